#!/usr/bin/env python3
"""PyTorch's training step time for a shardsim model shape: the CPU speed reference of issue 17
item 4 (scripts/cpu-speed.sh runs it beside `shardsim run`).

The model is a Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU, untied head) or GPT-style
(LayerNorm, learned positions, GELU, biases) written with PyTorch's own operators, as
tests/torch/reference.py writes it: the same architecture and sizes as shardsim's model
description, trained with torch.optim.AdamW (foreach) and clip_grad_norm_ as shardsim trains it
(gradient accumulation over micro-batches, clipping at 1.0). Attention is the unfused
softmax(QK^T)V (shardsim's attention=unfused) or F.scaled_dot_product_attention (its
attention=flash; PyTorch 1.13 on a CPU runs its math path). Tokens are uniform random ids: the
step time does not depend on their values.

  torch_step.py --layers L --hidden H --heads A --kv-heads K --ffn F --vocab V --seq S
                [--mbs M] [--gbs B] [--steps N] [--warmup W] [--threads T] [--dtype fp32|bf16]
                [--ddp]   (under torchrun-free launching: RANK/WORLD_SIZE/MASTER_* from the env)

Prints one JSON object: the median step time over the timed steps and each step's time.
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F


def parse():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 512), ("heads", 8), ("kv-heads", 4), ("ffn", 1536),
                          ("vocab", 4096), ("seq", 256), ("mbs", 4), ("gbs", 8), ("steps", 5), ("warmup", 1),
                          ("threads", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--attention", choices=["unfused", "flash"], default="flash")
    p.add_argument("--ddp", action="store_true")
    return p.parse_args()


class RmsNorm(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.ones(h))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.gain


def rope(x, cos, sin):
    # x (B, heads, T, d): rotate pairs (x[2i], x[2i+1]) by position angles.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        h, d = a.hidden, a.hidden // a.heads
        self.heads, self.kv_heads, self.d, self.flash = a.heads, a.kv_heads, d, a.attention == "flash"
        self.n1, self.n2 = RmsNorm(h), RmsNorm(h)
        self.q = torch.nn.Linear(h, a.heads * d, bias=False)
        self.k = torch.nn.Linear(h, a.kv_heads * d, bias=False)
        self.v = torch.nn.Linear(h, a.kv_heads * d, bias=False)
        self.o = torch.nn.Linear(a.heads * d, h, bias=False)
        self.gate = torch.nn.Linear(h, a.ffn, bias=False)
        self.up = torch.nn.Linear(h, a.ffn, bias=False)
        self.down = torch.nn.Linear(a.ffn, h, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        y = self.n1(x)
        q = self.q(y).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k(y).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(y).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if self.flash:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
                else None
        else:
            att = None
        if att is None:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.o(att.transpose(1, 2).reshape(b, t, -1))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Model(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = torch.nn.Embedding(a.vocab, a.hidden)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RmsNorm(a.hidden)
        self.head = torch.nn.Linear(a.hidden, a.vocab, bias=False)
        d = a.hidden // a.heads
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        ang = torch.outer(torch.arange(a.seq).float(), inv)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        logits = self.head(self.norm(x)).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    a = parse()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    model = Model(a)
    world, rank = 1, 0
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        world, rank = dist.get_world_size(), dist.get_rank()
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    local = a.gbs // world
    micro = local // a.mbs
    gen = torch.Generator().manual_seed(7 + rank)
    times = []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (local, a.seq + 1), generator=gen)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(micro):
            rows = tokens[m * a.mbs:(m + 1) * a.mbs]
            ctx = model.no_sync() if a.ddp and m + 1 < micro else torch.autograd.profiler.record_function("step")
            with ctx:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
                    loss = model(rows[:, :-1], rows[:, 1:]) / micro
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    if rank == 0:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "world": world,
                          "dtype": a.dtype, "attention": a.attention, "step_time_s": statistics.median(times),
                          "step_times_s": times}))


if __name__ == "__main__":
    main()
