"""PyTorch's side of examples/c/mesh_surrogate.c: the same MeshGraphNet-style model on the same
mesh and data (the file the example writes with --dump), trained the same way, evaluated the
same way. Graph aggregation with index_add_ (no torch_scatter), as the issue asks.

usage: torch_mesh.py DATA EPOCHS [PROCESSES [THREADS]]
DATA: int32 train, val, nodes, edges, the edges' sources, their destinations, then float32
x (train, 3, nodes), y (train, 1, nodes), x, y (val). The model, as the example's line: node
encoder Linear(3,16)-ReLU-Linear(16,16); edge encoder on [x_dst, x_src] Linear(6,16)-ReLU-
Linear(16,16); two processor steps e' = e + LN(MLP([h_dst, h_src, e])),
h' = h + LN(MLP([index_add of e' into the destinations, h])); decoder Linear(16,16)-ReLU-
Linear(16,1); MSE, Adam (lr 1e-3), batch 8, the samples in order. PROCESSES > 1: DDP over
Gloo, each process its share of every batch (the example's ddp on as many devices).
Prints the training time and the validation relative L2 error, then one JSON line.
"""
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

L, BATCH, PROC = 16, 8, 2


def mlp(i, o):
    return torch.nn.Sequential(torch.nn.Linear(i, L), torch.nn.ReLU(), torch.nn.Linear(L, o))


class MGN(torch.nn.Module):
    def __init__(self, src, dst, nodes):
        super().__init__()
        self.src, self.dst, self.nodes = src, dst, nodes
        self.node_enc, self.edge_enc = mlp(3, L), mlp(6, L)
        self.edge_mlp = torch.nn.ModuleList(mlp(3 * L, L) for _ in range(PROC))
        self.node_mlp = torch.nn.ModuleList(mlp(2 * L, L) for _ in range(PROC))
        self.edge_ln = torch.nn.ModuleList(torch.nn.LayerNorm(L) for _ in range(PROC))
        self.node_ln = torch.nn.ModuleList(torch.nn.LayerNorm(L) for _ in range(PROC))
        self.dec = mlp(L, 1)

    def forward(self, x):                      # x: (batch, 3, nodes)
        x = x.transpose(1, 2)                  # (batch, nodes, features)
        h = self.node_enc(x)
        e = self.edge_enc(torch.cat([x[:, self.dst], x[:, self.src]], -1))
        for p in range(PROC):
            m = torch.cat([h[:, self.dst], h[:, self.src], e], -1)
            e = e + self.edge_ln[p](self.edge_mlp[p](m))
            agg = torch.zeros(h.shape[0], self.nodes, L).index_add_(1, self.dst, e)
            h = h + self.node_ln[p](self.node_mlp[p](torch.cat([agg, h], -1)))
        return self.dec(h).transpose(1, 2)     # (batch, 1, nodes)


def load(path):
    raw = open(path, "rb").read()
    train, val, nodes, edges = struct.unpack_from("<4i", raw, 0)
    at = 16
    src = torch.from_numpy(np.frombuffer(raw, "<i4", edges, at).astype(np.int64))
    dst = torch.from_numpy(np.frombuffer(raw, "<i4", edges, at + 4 * edges).astype(np.int64))
    at += 8 * edges
    out = []
    for count, ch in ((train, 3), (train, 1), (val, 3), (val, 1)):
        k = count * ch * nodes
        out.append(torch.from_numpy(np.frombuffer(raw, "<f4", k, at).copy())
                   .reshape(count, ch, nodes))
        at += 4 * k
    return train, nodes, edges, src, dst, out


def rel_l2(model, x, y):
    with torch.no_grad():
        p = torch.cat([model(x[k:k + BATCH]) for k in range(0, x.shape[0], BATCH)])
        return float(((p - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean())


def run(rank, procs, path, epochs, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    train, nodes, edges, src, dst, (x, y, xv, yv) = load(path)
    model = MGN(src, dst, nodes)
    net = model
    if procs > 1:
        dist.init_process_group("gloo", rank=rank, world_size=procs)
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    untrained = rel_l2(model, xv, yv)
    lo, hi = BATCH * rank // procs, BATCH * (rank + 1) // procs
    t0 = time.perf_counter()
    for _ in range(epochs):
        for k in range(0, train, BATCH):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x[k + lo:k + hi]), y[k + lo:k + hi])
            loss.backward()
            opt.step()
    train_s = time.perf_counter() - t0
    if rank:
        dist.destroy_process_group()
        return
    err = rel_l2(model, xv, yv)
    print(f"mesh surrogate (PyTorch {torch.__version__}, {procs} process(es) x {threads} "
          f"thread(s)): {nodes} nodes, {edges} edges; {train} samples, {epochs} epochs, "
          f"batch {BATCH}")
    print(f"training {train_s:.3f} s; last loss {float(loss):.6g}; validation relative L2 "
          f"{err:.4f} (untrained {untrained:.4f})")
    print(json.dumps({"impl": "torch", "example": "mesh", "processes": procs,
                      "threads": threads, "train": train, "epochs": epochs,
                      "train_s": round(train_s, 4), "loss": float(loss), "val_rel_l2": err,
                      "val_rel_l2_untrained": untrained}))
    if procs > 1:
        dist.destroy_process_group()


def main():
    path, epochs = sys.argv[1], int(sys.argv[2])
    procs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    if procs == 1:
        run(0, 1, path, epochs, threads)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.multiprocessing.spawn(run, args=(procs, path, epochs, threads), nprocs=procs)


if __name__ == "__main__":
    main()
