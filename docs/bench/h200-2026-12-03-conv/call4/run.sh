#!/bin/bash
# call 4: (1) the conv with its loads in a shared-memory ring filled by cp.async (s8: 8 slots a
# thread, 7 tokens in flight, 32 KiB a block; s12: 12 slots, 48 KiB) against 2b5ffe8 (`head`:
# 4 tokens in flight in registers; call 3: 6.6 of 12.9 cycles between instructions waiting on
# loads); (2) ncu --set full of the mixer prefill's two big GEMMs at 4096 tokens on head: every
# gemm_bf16_ws launch (the 8192^3 probe's, then out_proj: 107 us where the probe's rate gives
# ~83) and gemm_f16_ws_cols3 (in_proj, 305 us against ~242 at that rate).  Call 3 meant to
# catch out_proj by skipping the probe's launches and caught two probes instead.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
W=head; N=/usr/local/cuda/bin/ncu
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for v in s8 s12; do
  run $v timeout 120 .carry/var/$v/metrale_conformance --jobs 8 --filter 'conv/*' > $O/conv_$v.txt 2>&1; echo "$v conv rc=$? $(tail -1 $O/conv_$v.txt)" >> $O/log.txt
done
for v in head s8 s12; do for n in 4096 16384; do
run $v timeout 90 $N --clock-control none -k regex:'conv1d' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --prefill $n --samples 1 --warmup 0 > $O/ncuconv_${v}_$n.csv 2>&1
done; done; el conv ncu
for r in 1 2 3; do for v in head s8 s12; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; done; el mixer
for v in head s12; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
diff <(grep -i "err\|nmse" $O/layer_head.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_s12.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_head.txt)" >> $O/log.txt
el layer
run $W timeout 400 $N --set full --import-source no -k regex:'^gemm_bf16_ws$|gemm_f16_ws_cols3' -o $O/g \
  .carry/var/$W/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_g.txt 2>&1
echo "ncu rc=$?" >> $O/log.txt; el ncu
$N --import $O/g.ncu-rep --page details --csv > $O/details_g.csv 2>>$O/log.txt
$N --import $O/g.ncu-rep --page raw --csv > $O/raw_g.csv 2>>$O/log.txt
rm -f $O/g.ncu-rep
python3 - > $O/summary.txt <<'PY'
import os,csv,glob,json
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncuconv_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:22]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
rows=list(csv.reader(open(O+'/raw_g.csv'))); hdr=rows[0]
keys=('gpu__time_duration.sum','sm__cycles_elapsed.avg.per_second','smsp__inst_executed.sum','dram__bytes_read.sum','dram__bytes_write.sum','lts__t_sectors_srcunit_tex_op_read.sum','sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active','sm__throughput.avg.pct_of_peak_sustained_elapsed','launch__grid_size')
for r in rows[2:]:
    d=dict(zip(hdr,r))
    st=[(float(d[k].replace(',','')),k.split('stalled_')[1].replace('_per_issue_active.ratio','')) for k in hdr if k.startswith('smsp__average_warps_issue_stalled') and d[k] not in ('','n/a')]
    st.sort(reverse=True)
    print(d.get('ID'), d.get('Kernel Name','')[:20], {k.split('__')[1][:30]:d.get(k) for k in keys}, [(n, round(v,2)) for v,n in st[:8]])
PY
cat $O/summary.txt >> $O/log.txt
rm -f $O/raw_g.csv.unused
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
