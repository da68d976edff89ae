"""PyTorch's float64 reference for the graph modules after SGD steps.

usage: graph_reference.py SIDE REDUCE C NODES EDGES ROWS STEPS LR DIR
The model is Strata's conv1d(C, 1) over (C, nodes) node samples, gather(SIDE) to edges,
scatter(REDUCE) back to nodes: y = scatter(index_select(conv(x), -1, idx)) where the scatter is
zeros.index_add_(-1, dst, e) (over the in-degree for mean, 0 where a node has none). DIR holds
w0.f32 (conv weight [C, C, 1] then bias [C]), x.f32 and t.f32 [ROWS, C, NODES], src.i32 and
dst.i32 [EDGES]. Each step: loss = sum((y - t)^2) / 2, backward, w -= LR * grad, in float64.
Writes DIR/w.f64 (weight then bias after STEPS steps) and prints "done".
"""
import sys

import numpy as np
import torch


def main():
    side, reduce = sys.argv[1], sys.argv[2]
    c, nodes, edges, rows, steps = map(int, sys.argv[3:8])
    lr, d = float(sys.argv[8]), sys.argv[9]

    def load(name, dtype):
        return torch.from_numpy(np.fromfile(d + "/" + name, dtype=dtype).astype(
            np.float64 if dtype == np.float32 else np.int64))
    w0 = load("w0.f32", np.float32)
    x = load("x.f32", np.float32).reshape(rows, c, nodes)
    t = load("t.f32", np.float32).reshape(rows, c, nodes)
    src, dst = load("src.i32", np.int32), load("dst.i32", np.int32)
    assert src.numel() == edges and dst.numel() == edges
    conv = torch.nn.Conv1d(c, c, 1).double()
    conv.load_state_dict({"weight": w0[:c * c].reshape(c, c, 1), "bias": w0[c * c:]},
                         strict=True)
    idx = src if side == "src" else dst
    deg = torch.zeros(nodes, dtype=torch.float64).index_add_(
        0, dst, torch.ones(edges, dtype=torch.float64))
    for _ in range(steps):
        conv.zero_grad()
        e = conv(x).index_select(-1, idx)
        y = torch.zeros(rows, c, nodes, dtype=torch.float64).index_add(-1, dst, e)
        if reduce == "mean":
            y = torch.where(deg > 0, y / deg.clamp(min=1), torch.zeros_like(y))
        loss = ((y - t) ** 2).sum() / 2
        loss.backward()
        with torch.no_grad():
            for p in conv.parameters():
                p -= lr * p.grad
    out = torch.cat([conv.weight.detach().reshape(-1), conv.bias.detach()])
    out.numpy().astype(np.float64).tofile(d + "/w.f64")
    print("done")


if __name__ == "__main__":
    main()
