"""Load a Strata safetensors export into the equivalent PyTorch model and compare logits.

usage: load_safetensors.py MODEL.safetensors INPUT.f32 LOGITS.f32 ROWS
The model is the test rig's: layers = Sequential(Linear(20, 16), BatchNorm1d(16), ReLU(),
Dropout(0.25), Linear(16, 4)), evaluated in eval mode. Reads the file with the standard
library only (the safetensors layout: u64 header length, JSON header, data), so no package
beyond torch is needed. Prints "match" and exits 0 when every logit agrees within 1e-4
(relative) and every argmax is the same; exits 1 otherwise.
"""
import json
import struct
import sys

import torch
from torch import nn


class Rig(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(20, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                    nn.Dropout(0.25), nn.Linear(16, 4))

    def forward(self, x):
        return self.layers(x)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        assert spec["dtype"] == "F32", spec
        lo, hi = spec["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=torch.float32)
        out[name] = t.reshape(spec["shape"])
    return out


def main():
    path, xin, logits, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = Rig()
    missing, unexpected = model.load_state_dict(read_safetensors(path), strict=False)
    assert not unexpected, unexpected
    assert all(m.endswith("num_batches_tracked") for m in missing), missing
    compare(model, xin, logits, rows, 20, 4)


def read_f32(path, rows, cols):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(rows, cols)


def compare(model, xin, logits, rows, inputs, outputs):
    """Evaluate model (eval mode) on the input rows; print "match" or exit 1 (see above)."""
    model.eval()
    x, want = read_f32(xin, rows, inputs), read_f32(logits, rows, outputs)
    with torch.no_grad():
        got = model(x)
    err = ((got - want).abs() / (1 + want.abs())).max().item()
    same = bool((got.argmax(1) == want.argmax(1)).all())
    print(f"max relative difference {err:.3g}, argmax equal {same}")
    if err > 1e-4 or not same:
        sys.exit(1)
    print("match")


if __name__ == "__main__":
    main()
