#!/bin/bash
# call 4: gdn_decode_cluster35 with no global store before its second cluster arrival (`c36`, the
# working tree on c63ce88) against `c35` (13b697a's build) and `ef` (e3856c9's): suites,
# sanitizers of the cluster test, ncu of the kernel in decode-1 steps, decode 1..4 A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=c36
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
el suites
for t in memcheck racecheck synccheck; do
run $W timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn_decode/*' > $O/${t}_decode.txt 2>&1; echo "$t decode rc=$? $(tail -1 $O/${t}_decode.txt)" >> $O/log.txt
done
el sanitizers
for v in c35 $W; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cluster35' --metrics gpu__time_duration.sum,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1,4 --prefill 256 --samples 3 --warmup 0 --no-graphs > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3 4; do for v in ef c35 $W; do
  B $v --decode 1,2,4 --prefill 256 --samples 31 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in c35 $W; do
  B $v --part layer --decode 1 --prefill 256 --samples 21 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/mix_*.json')+glob.glob(O+'/layer_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','?')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:24]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
