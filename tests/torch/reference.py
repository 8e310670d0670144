#!/usr/bin/env python3
"""Replays a shardsim reference dump (runtime/exec/reference_dump.h) in PyTorch and compares.

The model is written here from the dump's shape alone, with PyTorch's own operators (F.linear,
F.layer_norm, F.gelu, F.silu, F.cross_entropy, autograd, torch.optim.AdamW,
clip_grad_norm_): nothing of shardsim's code is reused, so agreement checks shardsim's
forward, backward and optimizer against an implementation someone else wrote (llm.c's
test_gpt2 is the model: step 0's logits, loss and every gradient, then the losses of several
steps and the parameters they reach).

  reference.py DUMP_DIR [--label TEXT]

Prints one Markdown table row per check and exits 1 when any check is outside its tolerance
(the tolerances and their derivation are in TOLERANCES below).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

# Unit roundoff u = 2^-p of round-to-nearest with p significand bits (Higham, "Accuracy and
# Stability of Numerical Algorithms", 2nd ed., sec. 2.1): fp32 p = 24, bf16 p = 8 (7 stored).
U_FP32 = 2.0 ** -24
U_BF16 = 2.0 ** -8

# The bounds, derived (n is the longest reduction of the test models: vocab 512 in the LM
# head's backward; gamma_n = n u bounds one dot product's relative error, Higham eq. 3.4):
# - fp32 logits: the forward is about 4 GEMMs deep per layer (4 layers) plus the head; the two
#   implementations round differently in each, so the worst case is ~20 gamma_n relative to the
#   largest logit: 20 * 512 * 2^-24 = 6.1e-4. The bound is 1e-3 of the largest |logit|.
# - fp32 step-0 gradients: backward chains twice the forward's GEMMs, and a tensor's small
#   elements carry the error of its large ones: 2e-3 of the tensor's largest |gradient|.
# - fp32 losses: the loss is a mean of log-softmaxes, each within ~n u of exact; over 5 AdamW
#   steps the loss changes by ~1e-1 and an element whose gradient is within rounding of 0 moves
#   by up to +-lr either way (Adam normalizes), so the bound grows to 1e-4 relative.
# - fp32 parameters after the steps: the same sign-flip argument bounds each element's gap by
#   2 lr per step; what is asserted is the gap's RMS against the RMS of the update itself:
#   1e-2 (most elements agree to rounding; the few with near-zero gradients differ by ~lr).
# - bf16: shardsim stores activations and working weights in bf16 between operators, PyTorch's
#   autocast rounds only the GEMM inputs (and keeps norms and softmax in fp32); each operator
#   boundary adds up to u_bf16 = 2^-8 relative to the values it rounds. The loss is a mean over
#   the batch's 128 tokens of log-softmaxes whose errors have both signs, so it moves by much
#   less than one u_bf16: the bound is 5e-3 (1.3 u_bf16) relative per step. The parameters'
#   gap RMS is bounded by 0.25 of the update's RMS (bf16 rounding flips the sign of small
#   gradients, and Adam turns a flip into a 2 lr step). A bf16 run is also replayed in fp32, to
#   show the size of PyTorch's own autocast error beside shardsim's (rows without a bound).
TOLERANCES = {
    "fp32": {"logits": 1e-3, "grads": 2e-3, "loss": 1e-4, "params": 1e-2},
    "bf16": {"loss": 5e-3, "params": 0.25},
}


def load(dump_dir, name, dtype):
    return torch.from_numpy(np.fromfile(os.path.join(dump_dir, name), dtype=dtype))


class Model:
    """A decoder-only transformer in PyTorch, parameters by shardsim's tensor names."""

    def __init__(self, spec, tensors, flat):
        self.m = spec
        self.params = {}
        for t in tensors:
            w = flat[t["offset"]:t["offset"] + t["rows"] * t["cols"]].view(t["rows"], t["cols"])
            if t["rows"] == 1:  # gains and biases are vectors
                w = w.view(t["cols"])
            self.params[t["name"]] = w.clone().requires_grad_(True)

    def norm(self, x, prefix):
        m, p = self.m, self.params
        if m["norm"] == "layernorm":
            return F.layer_norm(x, (m["hidden"],), p[prefix + ".gain"], p[prefix + ".bias"], m["norm_eps"])
        # RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * gain, in fp32.
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + m["norm_eps"])) * p[prefix + ".gain"]

    def linear(self, x, prefix, qkv=False):
        p = self.params
        return F.linear(x, p[prefix + ".weight"], p.get(prefix + ".bias"))

    def rope(self, x):
        # Rotate-half RoPE (GPT-NeoX / Hugging Face Llama): pair (i, i + d/2) turned by
        # t * base^(-2i/d). Angles in float64, then the tensor's type.
        b, t, h, d = x.shape
        half = d // 2
        inv = self.m["rope_base"] ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        cos = ang.cos().to(x.dtype)[None, :, None, :]
        sin = ang.sin().to(x.dtype)[None, :, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, inputs):
        m, p = self.m, self.params
        b, t = inputs.shape
        hd, nh, nkv = m["head_dim"], m["heads"], m["kv_heads"]
        x = p["embed.tokens"][inputs]
        if m["position"] == "learned":
            x = x + p["embed.positions"][:t]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for layer in range(m["layers"]):
            pre = "blocks.%d." % layer
            h = self.norm(x, pre + "attn_norm")
            q = self.linear(h, pre + "attn.q").view(b, t, nh, hd)
            k = self.linear(h, pre + "attn.k").view(b, t, nkv, hd)
            v = self.linear(h, pre + "attn.v").view(b, t, nkv, hd)
            if m["position"] == "rope":
                q, k = self.rope(q), self.rope(k)
            # GQA: query head i reads KV head i // (heads / kv_heads).
            k = k.repeat_interleave(nh // nkv, dim=2)
            v = v.repeat_interleave(nh // nkv, dim=2)
            q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # (b, heads, t, d)
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, nh * hd)
            x = x + self.linear(y, pre + "attn.out")
            h = self.norm(x, pre + "mlp_norm")
            if m["activation"] == "swiglu":
                u = F.silu(self.linear(h, pre + "mlp.gate")) * self.linear(h, pre + "mlp.up")
                x = x + self.linear(u, pre + "mlp.down")
            else:
                u = F.gelu(self.linear(h, pre + "mlp.fc"), approximate="tanh")
                x = x + self.linear(u, pre + "mlp.proj")
        x = self.norm(x, "final_norm")
        head = p["embed.tokens"] if m["tied_embeddings"] else p["lm_head.weight"]
        return F.linear(x, head).reshape(b * t, m["vocab"])


def flat_of(model, tensors, what):
    out = []
    for t in tensors:
        v = model.params[t["name"]]
        out.append((v.grad if what == "grad" else v).detach().reshape(-1))
    return torch.cat(out)


def learning_rate(sched, step):
    """Megatron-LM's OptimizerParamScheduler.get_lr with --lr-warmup-init 0, written from its
    documented rule (linear warm-up from 0, then constant, linear or cosine decay to min_lr over
    decay_steps; step = the steps already taken)."""
    w, d = sched["warmup_steps"], sched["decay_steps"]
    hi, lo = sched["max_lr"], sched["min_lr"]
    if w > 0 and step <= w:
        return hi * step / w
    if sched["decay"] == "constant":
        return hi
    if step > d:
        return lo
    ratio = (step - w) / (d - w)
    coeff = 1.0 - ratio if sched["decay"] == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return lo + coeff * (hi - lo)


def replay(man, dump, tensors, p0, inputs, targets, autocast, on_step0=None):
    """Trains a PyTorch copy from p0 on the dump's tokens; returns (losses, final flat params)."""
    spec, opt = man["model"], man["adamw"]
    model = Model(spec, tensors, p0)
    decay = [model.params[t["name"]] for t in tensors if t["weight_decay"]]
    no_decay = [model.params[t["name"]] for t in tensors if not t["weight_decay"]]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": opt["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    sched = man["lr_schedule"]
    losses = []
    for s in range(man["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(sched, s)
        optimizer.zero_grad(set_to_none=True)
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model.forward(inputs[s])
        else:
            logits = model.forward(inputs[s])
        loss = F.cross_entropy(logits.float(), targets[s].reshape(-1))
        loss.backward()
        losses.append(loss.item())
        if s == 0 and on_step0:
            on_step0(logits.detach().float(), flat_of(model, tensors, "grad"))
        torch.nn.utils.clip_grad_norm_(list(model.params.values()), opt["max_grad_norm"])
        optimizer.step()
    return losses, flat_of(model, tensors, "param")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    with open(os.path.join(args.dump, "manifest.json")) as f:
        man = json.load(f)
    spec, tensors = man["model"], man["tensors"]
    steps, gbs, seq = man["steps"], man["gbs"], spec["seq_len"]
    dtype = man["dtype"]
    tol = TOLERANCES[dtype]
    torch.manual_seed(0)
    torch.set_num_threads(1)

    p0 = load(args.dump, "params_initial.f32", np.float32)
    pn = load(args.dump, "params_final.f32", np.float32)
    inputs = load(args.dump, "inputs.i32", np.int32).long().view(steps, gbs, seq)
    targets = load(args.dump, "targets.i32", np.int32).long().view(steps, gbs, seq)
    label = args.label or "%s, %s, %s" % (spec["name"], man["source"], man["layout"])
    rows, failed = [], False

    def check(what, value, bound):
        nonlocal failed
        ok = bound is None or value <= bound
        failed |= not ok
        rows.append("| %s | %s | %.3g | %s | %s |" % (label, what, value, "-" if bound is None else "%.3g" % bound,
                                                     "pass" if ok else "FAIL"))

    def step0(logits, grads):
        if "logits.f32" in man["files"]:
            ref = load(args.dump, "logits.f32", np.float32).view(gbs * seq, spec["vocab"])
            gap = (ref - logits).abs().max().item() / ref.abs().max().item()
            check("step-0 logits: max gap / max abs logit", gap, tol["logits"])
        if "grads.f32" in man["files"]:
            ref = load(args.dump, "grads.f32", np.float32)
            worst, worst_name = 0.0, ""
            # A tensor whose gradient is zero in exact arithmetic holds only rounding noise: the
            # K bias's (softmax is shift-invariant, so q . b_k adds the same to every score of a
            # query and cancels). Its gap is measured against 1e-3 of the model's largest gradient.
            floor = 1e-3 * ref.abs().max().item()
            for t in tensors:
                a, n = t["offset"], t["rows"] * t["cols"]
                scale = max(ref[a:a + n].abs().max().item(), floor)
                g = (ref[a:a + n] - grads[a:a + n]).abs().max().item() / scale
                if g > worst:
                    worst, worst_name = g, t["name"]
            check("step-0 gradients, worst of %d tensors (%s): max gap / max abs grad" % (len(tensors), worst_name),
                  worst, tol["grads"])

    def compare(losses, final, what, bounded):
        loss_gap = max(abs(a - b) / abs(b) for a, b in zip(man["losses"], losses))
        check("%slosses of %d steps (%.4f -> %.4f): max relative gap" % (what, steps, losses[0], losses[-1]),
              loss_gap, tol["loss"] if bounded else None)
        update_rms = (final - p0).pow(2).mean().sqrt().item()
        gap_rms = (final - pn).pow(2).mean().sqrt().item()
        check("%sparameters after %d steps: gap RMS / update RMS" % (what, steps), gap_rms / update_rms,
              tol["params"] if bounded else None)

    if man["learning_rates"]:
        gap = max(abs(a - learning_rate(man["lr_schedule"], s)) for s, a in enumerate(man["learning_rates"]))
        check("learning rates of %d steps (%s schedule, warm-up %d): max gap" %
              (steps, man["lr_schedule"]["decay"], man["lr_schedule"]["warmup_steps"]), gap, 1e-15)
    losses, final = replay(man, args.dump, tensors, p0, inputs, targets, dtype == "bf16", step0)
    compare(losses, final, "PyTorch bf16 autocast: " if dtype == "bf16" else "", True)
    if dtype == "bf16":
        # For scale: the same bf16 run against PyTorch in fp32, and PyTorch's autocast against
        # its own fp32.
        losses32, final32 = replay(man, args.dump, tensors, p0, inputs, targets, False)
        compare(losses32, final32, "PyTorch fp32: ", False)
        autocast_gap = max(abs(a - b) / abs(b) for a, b in zip(losses, losses32))
        check("PyTorch's own bf16 autocast against its fp32: losses' max relative gap", autocast_gap, None)
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
