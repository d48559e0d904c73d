#!/usr/bin/env python3
"""Which of a backend's kernels a program or a test suite launched.

    metrale audit --backend B > audit.txt
    METRALE_LAUNCH_LOG=launches.txt metrale_layer_tests ...      (any program; the log appends)
    scripts/launch-coverage.py audit.txt launches.txt [B]

Prints how many of the kernels the audit lists as present on backend B (default: the first
backend of the log) were launched, and those that were not.  Exit status 2 when nothing could
be read.
"""
import re
import sys


def present(audit_path):
    """module.name of every kernel the audit's table lists as present."""
    out = []
    row = re.compile(r"^\s+(\w+)\s+(\w+)\s+(required|optional)\s+present\b")
    with open(audit_path) as f:
        for line in f:
            m = row.match(line)
            if m:
                out.append(f"{m.group(1)}.{m.group(2)}")
    return out


def launched(log_path, backend):
    counts = {}
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            if backend is None:
                backend = parts[0]
            if parts[0] == backend:
                counts[parts[1]] = counts.get(parts[1], 0) + int(parts[2])
    return backend, counts


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    have = present(argv[1])
    backend, counts = launched(argv[2], argv[3] if len(argv) > 3 else None)
    if not have or not counts:
        print(f"nothing read: {len(have)} present kernels in {argv[1]}, {len(counts)} launched in {argv[2]}",
              file=sys.stderr)
        return 2
    never = [k for k in have if k not in counts]
    print(f"{backend}: {len(have) - len(never)} of its {len(have)} kernels launched; never: "
          + (", ".join(never) if never else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
