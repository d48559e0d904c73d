#!/bin/bash
# call 7: f32_to_f16 by one cvt a value (`ef`, the working tree on 57ec2f7) against `fin`
# (1f38ac6): its conformance test, ncu of f32_to_f16 in mixer prefills of 4096 / 16384 tokens,
# mixer A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run ef timeout 120 .carry/var/ef/metrale_conformance --jobs 4 --filter 'elementwise/*' > $O/conf_ef.txt 2>&1; echo "ef elementwise rc=$? $(tail -1 $O/conf_ef.txt)" >> $O/log.txt
for v in fin ef; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'f32_to_f16' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --prefill 4096,16384 --samples 1 --warmup 0 > $O/ncu_${v}.csv 2>&1
grep '"f32_to_f16"' $O/ncu_${v}.csv | grep time_duration | cut -d, -f1,5,15- | sed "s/^/$v /" >> $O/log.txt
done
for r in 1 2 3; do for v in fin ef; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
  python3 -c "import json,sys; j=json.load(open('$O/mix_${v}_$r.json')); print('$v', $r, [(r['n'], r['median_us']) for r in j['results'] if r.get('kind')=='prefill'])" >> $O/log.txt
done; done
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
