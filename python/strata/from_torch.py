#!/usr/bin/python3
"""strata-from-torch: a PyTorch module as a Strata model line and a safetensors file of weights.

usage: strata-from-torch FILE.py EXPR --input-shape C[,D][,H][,W] [--input-shape ...]
                         --line OUT.line --weights OUT.safetensors [--loss LOSS ...]

FILE.py is imported; EXPR, evaluated in its namespace, builds a torch.nn.Module. The module is
traced with torch.fx (symbolic_trace) and its shapes propagated on a zero input of each
--input-shape (a sample's shape, without the batch). Each node becomes one module of the line
(the grammar strata_model_parse() reads), in the traced order; a node that reads something
other than the module just before it names its source with from=. The weights are written
under the names Strata's export uses, layers.N.weight for module N of the line (PyTorch's
state_dict names of the equivalent module), so that

    strata-train --model "$(cat OUT.line)" --init-weights OUT.safetensors

starts from the module's values. A node Strata has no module for is refused, naming the node
and its op; exit status 2. Only the Python standard library and torch are used.

       strata-from-torch FILE.onnx --input-shape ... --line OUT.line --weights OUT.safetensors

reads an ONNX file instead (Debian's python3-onnx), its nodes walked in order the same way.

This file is both the tool (tools/strata-from-torch is a link to it, and `make install` installs
it as bin/strata-from-torch: it needs no libstrata) and strata.from_torch in the package, where
convert() gives strata.Model.from_torch() its line and weights: one converter for both.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import operator
import os
import struct
import sys
import types

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp


class Refused(Exception):
    """A model Strata cannot take: the message names the node and why."""


def fmt_float(v):
    """A float as the line writes it: the shortest text that reads back as the same double."""
    return repr(float(v))


def dims(v, n):
    """PyTorch's int-or-tuple as the line's per-dimension value: 3 or 3x5."""
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) == 1:
        t = t * n
    return str(t[0]) if all(x == t[0] for x in t) else "x".join(str(x) for x in t)


def refuse(node, what):
    raise Refused(f"node '{node.name}' ({node.op} {target_name(node)}): {what}")


def target_name(node):
    t = node.target
    if isinstance(t, str):
        return t
    return getattr(t, "__module__", "") + "." + getattr(t, "__name__", repr(t))


ACTIVATION_FUNCS = {
    torch.relu: "relu", F.relu: "relu", torch.tanh: "tanh", F.tanh: "tanh",
    torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.silu: "silu",
}
ACTIVATION_METHODS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid"}
ADD_FUNCS = (operator.add, operator.iadd, torch.add)
FLATTEN_FUNCS = (torch.flatten,)
MAX_KEYS = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
AVG_KEYS = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
            "divisor_override")
POOL_FUNCS = {
    F.max_pool1d: ("MaxPool1d", MAX_KEYS), F.max_pool2d: ("MaxPool2d", MAX_KEYS),
    F.max_pool3d: ("MaxPool3d", MAX_KEYS), F.avg_pool1d: ("AvgPool1d", AVG_KEYS[:5]),
    F.avg_pool2d: ("AvgPool2d", AVG_KEYS), F.avg_pool3d: ("AvgPool3d", AVG_KEYS),
}
for f, pool in ((torch.avg_pool1d, "AvgPool1d"), (torch._C._nn.avg_pool2d, "AvgPool2d"),
                (torch._C._nn.avg_pool3d, "AvgPool3d"), (torch.max_pool1d, "MaxPool1d"),
                (torch.max_pool2d, "MaxPool2d"), (torch.max_pool3d, "MaxPool3d")):
    POOL_FUNCS.setdefault(f, (pool, AVG_KEYS if pool[0] == "A" else MAX_KEYS))  # as traced


class Converter:
    """The traced graph walked in order into the line's modules and the weights."""

    def __init__(self, gm, shapes):
        self.gm = gm
        self.mods = dict(gm.named_modules())
        self.shapes = shapes        # node -> shape of its value (batch first)
        self.index = {}             # node -> "input", "inputK" or the module's index
        self.words = []             # the line's modules, in order
        self.tensors = {}           # safetensors name -> tensor
        self.last = None            # the node whose value the next module reads by default
        self.called = {}            # a parameterised module's target -> the node that used it
        self.origin = {}            # safetensors name -> the module's own name of that tensor
        self.names = {id(t): n for n, t in list(gm.named_parameters()) +
                      list(gm.named_buffers())}

    def source(self, node, arg):
        """The from= text for @arg read by @node ('' when it is the previous module's value)."""
        if not isinstance(arg, torch.fx.Node) or arg not in self.index:
            refuse(node, "reads a value that is not a module's output or an input")
        if arg is self.last:
            return ""
        return str(self.index[arg])

    def emit(self, node, word, arg, params=None, merge_from=None):
        """Module @word for @node, reading @arg (a branch when it is not the previous one)."""
        src = self.source(node, arg)
        if merge_from is not None:
            word = f"{word}(from={self.index[merge_from]})" if "(" not in word else word
        elif src:
            word = word[:-1] + f",from={src})" if word.endswith(")") else f"{word}(from={src})"
        k = len(self.words)
        self.words.append(word)
        for name, t in (params or {}).items():
            self.tensors[f"layers.{k}.{name}"] = t.detach().to(torch.float32).contiguous()
            if id(t) in self.names:
                self.origin[f"layers.{k}.{name}"] = self.names[id(t)]
        self.index[node] = k
        self.last = node

    def sample(self, node):
        return tuple(self.shapes[node][1:])

    def run(self, placeholders):
        for k, p in enumerate(placeholders):
            self.index[p] = "input" if len(placeholders) == 1 else f"input{k}"
        self.last = placeholders[0]
        outputs = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                outputs = node.args[0] if isinstance(node.args[0], (tuple, list)) \
                    else [node.args[0]]
                continue
            if node.op == "call_module":
                self.module(node, self.mods[node.target])
            elif node.op == "call_function":
                self.function(node)
            elif node.op == "call_method":
                self.method(node)
            else:
                refuse(node, "Strata has no module for it")
        return outputs

    def one_input(self, node):
        if len(node.args) < 1 or not isinstance(node.args[0], torch.fx.Node):
            refuse(node, "takes no tensor")
        return node.args[0]

    def once(self, node, m):
        if node.target in self.called:
            refuse(node, f"the module is called again (first at '{self.called[node.target]}'):"
                   " shared weights; Strata's modules own theirs")
        self.called[node.target] = node.name

    def module(self, node, m):
        x = self.one_input(node)
        if len(node.args) != 1 or node.kwargs:
            refuse(node, "takes more than one tensor")
        shape = self.sample(x)
        kind = type(m)
        if kind is nn.Linear:
            if len(shape) != 1:
                refuse(node, f"Linear over an input of shape {list(shape)}: Strata's reads a "
                       "flat sample (add a Flatten)")
            self.once(node, m)
            if m.bias is None:
                refuse(node, "Linear without a bias")
            self.emit(node, f"linear({m.out_features})", x,
                      {"weight": m.weight, "bias": m.bias})
        elif kind in (nn.Conv1d, nn.Conv2d, nn.Conv3d):
            self.conv(node, m, x, shape)
        elif kind in (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d,
                      nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d):
            self.pool(node, m, x, shape)
        elif kind is nn.Upsample:
            self.upsample(node, m.scale_factor, m.size, m.mode, m.align_corners, x, shape)
        elif kind is nn.Flatten:
            if m.start_dim != 1 or m.end_dim != -1:
                refuse(node, f"Flatten(start_dim={m.start_dim}, end_dim={m.end_dim}): Strata's "
                       "flattens the whole sample (start_dim=1, end_dim=-1)")
            self.emit(node, "flatten", x)
        elif kind is nn.LayerNorm:
            if tuple(m.normalized_shape) != shape:
                refuse(node, f"LayerNorm over {list(m.normalized_shape)} of a sample "
                       f"{list(shape)}: Strata's normalises the whole sample")
            if not m.elementwise_affine:
                refuse(node, "LayerNorm without elementwise_affine")
            self.once(node, m)
            self.emit(node, "layernorm" + ("" if m.eps == 1e-5 else f"(eps={fmt_float(m.eps)})"),
                      x, {"weight": m.weight, "bias": m.bias})
        elif kind is nn.BatchNorm1d:
            self.batchnorm(node, m, x, shape)
        elif kind is nn.Dropout:
            self.emit(node, f"dropout({fmt_float(m.p)})" if m.p else "dropout", x)
        elif kind is nn.Identity:  # no module: its value is its input's
            self.index[node] = self.index[x] if x in self.index else refuse(node, "reads a "
                                                                             "value Strata lacks")
            if x is self.last:
                self.last = node
        elif kind in (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.SiLU):
            self.emit(node, {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid",
                             nn.SiLU: "silu"}[kind], x)
        elif kind is nn.GELU:
            self.emit(node, "gelu-tanh" if m.approximate == "tanh" else "gelu", x)
        elif kind is nn.LeakyReLU:
            self.leaky(node, m.negative_slope, x)
        else:
            refuse(node, f"{kind.__name__}: Strata has no such module")

    def leaky(self, node, slope, x):
        # Strata's slope 0 means PyTorch's default 0.01; a slope of 0 is ReLU
        self.emit(node, "relu" if slope == 0 else f"leaky-relu({fmt_float(slope)})", x)

    def conv(self, node, m, x, shape):
        nd = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}[type(m)]
        if m.groups != 1:
            refuse(node, f"groups={m.groups}: Strata's convolutions have one group")
        if getattr(m, "transposed", False):
            refuse(node, "a transposed convolution")
        self.once(node, m)
        args = [str(m.out_channels), dims(m.kernel_size, nd)]
        if dims(m.stride, nd) != "1":
            args.append("stride=" + dims(m.stride, nd))
        if isinstance(m.padding, str):
            if m.padding == "same":
                args.append("padding=same")
        elif dims(m.padding, nd) != "0":
            args.append("padding=" + dims(m.padding, nd))
        if dims(m.dilation, nd) != "1":
            args.append("dilation=" + dims(m.dilation, nd))
        if m.padding_mode != "zeros":
            args.append("padding_mode=" + m.padding_mode)
        params = {"weight": m.weight}
        if m.bias is None:
            args.append("bias=false")
        else:
            params["bias"] = m.bias
        self.emit(node, f"conv{nd}d({','.join(args)})", x, params)

    def pool(self, node, m, x, shape, name=None):
        name = name or type(m).__name__
        nd = int(name[-2])
        word = ("maxpool" if name.startswith("Max") else "avgpool") + f"{nd}d"
        if m.ceil_mode:
            refuse(node, f"{name} with ceil_mode=True: Strata's floors")
        if word.startswith("max") and m.return_indices:
            refuse(node, f"{name} with return_indices=True")
        if word.startswith("avg") and (not m.count_include_pad or m.divisor_override):
            refuse(node, f"{name} with count_include_pad=False or a divisor_override: "
                   "Strata's divides by the kernel's size")
        stride = m.stride if m.stride is not None else m.kernel_size
        args = [dims(m.kernel_size, nd)]
        if dims(stride, nd) != dims(m.kernel_size, nd):
            args.append("stride=" + dims(stride, nd))
        if dims(m.padding, nd) != "0":
            args.append("padding=" + dims(m.padding, nd))
        if word.startswith("max") and dims(m.dilation, nd) != "1":
            args.append("dilation=" + dims(m.dilation, nd))
        self.emit(node, f"{word}({','.join(args)})", x)

    def upsample(self, node, scale, size, mode, align, x, shape):
        nd = len(shape) - 1
        if nd < 1:
            refuse(node, "Upsample of a flat sample")
        if size is not None:
            size = tuple(size) if isinstance(size, (tuple, list)) else (size,) * nd
            if any(o % i for o, i in zip(size, shape[1:])):
                refuse(node, f"Upsample to size {list(size)}: not a whole multiple of "
                       f"{list(shape[1:])}")
            scale = tuple(o // i for o, i in zip(size, shape[1:]))
        s = tuple(scale) if isinstance(scale, (tuple, list)) else (scale,) * nd
        if any(float(v) != int(v) or int(v) < 1 for v in s):
            refuse(node, f"Upsample by {list(s)}: Strata's scales by whole numbers")
        want = {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]
        if mode not in ("nearest", want):
            refuse(node, f"Upsample mode '{mode}' on {nd} spatial dimensions: Strata's are "
                   f"nearest and {want}")
        if mode != "nearest" and align:
            refuse(node, "Upsample with align_corners=True")
        args = [dims(tuple(int(v) for v in s), nd)]
        if mode != "nearest":
            args.append("mode=" + mode)
        self.emit(node, f"upsample({','.join(args)})", x)

    def batchnorm(self, node, m, x, shape):
        if len(shape) != 1:
            refuse(node, f"BatchNorm1d over an input of shape {list(shape)}: Strata's "
                   "normalises each feature of a flat sample")
        if not m.affine or not m.track_running_stats or m.momentum is None:
            refuse(node, "BatchNorm1d without affine, running statistics or a momentum")
        self.once(node, m)
        args = []
        if m.eps != 1e-5:
            args.append("eps=" + fmt_float(m.eps))
        if m.momentum != 0.1:
            args.append("momentum=" + fmt_float(m.momentum))
        word = "batchnorm1d" + (f"({','.join(args)})" if args else "")
        self.emit(node, word, x, {"weight": m.weight, "bias": m.bias,
                                  "running_mean": m.running_mean,
                                  "running_var": m.running_var})

    def merge(self, node, word, a, b, ordered):
        """add or concat of @a and @b: one of them must be the previous module's value."""
        for t in (a, b):
            if not isinstance(t, torch.fx.Node) or t not in self.index:
                refuse(node, "merges a value that is not a module's output or an input")
        if a is self.last and b is not self.last:
            other = b
        elif b is self.last and not ordered:
            other = a
        else:
            refuse(node, f"{word}: Strata's merges the module just before it with an earlier "
                   "one; the value before it must be the " +
                   ("first tensor of torch.cat" if ordered else "one or the other operand"))
        self.emit(node, f"{word}(from={self.index[other]})", self.last, merge_from=other)

    def function(self, node):
        t = node.target
        if t in ACTIVATION_FUNCS:
            self.emit(node, ACTIVATION_FUNCS[t], self.one_input(node))
        elif t is F.gelu:
            approx = node.kwargs.get("approximate", "none")
            self.emit(node, "gelu-tanh" if approx == "tanh" else "gelu", self.one_input(node))
        elif t is F.leaky_relu:
            slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope",
                                                                            0.01)
            self.leaky(node, slope, self.one_input(node))
        elif t in ADD_FUNCS:
            if len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
                refuse(node, "an add of other than two tensors")
            self.merge(node, "add", node.args[0], node.args[1], False)
        elif t is torch.cat:
            xs = node.args[0]
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            if len(xs) != 2 or dim != 1:
                refuse(node, f"torch.cat of {len(xs)} tensors along dim {dim}: Strata's "
                       "concat joins two along the channels (dim=1)")
            self.merge(node, "concat", xs[0], xs[1], True)
        elif t in POOL_FUNCS:
            self.pool_call(node, t)
        elif t is F.dropout:
            p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
            self.emit(node, f"dropout({fmt_float(p)})" if p else "dropout",
                      self.one_input(node))
        elif t in FLATTEN_FUNCS:
            self.flatten_call(node)
        elif t is F.interpolate:
            kw = dict(node.kwargs)
            x = self.one_input(node)
            names = ["size", "scale_factor", "mode", "align_corners"]
            for k, v in zip(names, node.args[1:]):
                kw[k] = v
            self.upsample(node, kw.get("scale_factor"), kw.get("size"),
                          kw.get("mode", "nearest"), kw.get("align_corners"), x,
                          self.sample(x))
        else:
            refuse(node, "Strata has no module for it")

    def pool_call(self, node, t):
        """F.max_pool*d and F.avg_pool*d, their arguments as the modules' attributes."""
        name, keys = POOL_FUNCS[t]
        kw = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
              "return_indices": False, "count_include_pad": True, "divisor_override": None}
        kw.update(zip(keys, node.args[1:]))
        kw.update(node.kwargs)
        if "kernel_size" not in kw:
            refuse(node, "a pool without a kernel size")
        kw["stride"] = kw["stride"] or None  # F's stride=[] is the kernel, as None
        m = types.SimpleNamespace(**kw)
        x = self.one_input(node)
        self.pool(node, m, x, self.sample(x), name)

    def flatten_call(self, node):
        start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
        end = node.args[2] if len(node.args) > 2 else node.kwargs.get("end_dim", -1)
        if start != 1 or end != -1:
            refuse(node, f"flatten(start_dim={start}, end_dim={end}): Strata's flattens the "
                   "whole sample (start_dim=1)")
        self.emit(node, "flatten", self.one_input(node))

    def method(self, node):
        if node.target in ACTIVATION_METHODS and len(node.args) == 1:
            self.emit(node, ACTIVATION_METHODS[node.target], self.one_input(node))
        elif node.target == "flatten":
            self.flatten_call(node)
        elif node.target in ("add", "add_") and len(node.args) == 2 and not node.kwargs:
            self.merge(node, "add", node.args[0], node.args[1], False)
        else:
            refuse(node, "Strata has no module for it")


