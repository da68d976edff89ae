"""PyTorch's side of examples/vit.sh: the same ViT-style surrogate on the same HDF5 file (the
heat-equation pairs examples/c/diffusion_h5.c writes), trained and evaluated as strata-train
does with that script's options, on one thread.

usage: [SEED=S] torch_vit.py FILE.h5 EPOCHS [THREADS [INITIAL.safetensors]]
FILE.h5: datasets u and u_next, f32 (N, 1, 32, 32); the last eighth of the samples validates
(strata-train --val-fraction 0.125: floor(N / 8) samples), the others train.
The model, as the example's line `conv2d(32,4,stride=4) tokens posembed BLOCK BLOCK flatten
linear(1024)`: Conv2d(1, 32, 4, stride=4) (64 patches), flatten(2).transpose(1, 2) into 64
tokens of 32, a learned positional embedding (zeros at init, as Strata's posembed), two
pre-norm encoder blocks x + MHA(LN(x)), x + MLP(LN(x)) with nn.MultiheadAttention(32, 4,
batch_first=True), LayerNorm(32) (eps 1e-5) and an MLP Linear(32, 64) - GELU (exact) -
Linear(64, 32) on each token (Strata's kernel-1 conv1d between two tokens); flatten, Linear
(2048, 1024). MSE; AdamW (lr 1e-3, betas 0.9, 0.999, eps 1e-8, weight decay 0: strata-train's
defaults) with cosine annealing per optimizer step over the run to 0 (strata-train's cosine:
step k from 0 at lr (1 + cos(pi k / steps)) / 2); batch 64, the training set permuted every
epoch, the last partial batch trained. Validation: the MSE over every value of the validation
samples (strata-train's val_mse, val_loss) after the last epoch.
Prints the training time and the validation MSE, then one JSON line: train_s (the training
steps only), step_us_median (each step: the batch gathered, forward, backward, AdamW, the
schedule), val_mse.
INITIAL: a check of the semantics, not a benchmark: start from Strata's initial weights
(strata-train --export-initial, the example's line) and train the samples in order (as
strata-train --shuffle off); the JSON line then also lists every step's loss, to set beside
strata-train --metrics-csv FILE --log-every 1.
"""
import json
import math
import os
import struct
import statistics
import sys
import time

import h5py
import numpy as np
import torch

E, HEADS, MLP, BATCH, VAL_FRACTION = 32, 4, 64, 64, 0.125


class Block(torch.nn.Module):
    """A pre-norm transformer encoder block: x + MHA(LN(x)), then x + MLP(LN(x))."""

    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(E)
        self.attn = torch.nn.MultiheadAttention(E, HEADS, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(E)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(E, MLP), torch.nn.GELU(),
                                       torch.nn.Linear(MLP, E))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(torch.nn.Module):
    def __init__(self, side):
        super().__init__()
        self.patch = torch.nn.Conv2d(1, E, 4, stride=4)
        tokens = (side // 4) ** 2
        self.pos = torch.nn.Parameter(torch.zeros(tokens, E))
        self.blocks = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(tokens * E, side * side)
        self.side = side

    def forward(self, x):                                  # x: (batch, 1, side, side)
        h = self.patch(x).flatten(2).transpose(1, 2)       # (batch, tokens, E)
        h = self.blocks(h + self.pos)
        return self.head(h.flatten(1)).view(-1, 1, self.side, self.side)


def load_strata(model, path):
    """Strata's safetensors export of the example's line (modules by index) into the model."""
    raw = open(path, "rb").read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    head = json.loads(raw[8:8 + n])
    names = {"0": "patch", "2": "pos", "24": "head"}
    for b, at in ((0, 3), (1, 13)):  # a block's modules from its first LayerNorm's index
        for off, mod in ((0, "ln1"), (1, "attn"), (3, "ln2"), (5, "mlp.0"), (7, "mlp.2")):
            names[str(at + off)] = f"blocks.{b}.{mod}"
    state = {}
    for key, t in head.items():
        if key == "__metadata__":
            continue
        idx, rest = key.split(".", 2)[1:]
        a, b = t["data_offsets"]
        v = torch.from_numpy(np.frombuffer(raw, "<f4", (b - a) // 4, 8 + n + a).copy())
        name = names[idx] + ("" if idx == "2" else "." + rest)
        state[name] = v.reshape(t["shape"][:2] if "mlp" in name and rest == "weight"
                                else t["shape"])
    model.load_state_dict(state)


def val_mse(model, x, y):
    with torch.no_grad():
        se = sum(float(((model(x[k:k + BATCH]) - y[k:k + BATCH]) ** 2).sum())
                 for k in range(0, x.shape[0], BATCH))
        return se / y.numel()


def main():
    path, epochs = sys.argv[1], int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    torch.set_num_threads(threads)
    torch.manual_seed(int(os.environ.get("SEED", "1")))
    with h5py.File(path, "r") as f:
        u = torch.from_numpy(np.asarray(f["u"], dtype=np.float32))
        un = torch.from_numpy(np.asarray(f["u_next"], dtype=np.float32))
    n = u.shape[0]
    nval = int(n * VAL_FRACTION)
    train = n - nval
    x, y, xv, yv = u[:train], un[:train], u[train:], un[train:]
    model = ViT(u.shape[-1])
    if len(sys.argv) > 4:
        load_strata(model, sys.argv[4])
    steps = (train + BATCH - 1) // BATCH * epochs
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: (1.0 + math.cos(math.pi * min(k, steps) / steps)) / 2.0)
    untrained = val_mse(model, xv, yv)
    times, losses = [], []
    t0 = time.perf_counter()
    for _ in range(epochs):
        order = torch.randperm(train) if len(sys.argv) <= 4 else torch.arange(train)
        for k in range(0, train, BATCH):
            s0 = time.perf_counter()
            idx = order[k:k + BATCH]
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            sched.step()
            times.append(time.perf_counter() - s0)
            losses.append(float(loss))
    train_s = time.perf_counter() - t0
    err = val_mse(model, xv, yv)
    med = statistics.median(times) * 1e6
    print(f"vit (PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s)): {train} "
          f"samples of {u.shape[-1]} x {u.shape[-1]} ({nval} validate), {epochs} epochs, "
          f"batch {BATCH}, {len(times)} steps")
    print(f"training {train_s:.3f} s (median step {med:.0f} us); last loss {float(loss):.6g}; "
          f"validation MSE {err:.6g} (untrained {untrained:.6g})")
    out = {"impl": "torch", "example": "vit", "threads": torch.get_num_threads(),
           "train": train, "val": nval, "epochs": epochs, "steps": len(times),
           "train_s": round(train_s, 4), "step_us_median": round(med, 1), "loss": float(loss),
           "val_mse": err, "val_mse_untrained": untrained}
    if len(sys.argv) > 4:
        out["losses"] = losses
    print(json.dumps(out))


if __name__ == "__main__":
    main()
