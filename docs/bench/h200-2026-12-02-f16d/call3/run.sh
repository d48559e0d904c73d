#!/bin/bash
# call 3: conv1d_prefill_l2norm on blocks of T / grid.y tokens, grid.y making whole waves:
# convA (ceil waves, smaller blocks), convB (floor waves, larger blocks) against f16d
# (= d6a426b); suites of convA, ncu of the conv alone, mixer/layer prefill A/B
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c3; mkdir -p $O; date -u > $O/checks.txt
v=convA
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$v/metrale_conformance --jobs 1 --filter 'conv/conv1d_prefill_l2norm' > $O/san_memcheck.txt 2>&1; echo "memcheck rc=$?" >> $O/checks.txt; grep -E "ERROR SUMMARY|Synthesis" $O/san_memcheck.txt >> $O/checks.txt
el suites; cat $O/checks.txt
for v in f16d convA convB; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:conv1d_prefill --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 2048,4096,8192,16384 --samples 1 --warmup 0 > $O/ncu_conv_$v.csv 2>&1
done
el ncu
for r in 1 2 3; do for v in f16d convA convB; do
  B $v --decode 1 --prefill 2048,4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in f16d convA convB; do
  B $v --part layer --decode 1 --prefill 4096 --samples 11 --json > $O/lay_${v}_$r.json 2>>$O/stderr.txt
done; done; el layer
python3 - <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r['kind'][0]+str(r['n']), r['median_us']) for r in j['results']])
for v in ('f16d','convA','convB'):
    rows=list(csv.reader(open(O+f'/ncu_conv_{v}.csv'))); hdr=None; out=[]
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r))
            if d['Metric Name'].startswith('gpu__time'): out.append((d['Kernel Name'][:24], d['Grid Size'], d['Metric Value']))
    print(v, out)
PY
tar czf $OUT/c3.tgz -C $OUT c3 && rm -rf $O
