#!/usr/bin/env python3
"""Writes hardware/gemm/sm90-bf16.yaml: OpenXLA's measured sm_90 GEMM rates, bf16 column only.

Usage:
  scripts/extract-gemm-table.py [--git-dir DIR] [--commit SHA] [--header FILE] [--out FILE]

  --git-dir  a clone of ROCm/xla (default /work/.mirror/ROCm+xla/repo); the header is read
             with `git --git-dir DIR show SHA:xla/service/gpu/model/matmul_interpolator_data.h`
  --commit   the commit to read (default ea2c45f2cacc930dcfa4e7bb0773616b8e353c34)
  --header   read this copy of matmul_interpolator_data.h instead of the git object
  --out      where to write (default hardware/gemm/sm90-bf16.yaml, relative to the repository)

The header holds a text-format protobuf (kDefaultMatmulPTable) keyed by device ("sm_90",
"sm_100_B200", "gfx942", ...); each entry is one batched GEMM shape (b, m, n, k) with its
measured FLOP/s per dtype combination. Only the numbers are taken (as data, with a citation):
the "bf16xbf16->bf16" rate of every "sm_90" entry, converted exactly to TFLOP/s. The script
fails unless the sm_90 block is the full grid b in {1,2,4} x m, n, k in {256..4096}.
Python 3 standard library only.
"""

import argparse
import decimal
import os
import re
import subprocess
import sys

REPO = "ROCm/xla"
PATH = "xla/service/gpu/model/matmul_interpolator_data.h"
COMMIT = "ea2c45f2cacc930dcfa4e7bb0773616b8e353c34"
DEVICE = "sm_90"
BF16 = "bf16xbf16->bf16"
FP8_KEYS = ("f8e4m3fnxf8e4m3fn->bf16", "f8e4m3fnxf8e5m2->bf16", "f8e5m2xf8e4m3fn->bf16")
H100_FP8_DENSE_TFLOPS = 1979
BATCHES = (1, 2, 4)
SIZES = (256, 512, 1024, 2048, 4096)

TOKEN = re.compile(r'\s*(?:(\{)|(\})|([A-Za-z_][A-Za-z0-9_]*)\s*:?\s*(?=\{)|'
                   r'([A-Za-z_][A-Za-z0-9_]*)\s*:\s*("(?:[^"\\]|\\.)*"|[-+0-9.eE]+))')


def parse_text_proto(text):
    """Parses the subset of text-format protobuf the table uses into nested lists of
    (field, value) pairs; a message value is itself such a list."""
    pos, stack = 0, [[]]
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError("cannot parse the table near: %r" % text[pos:pos + 60])
        pos = m.end()
        if m.group(3):  # "name {"
            stack.append([])
            stack[-2].append((m.group(3), stack[-1]))
        elif m.group(1):
            pass  # the "{" after a message name
        elif m.group(2):
            stack.pop()
        else:
            value = m.group(5)
            value = value[1:-1] if value.startswith('"') else int(value)
            stack[-1].append((m.group(4), value))
    if len(stack) != 1:
        raise ValueError("unbalanced braces in the table")
    return stack[0]


def field(msg, name):
    return [v for k, v in msg if k == name]


def read_header(args):
    if args.header:
        with open(args.header, encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "--git-dir", args.git_dir, "show", "%s:%s" % (args.commit, PATH)],
                          check=True, capture_output=True, text=True).stdout


def sm90_entries(header):
    m = re.search(r'R"pb\((.*)\)pb"', header, re.S)
    if not m:
        raise ValueError("no R\"pb(...)pb\" table in the header")
    for device in field(parse_text_proto(m.group(1)), "entries"):
        if field(device, "key") == [DEVICE]:
            (value,) = field(device, "value")
            return field(value, "entries")
    raise ValueError("no %s block in the table" % DEVICE)


def rates(entry):
    return {field(f, "key")[0]: field(f, "value")[0] for f in field(entry, "flops")}


