"""PyTorch's side of examples/c/fno.c: the same FNO-2D on the same data (the file the example
writes with --dump), trained the same way, one thread, evaluated at both resolutions.

usage: torch_fno.py DATA EPOCHS [THREADS]
DATA: int32 train, val, N, FINE, then float32 x, y (train, N x N), x, y (val, N x N), x, y
(val, FINE x FINE). The model: the reference FNO-2D's shape as the example's line, written
with torch.fft (rfft2, einsum on the kept modes, irfft2): a kernel-1 Conv2d lifting to 16
channels, three blocks spectral(h) + Conv2d(16, 16, 1)(h) (GELU after the first two), a
Conv2d(16, 32, 1) - GELU - Conv2d(32, 1, 1) projection; 8 x 8 modes; MSE, Adam (lr 1e-3),
batch 16, the samples in order. Prints the training time, the mean relative L2 error on the
validation samples at N and at FINE, then one JSON line.
"""
import json
import struct
import sys
import time

import numpy as np
import torch

WIDTH, MODES, BATCH = 16, 8, 16


class Spectral(torch.nn.Module):
    """The reference FNO's SpectralConv2d (weights1: low rows, weights2: high rows)."""

    def __init__(self, c, m):
        super().__init__()
        self.m = m
        scale = 1.0 / (c * c)
        self.weights1 = torch.nn.Parameter(scale * torch.rand(c, c, m, m, dtype=torch.cfloat))
        self.weights2 = torch.nn.Parameter(scale * torch.rand(c, c, m, m, dtype=torch.cfloat))

    def forward(self, x):
        m, (h, w) = self.m, x.shape[-2:]
        x_ft = torch.fft.rfft2(x)
        out = torch.zeros(x.shape[0], self.weights1.shape[1], h, w // 2 + 1,
                          dtype=torch.cfloat)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.weights1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.weights2)
        return torch.fft.irfft2(out, s=(h, w))


class FNO(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = torch.nn.Conv2d(1, WIDTH, 1)
        self.spec = torch.nn.ModuleList(Spectral(WIDTH, MODES) for _ in range(3))
        self.pw = torch.nn.ModuleList(torch.nn.Conv2d(WIDTH, WIDTH, 1) for _ in range(3))
        self.proj = torch.nn.Sequential(torch.nn.Conv2d(WIDTH, 2 * WIDTH, 1), torch.nn.GELU(),
                                        torch.nn.Conv2d(2 * WIDTH, 1, 1))

    def forward(self, x):
        h = self.lift(x)
        for i in range(3):
            h = self.spec[i](h) + self.pw[i](h)
            if i < 2:
                h = torch.nn.functional.gelu(h)
        return self.proj(h)


def rel_l2(model, x, y):
    with torch.no_grad():
        errs = []
        for k in range(0, x.shape[0], BATCH):
            p = model(x[k:k + BATCH])
            t = y[k:k + BATCH]
            errs.append(((p - t).flatten(1).norm(dim=1) / t.flatten(1).norm(dim=1)))
        return float(torch.cat(errs).mean())


def main():
    path, epochs = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    torch.manual_seed(1)
    raw = open(path, "rb").read()
    train, val, n, fine = struct.unpack_from("<4i", raw, 0)
    at = 16
    arrays = []
    for count, side in ((train, n), (train, n), (val, n), (val, n), (val, fine), (val, fine)):
        k = count * side * side
        arrays.append(torch.from_numpy(np.frombuffer(raw, "<f4", k, at).copy())
                      .reshape(count, 1, side, side))
        at += 4 * k
    x, y, xv, yv, xf, yf = arrays
    model = FNO()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    untrained = rel_l2(model, xv, yv)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for k in range(0, train, BATCH):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[k:k + BATCH]), y[k:k + BATCH])
            loss.backward()
            opt.step()
    train_s = time.perf_counter() - t0
    e_n, e_fine = rel_l2(model, xv, yv), rel_l2(model, xf, yf)
    print(f"fno (PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s)): "
          f"{train} samples of {n} x {n}, {epochs} epochs, batch {BATCH}")
    print(f"training {train_s:.3f} s; last loss {float(loss):.6g}; validation relative L2 "
          f"{e_n:.4f} at {n} x {n}, {e_fine:.4f} at {fine} x {fine} (untrained {untrained:.4f})")
    print(json.dumps({"impl": "torch", "example": "fno", "threads": torch.get_num_threads(),
                      "train": train, "epochs": epochs, "n": n, "fine": fine,
                      "train_s": round(train_s, 4), "loss": float(loss), "val_rel_l2": e_n,
                      "val_rel_l2_fine": e_fine, "val_rel_l2_untrained": untrained}))


if __name__ == "__main__":
    main()
