"""PyTorch's float64 reference for the attention family's modules after SGD steps.

usage: attention_reference.py KIND L E HEADS CAUSAL EPS ROWS STEPS LR DIR
KIND is rmsnorm, layernorm, mha or posembed over samples (L, E) (batch_first); for the norms
HEADS is their dims (0: over (L, E), 1: over E, each token). DIR holds w0.f32 (the
module's parameters in Strata's order: its groups one after the other), x.f32 [ROWS, L, E]
and t.f32 (targets, the same shape). Each step: y = module(x), loss = sum((y - t)^2) / 2,
backward, w -= LR * grad, in float64. Writes DIR/w.f64 (the parameters after STEPS steps in
the same order) and prints "done".
"""
import sys

import numpy as np
import torch
from torch import nn


def rmsnorm(x, w, eps, dims):
    """nn.RMSNorm(normalized_shape=(L, E) or E, eps) (torch 2.4's definition)."""
    ms = x.pow(2).mean(dim=(2,) if dims == 1 else (1, 2), keepdim=True)
    return x * torch.rsqrt(ms + eps) * w


def main():
    kind, ln, e, heads, causal = sys.argv[1], *map(int, sys.argv[2:6])
    eps, rows, steps, lr, d = float(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), \
        float(sys.argv[9]), sys.argv[10]
    w0 = torch.from_numpy(np.fromfile(d + "/w0.f32", dtype=np.float32).astype(np.float64))
    x = torch.from_numpy(np.fromfile(d + "/x.f32", dtype=np.float32).astype(np.float64))
    t = torch.from_numpy(np.fromfile(d + "/t.f32", dtype=np.float32).astype(np.float64))
    x, t = x.reshape(rows, ln, e), t.reshape(rows, ln, e)
    if kind == "mha":
        m = nn.MultiheadAttention(e, heads, batch_first=True).double()
        sd = {}
        at = 0
        for name, p in m.state_dict().items():
            sd[name] = w0[at:at + p.numel()].reshape(p.shape)
            at += p.numel()
        assert at == w0.numel(), (at, w0.numel())
        assert list(sd) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                            "out_proj.bias"], list(sd)
        m.load_state_dict(sd, strict=True)
        mask = None
        if causal:
            mask = torch.triu(torch.ones(ln, ln, dtype=torch.bool), diagonal=1)
        params = list(m.parameters())
        order = [m.in_proj_weight, m.in_proj_bias, m.out_proj.weight, m.out_proj.bias]

        def f(v):
            return m(v, v, v, need_weights=False, attn_mask=mask)[0]
    elif kind == "layernorm":
        m = nn.LayerNorm((e,) if heads == 1 else (ln, e), eps=eps).double()
        half = w0.numel() // 2
        m.load_state_dict({"weight": w0[:half].reshape(m.weight.shape),
                           "bias": w0[half:].reshape(m.bias.shape)}, strict=True)
        order = params = [m.weight, m.bias]
        f = m
    else:
        w = w0.clone().reshape((e,) if kind == "rmsnorm" and heads == 1 else (ln, e))
        w.requires_grad_(True)
        order = params = [w]

        def f(v):
            return rmsnorm(v, w, eps, heads) if kind == "rmsnorm" else v + w
    for _ in range(steps):
        for p in params:
            p.grad = None
        loss = ((f(x) - t) ** 2).sum() / 2
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    out = torch.cat([p.detach().reshape(-1) for p in order])
    out.numpy().astype(np.float64).tofile(d + "/w.f64")
    print("done")


if __name__ == "__main__":
    main()
