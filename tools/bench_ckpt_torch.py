"""The PyTorch peer of strata-bench-ckpt: torch.save / torch.load of the same MLP's model and
optimizer state dicts (SGD with momentum, after one step so the buffers exist), each save
followed by os.fsync so that it is as durable as Strata's. Prints one JSON line of medians.
usage: bench_ckpt_torch.py DIR REPS"""
import json
import os
import statistics
import sys
import time

import torch
from torch import nn

torch.set_num_threads(1)
d, reps = sys.argv[1], int(sys.argv[2])
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                      nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model(torch.zeros(2, 784)).sum().backward()
opt.step()
path = os.path.join(d, "torch-bench.pt")
save, save_fsync, load = [], [], []
for _ in range(reps):
    t0 = time.perf_counter()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, path)
    save.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    save_fsync.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    s = torch.load(path)
    model.load_state_dict(s["model"])
    opt.load_state_dict(s["optim"])
    load.append(time.perf_counter() - t0)
print(json.dumps({"bytes": os.path.getsize(path),
                  "save_ms": statistics.median(save) * 1e3,
                  "save_fsync_ms": statistics.median(save_fsync) * 1e3,
                  "load_ms": statistics.median(load) * 1e3}))
os.remove(path)
