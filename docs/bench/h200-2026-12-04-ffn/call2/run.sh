#!/bin/bash
# call 2: the MoE FFN's decode rows (`n`: moe_gate_up_silu_rows for the routed rows and the shared
# expert's gate and up, moe_down_rows; built from the working tree on d22bb05) against `main`
# (d22bb05's build): the new rows' conformance and sanitizers, the kernels' loads in flight
# (SASS), ncu of a layer decode step at batch 1, layer decode A/B rounds, the suites of n.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=n
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 100 .carry/var/$W/metrale_conformance --jobs 4 --filter 'moe/*' > $O/conf_moe_$W.txt 2>&1; echo "$W moe conformance rc=$? $(tail -1 $O/conf_moe_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_moe_$W.txt | head -30 >> $O/log.txt
for t in memcheck racecheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/*_rows*' > $O/${t}.txt 2>&1; echo "$t rows rc=$? $(tail -1 $O/${t}.txt)" >> $O/log.txt
done
el sanitizers
/usr/local/cuda/bin/cuobjdump -sass .carry/var/$W/moe.sm_90a.cubin > $O/moe_sass.txt 2>&1
python3 - >> $O/log.txt <<'PY'
import re,os
p=os.environ['OUT']+'/c2/moe_sass.txt'
try: t=open(p).read()
except Exception as e: print('no sass', e); raise SystemExit
for fn in ('moe_gate_up_silu_rows','moe_down_rows'):
    m=re.search(r'Function : '+fn+r'\n(.*?)(?=\n\s*Function : |\Z)', t, re.S)
    if not m: print(fn,'not found'); continue
    body=m.group(1).split('\n')
    first_fma=next((i for i,l in enumerate(body) if 'FFMA' in l), None)
    ldg=[i for i,l in enumerate(body) if 'LDG' in l]
    print(fn, 'LDG before first FFMA:', sum(1 for i in ldg if first_fma is None or i<first_fma), 'LDG total:', len(ldg))
PY
el sass
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for v in main $W; do
run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,8 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in main $W; do
B $v --part layer --decode 1,2,4,8,16,32 --prefill 64 --samples 15 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; done; el layer rounds
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
el suites
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
