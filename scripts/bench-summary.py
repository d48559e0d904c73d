#!/usr/bin/env python3
"""One line per `metrale bench --json` file: its name, the ceilings (copy GB/s, gemm TFLOP/s)
and each case's median in us (d = decode batch, p = prefill tokens, c = core tokens)."""
import json
import os
import sys

for path in sys.argv[1:]:
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        print(os.path.basename(path), "unreadable:", e)
        continue
    cases = [(r.get("kind", "core")[0] + str(r["n"]), r["median_us"]) for r in j.get("results", [])]
    print(os.path.basename(path), round(j.get("copy_gbps", 0)), round(j.get("gemm_tflops", 0)), cases)
