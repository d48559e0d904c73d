#!/bin/bash
# call 4: phase 1 of the fp16 core on two warpgroups (delta_rule_prefill_chunked_f16x2, `x2`, the
# working tree) against `final` (b4e1102's build): suites on x2 (its conformance test with NMSE
# logged, conformance, layer, memcheck/racecheck/synccheck of its test), ncu of the core's
# kernels, core and mixer rows A/B, layer A/B, audit.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run x2 env METRALE_CF_LOG_NMSE=1 timeout 120 .carry/var/x2/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16*' --verbose > $O/conf_x2only.txt 2>&1; echo "x2 test rc=$?" >> $O/log.txt; tail -1 $O/conf_x2only.txt >> $O/log.txt
grep "PASS\|FAIL" $O/conf_x2only.txt >> $O/log.txt
grep "nmse.*chunked/32" $O/conf_x2only.txt | sort -t: -k3 -g | tail -3 >> $O/log.txt
grep -B2 -A8 "Assert\|Crash" $O/conf_x2only.txt | head -30 >> $O/log.txt
el x2 test
run x2 timeout 240 .carry/var/x2/metrale_conformance --jobs 8 > $O/conf_x2.txt 2>&1; echo "x2 conformance rc=$?" >> $O/log.txt; tail -1 $O/conf_x2.txt >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_x2.txt | head -40 >> $O/log.txt
run x2 env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/x2/metrale_layer_tests --jobs 4 > $O/layer_x2.txt 2>&1; echo "x2 layer rc=$?" >> $O/log.txt; tail -1 $O/layer_x2.txt >> $O/log.txt
grep "error .*(tol" $O/layer_x2.txt | sort -k2 -g | tail -3 >> $O/log.txt
el suites
for tool in memcheck synccheck racecheck; do
run x2 timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .carry/var/x2/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16x2' > $O/san_$tool.txt 2>&1
echo "$tool rc=$? $(grep 'SUMMARY' $O/san_$tool.txt | tail -1) $(tail -1 $O/san_$tool.txt)" >> $O/log.txt
done; el sanitizers
for v in final x2; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in final x2; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in final x2; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; done; el core
for v in final x2; do B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layerab_${v}.json 2>>$O/stderr.txt; done; el layer ab
run x2 .carry/var/x2/metrale audit --backend cuda > $O/audit_x2.txt 2>&1
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28]]).append(d['Metric Name'][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
grep -i "delta rule" $O/audit_x2.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
