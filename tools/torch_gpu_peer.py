# Peer of `make bench-gpu`: the Fashion-MNIST MLP trained with SGD (lr 0.05, momentum 0.9) on
# synthetic data of the same shape, in PyTorch eager and with the Lightning Trainer.
# Batches come from host memory as in strata-train (pinned, copied each step).
# usage: torch_gpu_peer.py MODEL BATCH STEPS [cuda|cpu]   (MODEL like 784-256-128-10)
# env PEERS: which of torch_eager,lightning to run (default both)
# prints one line per framework: "<name> steps_per_s=<x> step_us=<y>" or "<name> unavailable: why"
import os, sys, time

import torch
import torch.nn as nn


def mlp(widths):
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def data(widths, batch, steps, dev):
    g = torch.Generator().manual_seed(0)
    n = batch * min(steps, 64)
    x = torch.randn(n, widths[0], generator=g)
    y = torch.randint(0, widths[-1], (n,), generator=g)
    if dev == "cuda":
        x, y = x.pin_memory(), y.pin_memory()
    return x, y


def eager(widths, batch, steps, dev):
    torch.manual_seed(0)
    model = mlp(widths).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    x, y = data(widths, batch, steps, dev)
    nb = x.shape[0] // batch

    def step(s):
        i = s % nb
        xb = x[i * batch:(i + 1) * batch].to(dev, non_blocking=True)
        yb = y[i * batch:(i + 1) * batch].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for s in range(10):
        step(s)
    if dev == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for s in range(steps):
        loss = step(s)
    loss.item()  # strata reads the loss back every step too
    if dev == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps


def lightning(widths, batch, steps, dev):
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl
        except ImportError:
            raise RuntimeError("lightning is not installed")

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp(widths)
            self.lossf = nn.CrossEntropyLoss()

        def training_step(self, b, _):
            return self.lossf(self.net(b[0]), b[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    class Timer(pl.Callback):
        def __init__(self):
            self.t = None

        def on_train_batch_start(self, trainer, module, b, i):
            if self.t is None and trainer.global_step == 10:
                if dev == "cuda":
                    torch.cuda.synchronize()
                self.t = time.perf_counter()

        def on_train_end(self, trainer, module):
            if dev == "cuda":
                torch.cuda.synchronize()
            self.t = time.perf_counter() - self.t

    torch.manual_seed(0)
    x, y = data(widths, batch, steps, dev)
    ds = torch.utils.data.TensorDataset(x, y)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=False, drop_last=True,
                                     pin_memory=dev == "cuda")
    timer = Timer()
    trainer = pl.Trainer(accelerator="gpu" if dev == "cuda" else "cpu", devices=1,
                         max_steps=steps + 10, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[timer], max_epochs=-1)
    trainer.fit(Lit(), dl)
    return timer.t / steps


def main():
    widths = [int(w) for w in sys.argv[1].split("-")]
    batch, steps = int(sys.argv[2]), int(sys.argv[3])
    dev = sys.argv[4] if len(sys.argv) > 4 else "cuda"
    torch.set_num_threads(1)
    want = os.environ.get("PEERS", "torch_eager,lightning").split(",")
    for name, fn in (("torch_eager", eager), ("lightning", lightning)):
        if name not in want:
            continue
        try:
            s = fn(widths, batch, steps, dev)
            print(f"{name} steps_per_s={1.0 / s:.1f} step_us={s * 1e6:.1f}", flush=True)
        except Exception as e:  # report and go on: one missing peer must not hide the other
            print(f"{name} unavailable: {e}", flush=True)


if __name__ == "__main__":
    main()
