#!/bin/bash
# call 5: compute-sanitizer memcheck, racecheck and synccheck of the conv's conformance tests
# (and the norm's, whose SiLU changed) on 2b5ffe8's build (`head`).
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
S=/usr/local/cuda/bin/compute-sanitizer
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
for tool in memcheck racecheck synccheck; do
  run head timeout 200 $S --tool $tool --error-exitcode 9 .carry/var/head/metrale_conformance --jobs 1 --filter 'conv/conv1d_prefill_l2norm' > $O/${tool}_conv.txt 2>&1
  echo "$tool conv rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $O/${tool}_conv.txt | sort | uniq -c | tr '\n' ' ') $(grep -h 'Synthesis' $O/${tool}_conv.txt | tail -1)" >> $O/log.txt
  el $tool
done
run head timeout 150 $S --tool memcheck --error-exitcode 9 .carry/var/head/metrale_conformance --jobs 1 --filter 'norm/gated_rmsnorm_rows*' > $O/memcheck_norm.txt 2>&1
echo "memcheck norm rc=$? $(grep -h 'ERROR SUMMARY' $O/memcheck_norm.txt | sort | uniq -c | tr '\n' ' ') $(grep -h 'Synthesis' $O/memcheck_norm.txt | tail -1)" >> $O/log.txt
el done
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
