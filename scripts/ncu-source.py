#!/usr/bin/env python3
"""Reads ncu's source page (`ncu -i REPORT --page source --csv --print-source sass`, as
scripts/device-call.sh's kernel_view writes it) and prints where a kernel's warps stall.

  scripts/ncu-source.py FILE.csv [--top N] [--range NAME:FIRST-LAST:WARPS ...] [--regions]

Prints the total of the warp-state samples and the stall reasons over the kernel, then the N
SASS lines (default 40) with the most samples: line index (as --range counts them), times
executed, samples, the instruction and its two largest reasons.  Each --range sums lines
FIRST..LAST (inclusive, indices as printed) and divides by WARPS, the warps that run them, so
that ranges of different warpgroups compare (a warp's share of the samples is its share of the
time).  --regions cuts the kernel at every barrier, call, return and exit and prints each piece
with 150 samples or more (or 0.2 M shared-memory wavefronts, where the page has them): its lines,
samples, wavefronts (excess ones beside) and instructions executed, and the line that ends it.
docs/perf-prefill.md parts 29 and 30 read phases 3 and 0 this way."""
import argparse
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--range", action="append", default=[], metavar="NAME:FIRST-LAST:WARPS")
    ap.add_argument("--regions", action="store_true")
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv, newline="")))
    head = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if head is None:
        sys.exit(f"{a.csv}: no 'Address' header: not ncu's source page")
    cols = {name: j for j, name in enumerate(rows[head])}
    for need in ("Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if need not in cols:
            sys.exit(f"{a.csv}: no column '{need}'")
    lines = rows[head + 1:]
    reasons = [n for n in rows[head] if n.startswith("stall_") and "Not Issued" not in n]
    samples = lambda r: number(r[cols["Warp Stall Sampling (All Samples)"]])
    total = sum(samples(r) for r in lines)
    if total == 0:
        sys.exit(f"{a.csv}: no samples")
    print(f"{total:.0f} samples")
    by_reason = {n: sum(number(r[cols[n]]) for r in lines) for n in reasons}
    print("  " + ", ".join(f"{n[6:]} {100 * v / total:.1f}%" for n, v in
                           sorted(by_reason.items(), key=lambda x: -x[1]) if v > 0.005 * total))
    top = sorted(range(len(lines)), key=lambda k: -samples(lines[k]))[: a.top]
    for k in sorted(top):
        r = lines[k]
        two = sorted(((number(r[cols[n]]), n[6:]) for n in reasons), reverse=True)[:2]
        print(f"{k:6d} ex={number(r[cols['Instructions Executed']]):8.0f} s={samples(r):6.0f} "
              f"{r[cols['Source']].strip()[:60]:60s} " + " ".join(f"{n} {v:.0f}" for v, n in two if v))
    for spec in a.range:
        try:
            name, span, warps = spec.rsplit(":", 2)
            first, last = (int(x) for x in span.split("-"))
            warps = int(warps)
        except ValueError:
            sys.exit(f"--range {spec}: want NAME:FIRST-LAST:WARPS")
        s = sum(samples(lines[k]) for k in range(first, min(last, len(lines) - 1) + 1))
        print(f"{name:16s} {s:7.0f} samples, {s / warps:6.0f} a warp")
    if a.regions:
        col = lambda r, name: number(r[cols[name]]) if name in cols else 0.0
        ends = ("BAR.", "B2R", "EXIT", "CALL", "RET", "LDGDEPBAR", "DEPBAR")
        first = 0
        for k, r in enumerate(lines):
            if not (any(e in r[cols["Source"]] for e in ends) or k == len(lines) - 1):
                continue
            part = lines[first:k + 1]
            s = sum(samples(x) for x in part)
            wf = sum(col(x, "L1 Wavefronts Shared") for x in part)
            ex = sum(col(x, "L1 Wavefronts Shared Excessive") for x in part)
            ins = sum(col(x, "Instructions Executed") for x in part)
            if s >= 150 or wf >= 2e5:
                print(f"{first:6d}-{k:<6d} {s:6.0f} samples  wavefronts {wf / 1e6:5.2f} M (excess {ex / 1e6:4.2f})"
                      f"  instructions {ins / 1e6:6.2f} M  {r[cols['Source']].strip()[:40]}")
            first = k + 1


if __name__ == "__main__":
    main()
