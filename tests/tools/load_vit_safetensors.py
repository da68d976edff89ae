"""Load a Strata safetensors export of the guide's ViT-style line into PyTorch's equivalent.

usage: load_vit_safetensors.py MODEL.safetensors INPUT.f32 LOGITS.f32 ROWS
The model is tests/strategy/attention_parallel.c's line on 1 x 8 x 8 samples:
  input(1,8,8) conv2d(8,4,stride=4) tokens posembed
  rmsnorm(dims=1) mha(2,causal=1) add(from=2)
  rmsnorm(dims=1) tokens conv1d(16,1) gelu conv1d(8,1) tokens add(from=5)
  rmsnorm(dims=1) flatten linear(4)
a patch embedding, one pre-norm transformer encoder block (RMSNorm(8) per token, causal
nn.MultiheadAttention(8, 2, batch_first=True), an MLP of kernel-1 Conv1d applied to each
token) and a head. Every tensor must have PyTorch's name and shape (load_state_dict strict).
Prints "match" and exits 0 when every output agrees within 1e-4 (relative) and every argmax is
the same; exits 1 otherwise.
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_safetensors import compare, read_safetensors  # noqa: E402

E, L, CLASSES = 8, 4, 4


class RMSNorm(nn.Module):
    """nn.RMSNorm(E) (torch 2.4) with eps 1.1920929e-07 (FLT_EPSILON, PyTorch's None)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(E))

    def forward(self, x):
        eps = torch.finfo(torch.float32).eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class PosEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(L, E))


class Vit(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Conv2d(1, E, 4, stride=4), nn.Identity(), PosEmbed(), RMSNorm(),
            nn.MultiheadAttention(E, 2, batch_first=True), nn.Identity(), RMSNorm(),
            nn.Identity(), nn.Conv1d(E, 16, 1), nn.GELU(), nn.Conv1d(16, E, 1), nn.Identity(),
            nn.Identity(), RMSNorm(), nn.Identity(), nn.Linear(L * E, CLASSES)])

    def forward(self, x):
        f = self.layers
        h = f[0](x.reshape(-1, 1, 8, 8)).flatten(2).transpose(1, 2)
        h2 = h + f[2].weight
        n = f[3](h2)
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
        h5 = f[4](n, n, n, need_weights=False, attn_mask=mask)[0] + h2
        m = f[6](h5).transpose(1, 2)
        m = f[10](f[9](f[8](m))).transpose(1, 2)
        h12 = m + h5
        return f[15](f[13](h12).flatten(1))


def main():
    path, xin, logits, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = Vit()
    tensors = read_safetensors(path)
    assert sorted(tensors) == sorted(model.state_dict()), (sorted(tensors),
                                                            sorted(model.state_dict()))
    for name, t in model.state_dict().items():
        assert tensors[name].shape == t.shape, (name, tensors[name].shape, t.shape)
    model.load_state_dict(tensors, strict=True)
    compare(model, xin, logits, rows, 64, CLASSES)


if __name__ == "__main__":
    main()
