#!/bin/bash
# the issue-6 table on the build of b4e1102 (`final`, the twenty-third session): suites,
# fixtures, audit, mixer / core / layer rows, two rounds each; then three mixer rounds of
# 82704a8's build (`head`) against it.
cd "$(dirname "$0")/../../../.."
O=$OUT/t; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
v=final
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/log.txt; tail -1 $O/conf_$v.txt >> $O/log.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/log.txt; tail -1 $O/layer_$v.txt >> $O/log.txt
grep "error .*(tol" $O/layer_$v.txt | sort -k2 -g | tail -2 >> $O/log.txt
run $v .carry/var/$v/metrale audit --backend cuda > $O/audit_$v.txt 2>&1
el suites
for r in 1 2; do
B $v --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $v --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $v --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
for r in 1 2 3; do for w in head final; do
B $w --decode 1 --prefill 4096,16384 --json > $O/ab_${w}_$r.json 2>>$O/stderr.txt
done; done; el ab
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/t'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k not in ('results',) and not isinstance(j[k],(list,dict))}, [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/t.tgz -C $OUT t && cp $O/log.txt $OUT/log.txt && rm -rf $O
