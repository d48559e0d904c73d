#!/bin/bash
# call 4: ncu --set full of the mixer prefill's two big GEMMs at 4096 tokens on 2b5ffe8's build
# (`head`): every gemm_bf16_ws launch (the 8192^3 probe's, then out_proj: 107 us where the
# probe's rate gives ~83) and gemm_f16_ws_cols3 (in_proj, 305 us against ~242 at that rate).
# Call 3 meant to catch out_proj by skipping the probe's launches and caught two probes instead.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
W=head; N=/usr/local/cuda/bin/ncu
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
run $W timeout 400 $N --set full --import-source no -k regex:'^gemm_bf16_ws$|gemm_f16_ws_cols3' -o $O/g \
  .carry/var/$W/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_g.txt 2>&1
echo "ncu rc=$?" >> $O/log.txt; el ncu
$N --import $O/g.ncu-rep --page details --csv > $O/details_g.csv 2>>$O/log.txt
$N --import $O/g.ncu-rep --page raw --csv > $O/raw_g.csv 2>>$O/log.txt
rm -f $O/g.ncu-rep
python3 - > $O/summary.txt <<'PY'
import os,csv
O=os.environ['OUT']+'/c4'
rows=list(csv.reader(open(O+'/raw_g.csv'))); hdr=rows[0]
keys=('gpu__time_duration.sum','sm__cycles_elapsed.avg.per_second','smsp__inst_executed.sum','dram__bytes_read.sum','dram__bytes_write.sum','lts__t_sectors_srcunit_tex_op_read.sum','sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active','sm__throughput.avg.pct_of_peak_sustained_elapsed','launch__grid_size')
for r in rows[2:]:
    d=dict(zip(hdr,r))
    st=[(float(d[k].replace(',','')),k.split('stalled_')[1].replace('_per_issue_active.ratio','')) for k in hdr if k.startswith('smsp__average_warps_issue_stalled') and d[k] not in ('','n/a')]
    st.sort(reverse=True)
    print(d.get('ID'), d.get('Kernel Name','')[:20], {k.split('__')[1][:30]:d.get(k) for k in keys}, [(n, round(v,2)) for v,n in st[:8]])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
