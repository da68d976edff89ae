"""PyTorch models and checks for strata-from-torch and strata-to-torch's round trips.

The models (what strata-from-torch imports: `strata-from-torch torch_models.py 'cnn()' ...`):
mlp, cnn (the Fashion-MNIST CNN), unet (a U-Net-like skip model: its encoder's features
concatenated to the upsampled decoder's), resblock (a ResNet block, its shortcut an add), one
per conv padding mode (conv_mode('reflect')), and models Strata has no module for (refused).

usage: torch_models.py data DIR            IDX files of 28x28 images in DIR (seeded)
       torch_models.py check DIR NET.py WEIGHTS LOSS ACC
           NET.py's load(WEIGHTS) on DIR's test images: its mean cross-entropy and accuracy
           against Strata's LOSS and ACC; prints "agree" or exits 1
       torch_models.py onnx EXPR SHAPE OUT.onnx       the module EXPR exported as ONNX
       torch_models.py same NET.py WEIGHTS EXPR
           NET.py's load(WEIGHTS) and the module EXPR on the same random inputs: equal outputs
       torch_models.py direct DIR EXPR WEIGHTS LOSS ACC SHAPE
           the original module EXPR (here) on DIR's test images, with the transform stored in
           export WEIGHTS (Strata's own, read from its metadata), against LOSS and ACC; the
           images reshaped to SHAPE (C,H,W or another layout of their 784 bytes)
"""
import gzip
import importlib.util
import json
import struct
import sys

import torch
import torch.nn.functional as F
from torch import nn

TRAIN, TEST = 256, 200


def seeded(fn):
    def make(*a):
        torch.manual_seed(11)
        return fn(*a)
    return make


@seeded
def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.BatchNorm1d(32), nn.GELU(),
                         nn.Dropout(0.1), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 10))


@seeded
def cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(1, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Conv2d(4, 8, 3, padding="same", padding_mode="circular")
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec = nn.Conv2d(12, 4, 3, padding=1, padding_mode="replicate")
        self.down = nn.AvgPool2d(4)
        self.norm = nn.LayerNorm([4, 7, 7])
        self.head = nn.Linear(4 * 7 * 7, 10)

    def forward(self, x):
        e = torch.relu(self.enc(x))
        m = F.silu(self.mid(self.pool(e)))
        d = torch.cat((self.up(m), e), dim=1)
        d = self.norm(self.down(torch.tanh(self.dec(d))))
        return self.head(torch.flatten(d, 1))


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.c1 = nn.Conv2d(4, 4, 3, padding=2, dilation=2, padding_mode="reflect")
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.act = nn.LeakyReLU(0.2)
        self.head = nn.Linear(4 * 14 * 14, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        h = self.c2(self.act(self.c1(x)))
        h = h + x
        return self.head(F.relu(h).flatten(1))


@seeded
def unet():
    return UNet()


@seeded
def resblock():
    return ResBlock()


@seeded
def conv_mode(mode):
    return nn.Sequential(nn.Conv2d(1, 3, 5, padding=2, stride=2, padding_mode=mode),
                         nn.Sigmoid(), nn.Flatten(), nn.Linear(3 * 14 * 14, 10))


class Two(nn.Module):
    """Two inputs, two outputs: the guide's multi-argument model."""

    def __init__(self, swapped=False):
        super().__init__()
        self.a, self.b = nn.Linear(4, 16), nn.Linear(4, 16)
        self.head1, self.head2 = nn.Linear(32, 4), nn.Linear(32, 4)
        self.swapped = swapped

    def forward(self, x, y):
        ha, hb = torch.tanh(self.a(x)), torch.tanh(self.b(y))
        h = torch.cat((ha, hb) if self.swapped else (hb, ha), 1)
        return self.head1(h), self.head2(h)


@seeded
def two(swapped=False):
    return Two(swapped)


@seeded
def conv1d():
    """On a sample of 28 channels of 28: the image's rows as channels."""
    return nn.Sequential(nn.Conv1d(28, 4, 5, stride=2, padding=2, padding_mode="reflect"),
                         nn.ReLU(), nn.MaxPool1d(2), nn.Upsample(scale_factor=2, mode="linear"),
                         nn.Flatten(), nn.Linear(4 * 14, 10))


@seeded
def conv3d():
    """On a sample of 1 x 4 x 14 x 14: the image's bytes in another layout."""
    return nn.Sequential(nn.Conv3d(1, 2, 3, padding=1, padding_mode="circular"),
                         nn.GELU(approximate="tanh"), nn.AvgPool3d((1, 2, 2)),
                         nn.Upsample(scale_factor=(1, 2, 2)), nn.Flatten(),
                         nn.Linear(2 * 4 * 14 * 14, 10))


class Functional(nn.Module):
    """Pools, dropout and activations as functions and tensor methods; an Identity."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 2, 3)
        self.l = nn.Linear(2 * 7 * 7, 10)
        self.skip = nn.Identity()

    def forward(self, x):
        h = F.max_pool2d(self.skip(self.c(x)), 2).sigmoid()
        h = F.leaky_relu(F.avg_pool2d(h, 2, padding=1), 0.1)
        h = F.dropout(h, 0.2, training=self.training)
        return self.l(F.gelu(h.flatten(1)))


@seeded
def functional():
    return Functional()


@seeded
def fcn():
    """TorchFort's FCN: one periodic convolution."""
    return nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, padding_mode="circular"))


