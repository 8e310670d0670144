#!/usr/bin/env python3
"""A second reader of shardsim's checkpoint maps (runtime/exec/reshard.h), for
tests/resume_reshard_test.sh: assembles the whole model's fp32 master weights and AdamW
moments from a checkpoint folder's rank-R.bin / rank-R.map files, independently of the C++.

  reshard_assemble.py same DIR1 DIR2
      the two checkpoints hold the same state, bit for bit
  reshard_assemble.py compare A_DIR C_DIR A_JSON C_JSON FROM bitwise|close
      C (resumed at step FROM) against A (uninterrupted): losses of steps FROM.. and the final
      master weights equal (bitwise), or within 1e-5 relative (close; the bound is
      tests/mpi/exec_equivalence_main.cc's)
"""
import array
import json
import math
import os
import re
import struct
import sys

MAGIC = b"shardsim state map 1\n"


def sections(state):
    """rank-R.bin: int64 AdamW step, then weights, master, moment 1, moment 2 (int64 bytes + bytes)."""
    (step,) = struct.unpack_from("<q", state, 0)
    at, out = 8, []
    for _ in range(4):
        (n,) = struct.unpack_from("<q", state, at)
        at += 8
        out.append(state[at:at + n])
        at += n
    return step, out


def floats(buf, first, count):
    a = array.array("f")
    a.frombytes(buf[4 * first:4 * (first + count)])
    if len(a) != count:
        raise SystemExit("a run past its section's end")
    return a


def assemble(folder):
    ranks = sorted(int(m.group(1)) for f in os.listdir(folder) for m in [re.fullmatch(r"rank-(\d+)\.map", f)] if m)
    if not ranks or ranks != list(range(len(ranks))):
        raise SystemExit("%s: rank maps %s" % (folder, ranks))
    state, covered, steps = None, None, set()
    for r in ranks:
        with open(os.path.join(folder, "rank-%d.map" % r), "rb") as f:
            m = f.read()
        with open(os.path.join(folder, "rank-%d.bin" % r), "rb") as f:
            step, sec = sections(f.read())
        steps.add(step)
        if not m.startswith(MAGIC):
            raise SystemExit("rank %d: not a state map" % r)
        at = len(MAGIC)
        n, _weight_bytes, runs = struct.unpack_from("<qqq", m, at)
        at += 24
        if state is None:
            state = [array.array("f", bytes(4 * n)) for _ in range(3)]
            covered = bytearray(n)
        for _ in range(runs):
            full, count, master_at, moment_at, in_weights = struct.unpack_from("<qqqqq", m, at)
            at += 40
            for k, (src, first) in enumerate(((sec[0] if in_weights else sec[1], master_at),
                                              (sec[2], moment_at), (sec[3], moment_at))):
                state[k][full:full + count] = floats(src, first, count)
            if any(covered[full:full + count]):
                raise SystemExit("rank %d: elements [%d, +%d) counted twice" % (r, full, count))
            covered[full:full + count] = b"\x01" * count
    if not all(covered):
        raise SystemExit("%s: %d elements in no map" % (folder, covered.count(0)))
    if len(steps) != 1:
        raise SystemExit("%s: ranks at AdamW steps %s" % (folder, sorted(steps)))
    return steps.pop(), state


def rel_l2(a, b):
    d2 = sum((x - y) ** 2 for x, y in zip(a, b))
    r2 = sum(x * x for x in a)
    return math.sqrt(d2 / max(r2, 1e-30))


def main(argv):
    if argv[1] == "same":
        s1, a = assemble(argv[2])
        s2, b = assemble(argv[3])
        ok = s1 == s2 and all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
        print("%s and %s: %s (%d parameters)" % (argv[2], argv[3], "identical" if ok else "DIFFERENT", len(a[0])))
        return 0 if ok else 1
    a_dir, c_dir, a_json, c_json, first, kind = argv[2:8]
    first = int(first)
    with open(a_json) as f:
        la = json.load(f)["losses"][first:]
    with open(c_json) as f:
        c = json.load(f)
    lc = c["losses"]
    sa, a = assemble(a_dir)
    sc, cs = assemble(c_dir)
    if c["first_step"] != first or sa != sc or len(la) != len(lc):
        print("resumed at %s (expected %d), AdamW steps %d / %d" % (c["first_step"], first, sa, sc))
        return 1
    if kind == "bitwise":
        ok = la == lc and a[0].tobytes() == cs[0].tobytes()
        print("losses %s / %s; master weights %s" % (la, lc, "identical" if a[0].tobytes() == cs[0].tobytes() else "differ"))
        return 0 if ok else 1
    worst = max(abs(x - y) / max(abs(x), abs(y)) for x, y in zip(la, lc))
    err = rel_l2(a[0], cs[0])
    print("losses within %.2e relative, master weights %.2e relative L2 (bound 1e-5 each)" % (worst, err))
    return 0 if worst <= 1e-5 and err <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
