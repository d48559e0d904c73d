#!/bin/bash
# call 5: every kernel of one mixer prefill at 4096 and at 16384 tokens under ncu (clocks free),
# on the build of 383b5b5 (`h383`; its CUDA module byte-identical to a clean build of 1ef7d0c's
# kernels), for the mixer-prefill row's reasons in docs/perf.md; then three mixer rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for n in 4096 16384; do
run h383 timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/h383/metrale bench --backend cuda --prefill $n --samples 1 --warmup 0 > $O/ncu_$n.csv 2>&1
echo "ncu $n rc=$?" >> $O/log.txt
done
for r in 1 2 3; do run h383 timeout 60 .carry/var/h383/metrale bench --backend cuda --prefill 4096,16384 --json > $O/mix_$r.json 2>>$O/stderr.txt; done
python3 - > $O/summary.txt <<'PY'
import csv,os,json,glob
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/mix_*.json')):
    j=json.load(open(f)); print(os.path.basename(f), [(r['n'], r['median_us'], r.get('min_us')) for r in j['results']])
for n in (4096,16384):
    rows=list(csv.reader(open(f'{O}/ncu_{n}.csv'))); hdr=None; k={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); k.setdefault(int(d['ID']),{'name':d['Kernel Name'][:34]})[d['Metric Name']]=float(d['Metric Value'].replace(',',''))
    # the last prefill's launches: from the last f32_to_f16 of the big conversion on
    ids=sorted(k); tot=0
    for i in ids:
        m=k[i]; t=m.get('gpu__time_duration.sum',0)/1000; tot+=t
        print(n, i, m['name'], '%.1f us'%t, 'rd %.0f MB'%(m.get('dram__bytes_read.sum',0)/1e6), 'wr %.0f MB'%(m.get('dram__bytes_write.sum',0)/1e6), 'inst %.1fM'%(m.get('smsp__inst_executed.sum',0)/1e6))
    print(n, 'sum of all listed %.1f us'%tot)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
