#!/bin/bash
# call 2: the TMA-box epilogue of gemm_f16_ws_cols3 with the ring's stages traded for output
# boxes: sSbB = S ring stages, B boxes a consumer warp (ts = s8b2, call 1's).  Per build: the
# cols3 conformance tests, ncu of the GEMM at 4096 and 16384 tokens; mixer rounds against head.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
V="ts s6b5 s7b3 s4b8 s5b6"
for v in $V; do
run $v timeout 100 .carry/var/$v/metrale_conformance --filter 'gemm/gemm_f16_ws_cols3*' > $O/conf_$v.txt 2>&1; echo "$v cols3 tests rc=$? $(tail -1 $O/conf_$v.txt)" >> $O/log.txt
done; el tests
for v in head $V; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cols3' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2; do for v in head $V; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:24]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
