#!/bin/bash
# call 1: phase 1 of the fp16 core with the next chunk's U loads issued earlier in the chunk
# step (main: in step d, after the (Kd^T, M) wait, consumed at the next step's top):
#   u1: right after step b's MMA commit;  u2: at the step's top, before step b
# and step e's S plane put with the exponent change chosen from the last plane's maximum
# (ls; the block maximum waited for only when the plane would leave [2^3, 2^7)), and u2 + ls (u2ls)
# Suites of both (chunked tests, conformance, layer), ncu of phase 1 at 4096 and 16384 tokens,
# core and mixer rows in three rounds against final (b4e1102's build = main's kernels).
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for v in u1 u2 ls u2ls; do
  run $v timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$? $(tail -1 $O/conf_$v.txt)" >> $O/log.txt
  grep -B2 -A8 "FAIL\|Assert" $O/conf_$v.txt | head -20 >> $O/log.txt
  run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
for v in final ls u2ls; do
  run $v env METRALE_CF_LOG_NMSE=1 timeout 120 .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16' --verbose > $O/nmse_$v.txt 2>&1
  echo "$v f16 test rc=$? worst: $(grep 'nmse chunked/32' $O/nmse_$v.txt | sed 's/.*: //' | sort -g | tail -1)" >> $O/log.txt
  grep "error .*(tol" $O/layer_$v.txt 2>/dev/null | sort -k2 -g | tail -1 >> $O/log.txt
done
el suites
for r in 1 2 3; do for v in final u1 u2 ls u2ls; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; el core round $r; done
for r in 1 2 3; do for v in final u2 ls u2ls; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in final u2 ls u2ls; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
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
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
