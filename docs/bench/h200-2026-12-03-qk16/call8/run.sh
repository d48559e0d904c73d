#!/bin/bash
# call 8: can phase 0 take W's K slabs in half without waiting on them?  qk16h = qk16.patch plus
# qk16h.patch (the K slabs' raw halves stored to shared memory as halves, rows of 136, widened
# where W's product reads them; ptxas: 168 registers, 40 bytes of spills).  gdn conformance,
# ncu of the core's phases at 4096 tokens, the core at 4096 / 16384 against head.
cd "$(dirname "$0")/../../../.."
O=$OUT/c8; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
METRALE_TEST_BACKEND=cuda run qk16h timeout 100 .carry/var/qk16h/metrale_conformance --jobs 8 --filter 'gdn/*qk16*' > $O/conf.txt 2>&1; echo "qk16h new core test rc=$? $(tail -1 $O/conf.txt)" >> $O/log.txt
for v in head qk16h; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'delta_rule' --metrics gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --core --prefill 4096 --samples 1 --warmup 0 > $O/ncu_$v.csv 2>&1
grep -o '"delta_rule[^"]*","[^"]*","[^"]*","[^"]*","[^"]*",.*' $O/ncu_$v.csv | awk -F'","' '{print "'$v'", $1, $(NF-2), $NF}' >> $O/log.txt
done
for r in 1 2; do for v in head qk16h; do echo "$v $(run $v .carry/var/$v/metrale bench --backend cuda --core --prefill 4096,16384 --json 2>/dev/null | python3 -c 'import json,sys; j=json.load(sys.stdin); print([(r["n"], r["median_us"]) for r in j["results"]])')" >> $O/log.txt; done; done
tar czf $OUT/c8.tgz -C $OUT c8 && cp $O/log.txt $OUT/log.txt && rm -rf $O
