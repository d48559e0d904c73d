#!/bin/bash
# call 1: the top-k's picks kept in registers and stored once (`a`: moe_topk_warp and
# moe_topk_rows, main's rule), `b` (a, with moe_topk_rows at every T), `c` (b, with
# moe_down_rows at one load a row a step: 48 registers) against `h` (main's head code,
# 2af28d3's build): suites of b, sanitizers of the top-k tests, ncu of the top-k and down rows,
# layer rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for W in b c; do
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
done
W=b
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
run a timeout 100 .carry/var/a/metrale_conformance --jobs 4 --filter 'moe/*' > $O/conf_a_moe.txt 2>&1; echo "a moe rc=$? $(tail -1 $O/conf_a_moe.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_*.txt $O/layer_$W.txt | head -40 >> $O/log.txt
for t in memcheck racecheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/moe_topk*' > $O/${t}.txt 2>&1; echo "$t topk rc=$? $(tail -1 $O/${t}.txt)" >> $O/log.txt
done
el suites
for v in h a b c; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'moe_topk|moe_down_rows' --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,8,64 --prefill 4096 --samples 1 --warmup 0 --no-graphs > $O/ncu_$v.csv 2>&1
done
el ncu
for r in 1 2; do for v in h a b c; do
B $v --part layer --decode 1,2,4,8,16,32,64,256 --prefill 512,4096 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out=[]
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r))
            if d['Metric Name']=='gpu__time_duration.sum': out.append((d['Kernel Name'][:14], d['Metric Value']))
    print(os.path.basename(f), out)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
