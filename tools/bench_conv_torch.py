#!/usr/bin/env python3
"""PyTorch peer of `make bench-conv` (one thread, its oneDNN convolutions):

  fcn STEPS BATCH   TorchFort's default in-situ model on the 2-D advection loop of
                    examples/c/insitu.c: Conv2d(1, 1, 3, padding=1, padding_mode="circular")
                    over the 1 x 32 x 32 field u, target du/dx + du/dy, MSE, Adam (lr 1e-3)
                    with cosine annealing over the run; then 100 single-sample inferences at
                    later times give the validation MSE, as the example does.
  cnn EPOCHS BATCH [MAXSTEPS]
                    A LeNet-style Fashion-MNIST CNN, the model strata-train runs in the bench:
                    conv(32,3,p1) relu maxpool2 conv(64,3,p1) relu maxpool2 flatten
                    linear(128) relu linear(10); SGD lr 0.05 momentum 0.9 (strata-train's
                    defaults), images standardised with the training set's mean and deviation;
                    MAXSTEPS ends the run early (a timing run: the accuracy is then partial).

Prints one JSON line: steps/s and samples/s of the training steps (median step, the first
10 excluded), and the validation MSE (fcn) or the test accuracy after the last epoch (cnn).
"""
import gzip
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn

N = 32
AX, AY, DT = 1.0, 0.789, 0.01
DATA = "/usr/share/datasets/fashion-mnist"


def fields(ts):
    """States u and targets du/dx + du/dy at times ts: two [len(ts), 1, N, N] tensors."""
    g = torch.arange(N, dtype=torch.float64) * (2.0 / N) - 1.0
    x, y = g.view(1, 1, N), g.view(1, N, 1)
    t = torch.as_tensor(ts, dtype=torch.float64).view(-1, 1, 1)
    px, py = math.pi * (x - AX * t), math.pi * (y - AY * t)
    u = torch.sin(px) * torch.sin(py)
    du = math.pi * torch.cos(px) * torch.sin(py) + math.pi * torch.sin(px) * torch.cos(py)
    return u.unsqueeze(1).float(), du.unsqueeze(1).float()


def fcn(steps, batch):
    model = nn.Conv2d(1, 1, 3, padding=1, padding_mode="circular")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    loss_fn = nn.MSELoss()
    times = []
    for s in range(steps):
        x, y = fields([(s * batch + i + 1) * DT for i in range(batch)])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
    mse = 0.0
    with torch.no_grad():
        for k in range(100):
            u, du = fields([(steps * batch + 10 * k + 1) * DT])
            mse += float(((model(u).double() - du.double()) ** 2).mean())
    step = statistics.median(times[10:])
    return {"impl": "torch", "model": "fcn", "batch": batch, "steps": steps,
            "steps_per_s": 1.0 / step, "samples_per_s": batch / step,
            "train_loss": float(loss), "val_mse": mse / 100}


def idx(name, off):
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=off)


def cnn(epochs, batch, maxsteps):
    xtr = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
    xte = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
    ytr = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    yte = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    mean, std = xtr.mean(), xtr.std()
    xtr, xte = torch.from_numpy((xtr - mean) / std), torch.from_numpy((xte - mean) / std)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    steps = len(xtr) // batch
    times = []
    for ep in range(epochs):
        perm = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(ep))
        for s in range(min(steps, maxsteps)):
            i = perm[s * batch:(s + 1) * batch]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[i]), ytr[i])
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    with torch.no_grad():
        acc = sum(int((model(xte[k:k + 1000]).argmax(1) == yte[k:k + 1000]).sum())
                  for k in range(0, len(xte), 1000)) / len(xte)
    step = statistics.median(times[10:])
    return {"impl": "torch", "model": "cnn", "batch": batch, "epochs": epochs,
            "steps_per_s": 1.0 / step, "samples_per_s": batch / step,
            "train_loss": float(loss), "test_acc": acc}


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.set_flush_denormal(True)
    what, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    maxsteps = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 30
    print(json.dumps(fcn(n, batch) if what == "fcn" else cnn(n, batch, maxsteps)), flush=True)


if __name__ == "__main__":
    main()
