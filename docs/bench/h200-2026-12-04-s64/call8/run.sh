#!/bin/bash
# call 8: `s64g` (v6 with the warpgroup index read through a shuffle, so that the descriptors stay
# uniform) against `ef`: the row's test, the core, and the SASS's waits after its wgmmas.
cd "$(dirname "$0")/../../../.."
O=$OUT/c8; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 90 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=s64g
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 120 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_scan64' > $O/conf_scan64.txt 2>&1; echo "scan64 test rc=$? $(tail -1 $O/conf_scan64.txt)" >> $O/log.txt
for r in 1 2; do for v in ef $W; do B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt; done; done
/usr/local/cuda/bin/cuobjdump -sass -fun delta_rule_prefill_chunked_f16_scan64 .carry/var/$W/gdn_chunked.sm_90a.cubin > $O/scan64.sass 2>&1
echo "HGMMA $(grep -c HGMMA $O/scan64.sass) DEPBAR $(grep -c 'WARPGROUP.DEPBAR' $O/scan64.sass) R2UR $(grep -c R2UR $O/scan64.sass)" >> $O/log.txt
python3 - >> $O/log.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c8'
for f in sorted(glob.glob(O+'/core_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [('c'+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
tar czf $OUT/c8.tgz -C $OUT c8 && cp $O/log.txt $OUT/log.txt && rm -rf $O
