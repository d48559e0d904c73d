#!/bin/bash
# call 7: the decode gemvs with a block fence after their weight loads (`g`: ba604c6 plus the
# fence in gemm.cu's gemv_few), against `f` (28c5947's build; the same gemvs as main): gemm
# conformance of g, ncu of the gemvs at mixer decode 1 / 2 / 4, mixer and layer decode rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run g timeout 100 .carry/var/g/metrale_conformance --jobs 4 --filter 'gemm/*' > $O/conf_gemm_g.txt 2>&1; echo "g gemm conformance rc=$? $(tail -1 $O/conf_gemm_g.txt)" >> $O/log.txt
el conformance
for v in f g; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'gemv' --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1,2,4 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in f g; do
B $v --decode 1,2,4 --prefill 64 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
B $v --part layer --decode 1,2,4 --prefill 64 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv,collections
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for v in ('f','g'):
    try:
        rows=list(csv.reader(open(f'{O}/ncu_{v}.csv')))
        hi=[i for i,r in enumerate(rows) if r and r[0]=='ID'][0]
        h=rows[hi]; ki=h.index('Kernel Name'); mi=h.index('Metric Name'); vi=h.index('Metric Value'); ii=h.index('ID')
        per=collections.OrderedDict()
        for r in rows[hi+1:]:
            if len(r)<len(h): continue
            per.setdefault(r[ii],{'k':r[ki]})[r[mi]]=r[vi]
        print(v, [(k['k'][:14], k.get('gpu__time_duration.sum'), k.get('launch__grid_size'), k.get('launch__registers_per_thread')) for k in list(per.values())[:12]])
    except Exception as e: print(v, e)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
