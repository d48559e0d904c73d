#!/bin/bash
# call 4: phase 0 of the fp16 core with W and U by one fp16 product (m16n8k16; V's slab scaled
# by a power of two into fp16's range; f16s.patch) against u1p (main, one tf32 product).
# Benches first under short timeouts, ncu of phase 0, then f16s's suites; then the issue-6
# table on the winner (f16s if its suites pass and its core is faster, else u1p).
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
med() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][1]['median_us'])" $1 2>/dev/null || echo 1e9; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for r in 1 2 3; do for v in u1p f16s; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; el core round $r; done
for r in 1 2; do for v in u1p f16s; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in u1p f16s; do for n in 4096 16384; do
run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
export METRALE_TEST_BACKEND=cuda
ok=1
run f16s env METRALE_CF_LOG_NMSE=1 timeout 60 .carry/var/f16s/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16' --verbose > $O/f16_f16s.txt 2>&1 || ok=0
echo "f16s f16 test ok=$ok $(tail -1 $O/f16_f16s.txt) worst state: $(grep 'nmse chunked/32' $O/f16_f16s.txt | grep state | sed 's/.*: //' | sort -g | tail -1) o: $(grep 'nmse chunked/32' $O/f16_f16s.txt | grep ' o vs' | sed 's/.*: //' | sort -g | tail -1)" >> $O/log.txt
run f16s timeout 150 .carry/var/f16s/metrale_conformance --jobs 8 > $O/conf_f16s.txt 2>&1 || ok=0; echo "f16s conformance ok=$ok $(tail -1 $O/conf_f16s.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_f16s.txt | head -20 >> $O/log.txt
run f16s env METRALE_TEST_PRINT_ERRORS=1 timeout 150 .carry/var/f16s/metrale_layer_tests --jobs 4 > $O/layer_f16s.txt 2>&1 || ok=0; echo "f16s layer ok=$ok $(tail -1 $O/layer_f16s.txt)" >> $O/log.txt
grep "error .*(tol" $O/layer_f16s.txt | sort -k2 -g | tail -3 >> $O/log.txt
el suites
W=u1p
a=$(med $O/core_f16s_2.json); b=$(med $O/core_u1p_2.json)
if [ $ok = 1 ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" $a $b; then W=f16s; fi
echo "table on $W (core 16384 round 2: f16s $a, u1p $b)" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k != 'results' and not isinstance(j[k],(list,dict))}, [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
