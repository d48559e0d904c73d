#!/bin/bash
# call 6: stg2 (the staged epilogue for the first half of each tile only: the consumers store the
# second half themselves, so they never wait for the storers within a tile) against head
# (2489eca): suites, sanitizers on the kernel's tests, ncu of the GEMM, mixer A/B
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c6; mkdir -p $O; date -u > $O/checks.txt
v=stg2
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 --filter "gemm/*" > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
grep -B2 -A8 "FAIL\|CRASH" $O/conf_$v.txt | head -60 >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
for tf in "memcheck:gemm/gemm_f16_ws_cols3*" "racecheck:gemm/gemm_f16_ws_cols3*" "synccheck:gemm/gemm_f16_ws_cols3"; do tool=${tf%%:*}; flt=${tf#*:}
run $v env METRALE_TEST_BACKEND=cuda timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .carry/var/$v/metrale_conformance --jobs 1 --filter "$flt" > $O/san_$tool.txt 2>&1; echo "$tool $flt rc=$?" >> $O/checks.txt; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Synthesis" $O/san_$tool.txt >> $O/checks.txt
done
el suites; cat $O/checks.txt
for v in head stg2; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:cols3 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done
el ncu
for r in 1 2 3; do for v in head stg2; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c6'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[]).append(d['Metric Name'][:14]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
tar czf $OUT/c6.tgz -C $OUT c6 && rm -rf $O
