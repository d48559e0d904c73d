#!/bin/bash
# call 7 (timing build, wrong results): phase 0 of the fp16 core at four blocks an SM (p4,
# prep4.patch: Q read from memory instead of staged, 44288 bytes of shared memory, 128
# registers; phase 1 does not run) against f16s (main, three blocks an SM): ncu of phase 0.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
for r in 1 2; do for v in f16s p4; do for n in 4096 16384; do
run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --launch-count 1 --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_${n}_$r.csv 2>&1
done; done; done
python3 - > $O/summary.txt <<'PY'
import glob,os,csv
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[]).append(d['Metric Name'][:22]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
