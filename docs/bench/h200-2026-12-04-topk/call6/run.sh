#!/bin/bash
# call 6: the small GEMMs of the MoE layer (the router, n k = 513 x 2048; the shared expert's
# down, 2048 x 512; its gate|up above 12 rows) on the gemv up to 8 (`g8`) or 16 rows (`g16`)
# instead of 4 (`m` = 2889501's build): gemm conformance of g16, layer rounds at small batches.
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run g16 timeout 200 .carry/var/g16/metrale_conformance --jobs 8 --filter 'gemm/*' > $O/conf_g16.txt 2>&1; echo "g16 gemm rc=$? $(tail -1 $O/conf_g16.txt)" >> $O/log.txt
run g16 .carry/var/g16/metrale audit --backend cuda > $O/audit_g16.txt 2>&1
D=4,5,6,8,10,12,14,16,20,24,32
for r in 1 2; do for v in m g8 g16; do
B $v --part layer --decode $D --prefill 64 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
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
