#!/usr/bin/env python3
"""Reads `cuobjdump -sass` listings (or PTX) of the CUDA kernels and checks the early-start
contract in the code (kernels.def, METRALE_KERNEL_EARLY_START: nothing but L2 prefetches touches
global memory before griddepcontrol.wait).

    cuobjdump -sass kernels/*.sm_90a.cubin > sass.txt      (on the device: this machine has no
    scripts/sass-pdl-check.py sass.txt [kernels.def]        cuobjdump)

    nvcc -ptx -arch=sm_90a ... kernels/cuda/gemm.cu -o gemm.ptx   (anywhere nvcc is: the compiler's
    scripts/sass-pdl-check.py gemm.ptx ... [kernels.def]           order before ptxas schedules)

For each kernel it prints where griddepcontrol.wait (SASS ACQBULK) and launch_dependents
(PREEXIT) first appear and every global memory instruction laid out before the first ACQBULK.
An early-start kernel with such an instruction is listed as SUSPECT and the exit status is 1:
either the compiler moved a load above the wait, or the source reads before it.  Layout order is
not execution order (a loop's body can lie before its test), so a SUSPECT line is to be read, not
believed; a clean listing is the stronger statement.  Exit status 2: nothing could be read.
"""
import re
import sys

# opcodes that read or write global (or generic) memory; shared (LDS, STS, ATOMS), constant (LDC)
# and the L2 prefetch (CCTL) are not among them
GLOBAL_OPS = ("LDG", "STG", "ATOMG", "ATOM", "RED", "LD", "ST", "LDGSTS", "UTMALDG", "UTMASTG",
              "UBLKCP", "UTMAREDG", "SUATOM", "SULD", "SUST")
FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)\s*(.*?);")
# PTX: an entry, and an instruction as "opcode" (its first dotted word) with the rest; the wait and
# the trigger are named as in SASS, and global (or generic) accesses by the same opcodes
PTX_FUNC = re.compile(r"^\.(?:visible|weak)\s+\.entry\s+(\w+)\s*\(")
PTX_INSN = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9_]*)((?:\.[a-z0-9_:]+)*)\s*(.*?);")
PTX_GLOBAL = re.compile(r"^(ld|st|atom|red|cp\.async|cp\.reduce\.async)(\.(global|u|s|b|f)|\.bulk|\b)")


def ptx_op(op, mods):
    """The SASS name of a PTX instruction the check cares about, else the PTX opcode."""
    full = op + mods
    if full.startswith("griddepcontrol.wait"):
        return "ACQBULK"
    if full.startswith("griddepcontrol.launch_dependents"):
        return "PREEXIT"
    if PTX_GLOBAL.match(full) and ".shared" not in full and ".param" not in full and ".const" not in full \
            and ".local" not in full:
        return "LDG" if full.startswith(("ld", "cp")) else "STG"
    return "ptx." + op  # not among GLOBAL_OPS


def early_start_ids(path):
    ids = []
    with open(path) as f:
        for line in f:
            m = re.match(r"^METRALE_KERNEL_EARLY_START\((\w+)\)", line)
            if m:
                ids.append(m.group(1))
    return ids


def read_listing(paths):
    """name -> [(position, SASS-like opcode, full text, operands)] from SASS or PTX listings."""
    funcs = {}
    cur = None
    for p in paths:
        with open(p, errors="replace") as f:
            for line in f:
                m = FUNC.match(line) or PTX_FUNC.match(line)
                if m:
                    cur = funcs.setdefault(m.group(1), [])
                    continue
                if cur is None:
                    continue
                m = INSN.match(line)
                if m:
                    cur.append((int(m.group(1), 16), m.group(2), m.group(2) + m.group(3), m.group(4).strip()))
                    continue
                m = PTX_INSN.match(line)
                if m:
                    cur.append((len(cur), ptx_op(m.group(1), m.group(2)), m.group(1) + m.group(2), m.group(3).strip()))
    return funcs


def position(a):
    """An instruction's position as listed (hex, as cuobjdump writes it), "-" for none."""
    return format(a, "x") if a is not None else "-"


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    listings = [a for a in argv[1:] if not a.endswith(".def")]
    kdef = next((a for a in argv[1:] if a.endswith(".def")), "core/include/metrale/kernels.def")
    early = set(early_start_ids(kdef))
    funcs = read_listing(listings)
    if not funcs or not early:
        print(f"nothing read: {len(funcs)} functions in {' '.join(listings)}, {len(early)} early-start rows in {kdef}",
              file=sys.stderr)
        return 2
    suspect = 0
    print(f"{'kernel':44} {'early':5} {'ACQBULK':>8} {'PREEXIT':>8}  global memory before the first ACQBULK")
    for name in sorted(funcs):
        insns = funcs[name]
        acq = next((a for a, op, _, _ in insns if op == "ACQBULK"), None)
        pre = next((a for a, op, _, _ in insns if op == "PREEXIT"), None)
        is_early = name in early
        before = [f"{full} {args}" for a, op, full, args in insns
                  if op in GLOBAL_OPS and (acq is None or a < acq)] if (is_early or acq is not None) else []
        flag = ""
        if is_early and acq is None:
            flag = "SUSPECT: no ACQBULK at all"
        elif is_early and before:
            flag = "SUSPECT"
        suspect += bool(flag)
        shown = "; ".join(before[:4]) + (f"; ... {len(before) - 4} more" if len(before) > 4 else "")
        print(f"{name:44} {'yes' if is_early else '':5} {position(acq):>8} {position(pre):>8}  "
              f"{flag + ' ' if flag else ''}{shown}")
    missing = sorted(early - set(funcs))
    if missing:
        print("early-start rows with no function in the listing: " + ", ".join(missing))
    return 1 if suspect else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
