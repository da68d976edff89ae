"""Load a Strata safetensors export of the attention rig into the equivalent PyTorch model.

usage: load_attention_safetensors.py MODEL.safetensors INPUT.f32 LOGITS.f32 ROWS
The model is tests/strategy/attention_parallel.c's on samples (L, E) = (5, 4), batch_first:
layers.0 a learned positional embedding (weight [5, 4]), layers.1
nn.MultiheadAttention(4, 2, batch_first=True) with the causal mask, layers.2 the residual
add of layers.0's output, layers.3 RMSNorm((5, 4), eps=1e-5) (weight [5, 4]), layers.4
Linear(20, 4) on the flattened sequence. Every tensor must have PyTorch's name and shape
(load_state_dict strict). Prints "match" and exits 0 when every output agrees within 1e-4
(relative) and every argmax is the same; exits 1 otherwise.
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_safetensors import compare, read_safetensors  # noqa: E402

L, E, CLASSES = 5, 4, 4


class Weight(nn.Module):
    """A module holding one parameter called weight of the sequence's shape."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(L, E))


class AttentionRig(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Weight(), nn.MultiheadAttention(E, 2, batch_first=True),
                                     nn.Identity(), Weight(), nn.Linear(L * E, CLASSES)])

    def forward(self, x):
        h0 = x.reshape(-1, L, E) + self.layers[0].weight
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
        h = self.layers[1](h0, h0, h0, need_weights=False, attn_mask=mask)[0] + h0
        h = h * torch.rsqrt(h.pow(2).mean(dim=(1, 2), keepdim=True) + 1e-5)
        h = h * self.layers[3].weight
        return self.layers[4](h.flatten(1))


def main():
    path, xin, logits, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = AttentionRig()
    tensors = read_safetensors(path)
    assert sorted(tensors) == sorted(model.state_dict()), (sorted(tensors),
                                                            sorted(model.state_dict()))
    for name, t in model.state_dict().items():
        assert tensors[name].shape == t.shape, (name, tensors[name].shape, t.shape)
    model.load_state_dict(tensors, strict=True)
    compare(model, xin, logits, rows, L * E, CLASSES)


if __name__ == "__main__":
    main()
