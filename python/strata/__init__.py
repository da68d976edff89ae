"""Strata from Python: build a model from a model line or a torch.nn.Module, configure its strategy, devices and
optimizer by keyword, fit it on NumPy arrays, evaluate, predict, load and export weights, and
hand the trained weights to a torch.nn.Module.

    import numpy as np, strata
    m = strata.Model("input(784) linear(256) relu linear(128) relu linear(10)",
                     batch=128, strategy="ddp", devices=2, optimizer="sgd", lr=0.05, seed=1)
    m.fit(x, y, epochs=2)            # x: (n, 784) float32, y: (n,) int labels
    print(m.evaluate(x_test, y_test), m.predict(x_test[:5]))
    m = strata.Model.from_torch(torch_module, input_shape=(784,), strategy="ddp", devices=2)

Arrays are passed to the library as they are (C-contiguous float32 or float64 inputs, int32
labels or float targets): nothing is copied, except an array of another type or layout, which
is converted once per call. Every failure raises StrataError with the library's message.
"""
import ctypes
import json
import os
import tempfile

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Model", "StrataError", "read_safetensors"]

_OPTIMIZERS = {"sgd": 0, "adamw": 1}
_LOSSES = {"ce": "softmax_cross_entropy", "mse": "mse", "l1": "l1", "huber": "huber",
           "bce": "bce_with_logits"}
_OPTIM_KEYS = ("lr", "momentum", "dampening", "nesterov", "weight_decay", "beta1", "beta2",
               "eps", "schedule", "warmup")


class StrataError(RuntimeError):
    """A Strata call failed: @c status is its status (a negative STRATA_E* value), @c name the
    status's name and the message strata_last_error()'s text."""

    def __init__(self, status, message):
        self.status = status
        self.name = (lib.strata_status_name(status) or b"?").decode()
        super().__init__("%s: %s" % (self.name, message))


def _check(rc):
    if rc != 0:
        raise StrataError(rc, (lib.strata_last_error() or b"").decode(errors="replace"))
    return rc


def _fail(message):
    """A refusal found on the Python side: STRATA_EINVAL, worded as the library's."""
    raise StrataError(-1, "invalid argument: " + message)


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data) if a is not None else None