def tflops(flops_per_s):
    """Exact decimal TFLOP/s of an integer FLOP/s."""
    d = decimal.Decimal(flops_per_s).scaleb(-12).normalize()
    return format(d, "f")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--git-dir", default="/work/.mirror/ROCm+xla/repo")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--header")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--out", default=os.path.join(root, "hardware", "gemm", "sm90-bf16.yaml"))
    args = p.parse_args()

    rows, fp8_over, fp8_max = {}, 0, (0, None, None)
    e4m3_at_largest = None
    for e in sm90_entries(read_header(args)):
        shape = tuple(field(e, x)[0] for x in ("b", "m", "n", "k"))
        r = rates(e)
        if shape in rows or BF16 not in r:
            raise ValueError("shape %s repeated or without a %s rate" % (shape, BF16))
        rows[shape] = r[BF16]
        fp8 = [r[key] for key in FP8_KEYS if key in r]
        fp8_over += any(v > H100_FP8_DENSE_TFLOPS * 1e12 for v in fp8)
        for key in FP8_KEYS:
            if r.get(key, 0) > fp8_max[0]:
                fp8_max = (r[key], shape, key)
        if shape == (BATCHES[-1],) + (SIZES[-1],) * 3:
            e4m3_at_largest = r.get(FP8_KEYS[0])
    grid = {(b, m, n, k) for b in BATCHES for m in SIZES for n in SIZES for k in SIZES}
    if set(rows) != grid:
        raise ValueError("the %s block is not the full %d-point grid (%d entries)"
                         % (DEVICE, len(grid), len(rows)))

    fp8_rate, fp8_shape, fp8_key = fp8_max
    largest = "x".join(map(str, (BATCHES[-1],) + (SIZES[-1],) * 3))
    lines = [
        "# Measured bf16 GEMM throughput on sm_90 (Hopper: H100 and H200 share the die and the",
        "# 989 TFLOP/s dense bf16 peak), for shardsim's shape-dependent GEMM model",
        "# (src/cost/gemm_table.h; schema and use: docs/hardware.md, efficiency.matmul_table).",
        "#",
        "# GENERATED by scripts/extract-gemm-table.py; do not edit by hand.",
        "# [P] Source: OpenXLA's measured GEMM table as mirrored in %s," % REPO,
        "#     file %s," % PATH,
        "#     commit %s," % args.commit,
        "#     kDefaultMatmulPTable, block key \"%s\", flops key \"%s\"." % (DEVICE, BF16),
        "#     Only the measured numbers are taken, as data; no code.",
        "# What the numbers are: XLA's measured throughput of one batched GEMM (b independent",
        "#   m x k by k x n products) with bf16 inputs and bf16 output, as FLOP/s = 2 b m n k / time;",
        "#   here converted exactly to TFLOP/s (1e12 FLOP/s). Rows: b in {1, 2, 4} x m, n, k in",
        "#   {256, 512, 1024, 2048, 4096}: %d shapes." % len(rows),
        "# A dense GEMM with M rows runs as b = 1, m = M; b x m is the GEMM's row count (a b-batch",
        "#   of m-row products does the work of one (b m) x n x k GEMM), which is how shardsim maps",
        "#   M > 4096 onto the table.",
        "# The fp8 columns of the same block are NOT used: at large shapes they exceed the H100's",
        "#   %d TFLOP/s dense fp8 peak: %s reaches %.1f TFLOP/s"
        % (H100_FP8_DENSE_TFLOPS, FP8_KEYS[0], e4m3_at_largest / 1e12),
        "#   at b x m x n x k = %s; %d of the %d shapes exceed the peak in some fp8 column"
        % (largest, fp8_over, len(rows)),
        "#   (at most %.1f, %s at %s). So they cannot be real dense fp8"
        % (fp8_rate / 1e12, fp8_key, "x".join(map(str, fp8_shape))),
        "#   rates. The f32 column is not used either.",
        "arch: %s" % DEVICE,
        "dtype: bf16",
        "rates:  # TFLOP/s",
    ]
    for shape in sorted(rows):
        b, m, n, k = shape
        lines.append("  - {b: %d, m: %d, n: %d, k: %d, tflops: %s}" % (b, m, n, k, tflops(rows[shape])))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d shapes" % (args.out, len(rows)))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, subprocess.CalledProcessError, OSError) as e:
        sys.exit("extract-gemm-table.py: %s" % e)
