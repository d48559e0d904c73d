#!/bin/bash
# call 11: the review commit (`h` = 2af28d3's build: the same launches, the fits rules in one
# place each): conformance_cuda, layer_cuda, demo, the audit's FFN lines, one layer decode round.
cd "$(dirname "$0")/../../../.."
O=$OUT/c11; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run h timeout 200 .carry/var/h/metrale_conformance --jobs 8 > $O/conf_h.txt 2>&1; echo "h conformance rc=$? $(tail -1 $O/conf_h.txt)" >> $O/log.txt
run h timeout 200 .carry/var/h/metrale_layer_tests --jobs 4 > $O/layer_h.txt 2>&1; echo "h layer rc=$? $(tail -1 $O/layer_h.txt)" >> $O/log.txt
run h .carry/var/h/metrale demo --backend cuda > $O/demo_h.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
run h .carry/var/h/metrale audit --backend cuda > $O/audit_h.txt 2>&1; grep -A8 "MoE: 512" $O/audit_h.txt >> $O/log.txt
run h timeout 60 .carry/var/h/metrale bench --backend cuda --part layer --decode 1,8,40 --prefill 64 --samples 11 >> $O/log.txt 2>&1
tar czf $OUT/c11.tgz -C $OUT c11 && cp $O/log.txt $OUT/log.txt && rm -rf $O
