#!/bin/bash
# call 4: the head (2489eca) as `head`: suites, fixtures, audit, the issue-6 table (mixer, core,
# layer); and timing builds of gemm_f16_ws_cols3 (wrong results, the GEMM alone under ncu):
# nost (its epilogue's stores skipped behind a runtime test, so the MMAs stay), st6 / st5 (6 /
# 5 ring stages instead of 8): what an epilogue off the MMAs' path could save, and what the
# shared memory for staging it would cost
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c4; mkdir -p $O; date -u > $O/checks.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/checks.txt
v=head
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 1 --filter 'fixtures/*' > $O/fix_$v.txt 2>&1
run $v .carry/var/$v/metrale audit --backend cuda > $O/audit_$v.txt 2>&1
el suites; cat $O/checks.txt
for v in head nost st6 st5; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:cols3 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done
el ncu
v=head
for r in 1 2; do
B $v --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $v --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $v --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
python3 - <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k not in ('results',) and not isinstance(j[k],(list,dict))}, [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[]).append(d['Metric Name'][:14]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
tar czf $OUT/c4.tgz -C $OUT c4 && rm -rf $O
