#!/bin/bash
# call 1: phase 1 of the fp16 core as a programmatic dependent of phase 0, with phase 1's
# shared-memory request set per launch (METRALE_P1_SMEM): 70912 (as v32: two or three
# phase-1 blocks can share an SM), 120000 (one phase-1 block an SM, beside at most one
# phase-0 block), 160000 (one an SM, only where phase 0 has drained).
#   pdl:  v32's timing build (phase 1 reads the last call's records without waiting)
#   flag: phase 0 sets a ready word a record, phase 1 waits on it (correct form)
# Against `final` (b4e1102's build = main's kernels).
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for sm in 70912 120000 160000; do
  METRALE_P1_SMEM=$sm run flag timeout 120 .carry/var/flag/metrale_conformance --filter 'gdn/delta_rule_prefill*' > $O/conf_flag_$sm.txt 2>&1
  echo "flag $sm chunked tests rc=$? $(tail -1 $O/conf_flag_$sm.txt)" >> $O/log.txt
done
METRALE_P1_SMEM=120000 run flag timeout 240 .carry/var/flag/metrale_conformance --jobs 8 > $O/conf_flag.txt 2>&1; echo "flag conformance rc=$?" >> $O/log.txt; tail -1 $O/conf_flag.txt >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_flag.txt | head -40 >> $O/log.txt
METRALE_P1_SMEM=120000 run flag env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/flag/metrale_layer_tests --jobs 4 > $O/layer_flag.txt 2>&1; echo "flag layer rc=$?" >> $O/log.txt; tail -1 $O/layer_flag.txt >> $O/log.txt
grep "error .*(tol" $O/layer_flag.txt | sort -k2 -g | tail -3 >> $O/log.txt
METRALE_P1_SMEM=120000 run flag timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck .carry/var/flag/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16' > $O/san_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'SUMMARY' $O/san_memcheck.txt | tail -1) $(tail -1 $O/san_memcheck.txt)" >> $O/log.txt
el suites
for r in 1 2 3; do
  B final --core --prefill 4096,16384,65536 --json > $O/core_final_$r.json 2>>$O/stderr.txt
  for v in pdl flag; do for sm in 70912 120000 160000; do
    METRALE_P1_SMEM=$sm B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}${sm}_$r.json 2>>$O/stderr.txt
  done; done; el core round $r
done
for r in 1 2 3; do
  B final --decode 1 --prefill 4096,16384 --json > $O/mix_final_$r.json 2>>$O/stderr.txt
  for v in pdl flag; do for sm in 120000 160000; do
    METRALE_P1_SMEM=$sm B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}${sm}_$r.json 2>>$O/stderr.txt
  done; done; el mixer round $r
done
METRALE_P1_SMEM=120000 B flag --core --gates slow --prefill 4096,16384 --json > $O/coreslow_flag120000.json 2>>$O/stderr.txt
B final --core --gates slow --prefill 4096,16384 --json > $O/coreslow_final.json 2>>$O/stderr.txt
el slow gates
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
