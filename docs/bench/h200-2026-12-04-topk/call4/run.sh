#!/bin/bash
# call 4: where the second stream loses at layer decode 8 and 256 as a graph. `x` = `s` with
# METRALE_FORK picking the form (fork_modes.patch, not committed): 0 = s (fork after the norm,
# the shared expert on the second stream), 1 = fork after the top-k, 2 = 0 with the second
# stream's launches not early-start, 3 = the router, top-k and routed experts on the second
# stream and the shared expert on the caller's; and --one-stream.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
D=1,2,4,5,8,12,16,32,64,256
for r in 1 2; do
  for m in 0 1 2 3; do
    run x env METRALE_FORK=$m timeout 200 .carry/var/x/metrale bench --backend cuda --part layer --decode $D --prefill 64 --samples 15 --json > $O/m${m}_$r.json 2>>$O/stderr.txt
  done
  run x timeout 200 .carry/var/x/metrale bench --backend cuda --part layer --decode $D --prefill 64 --samples 15 --json --one-stream > $O/one_$r.json 2>>$O/stderr.txt
done; el graphs
for m in 0 1 2 3; do
  run x env METRALE_FORK=$m timeout 200 .carry/var/x/metrale bench --backend cuda --part layer --decode 1,8,16,256 --prefill 64 --samples 15 --json --no-graphs > $O/eager_m${m}.json 2>>$O/stderr.txt
done
run x timeout 200 .carry/var/x/metrale bench --backend cuda --part layer --decode 1,8,16,256 --prefill 64 --samples 15 --json --no-graphs --one-stream > $O/eager_one.json 2>>$O/stderr.txt
el eager
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
