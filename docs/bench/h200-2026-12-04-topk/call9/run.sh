#!/bin/bash
# call 9: the router's gemv and its top-k in one launch (`r`: moe_router_topk_rows, the top-k
# in the block that finishes last) against `f` (6eb5542): suites of r, memcheck and racecheck of
# the new test, ncu of the router and top-k, layer rounds at small batches and the table's rows.
cd "$(dirname "$0")/../../../.."
O=$OUT/c9; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
W=r
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
for t in memcheck racecheck synccheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/moe_router*' > $O/${t}.txt 2>&1; echo "$t router rc=$? $(tail -1 $O/${t}.txt)" >> $O/log.txt
done
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
el suites
for v in f r; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'moe_topk|moe_router|gemv_bf16_f32' --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,8 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_$v.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in f r; do
B $v --part layer --decode 1,2,4,5,8,12,16,64,256 --prefill 4096 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c9'
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
tar czf $OUT/c9.tgz -C $OUT c9 && cp $O/log.txt $OUT/log.txt && rm -rf $O