def _inputs(x, dim):
    """x as C-contiguous rows of float32 or float64 (a view when it already is one)."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    x = np.ascontiguousarray(x)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    x = x.reshape(x.shape[0], -1)
    if x.shape[1] != dim:
        _fail("inputs: %d values a row, the model takes %d" % (x.shape[1], dim))
    return x, (_lib.F32 if x.dtype == np.float32 else _lib.F64)


def _targets(y, n):
    """Labels (int32, one a row) or float targets (rows of float32 or float64)."""
    y = np.asarray(y)
    if y.ndim == 0 or y.shape[0] != n:
        _fail("targets: %d rows, the inputs have %d" % (y.shape[0] if y.ndim else 0, n))
    if np.issubdtype(y.dtype, np.integer):
        if y.ndim != 1:
            _fail("labels: one a row, not %s" % (y.shape,))
        return np.ascontiguousarray(y, dtype=np.int32), _lib.I32, 1
    if y.dtype not in (np.float32, np.float64):
        y = y.astype(np.float32)
    y = np.ascontiguousarray(y).reshape(n, -1)
    return y, (_lib.F32 if y.dtype == np.float32 else _lib.F64), y.shape[1]


def read_safetensors(path):
    """The tensors of a safetensors file as {name: ndarray} (and its metadata under
    "__metadata__"), read with NumPy alone."""
    types = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
             "I64": np.int64, "U8": np.uint8}
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            out[name] = t
            continue
        lo, hi = t["data_offsets"]
        a = np.frombuffer(raw, dtype=types[t["dtype"]], count=(hi - lo) //
                          np.dtype(types[t["dtype"]]).itemsize, offset=8 + n + lo)
        out[name] = a.reshape(t["shape"]).copy()
    return out


class Model:
    """A model line trained by a Strata runtime.

    @p line: a model line ("input(784) linear(256) relu linear(10)", strata_model_parse()).
    Keywords: batch (the largest batch a step takes, default 128), strategy ("single", "dp",
    "ddp", "zero1", "zero2", "fsdp", ...), devices, optimizer ("sgd" or "adamw"), lr,
    momentum, weight_decay and the other optimizer fields, precision ("32", "bf16-mixed",
    "16-mixed"), loss ("ce", "mse", "l1", "huber", "bce"), seed; any other keyword is a
    configuration field set by its name (strata_config_set(): accumulate, clip_norm, bind,
    invariant, timeout_s, ...). The runtime is made at once (strata_plan, strata_init,
    strata_connect); close() or a with block releases it.
    """

    def __init__(self, line, batch=128, loss=None, **options):
        self._rt = None
        self._torch_names = None
        self._mods = (ctypes.c_char * (lib.strata_module_bytes() * 256))()
        self._model = _lib.Model()
        if loss is not None:
            ops = lib.strata_loss_ops_by_name(_LOSSES.get(loss, loss).encode())
            if not ops:
                _fail("loss: '%s' is not ce, mse, l1, huber or bce" % loss)
            self._model.loss = ops
        _check(lib.strata_model_parse(line.encode(), self._mods, 256, ctypes.byref(self._model)))
        self.line = line
        self._cfg = (ctypes.c_char * lib.strata_config_bytes())()
        lib.strata_config_init(self._cfg)
        _check(lib.strata_config_set_model(self._cfg, ctypes.byref(self._model)))
        out = _lib.Dims()
        _check(lib.strata_model_output(ctypes.byref(self._model), ctypes.byref(out)))
        values = ctypes.c_int()
        _check(lib.strata_model_targets(ctypes.byref(self._model), ctypes.byref(values), None))
        self.target_values = values.value
        self.batch = batch
        self.seed = int(options.get("seed", 0))
        self._set("batch", batch)
        for key, value in options.items():
            self._option(key, value)
        self._set("classes", self._outputs_of_line())
        info = _lib.PlanInfo()
        _check(lib.strata_plan(self._cfg, ctypes.byref(info)))
        self.plan = {name: getattr(info, name) for name, _ in _lib.PlanInfo._fields_}
        rt = ctypes.c_void_p()
        _check(lib.strata_init(ctypes.byref(rt), self._cfg))
        self._rt = rt
        try:
            _check(lib.strata_connect(self._rt))
        except StrataError:
            self.close()
            raise
        outputs = ctypes.c_int()
        _check(lib.strata_outputs(self._rt, ctypes.byref(outputs)))
        self.outputs = outputs.value
        self.inputs = self._model.in_features

    @classmethod
    def from_torch(cls, module, input_shape, losses=None, **options):
        """A Model of torch.nn.Module @p module, starting from its weights: the module is
        traced with torch.fx on samples of @p input_shape (a sample's shape without the batch,
        e.g. (784,) or (1, 28, 28); a list of shapes for several inputs), each node becoming a
        module of the line as strata-from-torch does (the same converter), and its weights
        loaded strictly. @p losses: each output's loss, for several outputs. The keywords are
        Model()'s. A node Strata has no module for raises StrataError naming it."""
        from . import from_torch

        shapes = [tuple(s) for s in input_shape] if input_shape and \
            isinstance(input_shape[0], (tuple, list)) else [tuple(input_shape)]
        try:
            line, tensors, origin = from_torch.convert_named(module, shapes, losses)
        except from_torch.Refused as e:
            _fail("from_torch: %s" % e)
        m = cls(line, **options)
        m._torch_names = origin
        try:
            with tempfile.TemporaryDirectory(prefix="strata-") as d:
                path = os.path.join(d, "initial.safetensors")
                from_torch.write_safetensors(path, tensors, {"format": "pt",
                                                             "strata.model": line})
                m.load_weights(path)
        except BaseException:
            m.close()
            raise
        return m

    def _outputs_of_line(self):
        d = _lib.Dims()
        _check(lib.strata_model_output(ctypes.byref(self._model), ctypes.byref(d)))
        n = d.channels
        for k in range(d.ndim):
            n *= d.size[k]
        return n

    def _set(self, key, value):
        _check(lib.strata_config_set(self._cfg, key.encode(), float(value)))

    def _named(self, fn, value):
        v = ctypes.c_int()
        _check(fn(str(value).encode(), ctypes.byref(v)))
        return v.value

    def _option(self, key, value):
        if key == "strategy":
            self._set("strategy", self._named(lib.strata_strategy_from_name, value))
        elif key == "precision":
            self._set("precision", self._named(lib.strata_precision_parse, value))
        elif key == "optimizer":
            if value not in _OPTIMIZERS:
                _fail("optimizer: '%s' is not sgd or adamw" % value)
            self._set("optim.kind", _OPTIMIZERS[value])
        elif key in _OPTIM_KEYS:
            self._set("optim." + key, value)
        else:
            self._set(key, value)

    def close(self):
        """Tear the runtime down (strata_teardown); the model is unusable afterwards."""
        if self._rt is not None:
            rt, self._rt = self._rt, None
            _check(lib.strata_teardown(rt))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _live(self):
        if self._rt is None:
            _fail("the model was closed")
        return self._rt

    def _batches(self, n, batch):
        batch = self.batch if batch is None else int(batch)
        if batch <= 0 or batch > self.batch:
            _fail("batch: %d is not in 1..%d (the model's batch)" % (batch, self.batch))
        return [(lo, min(lo + batch, n)) for lo in range(0, n, batch)]

    def _batch(self, x, xtype, t, ttype, tdim, lo, hi):
        b = _lib.Batch()
        b.rows, b.dim, b.xtype = hi - lo, x.shape[1], xtype
        b.x = x.ctypes.data + lo * x.strides[0]
        if t is not None and ttype == _lib.I32:
            b.y = t.ctypes.data + lo * t.strides[0]
        elif t is not None:
            b.t, b.ttype, b.tdim = t.ctypes.data + lo * t.strides[0], ttype, tdim
        return b

    def _check_arrays(self, x, xtype, t, ttype, tdim):
        ds = _lib.Dataset()
        _check(lib.strata_dataset_arrays(ctypes.byref(ds), _ptr(x), xtype, x.shape[0],
                                         x.shape[1], _ptr(t), ttype, tdim))

    def fit(self, x, y, epochs=1, batch=None, shuffle=True, seed=None, first_epoch=0):
        """Train on rows x and targets y (int labels, or float targets) for @p epochs epochs of
        batches of @p batch rows (default: the model's), the last partial batch trained too.
        shuffle=True (default) visits epoch e's rows in the library's sampler order for
        @p seed (default: the model's seed) and epoch first_epoch + e, strata-train's order;
        shuffle=False in order, as strata-train --shuffle off. Returns each epoch's {"loss",
        "accuracy"} (labels) or {"loss", "mse", "mae"} (targets): the loss the mean of the
        steps' (strata-train's train_loss), the others row-weighted."""
        rt = self._live()
        x, xtype = _inputs(x, self.inputs)
        t, ttype, tdim = _targets(y, x.shape[0])
        self._check_arrays(x, xtype, t, ttype, tdim)
        spans = self._batches(x.shape[0], batch)
        history = []
        sampler = _Order(x.shape[0], self.seed if seed is None else seed) if shuffle else None
        for e in range(int(epochs)):
            order = sampler.epoch(first_epoch + e) if sampler else None
            acc = _Sums(ttype, per_step=True)
            for k, (lo, hi) in enumerate(spans):
                if order is None:
                    b = self._batch(x, xtype, t, ttype, tdim, lo, hi)
                else:
                    b, keep = self._indexed(x, xtype, t, ttype, tdim, order[lo:hi])
                if k == len(spans) - 1:
                    _check(lib.strata_end_accumulation_window(rt))
                m = _lib.Metrics()
                _check(lib.strata_train_step(rt, ctypes.byref(b), ctypes.byref(m)))
                acc.add(m)
            history.append(acc.result())
        return history

    def _indexed(self, x, xtype, t, ttype, tdim, rows):
        """A batch of the rows @p rows of the whole arrays: only the indices (and labels) are
        assembled here; each device gathers its rows (strata_batch index)."""
        index = np.ascontiguousarray(rows, dtype=np.uint32)
        b = _lib.Batch()
        b.rows, b.dim, b.xtype, b.x = len(index), x.shape[1], xtype, x.ctypes.data
        b.index, b.nimages = index.ctypes.data, x.shape[0]
        keep = [index]
        if ttype == _lib.I32:
            labels = np.ascontiguousarray(t[index])
            b.y = labels.ctypes.data
            keep.append(labels)
        else:
            b.t, b.ttype, b.tdim = t.ctypes.data, ttype, tdim
        return b, keep

    def evaluate(self, x, y, batch=None):
        """Eval-mode metrics over x and y (strata_eval_step batch after batch): {"loss",
        "accuracy"} with labels, {"loss", "mse", "mae"} with float targets, row-weighted."""
        rt = self._live()
        x, xtype = _inputs(x, self.inputs)
        t, ttype, tdim = _targets(y, x.shape[0])
        acc = _Sums(ttype)
        for lo, hi in self._batches(x.shape[0], batch):
            m = _lib.Metrics()
            b = self._batch(x, xtype, t, ttype, tdim, lo, hi)
            _check(lib.strata_eval_step(rt, ctypes.byref(b), ctypes.byref(m)))
            acc.add(m)
        return acc.result()

    def predict(self, x, batch=None):
        """The model's outputs for rows x: an (n, outputs) float32 array the library writes
        into directly (strata_predict_step)."""
        rt = self._live()
        x, xtype = _inputs(x, self.inputs)
        out = np.empty((x.shape[0], self.outputs), dtype=np.float32)
        for lo, hi in self._batches(x.shape[0], batch):
            b = self._batch(x, xtype, None, 0, 0, lo, hi)
            dst = out.ctypes.data + lo * out.strides[0]
            _check(lib.strata_predict_step(rt, ctypes.byref(b), ctypes.c_void_p(dst),
                                           (hi - lo) * self.outputs))
        return out

    def load_weights(self, path, partial=False):
        """Load a safetensors file (PyTorch state_dict names) or a Strata checkpoint's weights
        (strata_load_weights): strict unless @p partial. Returns what was loaded and left."""
        info = _lib.WeightsInfo()
        _check(lib.strata_load_weights(self._live(), os.fspath(path).encode(),
                                       _lib.WEIGHTS_PARTIAL if partial else _lib.WEIGHTS_STRICT,
                                       ctypes.byref(info)))
        return {"loaded": info.loaded, "missing": info.missing,
                "mismatched": info.mismatched, "unexpected": info.unexpected,
                "left": info.left.decode(errors="replace")}

    def export_safetensors(self, path):
        """Write the weights as safetensors, named as PyTorch's state_dict of the same layers
        in nn.Sequential (layers.0.weight, ...)."""
        _check(lib.strata_export_safetensors(self._live(), os.fspath(path).encode()))

    def save_checkpoint(self, path):
        """Everything a bitwise resume needs (parameters, optimizer state, steps), written
        atomically (strata_save_checkpoint), between optimizer steps."""
        _check(lib.strata_save_checkpoint(self._live(), os.fspath(path).encode(), None, 0))

    def load_checkpoint(self, path):
        """Restore a checkpoint of this model (strata_load_checkpoint: every checksum, name and
        shape checked first; a refusal changes nothing). Continue with fit(first_epoch=...)
        to walk the epochs the saving run had next."""
        _check(lib.strata_load_checkpoint(self._live(), os.fspath(path).encode(), None, 0,
                                          None, None))

    def state_dict(self):
        """The trained weights as {PyTorch state_dict name: float32 ndarray}."""
        with tempfile.TemporaryDirectory(prefix="strata-") as d:
            path = os.path.join(d, "weights.safetensors")
            self.export_safetensors(path)
            sd = read_safetensors(path)
        sd.pop("__metadata__", None)
        return sd

    def to_torch(self, module):
        """Copy the trained weights into @p module (a torch.nn.Module whose state_dict names
        are the export's, e.g. the same layers in `self.layers = nn.Sequential(...)`; for a
        Model made by from_torch(), the module it was made from or one like it). Only
        BatchNorm's num_batches_tracked, which Strata does not keep, may be left; any other
        missing or unexpected name raises StrataError. Returns the module."""
        import torch

        names = getattr(self, "_torch_names", None) or {}
        sd = {names.get(k, k): torch.from_numpy(v) for k, v in self.state_dict().items()}
        res = module.load_state_dict(sd, strict=False)
        missing = [k for k in res.missing_keys if not k.endswith("num_batches_tracked")]
        if missing or res.unexpected_keys:
            _fail("to_torch: the module lacks %s and has no %s" %
                  (res.unexpected_keys or "nothing", missing or "nothing"))
        return module