def convert(model, input_shapes, losses=None):
    """(line, tensors) for @model traced with samples of @input_shapes; raises Refused."""
    line, tensors, _ = convert_named(model, input_shapes, losses)
    return line, tensors


def convert_named(model, input_shapes, losses=None):
    """convert()'s (line, tensors) and {safetensors name: @model's own name of the tensor}
    for the tensors taken as they are from a parameter or buffer of @model."""
    model = model.eval()
    gm = torch.fx.symbolic_trace(model)
    gm.graph.eliminate_dead_code()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(input_shapes):
        raise Refused(f"the module takes {len(placeholders)} input(s) and "
                      f"{len(input_shapes)} --input-shape given")
    xs = [torch.zeros((2,) + tuple(s)) for s in input_shapes]
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # ShapeProp prints the trace
            ShapeProp(gm).propagate(*xs)
    except Exception as e:  # the module's own error on inputs of these shapes
        cause = e.__cause__ or e.__context__ or e
        raise Refused(f"the module does not run on samples of shape "
                      f"{[list(s) for s in input_shapes]}: {str(cause).splitlines()[0]}")
    shapes = {n: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
              if isinstance(n.meta.get("tensor_meta"), torch.fx.passes.shape_prop.TensorMetadata)}
    c = Converter(gm, shapes)
    outputs = c.run(placeholders)
    if not c.words:
        raise Refused("the module has no node Strata would run")
    for o in outputs:
        if not isinstance(o, torch.fx.Node) or not isinstance(c.index.get(o), int):
            raise Refused("an output of the module is not a module's output")
    if c.index[outputs[-1]] != len(c.words) - 1 and len(outputs) == 1:
        raise Refused("the module's output is not the last module")
    words = list(c.words)
    if len(outputs) > 1 or losses:
        losses = losses or []
        if len(losses) not in (0, len(outputs)):
            raise Refused(f"{len(losses)} --loss given for {len(outputs)} outputs")
        last = len(words) - 1
        if last not in [c.index[o] for o in outputs]:
            raise Refused("the last module is not one of the module's outputs")
        marks = {}
        for k, o in enumerate(outputs):
            marks.setdefault(c.index[o], []).append(losses[k] if losses else "")
        for i in sorted(marks, reverse=True):
            for loss in reversed(marks[i]):
                words.insert(i + 1, f"output({loss})" if loss else "output")
    inputs = " ".join("input(" + ",".join(str(v) for v in s) + ")" for s in input_shapes)
    return inputs + " " + " ".join(words), c.tensors, c.origin


