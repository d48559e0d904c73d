#!/bin/bash
# call 7: the f16 core's phase 0, unchanged, launched from an entry of its own (`sp`,
# sp_timing.patch on 383b5b5: the _prep entry runs prep_chunk<true>, the f16 entry only its phase 1;
# a correct build of the mixer's path, whose layer suite runs here), with call 6's vt3 and `fin`
# (1ef7d0c): ncu of the conv and the core's launches at 4096 and 16384 tokens, mixer rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
run sp env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/sp/metrale_layer_tests --jobs 4 --filter 'modes/*' > $O/layer_sp_modes.txt 2>&1; echo "sp layer modes rc=$? $(tail -1 $O/layer_sp_modes.txt)" >> $O/log.txt
for v in fin sp vt3; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'conv1d|delta_rule|cols3' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 4096,16384 --samples 1 --warmup 0 > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3 4; do for v in fin sp vt3; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
import csv
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:32]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
