#!/bin/bash
# call 4: the issue-6 table at the landed commit (final), with checks and an A/B against base
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/t
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log -1 --format='%h %s'; } > $OUT/t/checks.txt
for v in final base; do
  run $v env METRALE_TEST_BACKEND=cuda timeout 200 .carry/var/$v/metrale_conformance --jobs 8 > $OUT/t/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $OUT/t/checks.txt; tail -1 $OUT/t/conf_$v.txt >> $OUT/t/checks.txt
  run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $OUT/t/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $OUT/t/checks.txt; tail -1 $OUT/t/layer_$v.txt >> $OUT/t/checks.txt
  grep -o "error [0-9.e+-]* (tolerance [0-9.e+-]*): .*" $OUT/t/layer_$v.txt | sort > $OUT/t/fix_$v.txt
done
echo "fixture lines $(wc -l < $OUT/t/fix_final.txt), differing from base: $(diff $OUT/t/fix_final.txt $OUT/t/fix_base.txt | grep -c '^<')" >> $OUT/t/checks.txt
cat $OUT/t/checks.txt
run final timeout 60 .carry/var/final/metrale audit --backend cuda > $OUT/t/audit.txt 2>&1
el checks
for r in 1 2; do for v in final base; do
  B $v --decode 1,8,64,256 --prefill 4096,16384 --json > $OUT/t/mix_${v}_$r.json 2>>$OUT/t/stderr.txt
  B $v --part layer --decode 1,64,256 --prefill 4096,16384 --json > $OUT/t/lay_${v}_$r.json 2>>$OUT/t/stderr.txt
done; el round $r; done
B final --core --prefill 4096,16384,65536 --json > $OUT/t/core_final.json 2>>$OUT/t/stderr.txt
el core
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/t'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(os.path.basename(f),'bad',e); continue
    print(os.path.basename(f), j.get('copy_gbps'), j['gemm_tflops'], [(r['kind'][0]+str(r['n']), r['median_us'], r['min_us']) for r in j['results']])
PY
tar czf $OUT/t.tgz -C $OUT t && rm -rf $OUT/t
