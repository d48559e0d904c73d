#!/bin/bash
# call 2: conv (delta_rule_prefill_chunked_f16_conv: the conv and l2norm made in the fp16 chunked
# prefill's phase 0 from the conv's input, qkv never written) against head (304ec17's kernels; the
# build carries call 1's ws code at SKEW 0, an unused mbarrier).  Suites, sanitizers on the new
# test, ncu of the prefill's kernels, mixer and layer A/B, audit.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1
run conv timeout 200 .carry/var/conv/metrale_conformance > $O/conformance_cuda.txt 2>&1; echo "conformance rc=$?" >> $O/log.txt
tail -2 $O/conformance_cuda.txt >> $O/log.txt; el conformance
run conv timeout 200 .carry/var/conv/metrale_layer_tests > $O/layer_cuda.txt 2>&1; echo "layer rc=$?" >> $O/log.txt
tail -2 $O/layer_cuda.txt >> $O/log.txt; grep -i "worst\|max err\|fixture" $O/layer_cuda.txt | head -20 >> $O/log.txt; el layer
for tool in memcheck racecheck synccheck; do
  run conv timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .carry/var/conv/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16_conv*' > $O/san_$tool.txt 2>&1
  echo "$tool rc=$? $(grep -c 'ERROR SUMMARY: 0\|RACECHECK SUMMARY: 0' $O/san_$tool.txt) $(grep 'SUMMARY' $O/san_$tool.txt | tail -1)" >> $O/log.txt
done; el sanitizers
run conv .carry/var/conv/metrale audit --backend cuda > $O/audit.txt 2>&1
for v in head conv; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked|conv1d' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in head conv; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for v in head conv; do B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layer_${v}.json 2>>$O/stderr.txt; done; el layer bench
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c2'
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
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
