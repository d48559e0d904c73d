#!/bin/bash
# call 5: where the grouped experts should now take over from the decode rows.  `f` (28c5947:
# grouped from R >= 2E/3, 342 rows, 35 tokens at E = 512, k = 10) against `t` (the same build
# with grouped from R >= E, 52 tokens): layer decode 32 to 64, three rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
for r in 1 2 3; do for v in f t; do
B $v --part layer --decode 32,34,36,40,44,48,52,56 --prefill 64 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
