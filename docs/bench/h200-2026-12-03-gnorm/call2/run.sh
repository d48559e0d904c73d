#!/bin/bash
# call 2: as call 1, on the build whose z and the other blocks' sums are asked for at step c (z by cp.async into
# S's plane), the area zeroed by the first blocks only; against `final` (b4e1102's build).
# Suites (conformance, layer, memcheck/synccheck/racecheck of the new test), ncu of the core's
# kernels and the gated norm, mixer and layer A/B, audit.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run nrm env METRALE_CF_LOG_NMSE=1 timeout 120 .carry/var/nrm/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16_norm' --verbose > $O/conf_norm.txt 2>&1; echo "norm test rc=$?" >> $O/log.txt; tail -1 $O/conf_norm.txt >> $O/log.txt
grep "nmse.*| y" $O/conf_norm.txt | sort -t: -k3 -g | tail -3 >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|Crash" $O/conf_norm.txt | head -30 >> $O/log.txt
el norm test
run nrm timeout 240 .carry/var/nrm/metrale_conformance --jobs 8 > $O/conf_nrm.txt 2>&1; echo "nrm conformance rc=$?" >> $O/log.txt; tail -1 $O/conf_nrm.txt >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_nrm.txt | head -40 >> $O/log.txt
run nrm env METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/nrm/metrale_layer_tests --jobs 4 > $O/layer_nrm.txt 2>&1; echo "nrm layer rc=$?" >> $O/log.txt; tail -1 $O/layer_nrm.txt >> $O/log.txt
grep "error .*(tol" $O/layer_nrm.txt | sort -k2 -g | tail -3 >> $O/log.txt
el suites
for tool in memcheck synccheck racecheck; do
run nrm timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .carry/var/nrm/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16_norm' > $O/san_$tool.txt 2>&1
echo "$tool rc=$? $(grep 'SUMMARY' $O/san_$tool.txt | tail -1) $(tail -1 $O/san_$tool.txt)" >> $O/log.txt
done; el sanitizers
for v in final nrm; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked|gated' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
run nrm timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'chunked_f16_norm' --launch-skip 1 --launch-count 1 --section WarpStateStats --section InstructionStats --section SchedulerStats \
  .carry/var/nrm/metrale bench --backend cuda --part mixer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $O/ncu_nrm_p1_stalls.txt 2>&1
for f in delta_rule_prefill_chunked_f16_norm delta_rule_prefill_chunked_f16; do
/usr/local/cuda/bin/cuobjdump -sass -fun $f .carry/var/nrm/gdn_chunked.sm_90a.cubin > $O/sass_$f.txt 2>&1
done; el sass
grep -i "stall\|cycles per issued\|issue slot\|Executed Ipc\|Duration\|No Eligible\|Active Warps" $O/ncu_nrm_p1_stalls.txt | head -40 >> $O/log.txt
for r in 1 2 3; do for v in final nrm; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for v in final nrm; do B $v --part layer --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layerab_${v}.json 2>>$O/stderr.txt; done; el layer ab
run nrm .carry/var/nrm/metrale audit --backend cuda > $O/audit_nrm.txt 2>&1
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c2'
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
grep -i "delta rule\|gated norm" $O/audit_nrm.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
