#!/bin/bash
# call 3: the issue-6 table on the build of 2b5ffe8 (`head`; byte-identical to call 2's r4b3,
# whose suites ran there: conformance_cuda 91/91, layer_cuda 20/20, fixture lines identical),
# with the audit; then ncu --set full of out_proj (gemm_bf16_ws) in a 4096-token mixer prefill
# against the same kernel as the 8192^3 probe: out_proj takes 107 us where the probe's rate
# gives ~83 (why: clocks, stalls, the two-tile walk?).
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=head
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
N=/usr/local/cuda/bin/ncu
run $W timeout 200 $N --set full --import-source no -k regex:'^gemm_bf16_ws$' --launch-skip 6 --launch-count 2 -o $O/op \
  .carry/var/$W/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_op.txt 2>&1
echo "ncu rc=$?" >> $O/log.txt
$N --import $O/op.ncu-rep --page details --csv > $O/details_op.csv 2>>$O/log.txt
$N --import $O/op.ncu-rep --page raw --csv > $O/raw_op.csv 2>>$O/log.txt
rm -f $O/op.ncu-rep
run $W timeout 120 $N --set full --import-source no -k regex:'conv1d_prefill_l2norm' --launch-count 1 -o $O/conv \
  .carry/var/$W/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_conv.txt 2>&1
$N --import $O/conv.ncu-rep --page details --csv > $O/details_conv.csv 2>>$O/log.txt
$N --import $O/conv.ncu-rep --page raw --csv > $O/raw_conv.csv 2>>$O/log.txt
$N --import $O/conv.ncu-rep --page source --print-source sass --csv > $O/sass_conv.csv 2>>$O/log.txt
rm -f $O/conv.ncu-rep
el ncu
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k != 'results' and not isinstance(j[k],(list,dict))}, [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
want=('Duration','Memory Throughput','DRAM Throughput','Executed Instructions','Achieved Occupancy','Registers Per Thread','Issue Slots Busy','No Eligible','L2 Hit Rate','Grid Size','Block Size','SM Frequency','DRAM Frequency','Compute (SM) Throughput','Cluster Size','Dynamic Shared Memory Per Block')
for nm in ('op','conv'):
  try:
    for r in csv.DictReader(open(O+'/details_%s.csv'%nm)):
        if r.get('Metric Name','') in want: print(nm, r.get('ID'), r['Section Name'][:22], r['Metric Name'], r['Metric Value'], r.get('Metric Unit',''))
  except Exception as e: print('details', e)
  try:
    rows=list(csv.reader(open(O+'/raw_%s.csv'%nm))); hdr=rows[0]
    for r in rows[2:]:
        d=dict(zip(hdr,r))
        st={k:v for k,v in d.items() if 'smsp__average_warp_latency_issue_stalled' in k or ('warps_issue_stalled' in k and k.endswith('_per_warp_active.pct'))}
        top=sorted(((float(v.replace(',','')),k) for k,v in st.items() if v.replace(',','').replace('.','').isdigit()), reverse=True)[:10]
        print('stalls', nm, d.get('ID'), d.get('Kernel Name','')[:20], d.get('gpu__time_duration.sum'), d.get('sm__cycles_elapsed.avg.per_second'), [(k.split('stalled_')[-1][:28], v) for v,k in top])
  except Exception as e: print('raw', e)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
