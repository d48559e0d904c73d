#!/bin/bash
# call 7: a timing build (pdl_timing.patch; results of the first call after a change of inputs
# wrong): phase 1 of delta_rule_prefill_chunked_f16 launched as a programmatic dependent of
# phase 0 and not waiting for it, so that it starts once every phase-0 block runs: the upper
# bound of overlapping phase 1 with phase 0's last wave (records published by flags, not built),
# against head (2489eca): core and mixer prefill A/B
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c7; mkdir -p $O; date -u > $O/checks.txt
for r in 1 2 3; do for v in head pdl; do
  B $v --core --prefill 2048,4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
tar czf $OUT/c7.tgz -C $OUT c7 && rm -rf $O
