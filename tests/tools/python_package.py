"""The strata Python package against strata-train (tests/tools/python_package.c runs it).

  python_package.py train STRATA_TRAIN DATA DIR   the default MLP on the first samples of
      Fashion-MNIST through the package and through strata-train (--shuffle off on one
      device, shuffled under ddp on two): the same weights bit for bit, the same printed
      loss and accuracy; the weights handed to a torch module predict what Strata predicts.
  python_package.py errors DIR                    each refusal a StrataError with the message.
  python_package.py regression DIR                float targets, f64 inputs, shuffled epochs,
      a checkpoint resumed bitwise.
  python_package.py torch DIR                     strata.Model.from_torch() and to_torch().
  python_package.py layout NAME=BYTES...          the mirrored structs have the C sizes.
Prints OK last when every check passed.
"""
import gzip
import json
import os
import subprocess
import sys

import numpy as np

import strata
from strata import _lib

LINE = "input(784) linear(256) relu linear(128) relu linear(10)"
TRAIN, TEST, BATCH, EPOCHS, SEED = 512, 128, 64, 2, 7


def idx(path, n):
    """The first n samples of an IDX file (.gz), as the header's shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndims = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    per = int(np.prod(dims[1:])) if ndims > 1 else 1
    off = 4 + 4 * ndims
    return np.frombuffer(raw, dtype=np.uint8, count=n * per, offset=off).reshape([n] + dims[1:])


def write_idx(path, a):
    head = bytes([0, 0, 8, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    with gzip.open(path, "wb") as f:
        f.write(head + a.tobytes())


def same_weights(a, b):
    ta, tb = strata.read_safetensors(a), strata.read_safetensors(b)
    ta.pop("__metadata__", None)
    tb.pop("__metadata__", None)
    assert sorted(ta) == sorted(tb), (sorted(ta), sorted(tb))
    for k in ta:
        assert ta[k].shape == tb[k].shape and ta[k].tobytes() == tb[k].tobytes(), k
    return sorted(ta)


def train(cli, data, d):
    sub = os.path.join(d, "data")
    os.makedirs(sub, exist_ok=True)
    sets = {}
    for name, n in (("train", TRAIN), ("t10k", TEST)):
        images = idx(os.path.join(data, name + "-images-idx3-ubyte.gz"), n)
        labels = idx(os.path.join(data, name + "-labels-idx1-ubyte.gz"), n)
        write_idx(os.path.join(sub, name + "-images-idx3-ubyte.gz"), images)
        write_idx(os.path.join(sub, name + "-labels-idx1-ubyte.gz"), labels)
        # strata-train --raw-pixels: byte * (1.0f / 255.0f), in f32
        x = images.reshape(n, -1).astype(np.float32) * (np.float32(1) / np.float32(255))
        sets[name] = (x, labels.astype(np.int32))
    x, y = sets["train"]
    # in order on one device; shuffled under ddp on two, as the README's example runs
    for shuffle, strategy, devices in ((False, "single", 1), (True, "ddp", 2)):
        name = "cli-%d.safetensors" % shuffle
        out = subprocess.run([cli, "--data", sub, "--raw-pixels", "--shuffle",
                              "on" if shuffle else "off", "--json", "--epochs", str(EPOCHS),
                              "--batch", str(BATCH), "--seed", str(SEED), "--strategy", strategy,
                              "--devices", str(devices), "--optim", "sgd", "--lr", "0.05",
                              "--momentum", "0.9",
                              "--export-safetensors", os.path.join(d, name)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        epochs = [json.loads(l) for l in out.stdout.splitlines() if l.startswith('{"epoch"')]
        assert len(epochs) == EPOCHS, out.stdout
        m = strata.Model(LINE, batch=BATCH, seed=SEED, strategy=strategy, devices=devices,
                         optimizer="sgd", lr=0.05, momentum=0.9)
        hist = m.fit(x, y, epochs=EPOCHS, batch=BATCH, shuffle=shuffle)
        m.export_safetensors(os.path.join(d, "py.safetensors"))
        names = same_weights(os.path.join(d, name), os.path.join(d, "py.safetensors"))
        for e in range(EPOCHS):
            print("shuffle", shuffle, "epoch", e + 1, "cli", epochs[e]["train_loss"], "python",
                  hist[e]["loss"])
            assert "%.6f" % hist[e]["loss"] == "%.6f" % epochs[e]["train_loss"]
        if not shuffle:
            m.close()
    with m:
        xt, yt = sets["t10k"]
        ev = m.evaluate(xt, yt, batch=BATCH)
        print("test", ev, "cli", {k: v for k, v in epochs[-1].items() if k.startswith("test")})
        pred = m.predict(xt)
        assert pred.shape == (TEST, 10) and pred.dtype == np.float32
        assert (pred.argmax(1) == yt).mean() == ev["accuracy"]
        assert round(ev["accuracy"] * TEST) == round(epochs[-1]["test_acc"] * TEST), ev

        # the weights back into a torch module, named as the export names them
        try:
            import torch
        except ImportError:
            print("torch missing: the hand-back not checked")
        else:
            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = torch.nn.Sequential(
                        torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                        torch.nn.ReLU(), torch.nn.Linear(128, 10))

                def forward(self, v):
                    return self.layers(v)

            net = m.to_torch(Net())
            assert sorted(net.state_dict()) == names
            with torch.no_grad():
                ref = net(torch.from_numpy(xt)).numpy()
            err = np.abs(ref - pred).max() / np.abs(ref).max()
            print("torch against strata: max relative", err)
            assert err <= 1e-5, err

        # loading the CLI's weights into a fresh model predicts the same bits
        with strata.Model(LINE, batch=BATCH, seed=SEED + 1) as fresh:
            info = fresh.load_weights(os.path.join(d, name))
            assert info["loaded"] == len(names), info
            assert fresh.predict(xt).tobytes() == pred.tobytes()

        # an inference-only model (no gradients nor optimizer state planned): the same bits,
        # and training refused
        with strata.Model(LINE, batch=BATCH, strategy="single", inference_only=1) as dep:
            assert dep.plan["optimizer_bytes"] == 0, dep.plan
            dep.load_weights(os.path.join(d, name))
            assert dep.predict(xt).tobytes() == pred.tobytes()
            expect(lambda: dep.fit(xt[:BATCH], np.zeros(BATCH, np.int32)), "inference only")


def expect(fn, *words):
    try:
        fn()
    except strata.StrataError as e:
        for w in words:
            assert w in str(e), (w, str(e))
        print("refused:", e)
        return
    raise AssertionError("not refused: expected " + repr(words))


def errors(d):
    expect(lambda: strata.Model("input(784) linear(10 relu"), "STRATA_EINVAL",
           "unbalanced parentheses")
    expect(lambda: strata.Model("input(784) linearr(10)"), "linearr")
    expect(lambda: strata.Model("input(4) linear(2)", strategy="nope"), "nope")
    expect(lambda: strata.Model("input(4) linear(2)", optimizer="lbfgs"), "lbfgs")
    expect(lambda: strata.Model("input(4) linear(2)", no_such_field=1), "no_such_field")
    with strata.Model("input(4) linear(3)", batch=8) as m:
        x = np.zeros((8, 4), np.float32)
        y = np.zeros(8, np.int32)
        expect(lambda: m.fit(np.zeros((8, 5), np.float32), y), "5 values a row")
        expect(lambda: m.fit(x, np.zeros(7, np.int32)), "7")
        bad = x.copy()
        bad[2, 1] = np.nan
        expect(lambda: m.fit(bad, y), "row 2")
        expect(lambda: m.fit(x, y, batch=16), "batch")
        missing = os.path.join(d, "absent.safetensors")
        expect(lambda: m.load_weights(missing), "absent.safetensors")
        before = m.predict(x)
        with strata.Model("input(4) linear(5)", batch=8) as other:
            other.export_safetensors(os.path.join(d, "other.safetensors"))
        expect(lambda: m.load_weights(os.path.join(d, "other.safetensors")), "layers.0.weight")
        assert m.predict(x).tobytes() == before.tobytes()  # a refusal changed nothing
    expect(lambda: m.predict(x), "closed")


def regression(d):
    """Float targets from float64 inputs (converted where each device takes its rows), AdamW,
    shuffled epochs (batches of indices into the whole arrays): two runs give the same bits,
    the loss falls, and the order matters."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 4))
    t = np.tanh(x[:, :2] - x[:, 2:]).astype(np.float32)
    runs = []
    for shuffle in (True, True, False):
        with strata.Model("input(4) linear(16) tanh linear(2)", batch=16, loss="mse", seed=3,
                          optimizer="adamw", lr=1e-2) as m:
            h = m.fit(x, t, epochs=4, shuffle=shuffle, seed=5)
            assert set(h[-1]) == {"loss", "mse", "mae"} and h[-1]["loss"] < h[0]["loss"], h
            ev = m.evaluate(x, t)
            assert abs(ev["mse"] - ((m.predict(x) - t) ** 2).mean()) < 1e-5, ev
            runs.append(m.predict(x).tobytes())
    assert runs[0] == runs[1] and runs[0] != runs[2]

    # a checkpoint after 2 epochs, resumed in a fresh model: epochs 3 and 4 give the same bits
    def model():
        return strata.Model("input(4) linear(16) tanh linear(2)", batch=16, loss="mse", seed=3,
                            optimizer="adamw", lr=1e-2)

    path = os.path.join(d, "two.ckpt")
    with model() as m:
        m.fit(x, t, epochs=2, seed=5)
        m.save_checkpoint(path)
        m.fit(x, t, epochs=2, seed=5, first_epoch=2)
        whole = m.predict(x).tobytes()
    with model() as m:
        m.load_checkpoint(path)
        m.fit(x, t, epochs=2, seed=5, first_epoch=2)
        assert m.predict(x).tobytes() == whole
        assert whole == runs[0]
    with strata.Model("input(4) linear(3) tanh linear(2)", batch=16, loss="mse") as other:
        expect(lambda: other.load_checkpoint(path), "STRATA_EINVAL")


