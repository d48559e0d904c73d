#!/usr/bin/env python3
"""Sum an ncu SASS source page (--page source --print-source sass --csv) by the regions between
block barriers: stall samples, executed instructions, the main stall reasons and opcodes.
usage: regions.py sass.csv"""
import collections, csv, re, sys

rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]
col = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
ins = []
for r in rows[2:]:
    if len(r) != len(hdr):
        continue
    f = lambda h: float(r[col[h]] or 0) if r[col[h]] not in ('-', '') else 0.0
    ins.append((r[col['Source']].strip(), f('Warp Stall Sampling (All Samples)'), f('Instructions Executed'),
                {s: f(s) for s in stalls}))
tot_s = sum(i[1] for i in ins) or 1
tot_e = sum(i[2] for i in ins) or 1
print(f"instructions {len(ins)}, samples {tot_s:.0f}, warp-instructions executed {tot_e:.0f}")
start = 0
def flush(a, b):
    seg = ins[a:b]
    s = sum(i[1] for i in seg); e = sum(i[2] for i in seg)
    if s < 0.005 * tot_s and e < 0.005 * tot_e:
        return
    st = collections.Counter()
    ops = collections.Counter()
    for src, _, ex, d in seg:
        st.update(d)
        ops[re.sub(r'^@!?U?P\w+\s+', '', src).split()[0].split('.')[0] if src else '?'] += ex
    top = ', '.join(f"{k[6:]}:{v / (s or 1):.0%}" for k, v in st.most_common(4))
    tops = ', '.join(f"{k}:{v / 1e3:.0f}k" for k, v in ops.most_common(6))
    print(f"[{a:5d}-{b:5d}) samples {s / tot_s:6.1%} instr {e / tot_e:6.1%} | {top} | {tops}")
for k, (src, *_rest) in enumerate(ins):
    if re.search(r'\bBAR\b|\bBAR\.', src) or 'WARPSYNC' in src and 'BAR' in src:
        flush(start, k + 1)
        start = k + 1
flush(start, len(ins))
