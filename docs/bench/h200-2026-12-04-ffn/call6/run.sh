#!/bin/bash
# call 6: the router's top-k and the combine as early-start launches (`e`: 8265f17 plus
# moe_topk_warp, moe_topk_rows and moe_combine_wide early-start) against `f` (28c5947's build):
# moe conformance of e, layer decode rounds (run twice: the second time, SKIP_SUITE=1, with three
# rounds of the larger rows; its output is log2.txt).
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
[ -n "$SKIP_SUITE" ] || { run e timeout 100 .carry/var/e/metrale_conformance --jobs 4 --filter 'moe/*' > $O/conf_moe_e.txt 2>&1; echo "e moe conformance rc=$? $(tail -1 $O/conf_moe_e.txt)" >> $O/log.txt; }
el conformance
for r in 1 2 3; do for v in f e; do
B $v --part layer --decode 1,2,4,8,16,32 --prefill 64 --samples 15 --json > $O/${v}_small_$r.json 2>>$O/stderr.txt
done; done; el small
for r in 1 2 3; do for v in f e; do
B $v --part layer --decode 64,256 --prefill 4096 --samples 11 --json > $O/${v}_big_$r.json 2>>$O/stderr.txt
done; done; el big
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c6'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c6.tgz -C $OUT c6 && cp $O/log.txt $OUT/log.txt && rm -rf $O
