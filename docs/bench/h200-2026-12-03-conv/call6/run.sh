#!/bin/bash
# call 6: does compute-sanitizer follow Criterion's test processes (each test runs in a forked
# child)?  The conv test under memcheck with one log file a process (%p) and the default
# target set, then with --target-processes all: a log per child means the kernels were checked.
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
S=/usr/local/cuda/bin/compute-sanitizer
export METRALE_TEST_BACKEND=cuda
date -u > $O/log.txt; $S --version | tail -1 >> $O/log.txt
run head timeout 100 $S --tool memcheck --log-file $O/def.%p.txt .carry/var/head/metrale_conformance --jobs 1 --filter 'conv/conv1d_prefill_l2norm' > $O/def_out.txt 2>&1
echo "default: rc=$? logs=$(ls $O/def.*.txt | wc -l) $(tail -1 $O/def_out.txt)" >> $O/log.txt
run head timeout 100 $S --tool memcheck --target-processes all --log-file $O/all.%p.txt .carry/var/head/metrale_conformance --jobs 1 --filter 'conv/conv1d_prefill_l2norm' > $O/all_out.txt 2>&1
echo "all: rc=$? logs=$(ls $O/all.*.txt | wc -l) $(tail -1 $O/all_out.txt)" >> $O/log.txt
for f in $O/def.*.txt $O/all.*.txt; do echo "== $(basename $f): $(grep -c . $f) lines; $(grep -h 'ERROR SUMMARY' $f)" >> $O/log.txt; done
$S --help 2>&1 | grep -A3 "target-processes" >> $O/log.txt
cp $O/log.txt $OUT/log.txt
