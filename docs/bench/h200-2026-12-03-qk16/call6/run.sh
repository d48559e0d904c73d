#!/bin/bash
# call 6 (twenty-ninth session): the same sampling as the twenty-eighth session's call 7 (h200-2026-12-03-conv),
# for the 4096-token mixer prefill (the issue-6 row closest to its target): is it at the 700 W
# power cap too?  nvidia-smi every 20 ms; the bench's stderr lines timestamped so that each
# sample goes to its case.  Cases: mixer decode 1 and prefill 4096, long loops.  Build: head
# (b0cf9b6; kernels as 2b5ffe8).
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
stamp() { while IFS= read -r l; do echo "$(date +%s.%N) $l"; done; }
date -u > $O/log.txt
nvidia-smi -q -d POWER,CLOCK | grep -iE "power limit|max clocks|^ +sm +:|graphics" | head -14 >> $O/log.txt
R=clocks_event_reasons.active
nvidia-smi --query-gpu=$R --format=csv,noheader > /dev/null 2>&1 || R=clocks_throttle_reasons.active
echo "reasons field: $R" >> $O/log.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$R --format=csv,noheader -lms 20 > $O/smi.csv & SP=$!
sleep 0.5
run head timeout 120 .carry/var/head/metrale bench --backend cuda --decode 1 --prefill 4096 --samples 1500 --warmup 3 --json 2> >(stamp > $O/stderr_mixer.txt) > $O/mixer.json
run head timeout 120 .carry/var/head/metrale bench --backend cuda --core --prefill 4096 --samples 1500 --warmup 3 --json 2> >(stamp > $O/stderr_core.txt) > $O/core.json
sleep 0.5; kill $SP; wait $SP 2>/dev/null
python3 - >> $O/log.txt <<'PY'
import os,csv,collections,datetime
O=os.environ['OUT']+'/c6'
def num(s):
    try: return float(s.split()[0])
    except: return None
smi=[]
for r in csv.reader(open(O+'/smi.csv')):
    if len(r) < 6: continue
    try: t=datetime.datetime.strptime(r[0].strip(), '%Y/%m/%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
    except Exception: continue
    smi.append((t, num(r[1]), num(r[3]), num(r[4]), r[5].strip()))
phases=[]
for f in ('stderr_mixer.txt','stderr_core.txt'):
    for l in open(O+'/'+f):
        t,_,msg=l.partition(' ')
        phases.append((float(t), f.split('_')[1][:-4]+': '+msg.strip()[:40]))
phases.sort()
print('smi samples', len(smi), 'phases', len(phases), 'note: smi timestamps are local time of the machine' )
by=collections.defaultdict(list)
for s in smi:
    cur=None
    for t,lab in phases:
        if t <= s[0]: cur=lab
    by[cur].append(s)
for lab,v in by.items():
    cs=sorted(x[1] for x in v if x[1]); ps=sorted(x[2] for x in v if x[2])
    if not cs: continue
    print(lab, 'n', len(v), 'sm MHz min/med/max', cs[0], cs[len(cs)//2], cs[-1], 'W med/max', ps[len(ps)//2], ps[-1], 'C', v[-1][3], 'reasons', collections.Counter(x[4] for x in v).most_common(3))
PY
cp $O/log.txt $OUT/log.txt; tar czf $OUT/c6.tgz -C $OUT c6; rm -rf $O
