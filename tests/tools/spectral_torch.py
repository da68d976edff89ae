"""The reference FNO's SpectralConv1d / 2d / 3d in PyTorch, float64, against Strata's.

usage: spectral_torch.py CASES.bin
Each case in the file: int32 nd, cin, cout, n0, n1, n2, m1, m2, m3, rows (unused extents and
modes 0), then float32 lr, then float32 arrays x [rows, cin, n...], weights (Strata's flat
layout: weights1, weights2 (2-D, 3-D), weights3 and weights4 (3-D), each
[cin, cout, modes..., 2]), targets [rows, cout, n...], Strata's output y for x with those
weights, and Strata's weights after three SGD steps on 0.5 * sum((y - targets)^2). The module
is the reference's (torch.fft.rfft/rfft2/rfftn, einsum over the kept modes, irfft/irfft2/
irfftn to the input's size), its weights torch.view_as_complex() of Strata's. Prints "match"
and exits 0 when the output and the weights after three steps agree within 1e-5 of their largest
magnitude; exits 1 otherwise.
"""
import struct
import sys

import numpy as np
import torch


def spectral(x, ws, nd, m1, m2, m3):
    cout = ws[0].shape[1]
    if nd == 3:
        d, h, w = x.shape[-3:]
        x_ft = torch.fft.rfftn(x, dim=[-3, -2, -1])
        out_ft = torch.zeros(x.shape[0], cout, d, h, w // 2 + 1, dtype=torch.cdouble)
        mul = "bixyz,ioxyz->boxyz"
        out_ft[:, :, :m1, :m2, :m3] = torch.einsum(mul, x_ft[:, :, :m1, :m2, :m3], ws[0])
        out_ft[:, :, -m1:, :m2, :m3] = torch.einsum(mul, x_ft[:, :, -m1:, :m2, :m3], ws[1])
        out_ft[:, :, :m1, -m2:, :m3] = torch.einsum(mul, x_ft[:, :, :m1, -m2:, :m3], ws[2])
        out_ft[:, :, -m1:, -m2:, :m3] = torch.einsum(mul, x_ft[:, :, -m1:, -m2:, :m3], ws[3])
        return torch.fft.irfftn(out_ft, s=(d, h, w), dim=[-3, -2, -1])
    if nd == 1:
        n = x.shape[-1]
        x_ft = torch.fft.rfft(x)
        out_ft = torch.zeros(x.shape[0], cout, n // 2 + 1, dtype=torch.cdouble)
        out_ft[:, :, :m1] = torch.einsum("bix,iox->box", x_ft[:, :, :m1], ws[0])
        return torch.fft.irfft(out_ft, n=n)
    h, w = x.shape[-2], x.shape[-1]
    x_ft = torch.fft.rfft2(x)
    out_ft = torch.zeros(x.shape[0], cout, h, w // 2 + 1, dtype=torch.cdouble)
    out_ft[:, :, :m1, :m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m1, :m2], ws[0])
    out_ft[:, :, -m1:, :m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m1:, :m2], ws[1])
    return torch.fft.irfft2(out_ft, s=(h, w))


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def main():
    data = open(sys.argv[1], "rb").read()
    at, ok = 0, True
    while at < len(data):
        nd, cin, cout, n0, n1, n2, m1, m2, m3, rows = struct.unpack_from("<10i", data, at)
        lr = struct.unpack_from("<f", data, at + 40)[0]
        at += 44
        ext = [n0, n1, n2][:nd]
        modes = [m1, m2, m3][:nd]
        blocks = 1 << (nd - 1)
        npts = int(np.prod(ext))
        nw = cin * cout * int(np.prod(modes)) * 2

        def take(count):
            nonlocal at
            v = np.frombuffer(data, dtype="<f4", count=count, offset=at)
            at += 4 * count
            return torch.tensor(v.astype(np.float64))

        x = take(rows * cin * npts).reshape(rows, cin, *ext)
        w0 = take(blocks * nw)
        t = take(rows * cout * npts).reshape(rows, cout, *ext)
        y_strata = take(rows * cout * npts).reshape(rows, cout, *ext)
        w3_strata = take(blocks * nw)
        ws = [torch.view_as_complex(w0[b * nw:(b + 1) * nw].reshape(cin, cout, *modes, 2)
                                    .contiguous()).requires_grad_() for b in range(blocks)]
        y = spectral(x, ws, nd, m1, m2, m3)
        dy = rel(y_strata, y.detach())
        for _ in range(3):
            for w in ws:
                w.grad = None
            loss = 0.5 * ((spectral(x, ws, nd, m1, m2, m3) - t) ** 2).sum()
            loss.backward()
            with torch.no_grad():
                for w in ws:
                    w -= lr * w.grad
        w3 = torch.cat([torch.view_as_real(w.detach()).reshape(-1) for w in ws])
        dw = rel(w3_strata, w3)
        print(f"{nd}-d {cin}->{cout} extents {ext} modes {modes}: output {dy:.3g}, "
              f"weights after 3 steps {dw:.3g}")
        ok &= dy <= 1e-5 and dw <= 1e-5
    if ok:
        print("match")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
