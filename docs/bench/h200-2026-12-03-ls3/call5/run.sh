#!/bin/bash
# call 5: phase 0 of the fp16 core with its slabs staged in fp16, already scaled, and the B
# fragments by ldmatrix.trans (f16l.patch) against f16s (main at f46c819). Benches first
# under short timeouts, ncu of both phases, then f16l's suites.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for r in 1 2 3; do for v in f16s f16l; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; el core round $r; done
for r in 1 2; do for v in f16s f16l; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in f16s f16l; do for n in 4096 16384; do
run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
export METRALE_TEST_BACKEND=cuda
run f16l env METRALE_CF_LOG_NMSE=1 timeout 60 .carry/var/f16l/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16' --verbose > $O/f16_f16l.txt 2>&1
echo "f16l f16 test rc=$? $(tail -1 $O/f16_f16l.txt) worst state: $(grep 'nmse chunked/32' $O/f16_f16l.txt | grep state | sed 's/.*: //' | sort -g | tail -1) o: $(grep 'nmse chunked/32' $O/f16_f16l.txt | grep ' o vs' | sed 's/.*: //' | sort -g | tail -1)" >> $O/log.txt
run f16l timeout 150 .carry/var/f16l/metrale_conformance --jobs 8 > $O/conf_f16l.txt 2>&1; echo "f16l conformance rc=$? $(tail -1 $O/conf_f16l.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_f16l.txt | head -20 >> $O/log.txt
run f16l env METRALE_TEST_PRINT_ERRORS=1 timeout 150 .carry/var/f16l/metrale_layer_tests --jobs 4 > $O/layer_f16l.txt 2>&1; echo "f16l layer rc=$? $(tail -1 $O/layer_f16l.txt)" >> $O/log.txt
grep "error .*(tol" $O/layer_f16l.txt | sort -k2 -g | tail -3 >> $O/log.txt
el suites
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
