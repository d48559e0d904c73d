#!/bin/bash
# call 1: c3 (gemm_f16_ws_cols3: the prefill's whole in_proj in one launch on fp16 x, b|a included)
# against base (b4ef473): suites, sanitizers on the new kernel, ncu of a 4096-token mixer
# prefill, mixer and layer prefill A/B
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c1; mkdir -p $O; date -u > $O/checks.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/checks.txt
v=c3
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 1 --filter 'fixtures/*' > $O/fix_$v.txt 2>&1
for tf in "memcheck:gemm/gemm_f16_ws_cols3*" "racecheck:gemm/gemm_f16_ws_cols3"; do tool=${tf%%:*}; flt=${tf#*:}
run $v env METRALE_TEST_BACKEND=cuda timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .carry/var/$v/metrale_conformance --jobs 1 --filter "$flt" > $O/san_$tool.txt 2>&1; echo "$tool $flt rc=$?" >> $O/checks.txt; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Synthesis" $O/san_$tool.txt >> $O/checks.txt
done
el suites; cat $O/checks.txt
run $v .carry/var/$v/metrale audit --backend cuda > $O/audit_$v.txt 2>&1
for v in base c3; do
run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $O/ncu_mix4096_$v.csv 2>&1
done
el ncu
for r in 1 2 3; do for v in base c3; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in base c3; do
  B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/lay_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
python3 - <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for v in ('base','c3'):
    rows=list(csv.reader(open(O+f'/ncu_mix4096_{v}.csv'))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28],d['Grid Size']]).append(d['Metric Name'][:12]+'='+d['Metric Value'])
    for k in sorted(out,key=int)[-14:]: print(v, out[k])
PY
tar czf $OUT/c1.tgz -C $OUT c1 && rm -rf $O
