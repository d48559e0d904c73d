#!/bin/bash
# call 9: `uh` (the fp16 core's record with U in IEEE half, scaled per 16 columns) against `ef`:
# conformance_cuda, layer_cuda (error lines against call 8 of h200-2026-12-04-vh, e3856c9's),
# ncu of the core's phases at 16384 tokens, core and mixer A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c9; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 90 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=uh
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 150 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 150 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
el suites
for v in ef $W; do
run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'delta_rule' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2; do for v in ef $W; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c9'
for f in sorted(glob.glob(O+'/core_*.json')+glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:40]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c9.tgz -C $OUT c9 && cp $O/log.txt $OUT/log.txt && rm -rf $O
