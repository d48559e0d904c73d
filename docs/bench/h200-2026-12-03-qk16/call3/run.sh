#!/bin/bash
# call 3: phase 0 of the qk16 core was 24 us slower at 4096 tokens in call 2 in both staging
# forms, with 40 MB fewer DRAM reads: the suspect is W's K slab, whose halves were widened as
# they were loaded (so each warp waited on the load before the inverse it should overlap).
#   head  b0cf9b6 (main)
#   qk16a call 2's cp.async staging, slab widened at its load
#   qk16r the same, the slab's raw halves held until they are stored to shared memory
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run qk16r timeout 100 .carry/var/qk16r/metrale_conformance --jobs 8 --filter 'gdn/*' > $O/conf_qk16r_gdn.txt 2>&1; echo "qk16r gdn tests rc=$? $(tail -1 $O/conf_qk16r_gdn.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16r_gdn.txt | head -30 >> $O/log.txt
run qk16r env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/qk16r/metrale_layer_tests --jobs 4 > $O/layer_qk16r.txt 2>&1; echo "qk16r layer rc=$? $(tail -1 $O/layer_qk16r.txt)" >> $O/log.txt
el suites
for v in head qk16a qk16r; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'conv1d|delta_rule' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 4096 --samples 1 --warmup 0 > $O/ncu_${v}_4096.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in head qk16a qk16r; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in head qk16a qk16r; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}.json 2>>$O/stderr.txt
done; el core
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/mix_*.json'))+sorted(glob.glob(O+'/core_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:26]]).append(d['Metric Name'].split('__')[1][:12]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
