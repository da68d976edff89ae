"""Load a Strata safetensors export of the conv rig into the equivalent PyTorch model.

usage: load_conv_safetensors.py MODEL.safetensors INPUT.f32 LOGITS.f32 ROWS
The model is the conv rig's (tests/support/rig.c, rig_init_conv): on 1 x 6 x 6 samples,
layers = Sequential(Conv2d(1, 4, 3, padding=1, padding_mode='circular'), ReLU(), Linear(144, 4)),
flattened (C, H, W) between the ReLU and the Linear as Strata's rows are stored. The weights
are read with load_safetensors.py's reader and must have PyTorch's shapes (the Conv2d weight
[4, 1, 3, 3]). Prints "match" and exits 0 when every output agrees within 1e-4 (relative) and
every argmax is the same; exits 1 otherwise.
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_safetensors import compare, read_safetensors  # noqa: E402

HW = 6
CLASSES = 4


class ConvRig(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, padding_mode="circular"),
                                    nn.ReLU(), nn.Linear(4 * HW * HW, CLASSES))

    def forward(self, x):
        x = self.layers[1](self.layers[0](x.reshape(-1, 1, HW, HW)))
        return self.layers[2](x.flatten(1))


def main():
    path, xin, logits, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = ConvRig()
    tensors = read_safetensors(path)
    for name, t in model.state_dict().items():
        assert tensors[name].shape == t.shape, (name, tensors[name].shape, t.shape)
    model.load_state_dict(tensors, strict=True)
    compare(model, xin, logits, rows, HW * HW, CLASSES)

if __name__ == "__main__":
    main()
