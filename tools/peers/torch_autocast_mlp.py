#!/usr/bin/env python3
"""PyTorch peer of a CPU training step: an MLP on random data, one thread, in fp32 or under
autocast(bfloat16) (oneDNN's bf16 GEMMs where the CPU has them).

Usage: /usr/bin/python3 torch_autocast_mlp.py WIDTHS BATCH STEPS fp32|bf16
  e.g. 784-2048-2048-10 512 12 bf16. ReLU between Linears, cross-entropy, SGD lr 0.01
  momentum 0.9; three untimed warm-up steps, then STEPS timed ones.
Prints one number: samples/s over the timed steps.
"""
import sys
import time

import torch


def main():
    widths = [int(w) for w in sys.argv[1].split("-")]
    batch, steps, precision = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for i in range(len(widths) - 1):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, widths[0])
    y = torch.randint(0, widths[-1], (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print(f"{steps * batch / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
