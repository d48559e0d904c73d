#!/bin/bash
# call 7: `s64f` (the state split over k between two warpgroups, each 64 columns x 64 k in registers;
# partial D and O exchanged through shared memory) against `ef`: the scan64 test, racecheck, the core, ncu.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 90 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=s64f
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 120 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_scan64' > $O/conf_scan64.txt 2>&1; echo "scan64 test rc=$? $(tail -1 $O/conf_scan64.txt)" >> $O/log.txt
grep -B2 -A6 "FAIL\|Assert\|CRASH\|Timeout" $O/conf_scan64.txt | head -40 >> $O/log.txt
for r in 1 2; do for v in ef $W; do B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt; done; done
el core
run $W timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_scan64' > $O/racecheck_scan64.txt 2>&1; echo "racecheck scan64 rc=$? $(tail -1 $O/racecheck_scan64.txt)" >> $O/log.txt
el racecheck
NCU=/usr/local/cuda/bin/ncu
run $W timeout 200 $NCU --set full --import-source no -k regex:scan64 -c 1 -o $O/rep .carry/var/$W/metrale bench --backend cuda --core --prefill 4096 --samples 1 --warmup 0 > $O/ncu_run.txt 2>&1; echo "ncu rc=$?" >> $O/log.txt
$NCU -i $O/rep.ncu-rep --page details --csv > $O/details.csv 2>&1
$NCU -i $O/rep.ncu-rep --page source --csv --print-source sass > $O/source_sass.csv 2>&1 || $NCU -i $O/rep.ncu-rep --page source --csv > $O/source_sass.csv 2>&1
rm -f $O/rep.ncu-rep
el ncu
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/core_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
grep -i "stall\|issue slot\|Warp Cycles\|Duration\|Registers\|Executed Ipc" $O/details.csv | cut -c1-200 | head -60 >> $O/log.txt
head -c 600 $O/source_sass.csv >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
