#!/usr/bin/env python3
"""PyTorch peer of strata-train's default job: an MLP on Fashion-MNIST on the CPU.

One process with one thread, or NPROCS processes under DistributedDataParallel over Gloo
(each computing its share of every global batch), or, with MODE zero, DDP with PyTorch's
ZeroRedundancyOptimizer (its ZeRO-1; FSDP needs a GPU). Defaults as strata-train's:
784-256-128-10 with ReLU, cross-entropy, SGD lr 0.05 momentum 0.9 (or AdamW lr 1e-3, weight
decay 0.01), batch 128, one epoch; every epoch is a seeded permutation of the 60 000 training
images and drops its last partial batch.

Usage: /usr/bin/python3 torch_mlp_fmnist.py [NPROCS [EPOCHS [BATCH [sgd|adamw [ddp|zero
       [WIDTHS]]]]]]
env PEER_ROWS: train on the first PEER_ROWS rows of each epoch's order only (the benches'
quick mode, BENCH_QUICK=1). Prints one line of key=value pairs (procs, mode, optim, widths, epochs, batch, steps, time,
step_us, samples_per_s, test_acc) that the tools/bench-*.sh scripts read.
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist"
PORT = "29534"


def idx_file(name, header):
    """The bytes of an IDX file after its header, as uint8."""
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header)


def fashion_mnist():
    """Training and test images (float32 in [0, 1], flattened) and labels (int64)."""
    def images(name):
        return torch.from_numpy(idx_file(name, 16).reshape(-1, 784).astype(np.float32) / 255)

    def labels(name):
        return torch.from_numpy(idx_file(name, 8).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def mlp(widths):
    """Linear layers of the given widths with a ReLU between each two."""
    layers = []
    for i in range(len(widths) - 1):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
    return torch.nn.Sequential(*layers)


def optimizer(name, params, mode, nprocs):
    if name == "sgd":
        cls, kw = torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}
    else:
        cls, kw = torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.01}
    if nprocs > 1 and mode == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ZeroRedundancyOptimizer(params, optimizer_class=cls, **kw)
    return cls(params, **kw)


def train(rank, nprocs, epochs, batch, optim="sgd", mode="ddp", widths="784-256-128-10"):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if nprocs > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", PORT)
        dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    xtr, ytr, xte, yte = fashion_mnist()
    model = mlp([int(w) for w in widths.split("-")])
    net = torch.nn.parallel.DistributedDataParallel(model) if nprocs > 1 else model
    opt = optimizer(optim, net.parameters(), mode, nprocs)
    loss_fn = torch.nn.CrossEntropyLoss()
    share = batch // nprocs
    steps = min(len(xtr), int(os.environ.get("PEER_ROWS", len(xtr)))) // batch
    start = time.perf_counter()
    for epoch in range(epochs):
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(epoch))
        for s in range(steps):
            lo = s * batch + rank * share
            rows = order[lo:lo + share]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(xtr[rows]), ytr[rows]).backward()
            opt.step()
    took = time.perf_counter() - start
    if rank == 0:
        with torch.no_grad():
            acc = (model(xte).argmax(dim=1) == yte).float().mean().item()
        total = steps * epochs
        print(f"procs={nprocs} mode={mode if nprocs > 1 else 'single'} optim={optim} "
              f"widths={widths} epochs={epochs} batch={batch} steps={total} time={took:.2f}s "
              f"step_us={took / total * 1e6:.0f} samples_per_s={total * batch / took:.0f} "
              f"test_acc={acc:.4f}", flush=True)
    if nprocs > 1:
        dist.destroy_process_group()


def main():
    a = sys.argv[1:]
    nprocs = int(a[0]) if len(a) > 0 else 1
    epochs = int(a[1]) if len(a) > 1 else 1
    batch = int(a[2]) if len(a) > 2 else 128
    rest = tuple(a[3:6])
    if nprocs == 1:
        train(0, 1, epochs, batch, *rest)
    else:
        mp.spawn(train, args=(nprocs, epochs, batch) + rest, nprocs=nprocs)


if __name__ == "__main__":
    main()
