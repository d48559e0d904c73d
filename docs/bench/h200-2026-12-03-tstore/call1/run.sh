#!/bin/bash
# call 1: gemm_f16_ws_cols3 writing its outputs by TMA boxes (`ts`, the working tree) against
# `head` (82704a8's build): suites on ts (conformance, layer, memcheck/racecheck/synccheck of the
# cols3 tests), ncu of the GEMM, mixer and layer A/B; then the issue-6 table on whichever build
# won the mixer rounds (two rounds of every row).
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run ts timeout 240 .carry/var/ts/metrale_conformance --jobs 8 > $O/conf_ts.txt 2>&1; echo "ts conformance rc=$?" >> $O/log.txt; tail -1 $O/conf_ts.txt >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_ts.txt | head -40 >> $O/log.txt
run ts env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/ts/metrale_layer_tests --jobs 4 > $O/layer_ts.txt 2>&1; echo "ts layer rc=$?" >> $O/log.txt; tail -1 $O/layer_ts.txt >> $O/log.txt
grep "error .*(tol" $O/layer_ts.txt | sort -k2 -g | tail -2 >> $O/log.txt
el suites
for tool in memcheck racecheck synccheck; do
run ts timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .carry/var/ts/metrale_conformance --filter 'gemm/gemm_f16_ws_cols3*' > $O/san_$tool.txt 2>&1
echo "$tool rc=$? $(grep 'SUMMARY' $O/san_$tool.txt | tail -1) $(tail -1 $O/san_$tool.txt)" >> $O/log.txt
done; el sanitizers
for v in head ts; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cols3' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,lts__t_sectors_op_write.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in head ts; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for v in head ts; do B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layerab_${v}.json 2>>$O/stderr.txt; done; el layer ab
W=$(python3 - <<'PY'
import json,glob,os,statistics
O=os.environ['OUT']+'/c1'
def med(v):
    xs=[]
    for f in glob.glob(O+'/mix_%s_*.json'%v):
        try: xs+= [r['median_us'] for r in json.load(open(f))['results'] if r.get('kind')=='prefill' and r['n']==4096]
        except Exception: pass
    return statistics.median(xs) if xs else 1e9
ok='Failing: 0' in open(O+'/conf_ts.txt').read() and 'Failing: 0' in open(O+'/layer_ts.txt').read()
print('ts' if ok and med('ts') < med('head') - 3 else 'head')
PY
)
echo "table on $W" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k not in ('results',) and not isinstance(j[k],(list,dict))} if 'table' in f else '', [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:24]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
