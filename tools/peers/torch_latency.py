#!/usr/bin/env python3
"""PyTorch eager peer of tools/strata-bench-latency.c: the latency of one forward of a model
strata-to-torch wrote (the same model line and the same weights as Strata's), on one thread,
under torch.inference_mode(), each call timed alone after a warm-up.

Usage: /usr/bin/python3 torch_latency.py MODEL.py WEIGHTS BATCH ITERS WARMUP [--script OUT.pt]
  MODEL.py: strata-to-torch's module source; WEIGHTS: the safetensors export it loads.
  --script OUT.pt: also save the model traced to TorchScript (torch.jit.trace of its predict
  on a batch of BATCH), what tools/peers/libtorch_latency.cpp loads.
Prints one JSON line: batch, us_median, us_p10, us_p90.
"""
import importlib.util
import json
import sys
import time

import torch


class Predict(torch.nn.Module):
    """The written module's predict() (inputs already transformed) as forward()."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.predict(x)


def main():
    args = sys.argv[1:]
    script = None
    if "--script" in args:
        k = args.index("--script")
        script = args[k + 1]
        del args[k:k + 2]
    if len(args) != 5:
        sys.exit(__doc__)
    source, weights, batch, iters, warmup = args[0], args[1], *map(int, args[2:])
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    spec = importlib.util.spec_from_file_location("strata_model", source)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = Predict(mod.load(weights)).eval()
    x = torch.rand((batch,) + tuple(mod.INPUTS[0])) - 0.5
    if script:
        with torch.no_grad():
            torch.jit.trace(net, x).save(script)
    t = []
    with torch.inference_mode():
        for i in range(warmup + iters):
            t0 = time.perf_counter_ns()
            net(x)
            t.append((time.perf_counter_ns() - t0) / 1e3)
    t = sorted(t[warmup:])
    print(json.dumps({"batch": batch, "us_median": t[len(t) // 2],
                      "us_p10": t[len(t) // 10], "us_p90": t[len(t) * 9 // 10]}))


if __name__ == "__main__":
    main()
