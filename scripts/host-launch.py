#!/usr/bin/env python3
"""The host's cost per eager PyTorch op, for hardware descriptions' `host.launch_overhead`.

Times a chain of tiny element-wise ops under autograd (eager RMSNorm's eight kernels, as
torchtitan writes it: float, pow, mean, + eps, rsqrt, multiply, type_as, weight multiply) so
that each op's device time is negligible and the host's issue rate is what is measured:

  --device cpu   the dispatcher and autograd alone (CPU tensors, one thread): the part of a
                 launch that is PyTorch's, on this machine's CPU;
  --device cuda  the same chain on the GPU, launched back to back and synchronised once at the
                 end: host time per op with the CUDA caching allocator and cudaLaunchKernel, as
                 long as the host, not the device, is the slower (the chain's device time is
                 also timed, with CUDA events, and printed beside it); then the chain captured
                 in a CUDA graph and replayed, the host time per replay.

Prints a Markdown table (and writes it to --out). Used by scripts/gpu-check.sh on the GPU
machine and by its CPU dry run; the figures are cited where a description uses them.
"""
import argparse
import os
import platform
import statistics
import sys
import time


def chain(x, w):
    y = x.float()
    z = y.pow(2).mean(-1, keepdim=True)
    r = (z + 1e-5).rsqrt()
    return (y * r).type_as(x) * w


OPS_PER_CHAIN = 8  # float, pow, mean, add, rsqrt, mul, type_as, mul


def per_op_seconds(fn, reps, sync):
    """Best of five timings of `reps` calls, per op."""
    best = float("inf")
    for _ in range(5):
        sync()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / reps)
    return best / OPS_PER_CHAIN


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not 1 <= a.reps <= 1_000_000:
        sys.exit("host-launch: --reps must be 1..1000000")
    import torch

    torch.set_num_threads(1)
    dev = torch.device(a.device)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("host-launch: no CUDA device")
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    # bf16 on the GPU, as training runs; on the CPU fp32 over 8 elements, whose arithmetic is
    # nothing beside the dispatch (the CPU's bf16 kernels convert, which is not the host's
    # launch cost being measured).
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    x = torch.randn(1, 8, device=dev, dtype=dtype, requires_grad=True)
    w = torch.randn(8, device=dev, dtype=dtype, requires_grad=True)
    for _ in range(200):  # warm-up: the allocator's blocks, the kernels' first launches
        chain(x, w)
    sync()
    rows = []
    host = per_op_seconds(lambda: chain(x, w), a.reps, sync)
    rows.append(("eager op under autograd, host per op", host))
    with torch.no_grad():
        rows.append(("eager op without autograd, host per op", per_op_seconds(lambda: chain(x, w), a.reps, sync)))
    if a.device == "cuda":
        # The chain's device time: events around many chains, per op (a lower bound on the
        # host's only while the host is the slower).
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            start.record()
            for _ in range(a.reps):
                chain(x, w)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3 / a.reps / OPS_PER_CHAIN)
        rows.append(("the same ops, device time per op (events)", statistics.median(times)))
        # A CUDA graph of the chain (no autograd: the forward's kernels), replayed.
        xs = x.detach().clone()
        ws = w.detach().clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                chain(xs, ws)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            chain(xs, ws)
        replay = per_op_seconds(g.replay, a.reps, sync) * OPS_PER_CHAIN
        rows.append((f"CUDA graph of the {OPS_PER_CHAIN} ops, host per replay", replay))
    name = torch.cuda.get_device_name(0) if a.device == "cuda" else "CPU tensors"
    cpu = platform.processor() or platform.machine()
    lines = [f"# Host cost per eager PyTorch op ({a.device}: {name}; torch {torch.__version__}, "
             f"{a.reps} chains of {OPS_PER_CHAIN} ops, best of 5)", "",
             f"Written by `scripts/host-launch.py --device {a.device} --reps {a.reps}` on a host with "
             f"{os.cpu_count()} CPUs ({cpu}): each op's host time while the host, not the device, is the "
             "slower (the script's docstring says how).", "",
             "| what | us |", "|---|---:|"]
    lines += [f"| {what} | {t * 1e6:.2f} |" for what, t in rows]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