# ---- models Strata has no module for: each refused, naming the node and its op ----

def softmax():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.Softmax(dim=1))


class Mul(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1) * 2.0


def mul():
    return Mul()


def grouped():
    return nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten())


def ceil_pool():
    return nn.Sequential(nn.MaxPool2d(3, ceil_mode=True), nn.Flatten())


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(self.fc(x))


def shared():
    return Shared()


def linear_on_image():
    return nn.Sequential(nn.Linear(28, 10))


class Lambda(nn.Module):
    def __init__(self, fn, *mods):
        super().__init__()
        self.m = nn.ModuleList(mods)
        self.fn = fn

    def forward(self, x):
        return self.fn(x, self.m)


# each on a sample of 2 x 8 x 8 (batchnorm_image: 2 x 8): a module or call Strata has, with
# arguments it has not
BAD = {
    "flatten2": lambda: nn.Sequential(nn.Flatten(2)),
    "layernorm_part": lambda: nn.Sequential(nn.LayerNorm([8, 8])),
    "layernorm_plain": lambda: nn.Sequential(nn.LayerNorm([2, 8, 8], elementwise_affine=False)),
    "batchnorm_image": lambda: nn.Sequential(nn.BatchNorm1d(2)),
    "bn_no_stats": lambda: nn.Sequential(nn.Flatten(), nn.BatchNorm1d(128,
                                                                      track_running_stats=False)),
    "upsample_frac": lambda: nn.Sequential(nn.Upsample(scale_factor=1.5)),
    "upsample_align": lambda: nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear",
                                                        align_corners=True)),
    "upsample_mode": lambda: nn.Sequential(nn.Upsample(scale_factor=2, mode="bicubic")),
    "upsample_size": lambda: nn.Sequential(nn.Upsample(size=(12, 12))),
    "avg_exclude": lambda: nn.Sequential(nn.AvgPool2d(2, count_include_pad=False)),
    "linear_nobias": lambda: nn.Sequential(nn.Flatten(), nn.Linear(128, 4, bias=False)),
    "transposed": lambda: nn.Sequential(nn.ConvTranspose2d(2, 2, 3)),
    "cat3": lambda: Lambda(lambda x, m: torch.cat((m[0](x), x, x), 1), nn.ReLU()),
    "cat_dim2": lambda: Lambda(lambda x, m: torch.cat((m[0](x), x), 2), nn.ReLU()),
    "add_alpha": lambda: Lambda(lambda x, m: torch.add(m[0](x), x, alpha=2), nn.ReLU()),
    "add_const": lambda: Lambda(lambda x, m: m[0](x) + 1.0, nn.ReLU()),
}


