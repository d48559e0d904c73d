#!/bin/bash
# call 2: the ready-word wait in four forms (call 1's `flag` blocked thread 0 on an acquire
# load between step b's MMA commit and its wait, and the reader did the proxy fence):
#   fA: thread 0 reads the next record's word relaxed at the step's top, looks at it before
#       step c's barrier and spins (acquire) only if it was not yet set; writer-side proxy fence
#   fB: fA + fence.acq_rel.gpu when the relaxed read saw it set (the formal acquire pattern)
#   fC: fA with U and e^(G_L) read by __ldg instead of ld.global.cg
#   (fD, call 1's acquire wait with the writer-side proxy fence, was built but not carried: 64 MiB)
#   fE: timing build: fA's phase 0 (ready words) and loads, phase 1 waiting for nothing
#   early: fA as a manifest row (delta_rule_prefill_chunked_f16_early, 120000 bytes) the ops take
#          for phase 1 when its grid fits in one wave; suites, audit and rows
# with METRALE_P1_SMEM (phase 1's request) 170000 (no phase-0 block fits beside: 160000 + 70912 plus
# 1 KiB a block still fit in 228 KiB, so call 1's 160000 was the 120000 class) and 120000; against final and call 1's pdl.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for v in fA fB fC; do
  METRALE_P1_SMEM=170000 run $v timeout 120 .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill*' > $O/conf_${v}.txt 2>&1
  echo "$v chunked tests rc=$? $(tail -1 $O/conf_${v}.txt)" >> $O/log.txt
done
METRALE_P1_SMEM=170000 run fA timeout 240 .carry/var/fA/metrale_conformance --jobs 8 > $O/conf_fA_all.txt 2>&1; echo "fA conformance rc=$? $(tail -1 $O/conf_fA_all.txt)" >> $O/log.txt
METRALE_P1_SMEM=170000 run fA env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/fA/metrale_layer_tests --jobs 4 > $O/layer_fA.txt 2>&1; echo "fA layer rc=$? $(tail -1 $O/layer_fA.txt)" >> $O/log.txt
run early timeout 240 .carry/var/early/metrale_conformance --jobs 8 > $O/conf_early.txt 2>&1; echo "early conformance rc=$? $(tail -1 $O/conf_early.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_early.txt | head -30 >> $O/log.txt
run early env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/early/metrale_layer_tests --jobs 4 > $O/layer_early.txt 2>&1; echo "early layer rc=$? $(tail -1 $O/layer_early.txt)" >> $O/log.txt
grep "error .*(tol" $O/layer_early.txt | sort -k2 -g | tail -2 >> $O/log.txt
for tool in memcheck racecheck synccheck; do
run early timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .carry/var/early/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16_early' > $O/san_$tool.txt 2>&1
echo "$tool rc=$? $(grep 'SUMMARY' $O/san_$tool.txt | tail -1) $(tail -1 $O/san_$tool.txt)" >> $O/log.txt
done
run early .carry/var/early/metrale audit --backend cuda > $O/audit_early.txt 2>&1
grep -i "delta rule\|early" $O/audit_early.txt | head -5 >> $O/log.txt
el suites
for r in 1 2 3; do
  B final --core --prefill 4096,16384,65536 --json > $O/core_final_$r.json 2>>$O/stderr.txt
  METRALE_P1_SMEM=170000 B pdl --core --prefill 4096,16384,65536 --json > $O/core_pdl170000_$r.json 2>>$O/stderr.txt
  for v in fA fB fC fE; do
    METRALE_P1_SMEM=170000 B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}170000_$r.json 2>>$O/stderr.txt
  done
  B early --core --prefill 4096,16384,65536 --json > $O/core_early_$r.json 2>>$O/stderr.txt
  METRALE_P1_SMEM=120000 B pdl --core --prefill 4096,16384,65536 --json > $O/core_pdl120000_$r.json 2>>$O/stderr.txt
  METRALE_P1_SMEM=120000 B fA --core --prefill 4096,16384,65536 --json > $O/core_fA120000_$r.json 2>>$O/stderr.txt
  el core round $r
done
for r in 1 2 3; do
  B final --decode 1 --prefill 4096,16384 --json > $O/mix_final_$r.json 2>>$O/stderr.txt
  METRALE_P1_SMEM=170000 B pdl --decode 1 --prefill 4096,16384 --json > $O/mix_pdl170000_$r.json 2>>$O/stderr.txt
  for v in fA fB; do
    METRALE_P1_SMEM=170000 B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}170000_$r.json 2>>$O/stderr.txt
  done
  B early --decode 1 --prefill 4096,16384 --json > $O/mix_early_$r.json 2>>$O/stderr.txt
  el mixer round $r
done
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
