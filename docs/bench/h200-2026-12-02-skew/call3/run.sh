#!/bin/bash
# call 3: silu by the fast exp and division (silu_fast) in conv1d_prefill_l2norm and in the fused
# row's phase 0.  fastsilu: the conv kernel so, mixer unfused; convfast: the fused row (call 2's
# code) with it; head as in call 2.  Suites, ncu of conv + core, mixer and layer A/B.
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1
run convfast timeout 200 .carry/var/convfast/metrale_conformance > $O/conformance_cuda.txt 2>&1; echo "conformance rc=$?" >> $O/log.txt
tail -1 $O/conformance_cuda.txt >> $O/log.txt; el conformance
for v in fastsilu convfast; do
run $v timeout 200 .carry/var/fastsilu/metrale_layer_tests > $O/layer_cuda_$v.txt 2>&1; echo "layer $v rc=$?" >> $O/log.txt
tail -1 $O/layer_cuda_$v.txt >> $O/log.txt; grep "error .*(tol" $O/layer_cuda_$v.txt | sort -k2 -g | tail -3 >> $O/log.txt
done; el layer
run convfast timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck .carry/var/convfast/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16_conv*' > $O/san_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'SUMMARY' $O/san_memcheck.txt | tail -1)" >> $O/log.txt
for v in head fastsilu convfast; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked|conv1d' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in head fastsilu convfast; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for v in head fastsilu convfast; do B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layer_${v}.json 2>>$O/stderr.txt; done; el layer bench
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:38]]).append(d['Metric Name'][:14]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