def bad(kind):
    return BAD[kind]()


def not_a_module():
    return 3


# ---- data and checks ----

def write_idx(path, data, dims):
    code = 0x08
    head = struct.pack(">BBBB", 0, 0, code, len(dims)) + b"".join(struct.pack(">I", d)
                                                                   for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(head + bytes(data))


def data(d):
    g = torch.Generator().manual_seed(3)
    for prefix, n in (("train", TRAIN), ("t10k", TEST)):
        labels = torch.randint(0, 10, (n,), generator=g)
        img = torch.randint(0, 256, (n, 28, 28), generator=g)
        img[:, :, :] = (img // 2 + labels.view(n, 1, 1) * 12).clamp(0, 255)
        write_idx(f"{d}/{prefix}-images-idx3-ubyte.gz", img.to(torch.uint8).reshape(-1).tolist(),
                  (n, 28, 28))
        write_idx(f"{d}/{prefix}-labels-idx1-ubyte.gz", labels.to(torch.uint8).tolist(), (n,))
    print("written")


def test_set(d):
    with gzip.open(f"{d}/t10k-images-idx3-ubyte.gz") as f:
        x = torch.tensor(list(f.read()[16:]), dtype=torch.uint8).reshape(TEST, 1, 28, 28)
    with gzip.open(f"{d}/t10k-labels-idx1-ubyte.gz") as f:
        y = torch.tensor(list(f.read()[8:]), dtype=torch.int64)
    return x, y


def compare(logits, y, loss, acc):
    mine = F.cross_entropy(logits.double(), y).item()
    right = (logits.argmax(1) == y).double().mean().item()
    rel = abs(mine - loss) / max(abs(loss), 1e-30)
    print(f"pytorch loss {mine:.10g} acc {right:.6g}; strata loss {loss:.10g} acc {acc:.6g}; "
          f"relative {rel:.3g}")
    if rel > 1e-5 or abs(right - acc) > 1.5 / TEST:
        sys.exit(1)
    print("agree")


def check(d, net, weights, loss, acc):
    spec = importlib.util.spec_from_file_location("net", net)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.load(weights)
    x, y = test_set(d)
    with torch.no_grad():
        compare(model(x), y, loss, acc)


def direct(d, expr, weights, loss, acc, shape):
    with open(weights, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n))["__metadata__"]
    t = meta["strata.transform"]
    scale = float(t.split("byte * ")[1].split(" ")[0])
    sign, shift = t.split("byte * ")[1].split(" ")[1:3]
    shift = float(shift) * (-1.0 if sign == "-" else 1.0)
    model = eval(expr).eval()
    x, y = test_set(d)
    x = x.reshape((TEST,) + shape).to(torch.float32) * torch.tensor(scale) + torch.tensor(shift)
    with torch.no_grad():
        compare(model(x), y, loss, acc)


def same(net, weights, expr):
    """NET.py's load(WEIGHTS) and the module EXPR give the same outputs on random inputs."""
    spec = importlib.util.spec_from_file_location("net", net)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, orig = mod.load(weights), eval(expr).eval()
    xs = [torch.randn((5,) + tuple(s)) for s in mod.INPUTS]
    with torch.no_grad():
        a, b = model(*xs), orig(*xs)
    a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
    diff = max(float((p - q).abs().max()) for p, q in zip(a, b))
    print(f"{len(a)} outputs, largest difference {diff}")
    if len(a) != len(b) or diff > 1e-6:
        sys.exit(1)
    print("agree")


def to_onnx(expr, shape, out):
    """The module EXPR as an ONNX file (PyTorch's exporter), its batch dynamic."""
    model = eval(expr).eval()
    x = torch.zeros((1,) + tuple(int(v) for v in shape.split(",")))
    torch.onnx.export(model, x, out, input_names=["x"], dynamic_axes={"x": {0: "n"}})
    print("exported")


if __name__ == "__main__":
    if sys.argv[1] == "onnx":
        to_onnx(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "data":
        data(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]))
    else:
        direct(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]),
               tuple(int(v) for v in sys.argv[7].split(",")))
