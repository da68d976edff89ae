# PyTorch's profiler as the peer of strata-train --trace: the same MLP (784-256-128-10, SGD
# lr 0.05 momentum 0.9, batch 128, one thread) for one Fashion-MNIST epoch, without and with
# torch.profiler recording CPU ops and exporting a Chrome trace (export included in the time).
# usage: bench_trace_torch.py off|on [TRACE.json]   prints samples_per_s=N
import gzip, os, sys, time, numpy as np, torch, torch.nn as nn
D = "/usr/share/datasets/fashion-mnist"
def idx(name, off):
    with gzip.open(os.path.join(D, name)) as f: return np.frombuffer(f.read(), np.uint8, offset=off)
mode = sys.argv[1]; out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/torch-trace.json"
torch.set_num_threads(1); torch.manual_seed(0)
x = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255)
y = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9); lossf = nn.CrossEntropyLoss()
batch = 128; steps = len(x) // batch; perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
def epoch():
    for s in range(steps):
        i = perm[s * batch:(s + 1) * batch]
        opt.zero_grad(set_to_none=True); loss = lossf(model(x[i]), y[i]); loss.backward(); opt.step()
t0 = time.perf_counter()
if mode == "on":
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        epoch()
    prof.export_chrome_trace(out)
else:
    epoch()
dt = time.perf_counter() - t0
print(f"samples_per_s={steps * batch / dt:.0f}", flush=True)
