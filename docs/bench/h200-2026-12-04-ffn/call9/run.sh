#!/bin/bash
# call 9: the shared expert's gate and up on moe_gate_up_silu_rows up to 16 rows (`s16`: d73a140
# with GATE_UP_SILU_ROWS_MAX 16) against `d` (d73a140: up to 4 rows, the gemv's): layer decode
# 2 to 16, three rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c9; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
for r in 1 2 3; do for v in d s16; do
B $v --part layer --decode 4,5,6,8,12,16 --prefill 64 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c9'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c9.tgz -C $OUT c9 && cp $O/log.txt $OUT/log.txt && rm -rf $O