def from_torch(d):
    """strata.Model.from_torch(): a small CNN defined in PyTorch predicts what PyTorch predicts
    before training; after fit, to_torch() hands the trained weights back into the same module,
    which then predicts what Strata predicts; a module with a node Strata has no module for is
    refused, naming it."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Linear(4 * 4 * 4, 3)

        def forward(self, v):
            return self.head(torch.flatten(self.pool(torch.relu(self.conv(v))), 1))

    torch.manual_seed(0)
    net = Net()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 1, 8, 8)).astype(np.float32)
    y = (np.arange(32) % 3).astype(np.int32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    with strata.Model.from_torch(net, input_shape=(1, 8, 8), batch=16, lr=0.05,
                                 seed=2) as m:
        print("from_torch line:", m.line)
        pred = m.predict(x.reshape(32, -1))
        err = np.abs(ref - pred).max() / np.abs(ref).max()
        print("before training, strata against torch: max relative", err)
        assert err <= 1e-5, err
        h = m.fit(x.reshape(32, -1), y, epochs=3, shuffle=False)
        assert h[-1]["loss"] < h[0]["loss"], h
        pred = m.predict(x.reshape(32, -1))
        m.to_torch(net)
    with torch.no_grad():
        back = net(torch.from_numpy(x)).numpy()
    err = np.abs(back - pred).max() / np.abs(back).max()
    print("after training, torch with strata's weights: max relative", err)
    assert err <= 1e-5, err
    assert np.abs(back - ref).max() > 1e-3  # the module did change

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 4)

        def forward(self, v):
            return self.rnn(v)[0]

    expect(lambda: strata.Model.from_torch(Odd(), input_shape=(4,)), "from_torch", "rnn")


def layout(pairs):
    for p in pairs:
        name, size = p.split("=")
        got = __import__("ctypes").sizeof(_lib.STRUCTS[name])
        assert got == int(size), (name, got, size)
    assert len(pairs) == len(_lib.STRUCTS), pairs


if __name__ == "__main__":
    {"train": lambda a: train(*a), "errors": lambda a: errors(*a),
     "regression": lambda a: regression(*a), "torch": lambda a: from_torch(*a),
     "layout": layout}[sys.argv[1]](sys.argv[2:])
    print("OK")