class _Order:
    """One process's sampler (strata_sampler_set_epoch(): Philox from seed + epoch, as
    strata-train's), its buffers NumPy's: a sampler of one rank, as strata_sampler_init()
    makes it."""

    def __init__(self, n, seed):
        self.indices = np.empty(n, dtype=np.uint32)
        self.perm = np.empty(n, dtype=np.uint32)
        self.s = _lib.Sampler(n=n, world=1, rank=0, shuffle=1, drop_last=0, seed=seed,
                              per_rank=n, indices=self.indices.ctypes.data,
                              perm=self.perm.ctypes.data)

    def epoch(self, e):
        lib.strata_sampler_set_epoch(ctypes.byref(self.s), e)
        return self.indices


class _Sums:
    """Row-weighted sums of the steps' metrics."""

    def __init__(self, ttype, per_step=False):
        self.labels = ttype == _lib.I32
        self.per_step = per_step
        self.steps = self.rows = 0
        self.loss = self.mse = self.mae = 0.0
        self.correct = 0

    def add(self, m):
        self.steps += 1
        self.rows += m.rows
        self.loss += m.loss if self.per_step else m.loss * m.rows
        self.correct += m.correct
        self.mse += m.mse * m.rows
        self.mae += m.mae * m.rows

    def result(self):
        n = max(self.rows, 1)
        loss = self.loss / max(self.steps if self.per_step else self.rows, 1)
        if self.labels:
            return {"loss": loss, "accuracy": self.correct / n}
        return {"loss": loss, "mse": self.mse / n, "mae": self.mae / n}
