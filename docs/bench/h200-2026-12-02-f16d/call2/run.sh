#!/bin/bash
# call 2: f16d2 (decode batches 129..256 on gemm_f16_ws192, 128x192 tiles) suites and
# sanitizers on the new kernel's tests; A/B head / f16d (128x256 pairs) / f16d2; ncu decode 256
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c2; mkdir -p $O; date -u > $O/checks.txt
v=f16d2
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
for tool in memcheck synccheck; do
run $v env METRALE_TEST_BACKEND=cuda timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .carry/var/$v/metrale_conformance --jobs 1 --filter 'gemm/gemm_f16_ws192*' > $O/san_$tool.txt 2>&1; echo "$tool rc=$?" >> $O/checks.txt; grep -E "ERROR SUMMARY|Synthesis" $O/san_$tool.txt >> $O/checks.txt
done
el suites; cat $O/checks.txt
run $v .carry/var/$v/metrale audit --backend cuda > $O/audit_$v.txt 2>&1
for r in 1 2; do for v in head f16d f16d2; do
  B $v --decode 128,129,192,256 --prefill 4096 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
  B $v --part layer --decode 256 --prefill 4096 --samples 11 --json > $O/lay_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
v=f16d2; run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 192,256 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_dec_$v.csv 2>&1
el ncu
python3 - <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r['kind'][0]+str(r['n']), r['median_us']) for r in j['results']])
rows=list(csv.reader(open(O+'/ncu_dec_f16d2.csv'))); hdr=None
for r in rows:
    if r and r[0]=='ID': hdr=r; continue
    if hdr and len(r)==len(hdr):
        d=dict(zip(hdr,r))
        if d['Metric Name'].startswith('gpu__time') and any(x in d['Kernel Name'] for x in ('f16','ws192','pair35','splitk4')): print(d['ID'], d['Kernel Name'][:30], d['Grid Size'], d['Metric Value'])
PY
tar czf $OUT/c2.tgz -C $OUT c2 && rm -rf $O