class OnnxConverter:
    """An ONNX graph (Debian's python3-onnx) walked in its order into the line's modules."""

    ACT = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}

    def __init__(self, model):
        import onnx
        from onnx import numpy_helper
        self.onnx = onnx
        model = onnx.shape_inference.infer_shapes(model)
        self.g = model.graph
        self.init = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                     for t in self.g.initializer}
        for n in self.g.node:  # constants a node holds, as initializers
            if n.op_type == "Constant":
                self.init[n.output[0]] = torch.from_numpy(
                    numpy_helper.to_array(n.attribute[0].t).copy())
        self.shapes = {}
        for v in list(self.g.value_info) + list(self.g.input) + list(self.g.output):
            d = v.type.tensor_type.shape.dim
            self.shapes[v.name] = tuple(x.dim_value if x.HasField("dim_value") else -1
                                        for x in d)
        self.index, self.words, self.tensors, self.last = {}, [], {}, None

    def inputs(self):
        return [i for i in self.g.input if i.name not in self.init]

    def refuse(self, n, what):
        raise Refused(f"node '{n.name or n.output[0]}' (ONNX op {n.op_type}): {what}")

    def attrs(self, n):
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in n.attribute}

    def emit(self, n, word, x, params=None):
        if x not in self.index:
            self.refuse(n, f"reads '{x}', which is not a module's output or an input")
        if x != self.last:
            src = f"from={self.index[x]}"
            word = word[:-1] + "," + src + ")" if word.endswith(")") else f"{word}({src})"
        k = len(self.words)
        self.words.append(word)
        for name, t in (params or {}).items():
            self.tensors[f"layers.{k}.{name}"] = t.to(torch.float32).contiguous()
        self.index[n.output[0]] = k
        self.last = n.output[0]

    def weight(self, n, name):
        if name not in self.init:
            self.refuse(n, f"its weight '{name}' is not a constant of the file")
        return self.init[name]

    def run(self, shapes):
        ins = self.inputs()
        if len(ins) != len(shapes):
            raise Refused(f"the file takes {len(ins)} input(s) and {len(shapes)} "
                          "--input-shape given")
        for k, i in enumerate(ins):
            self.index[i.name] = "input" if len(ins) == 1 else f"input{k}"
            self.shapes[i.name] = (-1,) + tuple(shapes[k])
        self.last = ins[0].name
        for n in self.g.node:
            if n.op_type != "Constant":
                self.node(n, self.attrs(n))
        return [o.name for o in self.g.output]

    def node(self, n, a):
        op, x = n.op_type, n.input[0] if n.input else None
        nd = len(self.shapes.get(x, ())) - 2
        if op in self.ACT:
            self.emit(n, self.ACT[op], x)
        elif op == "LeakyRelu":
            slope = a.get("alpha", 0.01)
            self.emit(n, "relu" if slope == 0 else f"leaky-relu({fmt_float(slope)})", x)
        elif op in ("Dropout", "Identity"):  # no module: what reads it reads its input
            self.index[n.output[0]] = self.index[x]
            if x == self.last:
                self.last = n.output[0]
        elif op == "Flatten":
            if a.get("axis", 1) != 1:
                self.refuse(n, f"axis {a.get('axis')}: Strata's flattens the whole sample")
            self.emit(n, "flatten", x)
        elif op == "Gemm":
            if a.get("transA", 0) or not a.get("transB", 0) or a.get("alpha", 1.0) != 1.0 \
                    or a.get("beta", 1.0) != 1.0 or len(n.input) < 3:
                self.refuse(n, "a Gemm that is not a Linear (x W^T + b)")
            w = self.weight(n, n.input[1])
            self.emit(n, f"linear({w.shape[0]})", x,
                      {"weight": w, "bias": self.weight(n, n.input[2])})
        elif op == "Conv":
            self.conv(n, a, x, nd)
        elif op in ("MaxPool", "AveragePool"):
            self.pool(n, a, x, nd)
        elif op == "BatchNormalization":
            if nd != -1:
                self.refuse(n, "over a sample with a layout: Strata's normalises each feature "
                            "of a flat sample")
            args = []
            if abs(a.get("epsilon", 1e-5) - 1e-5) > 1e-12:
                args.append("eps=" + fmt_float(a["epsilon"]))
            mom = 1.0 - a.get("momentum", 0.9)
            if abs(mom - 0.1) > 1e-7:
                args.append("momentum=" + fmt_float(mom))
            names = ("weight", "bias", "running_mean", "running_var")
            self.emit(n, "batchnorm1d" + (f"({','.join(args)})" if args else ""), x,
                      {k: self.weight(n, i) for k, i in zip(names, n.input[1:5])})
        elif op in ("Add", "Concat"):
            if len(n.input) != 2 or (op == "Concat" and a.get("axis") != 1):
                self.refuse(n, "Strata's merges two tensors (Concat: along axis 1)")
            p, q = n.input
            if p == self.last and q != self.last:
                other = q
            elif q == self.last and op == "Add":
                other = p
            else:
                self.refuse(n, "Strata's merges the module just before it with an earlier one")
            if other not in self.index:
                self.refuse(n, f"merges '{other}', which is not a module's output or an input")
            self.emit(n, f"{op.lower()}(from={self.index[other]})", self.last)
        else:
            self.refuse(n, "Strata has no module for it")

    def conv(self, n, a, x, nd):
        if a.get("group", 1) != 1 or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            self.refuse(n, "groups or auto_pad: Strata's convolutions have one group and "
                        "explicit padding")
        w = self.weight(n, n.input[1])
        pads = a.get("pads", [0] * 2 * nd)
        if pads[:nd] != pads[nd:]:
            self.refuse(n, f"pads {pads}: Strata's pad both sides alike")
        args = [str(w.shape[0]), dims(a["kernel_shape"], nd)]
        for key, word, dflt in (("strides", "stride", "1"), ("dilations", "dilation", "1")):
            if key in a and dims(a[key], nd) != dflt:
                args.append(f"{word}=" + dims(a[key], nd))
        if dims(pads[:nd], nd) != "0":
            args.append("padding=" + dims(pads[:nd], nd))
        params = {"weight": w}
        if len(n.input) > 2 and n.input[2]:
            params["bias"] = self.weight(n, n.input[2])
        else:
            args.append("bias=false")
        self.emit(n, f"conv{nd}d({','.join(args)})", x, params)

    def pool(self, n, a, x, nd):
        word = ("maxpool" if n.op_type == "MaxPool" else "avgpool") + f"{nd}d"
        pads = a.get("pads", [0] * 2 * nd)
        if a.get("ceil_mode", 0) or pads[:nd] != pads[nd:] or len(n.output) > 1:
            self.refuse(n, "ceil_mode, uneven pads or indices: Strata's pools floor, pad both "
                        "sides alike and give values")
        if word.startswith("avg") and any(pads) and not a.get("count_include_pad", 0):
            self.refuse(n, "count_include_pad=0 with padding: Strata's divides by the kernel")
        k = dims(a["kernel_shape"], nd)
        args = [k]
        stride = dims(a.get("strides", [1] * nd), nd)
        if stride != k:
            args.append("stride=" + stride)
        if dims(pads[:nd], nd) != "0":
            args.append("padding=" + dims(pads[:nd], nd))
        if word.startswith("max") and dims(a.get("dilations", [1] * nd), nd) != "1":
            args.append("dilation=" + dims(a["dilations"], nd))
        self.emit(n, f"{word}({','.join(args)})", x)


