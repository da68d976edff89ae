#!/usr/bin/env python3
"""PyTorch peer of examples/c/insitu.c and examples/fortran/insitu.f90: the 2-D advection
workload of TorchFort's simulation example, trained as a PyTorch user would train it.

The simulated field is u(x, y, t) = sin(pi (x - AX t)) sin(pi (y - AY t)) on a periodic 32x32
grid over [-1, 1)^2 (AX 1, AY 0.789, time step 0.01). A training step takes BATCH
consecutive states: input u, target du/dx + du/dy, both flattened to 1024 values. The model
is an MLP (default 1024-1024: one Linear, as TorchFort's native MLP config), MSE loss, Adam
lr 1e-3 with cosine annealing over the run; then 100 single-sample inferences at later times
give the validation MSE. The first 10 steps are not timed; the simulation's time is kept apart.

Usage: /usr/bin/python3 torch_insitu.py NPROCS STEPS [BATCH [WIDTHS [ACT]]]
  NPROCS 1: one process, one thread; NPROCS > 1: DDP over Gloo, each process computing its
  share of every global batch. WIDTHS e.g. 1024-512-1024, ACT relu|tanh|gelu between Linears.
  TUNED=1 (default) flushes denormals and uses the foreach Adam, as a tuned CPU user would
  (Adam's squared gradients underflow here); TUNED=0 keeps PyTorch's defaults.
Prints one JSON line: steps/s and samples/s of the timed training steps, the simulation's
seconds, the last training loss and the validation MSE.
"""
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GRID = 32
AX, AY, DT = 1.0, 0.789, 0.01
UNTIMED = 10
PORT = "29513"


def states(times):
    """The field and its target at each time: two float32 tensors [len(times), GRID * GRID]."""
    axis = torch.arange(GRID, dtype=torch.float64) * (2.0 / GRID) - 1.0
    t = torch.as_tensor(times, dtype=torch.float64).view(-1, 1, 1)
    phase_x = math.pi * (axis.view(1, 1, GRID) - AX * t)
    phase_y = math.pi * (axis.view(1, GRID, 1) - AY * t)
    u = torch.sin(phase_x) * torch.sin(phase_y)
    target = math.pi * (torch.cos(phase_x) * torch.sin(phase_y) +
                        torch.sin(phase_x) * torch.cos(phase_y))
    n = len(times)
    return u.reshape(n, -1).float(), target.reshape(n, -1).float()


def mlp(widths, act):
    kinds = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "gelu": torch.nn.GELU}
    layers = []
    for i in range(len(widths) - 1):
        if i:
            layers.append(kinds[act]())
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
    return torch.nn.Sequential(*layers)


def train(rank, nprocs, steps, batch, widths, act, results):
    tuned = os.environ.get("TUNED", "1") == "1"
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.set_flush_denormal(tuned)
    if nprocs > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", PORT)
        dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    model = mlp(widths, act)
    net = torch.nn.parallel.DistributedDataParallel(model) if nprocs > 1 else model
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, foreach=tuned)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    loss_fn = torch.nn.MSELoss()
    share = batch // nprocs
    sim_s = train_s = 0.0
    timed = 0
    loss = torch.tensor(0.0)
    for s in range(steps):
        t0 = time.perf_counter()
        first = s * batch + rank * share
        x, y = states([(first + i + 1) * DT for i in range(share)])
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        schedule.step()
        t2 = time.perf_counter()
        sim_s += t1 - t0
        if s >= UNTIMED:
            train_s += t2 - t1
            timed += 1
    model.eval()
    errors = []
    with torch.no_grad():
        for k in range(100):
            x, y = states([(steps * batch + 10 * k + 1) * DT])
            errors.append(float(torch.mean((model(x) - y) ** 2)))
    if rank == 0:
        results.put({"peer": "pytorch", "nprocs": nprocs, "batch": batch, "widths": widths,
                     "act": act, "steps": steps, "steps_per_s": timed / train_s,
                     "samples_per_s": timed * batch / train_s, "sim_s": sim_s,
                     "train_loss": float(loss), "val_mse": sum(errors) / len(errors),
                     "tuned": tuned, "torch": torch.__version__})
    if nprocs > 1:
        dist.destroy_process_group()


def main():
    a = sys.argv[1:]
    nprocs = int(a[0]) if len(a) > 0 else 1
    steps = int(a[1]) if len(a) > 1 else 2000
    batch = int(a[2]) if len(a) > 2 else 16
    widths = [int(w) for w in (a[3] if len(a) > 3 else "1024-1024").split("-")]
    act = a[4] if len(a) > 4 else "relu"
    if widths[0] != GRID * GRID or widths[-1] != GRID * GRID:
        sys.exit(f"torch_insitu.py: the widths must start and end at {GRID * GRID}")
    if batch % nprocs:
        sys.exit("torch_insitu.py: BATCH must be a multiple of NPROCS")
    if steps <= UNTIMED:
        sys.exit(f"torch_insitu.py: STEPS must be more than the {UNTIMED} untimed ones")
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    if nprocs == 1:
        train(0, 1, steps, batch, widths, act, results)
    else:
        mp.start_processes(train, args=(nprocs, steps, batch, widths, act, results),
                           nprocs=nprocs, start_method="spawn")
    print(json.dumps(results.get()))


if __name__ == "__main__":
    main()
