#!/bin/bash
# call 3: phase 1 of the fp16 core at 16 value columns a block (c16: 256 blocks, two an SM;
# c16.patch, a timing build: the conformance test still launches 32) against u1p (main).
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 30 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for r in 1 2 3; do for v in u1p c16; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; el core round $r; done
for v in u1p c16; do for n in 4096 16384; do
run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --metrics gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_bytes.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
export METRALE_TEST_BACKEND=cuda
run c16 env METRALE_TEST_PRINT_ERRORS=1 timeout 120 .carry/var/c16/metrale_layer_tests --jobs 4 > $O/layer_c16.txt 2>&1; echo "c16 layer rc=$? $(tail -1 $O/layer_c16.txt)" >> $O/log.txt
grep "error .*(tol" $O/layer_c16.txt | sort -k2 -g | tail -3 >> $O/log.txt
el layer
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