def convert_onnx(path, input_shapes):
    """(line, tensors) for the ONNX file @path; raises Refused."""
    try:
        import onnx
    except ImportError:
        raise Refused(f"{path}: reading ONNX needs Debian's python3-onnx")
    try:
        model = onnx.load(path)
    except Exception as e:
        raise Refused(f"{path}: not an ONNX file ({str(e).splitlines()[0] if str(e) else e})")
    c = OnnxConverter(model)
    outputs = c.run(input_shapes)
    if not c.words:
        raise Refused("the file has no node Strata would run")
    if len(outputs) != 1 or c.index.get(outputs[0]) != len(c.words) - 1:
        raise Refused("the file's output is not its last module (one output is read)")
    inputs = " ".join("input(" + ",".join(str(v) for v in s) + ")" for s in input_shapes)
    return inputs + " " + " ".join(c.words), c.tensors


def write_safetensors(path, tensors, meta):
    """@tensors (name -> f32 tensor) as a safetensors file, with the standard library."""
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        raw = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_module(path, expr):
    spec = importlib.util.spec_from_file_location("strata_user_model", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(mod)
    model = eval(expr, vars(mod))  # the user's own expression, in the user's own file
    if not isinstance(model, nn.Module):
        raise Refused(f"'{expr}' is a {type(model).__name__}, not a torch.nn.Module")
    return model


def parse_shape(text):
    try:
        s = tuple(int(v) for v in text.split(","))
    except ValueError:
        s = ()
    if not 1 <= len(s) <= 4 or any(v <= 0 for v in s):
        raise argparse.ArgumentTypeError(f"'{text}' is not C[,D][,H][,W] of positive counts")
    return s


def main():
    ap = argparse.ArgumentParser(prog="strata-from-torch", description=__doc__.split("\n")[0])
    ap.add_argument("file", help="the Python file that defines the module, or an .onnx file")
    ap.add_argument("expr", nargs="?", help="an expression, in FILE's namespace, that builds "
                    "it (none for an .onnx file)")
    ap.add_argument("--input-shape", action="append", type=parse_shape, required=True,
                    help="a sample's shape without the batch, C[,D][,H][,W]; once per input")
    ap.add_argument("--line", required=True, help="where the model line goes ('-': stdout)")
    ap.add_argument("--weights", required=True, help="the safetensors file of its weights")
    ap.add_argument("--loss", action="append", help="each output's loss (several outputs)")
    o = ap.parse_args()
    try:
        if not os.path.isfile(o.file):
            raise Refused(f"{o.file}: not a file")
        if o.file.endswith(".onnx"):
            line, tensors = convert_onnx(o.file, o.input_shape)
        elif o.expr is None:
            raise Refused("an expression that builds the module is needed (FILE.py EXPR)")
        else:
            line, tensors = convert(load_module(o.file, o.expr), o.input_shape, o.loss)
    except Refused as e:
        print(f"strata-from-torch: {e}", file=sys.stderr)
        return 2
    write_safetensors(o.weights, tensors, {"format": "pt", "producer": "strata-from-torch",
                                           "strata.model": line})
    if o.line == "-":
        print(line)
    else:
        with open(o.line, "w") as f:
            f.write(line + "\n")
        print(f"strata-from-torch: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
