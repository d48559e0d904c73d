#!/bin/bash
# table: the issue-6 table on `c35` (the build of 13b697a's code: pair35 and cluster35 arriving on
# their cluster barriers later), two rounds (layer rows 11 samples), with `ef` (e3856c9's build)
# beside it for the machine's own spread; then two more mixer decode A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/t; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=c35
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
B ef --decode 1,8,64,256 --prefill 4096,16384 --json > $O/ef_mixer_$r.json 2>>$O/stderr.txt
B ef --core --prefill 4096,16384,65536 --json > $O/ef_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
for r in 3 4; do for v in ef $W; do
  B $v --decode 1,8,64,256 --prefill 4096 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; done; el mixer rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/t'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/t.tgz -C $OUT t && cp $O/log.txt $OUT/log.txt && rm -rf $O
