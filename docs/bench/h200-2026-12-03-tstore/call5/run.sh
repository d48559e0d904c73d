#!/bin/bash
# call 5: timing build d4 of b4e1102: each consumer warp sends all its TMA boxes onto one 2 KiB of y0 (the TMA unit
# as busy, 2 MB written over and over in L2 instead of 182 MB to DRAM; wrong results), against `final`: ncu.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for v in final d4; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cols3' --metrics gpu__time_duration.sum,dram__bytes_write.sum,smsp__inst_executed.sum,sm__cycles_active.avg --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done
python3 - > $O/summary.txt <<'PY'
import glob,os,csv
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:24]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
