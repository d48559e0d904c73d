#!/bin/bash
# call 6: the suites after the review commit (`h`: gemm_run refusing a plan with no kernel;
# op_gemm_f16 a plain gemm_run), the audit and the demo, and one mixer decode round.
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
W=h
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -30 >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
run $W .carry/var/$W/metrale demo --backend cuda > $O/demo_$W.txt 2>&1; echo "demo rc=$? $(tail -1 $O/demo_$W.txt)" >> $O/log.txt
run $W timeout 100 .carry/var/$W/metrale bench --backend cuda --decode 1,8,64,128,256 --prefill 64 --json > $O/mix_$W.json 2>>$O/stderr.txt; echo "bench rc=$?" >> $O/log.txt
tar czf $OUT/c6.tgz -C $OUT c6 && cp $O/log.txt $OUT/log.txt && rm -rf $O
