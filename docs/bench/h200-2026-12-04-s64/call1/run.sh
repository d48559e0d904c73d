#!/bin/bash
# call 1: phase 1 of the fp16 core with the state in registers (`s64`, the working tree on 44de193:
# row delta_rule_prefill_chunked_f16_scan64) against `ef` (e3856c9's build): the new row's
# conformance test first (a hang must not eat the call), then the suites, memcheck of the new test,
# ncu of the core's phase 1, core and mixer A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 90 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=s64
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W env METRALE_CF_LOG_NMSE=1 timeout 120 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_scan64' > $O/conf_scan64.txt 2>&1; echo "scan64 test rc=$? $(tail -1 $O/conf_scan64.txt)" >> $O/log.txt
grep -B2 -A6 "FAIL\|Assert\|CRASH\|Timeout" $O/conf_scan64.txt | head -60 >> $O/log.txt
el scan64 test
B $W --core --prefill 4096,16384,65536 --json > $O/core_${W}_0.json 2>>$O/stderr.txt; el core first
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
for v in ef $W; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
diff <(grep -i "err\|nmse" $O/layer_ef.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_$W.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing from ef: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_ef.txt)" >> $O/log.txt
el suites
run $W timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_scan64' > $O/memcheck_scan64.txt 2>&1; echo "memcheck scan64 rc=$? $(tail -1 $O/memcheck_scan64.txt)" >> $O/log.txt
el sanitizers
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for v in ef $W; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'delta_rule' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,lts__t_bytes.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill 4096,16384 --samples 1 --warmup 0 > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2; do for v in ef $W; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/core_*.json')+glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:40]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
