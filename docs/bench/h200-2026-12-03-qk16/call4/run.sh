#!/bin/bash
# call 4 (inline command): the core alone, two rounds, head against qk16a and the timing build
# qk16t (qk16a with W's K slabs read from qkv's f32 columns, which the bench fills with the same
# normalised q and k: wrong in the mixer, where the half conv leaves them unwritten).
O=$OUT; run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
for r in 1 2; do for v in head qk16a qk16t; do echo "$v $(run $v .carry/var/$v/metrale bench --backend cuda --core --prefill 4096,16384 --json 2>/dev/null | python3 -c 'import json,sys; j=json.load(sys.stdin); print([(r["n"], r["median_us"]) for r in j["results"]])')"; done; done 2>&1 | tee $O/core_ab.txt
