#!/bin/bash
# call 1 (twenty-eighth session): main's build (e190213) on the H200.
#  1. the suites, with the five rounding tests of the 27th session (never run on a GPU before);
#  2. where the mixer prefill's ~770 us at 4096 tokens go: every kernel's time, bytes and
#     instructions (ncu, clocks free), and a timeline of the gaps between them (nsys, if there);
#  3. ncu --set full of conv1d_prefill_l2norm at 4096 tokens (77 us, 3.3 TB/s): bytes or issue?
#  4. the mixer bench, three rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
N=/usr/local/cuda/bin/ncu
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run main timeout 240 .carry/var/main/metrale_conformance --jobs 8 --verbose > $O/conf.txt 2>&1; echo "conformance rc=$? $(tail -1 $O/conf.txt)" >> $O/log.txt
grep -i "round" $O/conf.txt | head -20 >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf.txt | head -30 >> $O/log.txt
run main env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/main/metrale_layer_tests --jobs 4 > $O/layer.txt 2>&1; echo "layer rc=$? $(tail -1 $O/layer.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/layer.txt | head -20 >> $O/log.txt
el suites
for n in 4096 16384; do
run main timeout 90 $N --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed --csv \
  .carry/var/main/metrale bench --backend cuda --prefill $n --samples 1 --warmup 0 > $O/ncu_all_$n.csv 2>&1
done
el ncu all
NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NS" >> $O/log.txt
if [ -n "$NS" ]; then
  run main timeout 120 $NS profile -o $O/tl --force-overwrite true --trace cuda .carry/var/main/metrale bench --backend cuda --prefill 4096 --samples 20 --warmup 5 > $O/nsys.txt 2>&1
  $NS stats --report cuda_gpu_trace --format csv -o $O/tl $O/tl.nsys-rep >> $O/nsys.txt 2>&1
  rm -f $O/tl.nsys-rep $O/tl.sqlite
fi
el nsys
run main timeout 120 $N --set full --import-source no -k regex:'conv1d_prefill_l2norm' --launch-count 1 -o $O/conv \
  .carry/var/main/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_conv.txt 2>&1
echo "ncu full rc=$?" >> $O/log.txt
$N --import $O/conv.ncu-rep --page details --csv > $O/details_conv.csv 2>>$O/log.txt
$N --import $O/conv.ncu-rep --page source --print-source sass --csv > $O/sass_conv.csv 2>>$O/log.txt
rm -f $O/conv.ncu-rep
el ncu full
for r in 1 2 3; do B main --prefill 4096,16384 --json > $O/mix_$r.json 2>>$O/stderr.txt; done
el mixer
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv,collections
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncu_all_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:34]]).append(d['Metric Name'][:22]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), k, out[k])
want=('Duration','Memory Throughput','DRAM Throughput','Executed Instructions','Achieved Occupancy','Theoretical Occupancy','Registers Per Thread','Issue Slots Busy','Eligible Warps Per Scheduler','No Eligible','L1/TEX Hit Rate','L2 Hit Rate','Mem Busy','Max Bandwidth','Warp Cycles Per Issued Instruction','Waves Per SM','Grid Size','Block Size','SM Frequency','DRAM Frequency')
try:
    for r in csv.DictReader(open(O+'/details_conv.csv')):
        if r.get('Metric Name','') in want: print('conv', r['Section Name'][:22], r['Metric Name'], r['Metric Value'], r.get('Metric Unit',''))
except Exception as e: print('details', e)
try:
    rows=list(csv.DictReader(open(O+'/sass_conv.csv'))); c=collections.Counter(); tot=0
    key=[k for k in rows[0] if 'Instructions Executed' in k and 'Predicated' not in k][0]
    for r in rows:
        op=r['Source'].split()[0] if r['Source'].split() else '?'
        if op.startswith('@'): op=r['Source'].split()[1]
        n=float(r[key] or 0); c[op.split('.')[0]]+=n; tot+=n
    print('sass total', tot, [(k, round(100*v/tot,1)) for k,v in c.most_common(20)])
except Exception as e: print('sass', e)
try:
    rows=list(csv.DictReader(open(O+'/tl_cuda_gpu_trace.csv'))); ks=[r for r in rows if r.get('Name')]
    print('trace rows', len(ks), list(rows[0].keys())[:12])
    for r in ks[-40:]: print('tl', r.get('Start (ns)'), r.get('Duration (ns)'), r.get('Name','')[:40])
except Exception as e: print('tl', e)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
