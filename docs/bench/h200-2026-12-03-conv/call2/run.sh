#!/bin/bash
# call 2: conv1d_prefill_l2norm with fewer instructions (call 1: 158 warp instructions a token
# of a warp, 60 % of issue slots, DRAM 56 %; its shuffles looped at run time, index arithmetic and
# bound tests each token, MOVs of the window and buffers, __expf's range fix).  Builds:
#   main  e190213
#   r4b3  ring of 4 loads a thread, 3 blocks an SM (80 registers, ptxas spills 52 bytes)
#   r6b2  ring of 6, 2 blocks an SM (103 registers; ops.c makes waves of 2 blocks an SM)
#   r8b2  ring of 8, 2 blocks an SM (118 registers)
# all with silu_fast by ex2.approx.ftz (also in the gated norm).  SASS of r4b3 (where the
# spills are), ncu of conv and gated norm, mixer rounds, suites of r4b3 (conv/norm for all).
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
V="main r4b3 r6b2 r8b2"
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for v in r4b3 r6b2 r8b2; do /usr/local/cuda/bin/cuobjdump -sass .carry/var/$v/conv.sm_90a.cubin > $O/sass_$v.txt 2>&1; done
awk '/Function : conv1d_prefill_l2norm/,/Function : conv1d_update|\.\.\.\.\.\.\.\.\.\./' $O/sass_r4b3.txt | grep -n "LDL\|STL" | head -40 >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for v in r4b3 r6b2 r8b2; do
  run $v timeout 120 .carry/var/$v/metrale_conformance --jobs 8 --filter 'conv/*' > $O/conv_$v.txt 2>&1; echo "$v conv rc=$? $(tail -1 $O/conv_$v.txt)" >> $O/log.txt
  run $v timeout 120 .carry/var/$v/metrale_conformance --jobs 8 --filter 'norm/*' > $O/norm_$v.txt 2>&1; echo "$v norm rc=$? $(tail -1 $O/norm_$v.txt)" >> $O/log.txt
done
el quick suites
for v in $V; do for n in 4096 16384; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'conv1d|gated' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in $V; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
run r4b3 timeout 240 .carry/var/r4b3/metrale_conformance --jobs 8 > $O/conf_r4b3.txt 2>&1; echo "r4b3 conformance rc=$? $(tail -1 $O/conf_r4b3.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_r4b3.txt | head -20 >> $O/log.txt
for v in main r4b3; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert" $O/layer_r4b3.txt | head -20 >> $O/log.txt
diff <(grep -i "err\|nmse" $O/layer_main.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_r4b3.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_main.txt)" >> $O/log.txt
el suites
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:22]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
rm -f $O/sass_r6b2.txt $O/sass_r8b2.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
