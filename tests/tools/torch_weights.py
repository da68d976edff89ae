"""Write a PyTorch state_dict as safetensors, for strata_load_weights()'s tests.

usage: torch_weights.py OUT.safetensors EXPECTED.f32
The model is the full test rig's: layers = Sequential(Linear(20, 16), BatchNorm1d(16), ReLU(),
Dropout(0.25), Linear(16, 4)), its parameters and running statistics drawn at random (seed 7)
in float64. The tensors are stored in turn as F64, BF16, F16 and F32, with BatchNorm's
num_batches_tracked as I64, exactly as a state_dict holds them; the file is written with the
standard library (the safetensors layout: u64 header length, JSON header padded with spaces,
data), so no package beyond torch is needed. EXPECTED.f32 gets each tensor but the step counter
as float32 (what Strata must load), in state_dict order. Prints "written".
"""
import json
import struct
import sys

import torch
from torch import nn

DTYPES = [("F64", torch.float64), ("BF16", torch.bfloat16), ("F16", torch.float16),
          ("F32", torch.float32)]


def rig():
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(20, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(16, 4)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
        model[1].running_mean.copy_(torch.randn(16, dtype=torch.float64))
        model[1].running_var.copy_(torch.rand(16, dtype=torch.float64) + 0.5)
        model[1].num_batches_tracked.fill_(12)
    return model


def main():
    out, expected = sys.argv[1], sys.argv[2]
    state = {"layers." + k: v for k, v in rig().state_dict().items()}
    header, blobs, at, want, turn = {}, [], 0, [], 0
    for name, t in state.items():
        if name.endswith("num_batches_tracked"):
            kind, t = "I64", t.to(torch.int64)
        else:
            kind, dtype = DTYPES[turn % len(DTYPES)]
            turn += 1
            t = t.to(dtype)
            want.append(t.to(torch.float32).reshape(-1))
        raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else \
            t.reshape(1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    with open(expected, "wb") as f:
        f.write(torch.cat(want).numpy().tobytes())
    print("written")


if __name__ == "__main__":
    main()
