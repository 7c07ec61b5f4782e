#!/usr/bin/env python3
"""Writes the per-op conformance cases under tests/data/ops/ with NumPy alone.

Each case is a small rml-graph model, <case>.json + <case>.safetensors. The safetensors file holds
the graph's stored constants (const.<id>), its inputs (input.<k>) and NumPy's expected outputs
(expected.<k>), computed in float64 and rounded to float32. The graph's metadata says how to
compare: "rtol"/"atol" (|got - want| <= atol + rtol * |want|; integer and bool outputs compare
exactly, and 16-bit float outputs bit for bit when both are 0), or
"error": a status code name the run must fail with (data the checker cannot see).

Run: /usr/bin/python3 tests/data/ops/gen_ops.py  (deterministic; rewrites every case)
"""
import json
import math
import os

import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from gen_fixtures import write_safetensors  # noqa: E402  (tests/data/gen_fixtures.py)
rng = np.random.default_rng(20260)

ELEMENTWISE = {"rtol": "1e-6", "atol": "1e-6"}


def tol_k(k):
    """Reductions and products: 1e-5 * sqrt(K), relative and absolute."""
    t = "%.3g" % (1e-5 * math.sqrt(max(k, 1)))
    return {"rtol": t, "atol": t}


def dtype_name(a):
    # uint16 arrays hold bf16 bit patterns (NumPy has no bfloat16; see gen_fixtures.py).
    return {np.dtype("float32"): "f32", np.dtype("int32"): "i32", np.dtype("float16"): "f16",
            np.dtype("uint16"): "bf16", np.dtype("int64"): "i64", np.dtype("bool"): "bool"}[a.dtype]


class Case:
    """Builds one graph: inputs, constants and nodes, each value with the type NumPy gives it."""

    def __init__(self, name, meta=None):
        self.name, self.meta = name, dict(meta or ELEMENTWISE)
        self.values, self.inputs, self.outputs, self.constants, self.nodes = [], [], [], [], []
        self.feeds, self.stored, self.arrays = [], [], {}

    def _value(self, array, name=""):
        v = {"dtype": dtype_name(array), "shape": list(array.shape)}
        if name:
            v["name"] = name
        self.values.append(v)
        vid = len(self.values) - 1
        self.arrays[vid] = array
        return vid

    def input(self, array, name):
        vid = self._value(array, name)
        self.inputs.append(vid)
        self.feeds.append(("input.%d" % (len(self.inputs) - 1), array))
        return vid

    def const(self, array):
        vid = self._value(array)
        self.constants.append({"value": vid, "tensor": "const.%d" % vid})
        self.stored.append(("const.%d" % vid, array))
        return vid

    def node(self, op, inputs, result, attrs=None, name=""):
        vid = self._value(result)
        n = {"op": op, "inputs": list(inputs), "outputs": [vid]}
        if name:
            n["name"] = name
        if attrs:
            n["attrs"] = attrs
        self.nodes.append(n)
        return vid

    def output(self, vid):
        self.outputs.append(vid)

    def write(self):
        graph = {"format": "rml-graph", "version": 1, "producer": "rml tests/data/ops/gen_ops.py (numpy)",
                 "values": self.values, "inputs": self.inputs, "outputs": self.outputs,
                 "constants": self.constants, "nodes": self.nodes, "metadata": self.meta}
        with open(os.path.join(HERE, self.name + ".json"), "w") as f:
            json.dump(graph, f, indent=1)
            f.write("\n")
        expected = [("expected.%d" % k, self.arrays[v]) for k, v in enumerate(self.outputs)]
        write_safetensors(os.path.join(HERE, self.name + ".safetensors"), self.stored + self.feeds + expected)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32)


def randn(*shape):
    return f32(rng.standard_normal(shape))


def one_op(name, op, inputs, result, attrs=None, meta=None, consts=()):
    """A case with one node; inputs listed in `consts` (by position) are stored constants."""
    c = Case(name, meta)
    ids = []
    for i, a in enumerate(inputs):
        ids.append(c.const(a) if i in consts else c.input(a, "x%d" % i))
    c.output(c.node(op, ids, result, attrs))
    c.write()


# ---- unary ----
erf = np.vectorize(math.erf)
UNARY = {
    "neg": lambda x: -x, "abs": np.abs, "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "erf": erf, "gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)), "sin": np.sin, "cos": np.cos,
}
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


def unary_cases():
    for op, fn in UNARY.items():
        x = randn(3, 5) * f32(3)
        if op in POSITIVE:
            x = np.abs(x) + f32(0.1)
        one_op("unary_" + op, op, [x], f32(fn(x.astype(np.float64))))
    x = randn(2, 7) * f32(3)
    xd = x.astype(np.float64)
    tanh_gelu = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    one_op("unary_gelu_tanh", "gelu", [x], f32(tanh_gelu), {"approximate": "tanh"})
    one_op("unary_gelu_none", "gelu", [x], f32(UNARY["gelu"](xd)), {"approximate": "none"})
    one_op("unary_rank0", "exp", [f32(0.5)], f32(np.exp(0.5)))
    one_op("unary_empty", "relu", [f32(np.zeros((0, 3)))], f32(np.zeros((0, 3))))


# ---- binary and where ----
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
    "equal": lambda a, b: (a == b).astype(np.float64), "less": lambda a, b: (a < b).astype(np.float64),
    "greater": lambda a, b: (a > b).astype(np.float64),
}
BROADCASTS = {
    "same": ((3, 4), (3, 4)), "scalar": ((3, 4), ()), "scalar_left": ((), (2, 3)), "row": ((3, 4), (4,)),
    "col": ((3, 4), (3, 1)), "general": ((2, 1, 4), (3, 1)), "rank0": ((), ()), "empty": ((0, 4), (4,)),
    "outer": ((4, 1), (1, 5)), "middle": ((2, 3, 4), (3, 1)),
}


def operand(shape, op):
    if op in ("equal", "less", "greater"):
        return f32(rng.integers(-2, 3, size=shape))  # ties on purpose
    if op == "pow":
        return f32(rng.uniform(0.5, 2.0, size=shape))
    if op == "div":
        return f32(rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1, 1], size=shape))
    return randn(*shape)


def binary_cases():
    for op, fn in BINARY.items():
        a, b = operand((3, 4), op), operand((4,), op)
        one_op("binary_" + op, op, [a, b], f32(fn(a.astype(np.float64), b.astype(np.float64))))
    for kind, (sa, sb) in BROADCASTS.items():
        a, b = randn(*sa), randn(*sb)
        one_op("broadcast_" + kind, "add" if kind != "general" else "mul", [a, b],
               f32((a.astype(np.float64) + b) if kind != "general" else a.astype(np.float64) * b))
    cond = f32(rng.integers(0, 2, size=(2, 1)))
    a, b = randn(2, 3), randn()
    one_op("where", "where", [cond, a, b], f32(np.where(cond != 0, a, b)))
    c3 = f32(rng.integers(0, 2, size=(4,)))
    a3, b3 = randn(3, 1), randn(3, 4)
    one_op("where_general", "where", [c3, a3, b3], f32(np.where(c3 != 0, a3, b3)))


# ---- matmul ----
def matmul_cases():
    shapes = {
        "2d": ((2, 3), (3, 4)), "vec_vec": ((5,), (5,)), "vec_mat": ((3,), (2, 3, 4)),
        "mat_vec": ((2, 3, 4), (4,)), "batch_broadcast": ((2, 1, 3, 4), (5, 4, 2)),
        "batch_shared_rhs": ((4, 3, 5), (5, 2)), "batch_shared_lhs": ((3, 5), (4, 5, 2)),
        "big": ((17, 33), (33, 40)), "k0": ((2, 0), (0, 3)),
    }
    for name, (sa, sb) in shapes.items():
        a, b = randn(*sa), randn(*sb)
        k = sa[-1]
        one_op("matmul_" + name, "matmul", [a, b], f32(np.matmul(a.astype(np.float64), b)), meta=tol_k(k))
    a, w = randn(2, 12), randn(12, 16)
    one_op("matmul_const_rhs", "matmul", [a, w], f32(a.astype(np.float64) @ w), meta=tol_k(12), consts=(1,))
    a, w = randn(3, 7, 33), randn(33, 20)  # 21 rows after folding the batch: packed weights
    one_op("matmul_const_rhs_packed", "matmul", [a, w], f32(a.astype(np.float64) @ w), meta=tol_k(33), consts=(1,))


# ---- conv2d and pools ----
def conv_ref(x, w, bias, strides, pads, dilations, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]))
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    ekh, ekw = dilations[0] * (kh - 1) + 1, dilations[1] * (kw - 1) + 1
    oh = (xp.shape[2] - ekh) // strides[0] + 1
    ow = (xp.shape[3] - ekw) // strides[1] + 1
    og = o // groups
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for i in range(oh):
            for j in range(ow):
                y0, x0 = i * strides[0], j * strides[1]
                win = xp[:, g * cg:(g + 1) * cg, y0:y0 + ekh:dilations[0], x0:x0 + ekw:dilations[1]]
                y[:, g * og:(g + 1) * og, i, j] = np.einsum("nchw,ochw->no", win, w[g * og:(g + 1) * og])
    if bias is not None:
        y += bias.astype(np.float64)[None, :, None, None]
    return y


def conv_cases():
    cases = {
        "default": dict(x=(1, 2, 5, 5), w=(3, 2, 3, 3), attrs=None),
        "pad_bias": dict(x=(2, 3, 6, 5), w=(4, 3, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "strided_asym": dict(x=(1, 2, 7, 8), w=(3, 2, 3, 2), attrs={"strides": [2, 3], "pads": [0, 1, 2, 0]}),
        "dilated": dict(x=(1, 2, 9, 9), w=(2, 2, 3, 3), attrs={"dilations": [2, 3], "pads": [2, 1, 2, 1]}),
        "grouped": dict(x=(1, 4, 6, 6), w=(6, 2, 3, 3), attrs={"groups": 2, "pads": [1, 1, 1, 1]}, bias=True),
        "depthwise": dict(x=(2, 3, 6, 7), w=(3, 1, 3, 3),
                          attrs={"groups": 3, "pads": [1, 2, 1, 0], "strides": [1, 2]}, bias=True),
        "depthwise_dilated": dict(x=(1, 2, 7, 7), w=(2, 1, 3, 3), attrs={"groups": 2, "dilations": [2, 2]}),
        "pointwise": dict(x=(2, 4, 3, 5), w=(6, 4, 1, 1), attrs={}, bias=True),
        "pointwise_strided": dict(x=(1, 3, 5, 5), w=(2, 3, 1, 1), attrs={"strides": [2, 2]}),
    }
    for name, spec in cases.items():
        attrs = spec["attrs"] or {}
        x, w = randn(*spec["x"]), randn(*spec["w"])
        inputs = [x, w]
        bias = randn(spec["w"][0]) if spec.get("bias") else None
        if bias is not None:
            inputs.append(bias)
        y = conv_ref(x, w, bias, attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0]),
                     attrs.get("dilations", [1, 1]), attrs.get("groups", 1))
        k = spec["w"][1] * spec["w"][2] * spec["w"][3]
        one_op("conv2d_" + name, "conv2d", inputs, f32(y), spec["attrs"], meta=tol_k(k), consts=(1, 2))


def conv_blocked_cases():
    """Convolutions big enough for the executor's packed path to tile output positions, block the
    depth and split output channels across threads (each holds enough work for the executor to split
    it at 2 threads) (with its own generator, so adding them left
    every other case's data unchanged)."""
    r = np.random.default_rng(20261)
    cases = {
        "tiled": dict(x=(1, 48, 14, 14), w=(40, 48, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "deep": dict(x=(1, 300, 4, 4), w=(10, 300, 3, 3), attrs={"pads": [1, 0, 1, 0]}),
        "few_positions": dict(x=(1, 128, 5, 5), w=(72, 128, 3, 3), attrs={"pads": [1, 1, 1, 1], "strides": [2, 1]},
                              bias=True),
        "pointwise_wide": dict(x=(1, 40, 12, 12), w=(24, 40, 1, 1), attrs={}, bias=True),
        "grouped_dilated": dict(x=(2, 24, 9, 9), w=(30, 8, 3, 3), attrs={"groups": 3, "dilations": [2, 1],
                                                                           "pads": [2, 1, 2, 1]}),
        # One or two output positions per image: the channels become the GEMM's columns.
        "single_position": dict(x=(2, 256, 3, 3), w=(128, 256, 3, 3), attrs={}, bias=True),
        "two_positions_grouped": dict(x=(1, 256, 3, 4), w=(256, 128, 3, 3), attrs={"groups": 2, "pads": [0, 0, 0, 0]}),
        # Depthwise: 40 channels interleaved 16 at a time (16 + 16 + 8); rows of 40 and 35 outputs run row by row
        # (the second with its stride-2 rows split into even and odd columns).
        "depthwise_lanes": dict(x=(2, 40, 12, 12), w=(40, 1, 3, 3), attrs={"groups": 40, "pads": [1, 1, 1, 1]},
                                bias=True),
        "depthwise_wide_rows": dict(x=(1, 2, 3, 40), w=(2, 1, 3, 3), attrs={"groups": 2, "pads": [0, 1, 0, 1]},
                                    bias=True),
        "depthwise_wide_strided": dict(x=(1, 2, 4, 70), w=(2, 1, 3, 3),
                                       attrs={"groups": 2, "pads": [1, 1, 1, 1], "strides": [1, 2]}),
        # Too few positions for a tile per thread at 2 threads: the threads split the output channels
        # over one shared im2col matrix. Which plane does that depends on the GEMM's panel width
        # (kernels/sgemm.hpp): 20 positions with SSE's 8-float panels, 42 with AVX2's 16, 81 with
        # AVX-512's 32; on the other widths the same cases take several tiles or the turned-around product.
        "split_channels_sse": dict(x=(1, 48, 4, 5), w=(32, 48, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "split_channels_avx2": dict(x=(1, 24, 6, 7), w=(32, 24, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "split_channels_avx512": dict(x=(1, 16, 9, 9), w=(32, 16, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        # Strided convolutions that read the padded input split by stride phase (no im2col): a 7x7
        # stride-2 stem over odd extents, a 3x3 stride 2 with uneven pads over two images, strides (2, 1),
        # and a 5x5 stride 3 (nine phases, each read by some tap).
        "phases_stem": dict(x=(1, 3, 17, 45), w=(16, 3, 7, 7), attrs={"pads": [3, 3, 3, 3], "strides": [2, 2]},
                            bias=True),
        "phases_3x3": dict(x=(2, 8, 20, 31), w=(24, 8, 3, 3), attrs={"pads": [1, 1, 0, 1], "strides": [2, 2]},
                           bias=True),
        "phases_2x1": dict(x=(1, 6, 11, 32), w=(32, 6, 3, 3), attrs={"pads": [1, 1, 1, 1], "strides": [2, 1]}),
        "phases_stride3": dict(x=(1, 4, 26, 50), w=(20, 4, 5, 5), attrs={"pads": [2, 2, 1, 2], "strides": [3, 3]},
                               bias=True),
        # Turned-around products that read the padded input (or a 1x1 convolution's input) in place, a
        # row of output positions per tile: rows longer than a tile (AVX-512's 12 rows, SSE's and AVX2's
        # 6), channels that end inside a panel, stride 2, a 1x1 convolution; each splits at 2 threads.
        "direct_rows_avx512": dict(x=(1, 40, 3, 20), w=(72, 40, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "direct_rows_sse": dict(x=(1, 40, 2, 7), w=(60, 40, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True),
        "direct_pointwise": dict(x=(1, 256, 2, 5), w=(104, 256, 1, 1), attrs={}, bias=True),
        "direct_strided": dict(x=(1, 32, 9, 13), w=(48, 32, 3, 3), attrs={"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        # Depthwise on short rows, 16 channels interleaved: rows whose positions fill whole SIMD transposes
        # and a last one that overlaps (21 = 16 + 5, 2 x 8 + 5, 5 x 4 + 1), a 5x5 stride 2, a dilated
        # kernel over 16 + 4 channels.
        "depthwise_lanes_blocks": dict(x=(1, 48, 21, 21), w=(48, 1, 3, 3), attrs={"groups": 48, "pads": [1, 1, 1, 1]},
                                       bias=True),
        "depthwise_lanes_s2_5x5": dict(x=(1, 32, 30, 38), w=(32, 1, 5, 5),
                                       attrs={"groups": 32, "pads": [2, 2, 2, 2], "strides": [2, 2]}, bias=True),
        "depthwise_lanes_dilated": dict(x=(2, 20, 23, 25), w=(20, 1, 3, 3),
                                        attrs={"groups": 20, "pads": [2, 1, 2, 3], "dilations": [2, 2]}),
        # A residual add between the convolution and the relu, fused into the epilogue (a second input
        # of the output's shape; "left" puts it first in the add): over position tiles of the padded
        # input, a small plane (turned around with AVX-512 and AVX2), a 1x1 convolution, a strided 1x1
        # (im2col), two images; and a residual that broadcasts along channels, which stays an add.
        "residual_tiles": dict(x=(1, 24, 18, 18), w=(24, 24, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True,
                               residual="right"),
        "residual_small_plane": dict(x=(1, 64, 5, 5), w=(72, 64, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True,
                                     residual="left"),
        "residual_pointwise": dict(x=(2, 32, 10, 10), w=(40, 32, 1, 1), attrs={}, residual="right"),
        "residual_strided": dict(x=(1, 16, 12, 12), w=(32, 16, 1, 1), attrs={"strides": [2, 2]}, bias=True,
                                 residual="left"),
        "residual_broadcast": dict(x=(1, 24, 18, 18), w=(24, 24, 3, 3), attrs={"pads": [1, 1, 1, 1]}, bias=True,
                                   residual="channel"),
        # Interleaved depthwise rows narrower than a packet: 7 wide (quarter-packet transposes with
        # AVX-512, 4-position blocks, the last overlapping), 7 wide at stride 2, and 3 wide (element by
        # element, one position at a time); a 5x5 kernel at stride 1 over 12-wide rows.
        "depthwise_lanes_7x7": dict(x=(1, 32, 7, 7), w=(32, 1, 3, 3), attrs={"groups": 32, "pads": [1, 1, 1, 1]},
                                    bias=True),
        "depthwise_lanes_s2_7": dict(x=(1, 16, 14, 14), w=(16, 1, 3, 3),
                                     attrs={"groups": 16, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        "depthwise_lanes_3": dict(x=(1, 16, 3, 3), w=(16, 1, 3, 3), attrs={"groups": 16, "pads": [1, 1, 1, 1]},
                                  bias=True),
        "depthwise_lanes_5x5": dict(x=(1, 16, 12, 12), w=(16, 1, 5, 5), attrs={"groups": 16, "pads": [2, 2, 2, 2]}),
        # Turned-around products whose Y^T goes back by 4 x 4 blocks (6 positions) and by 8 x 8 (10).
        "transposed_6": dict(x=(1, 64, 2, 3), w=(40, 64, 1, 1), attrs={}, bias=True),
        "transposed_10": dict(x=(1, 48, 2, 5), w=(36, 48, 1, 1), attrs={}, bias=True),
    }
    for name, spec in cases.items():
        attrs = spec["attrs"]
        x, w = f32(r.standard_normal(spec["x"])), f32(r.standard_normal(spec["w"]))
        bias = f32(r.standard_normal(spec["w"][0])) if spec.get("bias") else None
        y = conv_ref(x, w, bias, attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0]),
                     attrs.get("dilations", [1, 1]), attrs.get("groups", 1))
        k = spec["w"][1] * spec["w"][2] * spec["w"][3]
        c = Case("conv2d_blocked_" + name, tol_k(k))
        ids = [c.input(x, "x"), c.const(w)] + ([c.const(bias)] if bias is not None else [])
        conv = c.node("conv2d", ids, f32(y), attrs or None)
        side = spec.get("residual")
        if side:
            res = f32(r.standard_normal((1, y.shape[1], 1, 1) if side == "channel" else y.shape))
            y = y + res.astype(np.float64)
            ri = c.input(res, "r")
            conv = c.node("add", [ri, conv] if side == "left" else [conv, ri], f32(y))
        c.output(c.node("relu", [conv], f32(np.maximum(y, 0))))  # fused into the conv's epilogue
        c.write()

def winograd_cases():
    """3x3 stride-1 convolutions that take the Winograd F(4, 3) path (kernels/winograd.hpp): planes
    that are not multiples of the 4x4 tile, pads 0, 1, 2 and asymmetric, batches, channel counts that
    are not multiples of the SIMD width; without an epilogue, with a bias, with a fused relu or
    relu6; channels above the path's thresholds. "split" has tiles enough for each of 2 threads to
    take a range, the others share each pass's stages at 2 threads; "chunks" takes several passes.
    Their own generator."""
    r = np.random.default_rng(20266)
    cases = {
        "odd_pad1": dict(x=(2, 49, 13, 11), w=(51, 49), pads=[1, 1, 1, 1], bias=True, act="relu"),
        "pad0": dict(x=(1, 50, 18, 15), w=(53, 50), pads=[0, 0, 0, 0]),
        "pad2": dict(x=(2, 48, 9, 10), w=(50, 48), pads=[2, 2, 2, 2], bias=True),
        "asym_pad": dict(x=(1, 52, 14, 13), w=(49, 52), pads=[0, 2, 1, 1], bias=True, act="relu6"),
        "split": dict(x=(2, 49, 22, 20), w=(50, 49), pads=[1, 1, 1, 1], bias=True, act="relu"),
        "chunks": dict(x=(2, 48, 24, 26), w=(48, 48), pads=[1, 1, 1, 1]),
        # A residual add before the activation, fused into the output transform's epilogue.
        "residual": dict(x=(1, 48, 20, 20), w=(48, 48), pads=[1, 1, 1, 1], bias=True, act="relu", residual="right"),
        "residual_left": dict(x=(2, 48, 13, 11), w=(56, 48), pads=[1, 1, 1, 1], act="relu", residual="left"),
        # Rows of more than 16 tiles at either tile size, so transforms run over full groups of 16
        # tiles (the last of F(4, 3)'s reads input column 65 of its group) and a short group after.
        "wide": dict(x=(1, 48, 12, 70), w=(48, 48), pads=[1, 1, 1, 1], bias=True),
    }
    for name, spec in cases.items():
        o, ci = spec["w"]
        x, w = f32(r.standard_normal(spec["x"])), f32(r.standard_normal((o, ci, 3, 3)))
        bias = f32(r.standard_normal(o)) if spec.get("bias") else None
        y = conv_ref(x, w, bias, [1, 1], spec["pads"], [1, 1], 1)
        c = Case("conv2d_winograd_" + name, tol_k(ci * 9))
        ids = [c.input(x, "x"), c.const(w)] + ([c.const(bias)] if bias is not None else [])
        out = c.node("conv2d", ids, f32(y), {"pads": spec["pads"]})
        side = spec.get("residual")
        if side:
            res = f32(r.standard_normal(y.shape))
            y = y + res.astype(np.float64)
            ri = c.input(res, "r")
            out = c.node("add", [ri, out] if side == "left" else [out, ri], f32(y))
        act = spec.get("act")
        if act:  # fused into the conv's epilogue
            y = np.maximum(y, 0)
            out = c.node("relu", [out], f32(y))
        if act == "relu6":
            out = c.node("minimum", [out, c.const(f32(6.0))], f32(np.minimum(y, 6)))
        c.output(out)
        c.write()


def depthwise_row_cases():
    """Depthwise convolutions whose rows are long enough to run through registers 16 outputs at a
    time (dilated; stride 3 with a wide kernel; planes larger than 16K floats, stride 1 and 2), and one
    stride too large for that path."""
    r = np.random.default_rng(20264)
    cases = {
        "rows_dilated": dict(x=(1, 3, 9, 37), k=(3, 3), attrs={"groups": 3, "dilations": [2, 3], "pads": [2, 3, 1, 2]}),
        "rows_stride3": dict(x=(1, 2, 7, 100), k=(3, 5), attrs={"groups": 2, "strides": [2, 3], "pads": [1, 2, 1, 2]}),
        "large_plane": dict(x=(1, 1, 130, 130), k=(3, 3), attrs={"groups": 1, "pads": [1, 1, 1, 1]}),
        # MobileNet's stride-2 shape: a padded plane larger than the 64 KB stack buffer this path had.
        "large_plane_stride2": dict(x=(1, 2, 120, 120), k=(3, 3),
                                    attrs={"groups": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        # A stride past DepthwiseRows::kMaxStride: row by row through memory (depthwise_plane).
        "plane_stride9": dict(x=(1, 2, 10, 200), k=(3, 3), attrs={"groups": 2, "strides": [1, 9], "pads": [1, 1, 1, 1]}),
        # The unrolled 3x3 and 5x5 kernels: blocks of 8 rows (the last overlapping the one before), a
        # plane under one block (row by row), even and odd left pads at stride 2, a stride-2 row too
        # short for one 16-pair block of the even/odd split.
        "rows_5x5": dict(x=(1, 3, 13, 40), k=(5, 5), attrs={"groups": 3, "pads": [2, 2, 2, 2]}),
        "rows_5x5_s2": dict(x=(1, 3, 23, 75), k=(5, 5), attrs={"groups": 3, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
        "rows_3x3_s2_short": dict(x=(1, 2, 50, 31), k=(3, 3), attrs={"groups": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        "rows_3x3_s2_even_pad": dict(x=(2, 2, 35, 66), k=(3, 3),
                                     attrs={"groups": 2, "strides": [2, 2], "pads": [0, 0, 1, 1]}),
        "rows_3x3_s2_few": dict(x=(1, 2, 9, 70), k=(3, 3), attrs={"groups": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        # Stride 1 read in place (AVX-512 builds; planes too large for the interleaved path): a row
        # of one run, masked at both ends (90 rows: a padded plane past DepthwiseLanes); pads wider
        # than the kernel reaches, so that whole rows and a run's first lanes read zeros; no padding
        # (no masked run); pads that differ per side.
        "in_place_one_run": dict(x=(1, 2, 90, 16), k=(3, 3), attrs={"groups": 2, "pads": [1, 1, 1, 1]}),
        "in_place_wide_pads": dict(x=(1, 2, 12, 33), k=(3, 3), attrs={"groups": 2, "pads": [3, 3, 2, 4]}),
        "in_place_5x5_unpadded": dict(x=(1, 2, 20, 50), k=(5, 5), attrs={"groups": 2, "pads": [0, 0, 0, 0]}),
        "in_place_5x5_uneven": dict(x=(2, 3, 9, 41), k=(5, 5), attrs={"groups": 3, "pads": [2, 1, 3, 4]}),
        # ... and at stride 2, where each pair of loads serves two taps: wide pads, an odd width.
        "in_place_s2_wide_pads": dict(x=(1, 2, 21, 75), k=(3, 3),
                                      attrs={"groups": 2, "strides": [2, 2], "pads": [3, 3, 2, 4]}),
        "in_place_5x5_s2_odd": dict(x=(1, 3, 37, 67), k=(5, 5),
                                    attrs={"groups": 3, "strides": [2, 2], "pads": [2, 1, 2, 2]}),
        # 3 x 3 rows of 16 to 31 outputs at stride 1, which read in place rather than interleaved: two
        # runs, the second overlapping the first (MobileNetV2's 28 x 28 planes), and 19 outputs a row
        # with pads that differ per side.
        "in_place_28": dict(x=(1, 3, 28, 28), k=(3, 3), attrs={"groups": 3, "pads": [1, 1, 1, 1]}),
        "in_place_19_uneven": dict(x=(2, 2, 11, 19), k=(3, 3), attrs={"groups": 2, "pads": [0, 2, 1, 0]}),
    }
    for name, spec in cases.items():
        attrs = spec["attrs"]
        c = spec["x"][1]
        x, w, bias = f32(r.standard_normal(spec["x"])), f32(r.standard_normal((c, 1) + spec["k"])), f32(r.standard_normal(c))
        y = conv_ref(x, w, bias, attrs.get("strides", [1, 1]), attrs["pads"], attrs.get("dilations", [1, 1]), c)
        one_op("conv2d_depthwise_" + name, "conv2d", [x, w, bias], f32(y), attrs, meta=tol_k(spec["k"][0] * spec["k"][1]),
               consts=(1, 2))


def softmax_chunked_cases():
    """softmax along a non-last axis whose inner extent spans several of the kernel's lane chunks."""
    r = np.random.default_rng(20262)
    x = f32(r.standard_normal((2, 5, 300)) * 4)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(axis=1, keepdims=True))
    one_op("softmax_axis1_wide_inner", "softmax", [x], f32(e / e.sum(axis=1, keepdims=True)), {"axis": 1},
           meta=tol_k(5))


def pool_ref(x, kernel, strides, pads, mode, count_include_pad=True):
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((n, c, h + pads[0] + pads[2], w + pads[1] + pads[3]), fill)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    ones = np.zeros(xp.shape[2:])
    ones[pads[0]:pads[0] + h, pads[1]:pads[1] + w] = 1
    oh = (xp.shape[2] - kernel[0]) // strides[0] + 1
    ow = (xp.shape[3] - kernel[1]) // strides[1] + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * strides[0]:i * strides[0] + kernel[0], j * strides[1]:j * strides[1] + kernel[1]]
            if mode == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = kernel[0] * kernel[1] if count_include_pad else ones[
                    i * strides[0]:i * strides[0] + kernel[0], j * strides[1]:j * strides[1] + kernel[1]].sum()
                y[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return y


def pool_cases():
    x = randn(2, 3, 7, 6)
    one_op("max_pool2d_default_strides", "max_pool2d", [x], f32(pool_ref(x, [2, 2], [2, 2], [0] * 4, "max")),
           {"kernel": [2, 2]})
    one_op("max_pool2d_padded", "max_pool2d", [x], f32(pool_ref(x, [3, 3], [2, 1], [1, 1, 1, 0], "max")),
           {"kernel": [3, 3], "strides": [2, 1], "pads": [1, 1, 1, 0]})
    one_op("avg_pool2d_include_pad", "avg_pool2d", [x], f32(pool_ref(x, [3, 2], [2, 2], [1, 0, 1, 1], "avg")),
           {"kernel": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}, meta=tol_k(6))
    one_op("avg_pool2d_exclude_pad", "avg_pool2d", [x],
           f32(pool_ref(x, [3, 3], [1, 1], [1, 1, 1, 1], "avg", False)),
           {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "count_include_pad": False}, meta=tol_k(9))
    one_op("avg_pool2d_default", "avg_pool2d", [x], f32(pool_ref(x, [2, 3], [2, 3], [0] * 4, "avg")),
           {"kernel": [2, 3]}, meta=tol_k(6))


# ---- reductions, softmax, argmax ----
def reduce_cases():
    x = randn(2, 3, 4, 5)
    xd = x.astype(np.float64)
    fns = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
    specs = {
        "axis1_keepdims": ({"axes": [1], "keepdims": True}, (1,), True),
        "last": ({"axes": [-1]}, (3,), False),
        "all_default": (None, None, False),
        "empty_axes": ({"axes": []}, None, False),
        "split_axes": ({"axes": [0, 2]}, (0, 2), False),
        "split_keepdims": ({"axes": [1, -1], "keepdims": True}, (1, 3), True),
        "inner": ({"axes": [0]}, (0,), False),
    }
    for op, fn in fns.items():
        for name, (attrs, axes, keep) in specs.items():
            y = fn(xd, axis=axes, keepdims=keep)
            count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
            one_op("%s_%s" % (op, name), op, [x], f32(y), attrs, meta=tol_k(count))
    one_op("sum_rank0", "sum", [f32(2.5)], f32(2.5), meta=tol_k(1))
    one_op("sum_empty_axis", "sum", [f32(np.zeros((2, 0)))], f32(np.zeros(2)), {"axes": [1]}, meta=tol_k(1))

    def softmax(v, axis):
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    s = randn(3, 4, 5) * f32(10)
    one_op("softmax_default", "softmax", [s], f32(softmax(s.astype(np.float64), -1)), meta=tol_k(5))
    one_op("softmax_axis0", "softmax", [s], f32(softmax(s.astype(np.float64), 0)), {"axis": 0}, meta=tol_k(3))
    big = f32([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1001.0]])
    one_op("softmax_stable", "softmax", [big], f32(softmax(big.astype(np.float64), 1)), {"axis": 1}, meta=tol_k(3))

    a = f32(rng.integers(0, 4, size=(3, 4, 5)))  # ties: the first maximum wins
    one_op("argmax_axis1_keepdims", "argmax", [a], np.argmax(a, axis=1)[:, None, :].astype(np.int32),
           {"axis": 1, "keepdims": True})
    one_op("argmax_last", "argmax", [a], np.argmax(a, axis=-1).astype(np.int32), {"axis": -1})


# ---- inputs large enough for each parallel kernel to split at 2 threads ----
def threaded_cases():
    """One case per parallel range in the kernels, each holding at least twice the work the executor
    hands one thread (2^15 elements touched, 2^17 multiply-adds for products), so that the test
    at 2 threads runs the split. Their own generator: adding them left every other case unchanged."""
    r = np.random.default_rng(20263)

    def rand(*shape, scale=1.0):
        return f32(r.standard_normal(shape) * scale)

    def softmax(v, axis):
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    # Unary: 2^16 elements through tanh with relu fused after it (one kernel, a chain of two).
    c = Case("threads_unary_chain", ELEMENTWISE)
    x = c.input(rand(128, 512, scale=2.0), "x")
    t = np.tanh(c.arrays[x].astype(np.float64))
    c.output(c.node("relu", [c.node("tanh", [x], f32(t))], f32(np.maximum(t, 0))))
    c.write()

    # Binary: rows of 512 with a broadcast row, relu fused into the add.
    c = Case("threads_binary_rows", ELEMENTWISE)
    x, b = c.input(rand(128, 512), "x"), c.input(rand(512), "b")
    s = c.arrays[x].astype(np.float64) + c.arrays[b]
    c.output(c.node("relu", [c.node("add", [x, b], f32(s))], f32(np.maximum(s, 0))))
    c.write()

    # Reductions over the last axis, rows split across threads.
    c = Case("threads_reduce_rows", tol_k(256))
    x = c.input(rand(256, 256), "x")
    xd = c.arrays[x].astype(np.float64)
    c.output(c.node("sum", [x], f32(xd.sum(axis=-1)), {"axes": [-1]}))
    c.output(c.node("max", [x], f32(xd.max(axis=-1)), {"axes": [-1]}))
    c.write()

    # softmax along a middle axis: outer 64, axis 16, inner 64.
    x = rand(64, 16, 64, scale=4.0)
    one_op("threads_softmax_inner", "softmax", [x], f32(softmax(x.astype(np.float64), 1)), {"axis": 1},
           meta=tol_k(16))

    # Pools: planes split across threads.
    x = rand(2, 32, 32, 32)
    one_op("threads_max_pool2d", "max_pool2d", [x], f32(pool_ref(x, [2, 2], [2, 2], [0] * 4, "max")),
           {"kernel": [2, 2]})
    x = rand(1, 32, 30, 30)
    one_op("threads_avg_pool2d", "avg_pool2d", [x], f32(pool_ref(x, [3, 3], [1, 1], [1, 1, 1, 1], "avg", False)),
           {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "count_include_pad": False}, meta=tol_k(9))

    # Depthwise conv2d with rows too wide for the interleaved-lanes path (the padded-rows path):
    # whole planes split across threads.
    x, w, bias = rand(1, 16, 20, 40), rand(16, 1, 3, 3), rand(16)
    y = conv_ref(x, w, bias, [1, 1], [1, 1, 1, 1], [1, 1], 16)
    one_op("threads_depthwise_planes", "conv2d", [x, w, bias], f32(y), {"groups": 16, "pads": [1, 1, 1, 1]},
           meta=tol_k(9), consts=(1, 2))

    # Products of two activations (no packed weights): split by rows, by column panels, by batch.
    for name, (sa, sb) in {"rows": ((40, 96), (96, 80)), "panels": ((8, 512), (512, 64)),
                           "batches": ((8, 32, 32), (8, 32, 32))}.items():
        a, b = rand(*sa), rand(*sb)
        one_op("threads_matmul_" + name, "matmul", [a, b], f32(np.matmul(a.astype(np.float64), b)),
               meta=tol_k(sa[-1]))

    # Depthwise conv2d on planes of few rows: whole planes per thread.
    x, w, bias = rand(1, 32, 6, 40), rand(32, 1, 3, 3), rand(32)
    y = conv_ref(x, w, bias, [1, 1], [1, 1, 1, 1], [1, 1], 32)
    one_op("threads_depthwise_channels", "conv2d", [x, w, bias], f32(y), {"groups": 32, "pads": [1, 1, 1, 1]},
           meta=tol_k(9), consts=(1, 2))
    # Stride 2 with a fused relu6, which runs on each thread's planes as it stores them.
    x, w, bias = rand(1, 8, 64, 64), rand(8, 1, 3, 3), rand(8)
    y = conv_ref(x, w, bias, [2, 2], [1, 1, 1, 1], [1, 1], 8)
    c = Case("threads_depthwise_rows_relu6", tol_k(9))
    out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y),
                 {"groups": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]})
    y = np.maximum(y, 0)
    out = c.node("relu", [out], f32(y))
    out = c.node("minimum", [out, c.const(f32(6.0))], f32(np.minimum(y, 6)))
    c.output(out)
    c.write()

    # add of two same-shape 4-D tensors (one contiguous run), one range of it per thread, with a
    # fused relu; and a flat run times a scalar, split in halves.
    a, b = rand(1, 8, 96, 96), rand(1, 8, 96, 96)
    c = Case("threads_add_planes_relu", ELEMENTWISE)
    out = c.node("add", [c.input(a, "a"), c.input(b, "b")], f32(a + b))
    out = c.node("relu", [out], f32(np.maximum(a + b, 0)))
    c.output(out)
    c.write()
    a = rand(70000)
    one_op("threads_mul_scalar_run", "mul", [a, f32(np.float32(1.5))], f32(a * np.float32(1.5)), consts=(1,))

    # Pools and elementwise ops split whole planes (channels) over the threads; convolutions split
    # position tiles or output channels: a max pool over 48 x 48 planes; a same-shape add over small
    # planes (12 x 12); a convolution with too few output positions for two tiles per thread
    # (9 x 9), which splits its output channels over an im2col matrix the threads build together;
    # and a stride-1 convolution read from a zero-padded input that the threads pad in bands of rows
    # (each the rows its position tiles read).
    x = rand(1, 16, 48, 48)
    one_op("threads_max_pool2d_rows", "max_pool2d", [x], f32(pool_ref(x, [3, 3], [2, 2], [1] * 4, "max")),
           {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    a, b = rand(1, 512, 12, 12), rand(1, 512, 12, 12)
    c = Case("threads_add_small_planes_relu", ELEMENTWISE)
    out = c.node("add", [c.input(a, "a"), c.input(b, "b")], f32(a + b))
    c.output(c.node("relu", [out], f32(np.maximum(a + b, 0))))
    c.write()
    # The few-panels case needs 2 or 3 GEMM panels of positions, which depends on the SIMD width:
    # 9 x 9 for AVX-512 (32-column panels), 6 x 6 for AVX2 (16), 4 x 5 for SSE and NEON builds (8).
    for name, (xs, ws, stride) in {"few_panels_channels": ((1, 192, 9, 9), (32, 192), 1),
                                   "pad_rows": ((1, 16, 24, 30), (20, 16), 1),
                                   "few_panels_channels_6x6": ((1, 408, 6, 6), (32, 408), 1),
                                   "few_panels_channels_4x5": ((1, 800, 4, 5), (12, 800), 1)}.items():
        x, w, bias = rand(*xs), rand(ws[0], ws[1], 3, 3), rand(ws[0])
        y = conv_ref(x, w, bias, [stride] * 2, [1, 1, 1, 1], [1, 1], 1)
        c = Case("threads_conv_" + name, tol_k(ws[1] * 9))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y),
                     {"strides": [stride] * 2, "pads": [1, 1, 1, 1]})
        c.output(c.node("relu", [out], f32(np.maximum(y, 0))))
        c.write()

    # Pools fold a window's rows into one before its columns when a row holds at most 1024 floats;
    # wider rows fold every tap of every row: one of each, stride 2 along the row.
    for name, w in {"narrow_rows": 1000, "wide_rows": 1100}.items():
        x = rand(1, 2, 5, w)
        one_op("max_pool2d_" + name, "max_pool2d", [x], f32(pool_ref(x, [2, 3], [1, 2], [0, 1, 1, 1], "max")),
               {"kernel": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 1]})
        one_op("avg_pool2d_" + name, "avg_pool2d", [x],
               f32(pool_ref(x, [3, 3], [2, 2], [1, 1, 1, 1], "avg", False)),
               {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": False},
               meta=tol_k(9))

    def pointwise_case(name, x, w, bias, relu6=False):
        """A 1x1 convolution with bias, then ReLU (ReLU6 as relu and minimum when `relu6`)."""
        y = conv_ref(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        c = Case(name, tol_k(x.shape[1]))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y))
        out = c.node("relu", [out], f32(np.maximum(y, 0)))
        if relu6:
            out = c.node("minimum", [out, c.const(f32(6.0))], f32(np.minimum(np.maximum(y, 0), 6)))
        c.output(out)
        c.write()

    # A 1x1 convolution that narrows the channels on a 14 x 14 plane runs turned around; its 72
    # channels are an odd number of panels at every SIMD width, so at 2 threads each thread takes a
    # range of positions over every panel.
    pointwise_case("threads_pointwise_positions", rand(1, 144, 14, 14), rand(72, 144, 1, 1), rand(72))
    # A 1x1 convolution that widens the channels into an output smaller than L2, on a plane too
    # large to run turned around: at 2 threads each thread takes a range of output channels over
    # the whole input: 72 channels, six row blocks of 12 on AVX-512 (twelve of 6 elsewhere), so the
    # forced shares of the split test move where the parts meet.
    pointwise_case("threads_pointwise_widening_channels", rand(1, 24, 20, 20), rand(72, 24, 1, 1), rand(72),
                   relu6=True)
    # A 1x1 convolution on a plane too large for either split above takes tiles of positions: at 2
    # threads each thread a range of the GEMM panels, cut into two tiles wherever L2 is 1 MB (2500
    # positions: 79 panels of 32 on AVX-512, 157 of 16 on AVX2, 313 of 8 elsewhere, so the ranges
    # differ by one panel, and the last holds a partial one).
    pointwise_case("threads_pointwise_tile_ranges", rand(1, 64, 50, 50), rand(48, 64, 1, 1), rand(48))


# ---- data movement, gather, cast ----
def movement_cases():
    x = randn(2, 3, 4)
    xi = rng.integers(-50, 50, size=(2, 3, 4)).astype(np.int32)
    one_op("reshape_infer", "reshape", [x], x.reshape(4, -1), {"shape": [4, -1]})
    one_op("reshape_i32", "reshape", [xi], xi.reshape(24), {"shape": [24]})
    one_op("transpose_perm", "transpose", [x], np.transpose(x, (1, 2, 0)).copy(), {"perm": [1, 2, 0]})
    one_op("transpose_default", "transpose", [xi], np.transpose(xi).copy())
    ys = [randn(2, 1, 4), randn(2, 3, 4), randn(2, 2, 4)]
    one_op("concat_mid", "concat", ys, np.concatenate(ys, axis=1), {"axis": -2})
    yi = [xi, xi[:, :, :1].copy()]
    one_op("concat_i32_last", "concat", yi, np.concatenate(yi, axis=2), {"axis": 2})
    z = randn(5, 6, 4)
    one_op("slice_steps", "slice", [z], z[1:5:2, -4:100, ::3].copy(),
           {"starts": [1, -4, 0], "ends": [5, 100, 4], "steps": [2, 1, 3]})
    one_op("slice_axes", "slice", [z], z[:, :, -3:-1].copy(), {"starts": [-3], "ends": [-1], "axes": [-1]})
    one_op("slice_clamped_empty", "slice", [z], z[4:2].copy(), {"starts": [4], "ends": [2]})
    one_op("slice_far_negative", "slice", [xi], xi[-100:1].copy(), {"starts": [-100], "ends": [1], "axes": [0]})
    e = randn(3, 1)
    one_op("expand", "expand", [e], np.broadcast_to(e, (2, 3, 4)).copy(), {"shape": [2, 3, 4]})
    one_op("expand_i32", "expand", [xi[:1]], np.broadcast_to(xi[:1], (3, 3, 4)).copy(), {"shape": [3, 3, 4]})
    one_op("pad_value", "pad", [x], np.pad(x, ((0, 1), (2, 0), (1, 1)), constant_values=1.5),
           {"pads": [0, 2, 1, 1, 0, 1], "value": 1.5})
    one_op("pad_default_i32", "pad", [xi], np.pad(xi, ((1, 0), (0, 0), (0, 2))), {"pads": [1, 0, 0, 0, 0, 2]})
    one_op("copy", "copy", [xi], xi.copy())
    idx = np.array([[0, -1], [2, -3]], dtype=np.int32)
    one_op("gather_axis1", "gather", [x, idx], np.take(x, idx, axis=1), {"axis": 1})
    one_op("gather_default_i32", "gather", [xi, np.array([1, -2, 0], dtype=np.int32)],
           np.take(xi, [1, -2, 0], axis=0))
    one_op("gather_scalar_index", "gather", [x, np.array(-1, dtype=np.int32)], np.take(x, -1, axis=2), {"axis": -1})
    c = Case("gather_out_of_range", {"error": "OUT_OF_RANGE"})
    d = c.input(x, "data")
    i = c.input(np.array([0, 3], dtype=np.int32), "indices")
    c.output(c.node("gather", [d, i], np.zeros((2, 2, 4), dtype=np.float32), {"axis": 1}))
    c.write()
    cx = f32([3.7, -3.7, 0.5, -0.5, 1e10, -1e10, 2147483520.0, -2147483648.0, np.nan, np.inf, -np.inf])
    want = np.array([3, -3, 0, 0, 2147483647, -2147483648, 2147483520, -2147483648, 0, 2147483647, -2147483648],
                    dtype=np.int32)
    one_op("cast_saturate", "cast", [cx], want, {"to": "i32"})
    one_op("cast_i32_f32", "cast", [xi], xi.astype(np.float32), {"to": "f32"})
    one_op("cast_same", "cast", [x], x.copy(), {"to": "f32"})


# ---- graphs that exercise fusion and aliasing ----
def graph_cases():
    c = Case("fused_mlp_block", tol_k(12))
    x = c.input(randn(6, 12), "x")  # 6 rows: the packed-weights GEMM path
    w, b = randn(12, 8), randn(8)
    wid, bid = c.const(w), c.const(b)
    xd = c.arrays[x].astype(np.float64)
    mm = xd @ w
    v = c.node("matmul", [x, wid], f32(mm))
    v = c.node("add", [bid, v], f32(mm + b))  # bias on the left
    v = c.node("relu", [v], f32(np.maximum(mm + b, 0)))
    t = np.tanh(np.maximum(mm + b, 0))
    v = c.node("tanh", [v], f32(t))
    r = c.node("reshape", [v], f32(t).reshape(4, 12), {"shape": [4, 12]})
    s = c.node("neg", [r], -f32(t).reshape(4, 12))
    c.output(s)
    c.output(v)  # also read by reshape: must not be fused away
    c.write()

    c = Case("chain_outputs", ELEMENTWISE)
    x = c.input(randn(4, 5), "x")
    xd = c.arrays[x].astype(np.float64)
    a = c.node("exp", [x], f32(np.exp(xd)))
    b2 = c.node("neg", [a], f32(-np.exp(xd)))
    c2 = c.node("abs", [b2], f32(np.exp(xd)))
    d = c.node("sigmoid", [c2], f32(1 / (1 + np.exp(-np.exp(xd)))))
    c.output(d)
    c.output(x)  # an input as an output
    c.output(d)  # the same value twice
    c.write()

    c = Case("constant_output", ELEMENTWISE)
    x = c.input(randn(3), "x")
    k = c.const(randn(2, 2))
    c.output(k)  # a stored constant as an output
    c.output(c.node("relu", [x], f32(np.maximum(c.arrays[x], 0))))
    c.write()


def scalar_chain_cases():
    """Binary ops with a constant scalar operand after another op: the executor fuses them into the
    producer's chain (relu6 as relu then minimum 6; scalar on either side; NaN rules), and leaves
    alone one whose scalar would broadcast the value to a larger shape."""
    r = np.random.default_rng(20265)

    c = Case("fused_relu6_conv", tol_k(36))
    x = c.input(f32(r.standard_normal((1, 4, 6, 6)) * 3), "x")
    w, b = f32(r.standard_normal((8, 4, 3, 3))), f32(r.standard_normal(8))
    y = conv_ref(c.arrays[x], w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    conv = c.node("conv2d", [x, c.const(w), c.const(b)], f32(y), {"pads": [1, 1, 1, 1]})
    relu = c.node("relu", [conv], f32(np.maximum(y, 0)))
    c.output(c.node("minimum", [relu, c.const(f32(6.0))], f32(np.minimum(np.maximum(y, 0), 6))))
    c.write()

    c = Case("fused_scalar_chain", ELEMENTWISE)
    xv = f32(r.standard_normal((3, 40)) * 2)
    xv[0, :3] = [np.nan, np.inf, -np.inf]
    x = c.input(xv, "x")
    v = -xv.astype(np.float64)
    n = c.node("neg", [x], f32(v))
    v = np.maximum(v, -0.5)
    n = c.node("maximum", [n, c.const(f32(-0.5))], f32(v))
    v = 2.0 + v
    n = c.node("add", [c.const(f32([2.0])), n], f32(v))  # scalar on the left, shape [1]
    v = 3.0 - v
    n = c.node("sub", [c.const(f32(3.0)), n], f32(v))
    v = v / 4.0
    n = c.node("div", [n, c.const(f32(4.0))], f32(v))
    v = v * 0.5
    n = c.node("mul", [n, c.const(f32(0.5))], f32(v))
    v = np.minimum(v, 0.25)
    n = c.node("minimum", [c.const(f32(0.25)), n], f32(v))
    v = v - 1.0
    n = c.node("sub", [n, c.const(f32(1.0))], f32(v))
    v = 1.0 / v
    c.output(c.node("div", [c.const(f32(1.0)), n], f32(v)))
    c.write()

    c = Case("fused_scalar_nan", ELEMENTWISE)
    x = c.input(f32(r.standard_normal((2, 17))), "x")
    relu = c.node("relu", [x], f32(np.maximum(c.arrays[x], 0)))
    c.output(c.node("maximum", [relu, c.const(f32(np.nan))], f32(np.full((2, 17), np.nan))))
    c.write()

    c = Case("chain_scalar_broadcasts", ELEMENTWISE)
    x = c.input(f32(r.standard_normal(4)), "x")
    e = np.exp(c.arrays[x].astype(np.float64))
    ex = c.node("exp", [x], f32(e))
    c.output(c.node("mul", [ex, c.const(f32([[2.0]]))], f32(e[None, :] * 2.0)))  # [4] -> [1, 4]: not fused
    c.write()

    # Clamping chains that the kernels apply as they store (sgemm::Finish, conv.hpp's Clamp): values
    # well past both bounds. A depthwise convolution on short rows (16 + 4 channels interleaved) with
    # relu6, and on long rows with maximum then minimum (a clip); a 1x1 convolution over 99 positions
    # (whole panels and a partial one) with a residual and a clip; a 1x1 convolution on a 3 x 5 plane
    # (turned around: the chain runs in the transpose back) with a residual and relu6.
    for name, xs, ws, lo, hi, res in (("relu6_depthwise_lanes", (1, 20, 9, 9), (20, 1, 3, 3), None, 6.0, False),
                                      ("clip_depthwise_rows", (1, 3, 10, 40), (3, 1, 3, 3), -1.5, 2.0, False),
                                      ("clip_pointwise_residual", (1, 12, 9, 11), (20, 12, 1, 1), -0.5, 1.0, True),
                                      ("relu6_transposed_residual", (1, 40, 3, 5), (48, 40, 1, 1), None, 6.0, True)):
        k = ws[1] * ws[2] * ws[3]
        c = Case("fused_" + name, tol_k(k))
        x = c.input(f32(r.standard_normal(xs) * 3), "x")
        w, b = f32(r.standard_normal(ws)), f32(r.standard_normal(ws[0]))
        groups = xs[1] if ws[1] == 1 else 1
        attrs = {"groups": groups, "pads": [1, 1, 1, 1]} if groups > 1 else None
        y = conv_ref(c.arrays[x], w, b, [1, 1], [1, 1, 1, 1] if attrs else [0, 0, 0, 0], [1, 1], groups)
        out = c.node("conv2d", [x, c.const(w), c.const(b)], f32(y), attrs)
        if res:
            rv = f32(r.standard_normal(y.shape) * 3)
            y = y + rv.astype(np.float64)
            out = c.node("add", [out, c.input(rv, "r")], f32(y))
        y = np.maximum(y, 0 if lo is None else lo)
        out = c.node("relu", [out], f32(y)) if lo is None else c.node("maximum", [out, c.const(f32(lo))], f32(y))
        y = np.minimum(y, hi)
        c.output(c.node("minimum", [out, c.const(f32(hi))], f32(y)))
        c.write()

    # SiLU run as the GEMM stores (over each stored tile, out of line) or in the transpose back: a 1x1
    # convolution over 117 positions (whole panels, then a partial one of 21, or 5, that SIMD packets
    # cover with an overlapping last one), one over 99 with a residual (a partial panel of 3, under a
    # packet), a turned-around 1x1 convolution, and a 3x3 convolution that runs through Winograd.
    for name, xs, ws, res in (("silu_pointwise", (1, 12, 9, 13), (20, 12, 1, 1), False),
                              ("silu_pointwise_residual", (1, 12, 9, 11), (20, 12, 1, 1), True),
                              ("silu_transposed", (1, 40, 3, 5), (48, 40, 1, 1), False),
                              ("silu_winograd", (1, 48, 20, 20), (48, 48, 3, 3), False)):
        k = ws[1] * ws[2] * ws[3]
        c = Case("fused_" + name, tol_k(k))
        x = c.input(f32(r.standard_normal(xs)), "x")
        w, b = f32(r.standard_normal(ws)), f32(r.standard_normal(ws[0]))
        pads = [ws[2] // 2] * 4
        y = conv_ref(c.arrays[x], w, b, [1, 1], pads, [1, 1], 1)
        out = c.node("conv2d", [x, c.const(w), c.const(b)], f32(y), {"pads": pads})
        if res:
            rv = f32(r.standard_normal(y.shape) * 3)
            y = y + rv.astype(np.float64)
            out = c.node("add", [out, c.input(rv, "r")], f32(y))
        c.output(c.node("silu", [out], f32(y / (1 + np.exp(-y)))))
        c.write()


# ---- the dtypes beyond f32 and i32: f16, bf16, i64, bool ----
EXACT = {"rtol": "0", "atol": "0"}


def bf16_bits_of(value):
    """bf16 bit pattern of a Python float (exact in float64), rounded to nearest, ties to even:
    written from the format's definition (8 significant bits, exponents down to 2^-133), not from
    bit tricks, so it checks rml's conversion independently."""
    if math.isnan(value):
        return 0x7FC0
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    a = abs(value)
    if math.isinf(a):
        return sign | 0x7F80
    if a == 0:
        return sign
    _, e = math.frexp(a)  # a = m * 2^e, 0.5 <= m < 1
    q = math.ldexp(1.0, max(e - 8, -133))  # the spacing of bf16 values near a
    k = a / q
    lo = math.floor(k)
    if k - lo > 0.5 or (k - lo == 0.5 and lo % 2 == 1):
        lo += 1
    r = lo * q
    if r >= 2.0 ** 128:
        return sign | 0x7F80
    return sign | (int(np.array(r, dtype=np.float32).view(np.uint32)) >> 16)


def bf16(values):
    """A float array rounded to bf16 (a uint16 array of bit patterns)."""
    flat = [bf16_bits_of(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]
    return np.array(flat, dtype=np.uint16).reshape(np.shape(values))


def bf16_f32(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


HALF = {
    # name: (round an f32 array to the type, widen the type to f32, tolerance: one unit in the last
    # place, and the f32 approximations' absolute error near 0 as for f32)
    "f16": (lambda a: np.asarray(a, dtype=np.float32).astype(np.float16), lambda h: h.astype(np.float32),
            {"rtol": "0.000977", "atol": "1e-6"}),
    "bf16": (bf16, bf16_f32, {"rtol": "0.0079", "atol": "1e-6"}),
}
INTS = {"i32": np.int32, "i64": np.int64}


def half_cases(r):
    """Each elementwise op on f16 and bf16: inputs rounded to the type, the op computed in float32 by
    NumPy, the result rounded to the type. The IEEE operations (add, sub, mul, div, sqrt, neg, abs,
    relu, maximum, minimum) must match bit for bit; functions rml approximates within one unit of
    the 16-bit type."""
    exact_unary = {"neg", "abs", "relu", "sqrt"}
    for t, (rnd, wid, ulp) in HALF.items():
        for op, fn in UNARY.items():
            x = f32(r.standard_normal((3, 7)) * 3)
            if op in POSITIVE:
                x = np.abs(x) + f32(0.1)
            xt = rnd(x)
            y = f32(fn(wid(xt).astype(np.float64)))  # the function in f64, rounded to f32 ...
            if op in exact_unary:
                y = fn(wid(xt))  # ... or NumPy's float32 operation itself
            one_op("%s_unary_%s" % (t, op), op, [xt], rnd(y), meta=EXACT if op in exact_unary else ulp)
        for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
            a, b = operand((3, 4), op), operand((4,), op)
            at, bt = rnd(a), rnd(b)
            y = BINARY[op](wid(at), wid(bt)).astype(np.float32)
            one_op("%s_binary_%s" % (t, op), op, [at, bt], rnd(y), meta=EXACT if op != "pow" else ulp)
        for op, fn in (("equal", np.equal), ("less", np.less), ("greater", np.greater)):
            a = rnd(f32(r.integers(-2, 3, size=(3, 4)) * 0.5))
            b = rnd(f32(r.integers(-2, 3, size=(4,)) * 0.5))
            one_op("%s_compare_%s" % (t, op), op, [a, b], fn(wid(a), wid(b)), meta=EXACT)
        # 2048 + 1 rounds to 2048 in f16 (ties to even), 256 + 1 in bf16: rounding after each op.
        big = 2048.0 if t == "f16" else 256.0
        a, b = rnd(f32([big, big, 1.0, 65504.0 if t == "f16" else 3e38])), rnd(f32([1.0, 3.0, 1e-4, 65504.0 if t == "f16" else 3e38]))
        one_op("%s_add_rounding" % t, "add", [a, b], rnd(wid(a) + wid(b)), meta=EXACT)
        x = rnd(f32(r.standard_normal((2, 3, 5))))
        xw = wid(x).astype(np.float64)
        for op, fn in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)):
            # Summed in f32 and rounded once: within a unit of the type, plus f32's own error near 0.
            tol = dict(ulp, atol="1e-6")
            one_op("%s_%s_axis1" % (t, op), op, [x], rnd(f32(fn(xw, axis=1))), {"axes": [1]}, meta=tol)
            one_op("%s_%s_split" % (t, op), op, [x], rnd(f32(fn(xw, axis=(0, 2), keepdims=True))),
                   {"axes": [0, 2], "keepdims": True}, meta=tol)
        a = rnd(f32(r.integers(0, 4, size=(3, 4, 5))))
        one_op("%s_argmax" % t, "argmax", [a], np.argmax(wid(a), axis=1).astype(np.int32), {"axis": 1})
        cond = r.integers(0, 2, size=(2, 1)).astype(bool)
        xa, ya = rnd(randn(2, 3)), rnd(randn(3))
        one_op("%s_where_bool" % t, "where", [cond, xa, ya], np.where(cond, xa, ya))
        one_op("%s_where_mask" % t, "where", [f32(cond), xa, ya], np.where(cond, xa, ya))


def half_tol(ulp, k):
    """A unit in the last place of the 16-bit type (`ulp`, from HALF) plus f32's accumulation error over k terms."""
    e = 1e-5 * math.sqrt(max(k, 1))
    return {"rtol": "%.3g" % (float(ulp["rtol"]) + e), "atol": "%.3g" % e}


def half_conv(r, rnd, wid, spec):
    """Random 16-bit x, w and bias for a conv2d `spec` (shapes x, w; attrs), the float64 result from
    them, and the depth k of its dot products."""
    attrs = spec["attrs"]
    x, w = rnd(f32(r.standard_normal(spec["x"]))), rnd(f32(r.standard_normal(spec["w"])))
    bias = rnd(f32(r.standard_normal(spec["w"][0])))
    y = conv_ref(wid(x), wid(w), wid(bias), attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0]),
                 attrs.get("dilations", [1, 1]), attrs.get("groups", 1))
    return x, w, bias, y, spec["w"][1] * spec["w"][2] * spec["w"][3]


def half_product_cases(r):
    """matmul, conv2d (constant 16-bit weights: they stay 16-bit, widened per run), the pools and
    softmax on f16 and bf16: computed in float64 from the 16-bit inputs and rounded once; within a
    unit in the last place plus f32's accumulation error."""
    for t, (rnd, wid, ulp) in HALF.items():
        def tol(k):
            return half_tol(ulp, k)

        for name, (sa, sb), const in (("2d", ((3, 8), (8, 5)), False), ("rows_const", ((2, 6, 40), (40, 24)), True),
                                      ("batch", ((2, 3, 4), (2, 4, 5)), False)):
            a, b = rnd(f32(r.standard_normal(sa))), rnd(f32(r.standard_normal(sb)))
            y = np.matmul(wid(a).astype(np.float64), wid(b).astype(np.float64))
            one_op("%s_matmul_%s" % (t, name), "matmul", [a, b], rnd(f32(y)), meta=tol(sa[-1]),
                   consts=(1,) if const else ())
        for name, spec in (("pad_bias", dict(x=(2, 3, 6, 5), w=(4, 3, 3, 3), attrs={"pads": [1, 1, 1, 1]})),
                           ("depthwise", dict(x=(1, 4, 6, 7), w=(4, 1, 3, 3), attrs={"groups": 4, "strides": [1, 2]})),
                           ("tiled", dict(x=(1, 24, 10, 10), w=(16, 24, 3, 3), attrs={"pads": [1, 1, 1, 1]}))):
            attrs = spec["attrs"]
            x, w, bias, y, k = half_conv(r, rnd, wid, spec)
            one_op("%s_conv2d_%s" % (t, name), "conv2d", [x, w, bias], rnd(f32(y)), attrs, meta=tol(k), consts=(1, 2))
        x = rnd(f32(r.standard_normal((2, 3, 7, 6))))
        xw = wid(x)
        one_op("%s_max_pool2d" % t, "max_pool2d", [x], rnd(f32(pool_ref(xw, [3, 3], [2, 1], [1, 1, 1, 0], "max"))),
               {"kernel": [3, 3], "strides": [2, 1], "pads": [1, 1, 1, 0]}, meta=EXACT)
        one_op("%s_avg_pool2d" % t, "avg_pool2d", [x], rnd(f32(pool_ref(xw, [3, 2], [2, 2], [1, 0, 1, 1], "avg"))),
               {"kernel": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}, meta=tol(6))
        if t == "f16":
            # Large enough that the widening before the f32 pool and the rounding after it split over
            # the threads (2^16 elements a part); its own generator, so the cases after keep their data.
            x = rnd(f32(np.random.default_rng(20269).standard_normal((1, 16, 96, 96))))
            one_op("threads_f16_max_pool2d", "max_pool2d", [x],
                   rnd(f32(pool_ref(wid(x), [3, 3], [1, 1], [1, 1, 1, 1], "max"))),
                   {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}, meta=EXACT)
        s = rnd(f32(r.standard_normal((3, 4, 5)) * 4))
        sd = wid(s).astype(np.float64)
        for axis in (-1, 1):
            e = np.exp(sd - sd.max(axis=axis, keepdims=True))
            one_op("%s_softmax_axis%d" % (t, axis), "softmax", [s], rnd(f32(e / e.sum(axis=axis, keepdims=True))),
                   {"axis": axis}, meta=tol(5))


def int_cases(r):
    """i32 and i64 arithmetic: wrapping add, sub, mul, neg and abs (NumPy's arrays wrap the same
    way), division truncating toward zero, comparisons giving bool, reductions, argmax, where."""
    for t, np_t in INTS.items():
        info = np.iinfo(np_t)
        edge = np.array([info.min, info.max, info.min + 1, -1, 0, 1, info.max - 1, 7], dtype=np_t)
        other = np.array([-1, 1, info.max, info.min, 5, -7, 2, -3], dtype=np_t)
        rand_a = r.integers(-1000, 1000, size=(3, 4)).astype(np_t)
        rand_b = r.integers(1, 50, size=(4,)).astype(np_t) * np.array([1, -1, 1, -1], dtype=np_t)
        with np.errstate(over="ignore"):
            for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                           ("maximum", np.maximum), ("minimum", np.minimum)):
                one_op("%s_%s_wrap" % (t, op), op, [edge, other], fn(edge, other))
                one_op("%s_%s" % (t, op), op, [rand_a, rand_b], fn(rand_a, rand_b))
            for op, fn in (("neg", np.negative), ("abs", np.abs), ("relu", lambda v: np.maximum(v, 0))):
                one_op("%s_unary_%s" % (t, op), op, [edge], fn(edge))

        def trunc_div(a, b):
            """Quotients truncated toward zero, in Python integers (NumPy's // floors)."""
            a, b = np.broadcast_arrays(a, b)
            q = [abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
            return np.array(q, dtype=np_t).reshape(a.shape)

        one_op("%s_div" % t, "div", [rand_a, rand_b], trunc_div(rand_a, rand_b))
        num = np.array([7, -7, 7, -7, info.min, info.max, 0, info.min], dtype=np_t)
        den = np.array([2, 2, -2, -2, 3, -1, 5, 1], dtype=np_t)
        one_op("%s_div_edges" % t, "div", [num, den], trunc_div(num, den))
        c = Case("%s_div_by_zero" % t, {"error": "INVALID_ARGUMENT"})
        c.output(c.node("div", [c.input(num[:3], "a"), c.input(np.array([1, 0, 1], dtype=np_t), "b")],
                        np.zeros(3, dtype=np_t)))
        c.write()
        c = Case("%s_div_overflow" % t, {"error": "OUT_OF_RANGE"})
        c.output(c.node("div", [c.input(np.array([info.min], dtype=np_t), "a"),
                                c.input(np.array([-1], dtype=np_t), "b")], np.zeros(1, dtype=np_t)))
        c.write()
        a = r.integers(-2, 3, size=(3, 4)).astype(np_t)
        b = r.integers(-2, 3, size=(4,)).astype(np_t)
        for op, fn in (("equal", np.equal), ("less", np.less), ("greater", np.greater)):
            one_op("%s_compare_%s" % (t, op), op, [a, b], fn(a, b))
        x = r.integers(-100, 100, size=(2, 3, 5)).astype(np_t)
        for op, fn in (("sum", np.sum), ("max", np.max), ("min", np.min)):
            one_op("%s_%s_axis1" % (t, op), op, [x], fn(x, axis=1).astype(np_t), {"axes": [1]})
            one_op("%s_%s_split" % (t, op), op, [x], fn(x, axis=(0, 2), keepdims=True).astype(np_t),
                   {"axes": [0, 2], "keepdims": True})
        with np.errstate(over="ignore"):
            wrap = np.array([info.max, info.max, 1], dtype=np_t)
            one_op("%s_sum_wraps" % t, "sum", [wrap], np.sum(wrap, dtype=np_t))
        one_op("%s_argmax" % t, "argmax", [x], np.argmax(x, axis=-1).astype(np.int32), {"axis": -1})
        cond = r.integers(0, 2, size=(3, 1)).astype(bool)
        one_op("%s_where" % t, "where", [cond, a, b], np.where(cond, a, b))


def bool_cases(r):
    a = r.integers(0, 2, size=(3, 4)).astype(bool)
    b = r.integers(0, 2, size=(4,)).astype(bool)
    one_op("bool_logical_and", "logical_and", [a, b], np.logical_and(a, b))
    one_op("bool_logical_or", "logical_or", [a, b], np.logical_or(a, b))
    one_op("bool_logical_not", "logical_not", [a], np.logical_not(a))
    one_op("bool_where", "where", [a, a, b], np.where(a, a, b))


def cast_value(x, src, dst):
    """NumPy's value of cast from `src` to `dst`, as rml defines cast (see docs/ops.md)."""
    if dst == "bool":
        return x != 0 if src != "bf16" else bf16_f32(x) != 0
    if src == "bool":
        x = x.astype(np.float32)
        src = "f32"
    if src == "bf16":
        x, src = bf16_f32(x), "f32"
    if dst in INTS:
        np_t = INTS[dst]
        if src in INTS:
            return x.astype(np_t)  # wraps, two's complement
        info = np.iinfo(np_t)
        xd = x.astype(np.float64)
        out = np.where(np.isnan(xd), 0, np.trunc(np.nan_to_num(xd, nan=0.0, posinf=2.0 ** 70, neginf=-2.0 ** 70)))
        out = [info.max if v >= 2.0 ** (info.bits - 1) else info.min if v <= -2.0 ** (info.bits - 1) else int(v)
               for v in out.ravel().tolist()]
        return np.array(out, dtype=np_t).reshape(x.shape)
    if dst == "f32":
        return x.astype(np.float32)
    if dst == "f16":
        if src in INTS:
            return x.astype(np.float16)  # exact in float64 first: one rounding
        return x.astype(np.float32).astype(np.float16)
    return bf16(x.astype(np.float64))  # bf16 from the exact value


def cast_cases(r):
    floats = [3.7, -3.7, 0.5, -0.5, 1e10, -1e10, np.nan, np.inf, -np.inf, 0.0, -0.0, 65519.0, 65520.0,
              2147483520.0, -2147483648.0, 9.3e18, 1.00390625, 1.0078125, 2.5e-8, 1e-40]
    ints = [0, 1, -1, 7, -7, 2049, 16842753, -16842753, 65519, 65520, 2147483647, -2147483648, 300]
    i64s = ints + [2 ** 40 + 1, -(2 ** 40) - 3, 2 ** 53 - 1, 2 ** 62]
    source = {
        "f32": f32(floats), "f16": f32(floats).astype(np.float16), "bf16": bf16(np.array(floats)),
        "i32": np.array(ints, dtype=np.int32), "i64": np.array(i64s, dtype=np.int64),
        "bool": np.array([True, False, True], dtype=bool),
    }
    for src, x in source.items():
        for dst in ("f32", "f16", "bf16", "i32", "i64", "bool"):
            with np.errstate(invalid="ignore", over="ignore"):
                want = cast_value(x, src, dst)
            one_op("cast_%s_to_%s" % (src, dst), "cast", [x], want, {"to": dst}, meta=EXACT)


def movement_dtype_cases(r):
    """Every movement op and gather (i64 indices) on each dtype beyond f32 and i32."""
    make = {
        "f16": lambda s: f32(r.standard_normal(s)).astype(np.float16),
        "bf16": lambda s: bf16(r.standard_normal(s)),
        "i64": lambda s: r.integers(-2 ** 40, 2 ** 40, size=s).astype(np.int64),
        "bool": lambda s: r.integers(0, 2, size=s).astype(bool),
    }
    for t, mk in make.items():
        x = mk((2, 3, 4))
        one_op("%s_reshape" % t, "reshape", [x], x.reshape(4, -1), {"shape": [4, -1]})
        one_op("%s_transpose" % t, "transpose", [x], np.transpose(x, (1, 2, 0)).copy(), {"perm": [1, 2, 0]})
        ys = [x, mk((2, 1, 4))]
        one_op("%s_concat" % t, "concat", ys, np.concatenate(ys, axis=1), {"axis": 1})
        one_op("%s_slice" % t, "slice", [x], x[:, -2:, ::3].copy(), {"starts": [-2, 0], "ends": [3, 4], "axes": [1, 2],
                                                                  "steps": [1, 3]})
        e = mk((3, 1))
        one_op("%s_expand" % t, "expand", [e], np.broadcast_to(e, (2, 3, 4)).copy(), {"shape": [2, 3, 4]})
        value = 1.5 if t != "bool" else 1.0
        fill = {"f16": np.float16(1.5), "bf16": bf16(np.array(1.5)), "i64": 1, "bool": True}[t]
        one_op("%s_pad" % t, "pad", [x], np.pad(x, ((0, 1), (1, 0), (0, 0)), constant_values=fill),
               {"pads": [0, 1, 0, 1, 0, 0], "value": value})
        one_op("%s_copy" % t, "copy", [x], x.copy())
        idx = np.array([[0, -1], [2, -3]], dtype=np.int64)
        one_op("%s_gather_i64" % t, "gather", [x, idx], np.take(x, idx, axis=1), {"axis": 1})
    x = randn(4, 3)
    one_op("gather_i64_indices", "gather", [x, np.array([3, -4, 1], dtype=np.int64)], np.take(x, [3, -4, 1], axis=0))
    c = Case("gather_i64_out_of_range", {"error": "OUT_OF_RANGE"})
    c.output(c.node("gather", [c.input(x, "data"), c.input(np.array([0, 2 ** 40], dtype=np.int64), "indices")],
                    np.zeros((2, 3), dtype=np.float32)))
    c.write()


def pow_mod_argmax_cases():
    """Integer pow (wrapping as mul does; a negative exponent fails the run), mod with ONNX's two sign
    rules (fmod false: the divisor's sign as Python's %, NumPy's mod; fmod true: the dividend's, C's
    and NumPy's fmod) on every numeric dtype, and argmax writing i64. Its own generator, so the cases
    before it keep their data."""
    r = np.random.default_rng(20268)
    for t, np_t in INTS.items():
        info = np.iinfo(np_t)
        bits = info.bits
        base = r.integers(-6, 7, size=(3, 5)).astype(np_t)
        exp = r.integers(0, 7, size=(5,)).astype(np_t)
        one_op("%s_pow" % t, "pow", [base, exp], np.power(base, exp))
        # Edges: x^0 = 1 (also 0^0 and MIN^0), 2^(bits-1) is the minimum, 2^bits wraps to 0, 3^k wraps
        # (NumPy's integer power multiplies in the type and wraps the same way), (-1)^odd, (-2)^(bits-1).
        edge_b = np.array([0, info.min, 2, 2, 3, -1, -2, 7, info.max, -3], dtype=np_t)
        edge_e = np.array([0, 0, bits - 1, bits, 3 * bits, 2 * bits + 1, bits - 1, 1, 2, bits + 7], dtype=np_t)
        with np.errstate(over="ignore"):
            one_op("%s_pow_wrap" % t, "pow", [edge_b, edge_e], np.power(edge_b, edge_e))
        c = Case("%s_pow_negative_exponent" % t, {"error": "INVALID_ARGUMENT"})
        c.output(c.node("pow", [c.input(np.array([2, 2, 1], dtype=np_t), "a"),
                                c.input(np.array([1, -1, 3], dtype=np_t), "b")], np.zeros(3, dtype=np_t)))
        c.write()
        a = r.integers(-50, 51, size=(3, 4)).astype(np_t)
        b = (r.integers(1, 9, size=(4,)) * np.array([1, -1, 1, -1])).astype(np_t)
        one_op("%s_mod" % t, "mod", [a, b], np.mod(a, b))
        one_op("%s_mod_fmod" % t, "mod", [a, b], np.fmod(a, b), {"fmod": True})
        num = np.array([7, -7, 7, -7, 6, -6, info.min, info.min, info.max, info.min, 0, info.max], dtype=np_t)
        den = np.array([3, 3, -3, -3, 3, -3, -1, 7, info.min, info.max, -5, 1], dtype=np_t)
        # MIN mod -1 is 0 (NumPy gives 0 and C++ leaves it undefined), written out rather than asked of NumPy.
        want_mod = np.array([int(x) - int(y) * (int(x) // int(y)) for x, y in zip(num, den)], dtype=np_t)
        want_fmod = np.array([int(math.fmod(int(x), int(y))) if abs(int(x)) < 2 ** 53 else
                              int(x) - int(y) * int(abs(int(x)) // abs(int(y))) * (1 if (x < 0) == (y < 0) else -1)
                              for x, y in zip(num, den)], dtype=np_t)
        one_op("%s_mod_edges" % t, "mod", [num, den], want_mod)
        one_op("%s_mod_fmod_edges" % t, "mod", [num, den], want_fmod, {"fmod": True})
        for fmod in (False, True):
            c = Case("%s_mod%s_by_zero" % (t, "_fmod" if fmod else ""), {"error": "INVALID_ARGUMENT"})
            c.output(c.node("mod", [c.input(np.array([5, 5, 5], dtype=np_t), "a"),
                                    c.input(np.array([2, 0, 3], dtype=np_t), "b")], np.zeros(3, dtype=np_t),
                            {"fmod": True} if fmod else None))
            c.write()
    # Floats: C's fmod, exact (the remainder is representable), so f16/bf16 round once and match bit for bit;
    # x fmod 0 is NaN, fmod(x, inf) is x.
    a = f32(r.standard_normal((3, 4)) * 10)
    b = f32([3.0, -2.5, 0.75, -7.0])
    one_op("f32_mod_fmod", "mod", [a, b], np.fmod(a, b), {"fmod": True}, meta=EXACT)
    ea = f32([5.5, -5.5, 0.0, -0.0, 1.0, 3.0, np.inf, 2.0])
    eb = f32([2.0, 2.0, 3.0, 3.0, 0.0, np.inf, 2.0, -0.5])
    with np.errstate(invalid="ignore"):
        one_op("f32_mod_fmod_edges", "mod", [ea, eb], np.fmod(ea, eb), {"fmod": True}, meta=EXACT)
    for t, (rnd, wid, _) in HALF.items():
        at, bt = rnd(a), rnd(b)
        one_op("%s_mod_fmod" % t, "mod", [at, bt], rnd(np.fmod(wid(at), wid(bt))), {"fmod": True}, meta=EXACT)
    # argmax with output_dtype i64 (ONNX's type), on a float, an integer and a 16-bit input.
    x = f32(r.integers(0, 5, size=(2, 6, 3)))
    one_op("argmax_i64", "argmax", [x], np.argmax(x, axis=1).astype(np.int64), {"axis": 1, "output_dtype": "i64"})
    one_op("argmax_i64_keepdims", "argmax", [x], np.argmax(x, axis=-1)[..., None].astype(np.int64),
           {"axis": -1, "keepdims": True, "output_dtype": "i64"})
    one_op("argmax_i32_named", "argmax", [x], np.argmax(x, axis=0).astype(np.int32), {"axis": 0, "output_dtype": "i32"})
    xi = r.integers(-9, 9, size=(4, 5)).astype(np.int64)
    one_op("i64_argmax_i64", "argmax", [xi], np.argmax(xi, axis=1).astype(np.int64), {"axis": 1, "output_dtype": "i64"})
    xb = bf16(x)
    one_op("bf16_argmax_i64", "argmax", [xb], np.argmax(bf16_f32(xb), axis=1).astype(np.int64),
           {"axis": 1, "output_dtype": "i64"})


def dtype_cases():
    r = np.random.default_rng(20266)
    half_cases(r)
    half_product_cases(np.random.default_rng(20267))
    int_cases(r)
    bool_cases(r)
    cast_cases(r)
    movement_dtype_cases(r)


def fused_block_cases():
    """Patterns the executor runs as one fused kernel (the layer-norm chain as the exporters lower
    nn.LayerNorm, in its variants), and near misses it must leave unfused; references in float64."""
    r = np.random.default_rng(20267)

    def ln_ref(x, eps, gamma=None, beta=None):
        xd = x.astype(np.float64)
        c = xd - xd.mean(axis=-1, keepdims=True)
        y = c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps)
        if gamma is not None:
            y = y * gamma.astype(np.float64)
        if beta is not None:
            y = y + beta.astype(np.float64)
        return y

    def ln_case(name, x, eps, gamma=None, beta=None, square="mul", root="rsqrt", extra_reader=False):
        c = Case(name, tol_k(x.shape[-1]))
        xi = c.input(x, "x")
        xd = x.astype(np.float64)
        mu = xd.mean(axis=-1, keepdims=True)
        m = c.node("mean", [xi], f32(mu), {"axes": [-1], "keepdims": True})
        cd = xd - mu
        cv = c.node("sub", [xi, m], f32(cd))
        sq = c.node("mul", [cv, cv], f32(cd * cd)) if square == "mul" else \
            c.node("pow", [cv, c.const(f32(2.0))], f32(cd * cd))
        var = (cd * cd).mean(axis=-1, keepdims=True)
        v = c.node("mean", [sq], f32(var), {"axes": [-1], "keepdims": True})
        ve = c.node("add", [c.const(f32(eps)), v], f32(var + eps))  # eps on the left
        if root == "rsqrt":
            rs = c.node("rsqrt", [ve], f32(1 / np.sqrt(var + eps)))
            y = c.node("mul", [rs, cv], f32(cd / np.sqrt(var + eps)))  # normalised value on the right
        else:
            rs = c.node("sqrt", [ve], f32(np.sqrt(var + eps)))
            y = c.node("div", [cv, rs], f32(cd / np.sqrt(var + eps)))
        want = ln_ref(x, eps)
        if gamma is not None:
            y = c.node("mul", [y, c.const(gamma)], f32(ln_ref(x, eps, gamma)))
        if beta is not None:
            y = c.node("add", [c.const(beta), y], f32(ln_ref(x, eps, gamma, beta)))
        c.output(y)
        if extra_reader:  # the centred value read outside the chain: the chain must not fuse
            c.output(c.node("neg", [cv], f32(-cd)))
        c.write()

    # Odd width, an offset mean, weight and bias: the exporters' chain (mul, rsqrt).
    x = f32(r.standard_normal((5, 37)) * 2 + 3)
    ln_case("fused_layer_norm", x, 1e-5, f32(r.standard_normal(37)), f32(r.standard_normal(37)))
    # ONNX's older decomposition: pow 2, sqrt then div; weight shaped [1, 1, 33]; a large eps.
    x = f32(r.standard_normal((3, 4, 33)))
    ln_case("fused_layer_norm_pow_div", x, 0.5, f32(r.standard_normal((1, 1, 33))), None, "pow", "sqrt")
    # No weight, bias only; width 1 (every centred value 0).
    ln_case("fused_layer_norm_bias_only", f32(r.standard_normal((4, 9))), 1e-3, None, f32(r.standard_normal(9)))
    ln_case("fused_layer_norm_width1", f32(r.standard_normal((6, 1))), 1e-5)
    # Enough rows to split over threads.
    ln_case("threads_fused_layer_norm", f32(r.standard_normal((300, 129))), 1e-5, f32(r.standard_normal(129)),
            f32(r.standard_normal(129)))
    # A near miss that must run unfused: the centred value read again (test_executor checks the step counts).
    ln_case("layer_norm_unfused_reader", f32(r.standard_normal((4, 10))), 1e-5, f32(r.standard_normal(10)),
            extra_reader=True)

    def transposed_weight_case(name, m, k, n, shared=False):
        """x @ transpose(W) + b with W a constant [n, k], as a Linear layer stores it."""
        c = Case(name, tol_k(k))
        x = c.input(randn(m, k), "x")
        w, b = randn(n, k), randn(n)
        xd = c.arrays[x].astype(np.float64)
        wt = c.node("transpose", [c.const(w)], w.T.copy(), {"perm": [1, 0]})
        mm = xd @ w.T.astype(np.float64)
        y = c.node("matmul", [x, wt], f32(mm))
        c.output(c.node("add", [y, c.const(b)], f32(mm + b)))
        if shared:  # the transposed weight is also an output: the transpose must run
            c.output(wt)
        c.write()

    transposed_weight_case("matmul_transposed_weight", 6, 12, 8)
    transposed_weight_case("threads_matmul_transposed_weight", 40, 300, 130)
    transposed_weight_case("matmul_transposed_weight_shared", 6, 12, 8, shared=True)


def gemm16_cases():
    """matmul and conv2d on f16 and bf16 with constant weights, through the 16-bit GEMM (gemm16.hpp):
    odd depth (the bf16 pair padded with a zero), odd rows and columns (partial micro-tiles and
    panels), depth past one block (256 steps) and rows past one row block (64), the Linear layout
    (transpose of a constant), padding, strides, groups, batch 2, bias and a relu after; references
    in float64 from the 16-bit inputs, rounded once (relu after the rounding, as its own op)."""
    r = np.random.default_rng(20268)
    for t, (rnd, wid, ulp) in HALF.items():
        def tol(k):
            return half_tol(ulp, k)

        for name, (m, k, n) in (("odd", (7, 33, 37)), ("one_row", (1, 5, 17)), ("deep", (70, 601, 40)),
                                ("wide", (9, 64, 300))):
            a, b = rnd(f32(r.standard_normal((m, k)))), rnd(f32(r.standard_normal((k, n))))
            y = wid(a).astype(np.float64) @ wid(b).astype(np.float64)
            one_op("gemm16_%s_matmul_%s" % (t, name), "matmul", [a, b], rnd(f32(y)), meta=tol(k), consts=(1,))
        # x @ transpose(W) with W [n, k] constant: packed as stored; a relu after.
        m, k, n = 9, 19, 50
        c = Case("gemm16_%s_matmul_linear_relu" % t, tol(k))
        x = rnd(f32(r.standard_normal((m, k))))
        w = rnd(f32(r.standard_normal((n, k))))
        xi = c.input(x, "x")
        wt = c.node("transpose", [c.const(w)], w.T.copy(), {"perm": [1, 0]})
        y = rnd(f32(wid(x).astype(np.float64) @ wid(w).astype(np.float64).T))
        mm = c.node("matmul", [xi, wt], y)
        c.output(c.node("relu", [mm], rnd(np.maximum(wid(y), 0))))
        c.write()
        for name, spec in (
                ("odd_pad", dict(x=(2, 3, 9, 8), w=(5, 3, 3, 3), attrs={"pads": [1, 2, 0, 1]})),
                ("strided_grouped", dict(x=(1, 6, 11, 9), w=(4, 3, 3, 2), attrs={"groups": 2, "strides": [2, 1],
                                                                                  "pads": [1, 1, 1, 0]})),
                ("dilated", dict(x=(1, 4, 10, 12), w=(6, 4, 3, 3), attrs={"dilations": [2, 1], "pads": [2, 1, 2, 1]})),
                ("pointwise_blocks", dict(x=(2, 7, 21, 19), w=(66, 7, 1, 1), attrs={})),
                ("deep", dict(x=(1, 60, 6, 6), w=(9, 60, 3, 3), attrs={"pads": [1, 1, 1, 1]}))):
            attrs = spec["attrs"]
            x, w, bias, y, k = half_conv(r, rnd, wid, spec)
            c = Case("gemm16_%s_conv2d_%s_relu" % (t, name), tol(k))
            ids = [c.input(x, "x"), c.const(w), c.const(bias)]
            yc = rnd(f32(y))
            conv = c.node("conv2d", ids, yc, attrs)
            c.output(c.node("relu", [conv], rnd(np.maximum(wid(yc), 0))))
            c.write()


def subsample_pool_cases():
    """Strided 1x1 convolutions run over a subsampled copy of their input, widening 1x1 convolutions on
    small planes turned around, and stride-2 max pools whose bands of rows fold as one (with its own
    generator, so adding them left every other case's data unchanged)."""
    r = np.random.default_rng(20261203)
    cases = {
        # Subsampled: strides (2, 2) over odd extents, (2, 1) grouped over two images, and one whose
        # bottom padding reads outside the input (no subsample: the im2col path).
        "subsampled_2x2": dict(x=(1, 40, 13, 11), w=(70, 40, 1, 1), attrs={"strides": [2, 2]}, bias=True),
        "subsampled_2x1_grouped": dict(x=(2, 24, 9, 10), w=(36, 12, 1, 1), attrs={"strides": [2, 1], "groups": 2}),
        "strided_pointwise_padded": dict(x=(1, 16, 8, 8), w=(20, 16, 1, 1),
                                         attrs={"strides": [2, 2], "pads": [0, 0, 1, 1]}, bias=True),
        # Widening on a 9 x 9 plane from 100 channels: turned around, the channels the GEMM's columns.
        "pointwise_widening_turned": dict(x=(1, 100, 9, 9), w=(150, 100, 1, 1), attrs={}, bias=True),
    }
    for name, spec in cases.items():
        attrs = spec["attrs"]
        x, w = f32(r.standard_normal(spec["x"])), f32(r.standard_normal(spec["w"]))
        bias = f32(r.standard_normal(spec["w"][0])) if spec.get("bias") else None
        inputs = [x, w] + ([bias] if bias is not None else [])
        y = conv_ref(x, w, bias, attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0]), [1, 1],
                     attrs.get("groups", 1))
        one_op("conv2d_" + name, "conv2d", inputs, f32(y), attrs, meta=tol_k(spec["w"][1]), consts=(1, 2))
    # Max pools 3x3 / pad 1 and 2x2 at stride 2 over rows wide enough that a plane folds in several
    # bands (4096 floats a band: 6 rows of 600, 4 of 1024), with NaNs, which win.
    x = f32(r.standard_normal((1, 2, 14, 600)))
    x[0, 1, 5, 17] = np.nan
    one_op("max_pool2d_s2_bands_3x3", "max_pool2d", [x], f32(pool_ref(x, [3, 3], [2, 2], [1] * 4, "max")),
           {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    x = f32(r.standard_normal((1, 3, 13, 1024)))
    x[0, 2, 8, 1001] = np.nan
    one_op("max_pool2d_s2_bands_2x2", "max_pool2d", [x], f32(pool_ref(x, [2, 2], [2, 2], [0] * 4, "max")),
           {"kernel": [2, 2], "strides": [2, 2]})
    # A 3x3 stride-2 convolution onto a 20 x 15 plane (300 positions, 144 values per output): turned
    # around, read in place, over 40 channels (a panel and a part).
    x, w = f32(r.standard_normal((1, 16, 40, 30))), f32(r.standard_normal((40, 16, 3, 3)))
    bias = f32(r.standard_normal(40))
    y = conv_ref(x, w, bias, [2, 2], [1, 1, 1, 1], [1, 1], 1)
    one_op("conv2d_turned_strided_3x3", "conv2d", [x, w, bias], f32(y), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
           meta=tol_k(144), consts=(1, 2))


def half_bulk_cases():
    """f16 and bf16 through the vector conversions (kernels/convert16.hpp) and the f32 kernels they
    feed: a run longer than the binary kernel's blocks, rows against a broadcast column and a scalar,
    reductions over rows longer than a block (a NaN wins a max) and over lanes; then convolutions
    and a matmul over constant weights, which f16 widens and packs as f32 at create (Winograd
    F(2, 3) over 48 channels, a strided 1x1, a 1x1) and bf16 keeps 16-bit. Their own generator."""
    r = np.random.default_rng(20261204)
    for t, (rnd, wid, ulp) in HALF.items():
        a, b = rnd(f32(r.standard_normal(1300) * 3)), rnd(f32(r.standard_normal(1300) * 3))
        one_op("%s_mul_long_run" % t, "mul", [a, b], rnd(wid(a) * wid(b)), meta=EXACT)
        a, b = rnd(f32(r.standard_normal((5, 37)))), rnd(f32(r.standard_normal((5, 1))))
        one_op("%s_sub_column" % t, "sub", [a, b], rnd(wid(a) - wid(b)), meta=EXACT)
        a, s = rnd(f32(r.standard_normal((4, 40)))), rnd(f32([1.7]))
        one_op("%s_div_scalar_left" % t, "div", [s, a], rnd(wid(s) / wid(a)), meta=EXACT)
        x = rnd(f32(r.standard_normal(2500)))
        one_op("%s_unary_relu_long" % t, "relu", [x], rnd(np.maximum(wid(x), f32(0))), meta=EXACT)
        tol = dict(ulp, atol="1e-6")
        x = rnd(f32(r.standard_normal((3, 2100))))
        one_op("%s_mean_long_rows" % t, "mean", [x], rnd(f32(np.mean(wid(x).astype(np.float64), axis=1))),
               {"axes": [1]}, meta=tol)
        x[1, 1500] = rnd(f32([np.nan]))[0]
        one_op("%s_max_long_rows_nan" % t, "max", [x], rnd(np.max(wid(x), axis=1)), {"axes": [1]}, meta=EXACT)
        x = rnd(f32(r.standard_normal((2, 6, 1100))))
        one_op("%s_sum_lanes" % t, "sum", [x], rnd(f32(np.sum(wid(x).astype(np.float64), axis=1))), {"axes": [1]},
               meta=tol)
        for name, spec in (("winograd", dict(x=(1, 48, 12, 10), w=(48, 48, 3, 3), attrs={"pads": [1, 1, 1, 1]})),
                           ("strided_pointwise", dict(x=(1, 32, 9, 9), w=(40, 32, 1, 1), attrs={"strides": [2, 2]})),
                           ("pointwise", dict(x=(2, 20, 6, 7), w=(24, 20, 1, 1), attrs={}))):
            x, w, bias, y, k = half_conv(r, rnd, wid, spec)
            one_op("%s_conv2d_%s" % (t, name), "conv2d", [x, w, bias], rnd(f32(y)), spec["attrs"],
                   meta=half_tol(ulp, k), consts=(1, 2))
        a, b = rnd(f32(r.standard_normal((40, 72)))), rnd(f32(r.standard_normal((72, 50))))
        y = np.matmul(wid(a).astype(np.float64), wid(b).astype(np.float64))
        one_op("%s_matmul_packed" % t, "matmul", [a, b], rnd(f32(y)), meta=half_tol(ulp, 72), consts=(1,))


def few_rows_cases():
    """Products over few rows (one register tile's at most) and several panels of constant weights,
    which run panel by panel through their whole depth (two depth blocks here): a 3x3 convolution
    onto a 2x2 plane, turned around (4 positions, 70 output channels), with its bias and a ReLU; a
    Linear layer of 5 rows whose bias and ReLU are applied as the product stores its tiles. Their
    own generator."""
    r = np.random.default_rng(20261205)
    x, w, b = f32(r.standard_normal((1, 40, 2, 2))), f32(r.standard_normal((70, 40, 3, 3))), f32(r.standard_normal(70))
    y = conv_ref(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    c = Case("conv2d_few_positions_relu", tol_k(360))
    out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(b)], f32(y), {"pads": [1, 1, 1, 1]})
    c.output(c.node("relu", [out], f32(np.maximum(y, 0))))
    c.write()
    a, w, b = f32(r.standard_normal((5, 300))), f32(r.standard_normal((300, 100))), f32(r.standard_normal(100))
    y = a.astype(np.float64) @ w.astype(np.float64)
    c = Case("matmul_few_rows_bias_relu", tol_k(300))
    mm = c.node("matmul", [c.input(a, "x"), c.const(w)], f32(y))
    y = y + b
    add = c.node("add", [mm, c.const(b)], f32(y))
    c.output(c.node("relu", [add], f32(np.maximum(y, 0))))
    c.write()


def half_conv_residual(r, t, half, name, spec, residual_first=False):
    """Case `name` on 16-bit type `t` (HALF[t] = `half`; a threads_ name keeps that prefix first): a
    conv2d `spec` whose rounded output a residual input is added to (first when `residual_first`).
    The tolerance's atol is a unit in the last place of the largest convolution output: a
    convolution output NumPy rounds the other way (its sum in float64) moves the add by that much.
    Returns the case, the add's value id and its rounded result."""
    rnd, wid, ulp = half
    x, w, bias, y, k = half_conv(r, rnd, wid, spec)
    yc = rnd(f32(y))
    res = rnd(f32(r.standard_normal(yc.shape) * 2))
    tol = half_tol(ulp, k)
    tol["atol"] = "%.3g" % (float(tol["atol"]) + float(ulp["rtol"]) * float(np.max(np.abs(wid(yc)))))
    c = Case("%s_%s" % (t, name) if not name.startswith("threads_") else "threads_%s_%s" % (t, name[8:]), tol)
    conv = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], yc, spec["attrs"])
    ri = c.input(res, "residual")
    v = rnd(wid(yc) + wid(res))
    return c, c.node("add", [ri, conv] if residual_first else [conv, ri], v), v


def half_residual_cases():
    """16-bit convolutions followed by a residual add and activations, which run as one step: the
    convolution's outputs rounded, the add and each activation computed in f32 and rounded after
    each op, as when they run alone (kernels/elementwise.hpp's half_epilogue). bf16 through the
    16-bit GEMM: a stride-1 convolution (computed over its padded rows, some columns dropped) and a
    stride-2 one whose add takes the residual first; f16 through the f32 kernels, the threads_ ones
    large enough that the convolution splits position tiles over 2 threads (Winograd's tile ranges;
    GEMM tiles on a plane past 1024 positions, which no build turns around), so its input and
    output convert in bands of rows. Tolerances: half_conv_residual. Their own generator."""
    r = np.random.default_rng(20261206)
    specs = (
        ("conv2d_residual_relu", dict(x=(1, 8, 9, 11), w=(8, 8, 3, 3), attrs={"pads": [1, 1, 1, 1]}), False, ("relu",)),
        ("conv2d_strided_residual_relu_neg", dict(x=(2, 6, 13, 12), w=(10, 6, 3, 3),
                                                  attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}), True,
         ("relu", "neg")),
        ("threads_conv2d_winograd_residual_relu", dict(x=(1, 48, 20, 20), w=(48, 48, 3, 3),
                                                       attrs={"pads": [1, 1, 1, 1]}), False, ("relu",)),
        ("threads_conv2d_tiles_residual_sigmoid", dict(x=(1, 16, 34, 34), w=(16, 16, 3, 3),
                                                       attrs={"pads": [1, 1, 1, 1]}), True, ("sigmoid",)),
    )
    acts = {"relu": lambda v: np.maximum(v, f32(0)), "neg": lambda v: -v,
            "sigmoid": lambda v: f32(1 / (1 + np.exp(-v.astype(np.float64))))}
    for t, half in HALF.items():
        rnd, wid, ulp = half
        for name, spec, residual_first, chain in specs:
            c, out, v = half_conv_residual(r, t, half, name, spec, residual_first)
            for a in chain:
                v = rnd(acts[a](wid(v)))
                out = c.node(a, [out], v)
            c.output(out)
            c.write()
        # A 1x1 convolution NumPy and rml both compute exactly (small integers times halves and
        # ones), then add and exp: the sum needs rounding, and exp of an unrounded sum would move
        # the output by units in the last place (bf16: up to 1.5 %), past the one the case allows.
        x = rnd(f32(r.integers(-2, 3, (1, 4, 5, 7))))
        w = rnd(f32(r.choice([-1.0, -0.5, 0.5, 1.0], (6, 4, 1, 1))))
        bias = rnd(f32(r.choice([-0.5, 0.25], 6)))
        yc = rnd(f32(conv_ref(wid(x), wid(w), wid(bias), [1, 1], [0, 0, 0, 0], [1, 1], 1)))
        res = rnd(f32(r.uniform(-2.5, 2.5, yc.shape)))
        c = Case("%s_conv2d_exact_residual_exp" % t, dict(ulp, atol="1e-6"))
        conv = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], yc, {})
        v = rnd(wid(yc) + wid(res))
        add = c.node("add", [conv, c.input(res, "residual")], v)
        c.output(c.node("exp", [add], rnd(np.exp(wid(v)))))
        c.write()


def close_conv_case(c, r, out, y, residual, relu=True, silu=False):
    """Ends conv2d case `c` whose output `out` holds `y`: a uniform residual input drawn from `r`
    and added when `residual`, then a relu when `relu`, or a SiLU when `silu`; the last value is the
    case's output."""
    if residual:
        res = f32(r.uniform(-1, 1, y.shape))
        y = f32(y) + res
        out = c.node("add", [out, c.input(res, "residual")], y)
    if silu:
        v = np.asarray(y, dtype=np.float64)
        out = c.node("silu", [out], f32(v / (1 + np.exp(-v))))
    elif relu:
        out = c.node("relu", [out], f32(np.maximum(y, 0)))
    c.output(out)
    c.write()


def row_band_cases():
    """Convolutions that run turned around and read their padded input in place (conv.hpp's direct
    runs), large enough that at 2 threads each part takes a band of output rows over every channel
    (PackedConvWeights::by_rows) and pads only the input rows its band reads: a stride-2 one with an
    odd number of rows (bands of 7 and 8), and a stride-1 one whose residual add and relu run as it
    stores its outputs. 48 channels are at least two GEMM panels at every SIMD width. Their own
    generator."""
    r = np.random.default_rng(20261204)
    for name, (xs, stride, residual) in {"s2_odd_rows_relu": ((1, 16, 30, 30), 2, False),
                                         "residual_relu": ((1, 16, 16, 16), 1, True)}.items():
        x = f32(r.uniform(-1, 1, xs))
        w, bias = f32(r.uniform(-1, 1, (48, 16, 3, 3))), f32(r.uniform(-1, 1, 48))
        y = conv_ref(x, w, bias, [stride] * 2, [1, 1, 1, 1], [1, 1], 1)
        c = Case("threads_conv_row_bands_" + name, tol_k(16 * 9))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y),
                     {"strides": [stride] * 2, "pads": [1, 1, 1, 1]})
        close_conv_case(c, r, out, y, residual)


def half_panel_cases():
    """Products whose last GEMM panel is exactly one SIMD packet wide, half of sgemm's kNr: that panel
    takes one packet a depth step (micro_tile<MR, 1>) and stores whole packets. Turned-around 1x1
    convolutions read in place (exact_rows), 288 deep (two depth blocks summed), whose panels are
    output channels: 48 channels (32 + 16 with AVX-512), 56 (3 x 16 + 8 with AVX2), 52 (6 x 8 + 4
    with SSE and NEON), bias and relu. And 1x1 convolutions over tiles of positions, whose last
    panel is one packet of positions (784 = 24 x 32 + 16; 40 = 2 x 16 + 8; 20 = 2 x 8 + 4), bias, a
    residual and SiLU finished as the GEMM stores. Their own generator."""
    r = np.random.default_rng(20261215)
    for name, xs, o, residual in (("turned_avx512", (1, 288, 3, 5), 48, False),
                                  ("turned_avx2", (1, 288, 3, 5), 56, False),
                                  ("turned_sse", (1, 288, 3, 5), 52, False),
                                  ("positions_avx512", (1, 16, 28, 28), 24, True),
                                  ("positions_avx2", (1, 16, 5, 8), 24, True),
                                  ("positions_sse", (1, 16, 4, 5), 24, True)):
        ci = xs[1]
        x, w = f32(r.uniform(-1, 1, xs)), f32(r.uniform(-1, 1, (o, ci, 1, 1)))
        bias = f32(r.uniform(-1, 1, o))
        y = conv_ref(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        c = Case("conv2d_half_panel_" + name, tol_k(ci))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y))
        close_conv_case(c, r, out, y, residual, silu=residual)


def winograd_turned_cases():
    """Winograd convolutions whose passes hold too few tiles for whole GEMM panels of them, so the
    products run turned around (kernels/winograd.hpp's WinogradWeights::turned): 25 tiles (a 10 x 10
    plane at F(2, 3)) with AVX-512's and AVX2's panels; 272 input channels, two depth blocks summed
    through the turned tiles; 60 output channels, a last panel of them partial; at 2 threads, the
    small-plane split by panels of output channels (with a residual add in the output transform)
    and tile ranges of 50 tiles each. Their own generator."""
    r = np.random.default_rng(20261207)
    cases = {
        "conv2d_winograd_turned_relu": dict(x=(1, 48, 10, 10), w=(64, 48), act=True),
        "conv2d_winograd_turned_deep": dict(x=(1, 272, 10, 10), w=(60, 272)),
        "threads_conv2d_winograd_turned_residual_relu": dict(x=(1, 64, 10, 10), w=(96, 64), act=True, residual=True),
        "threads_conv2d_winograd_turned_ranges": dict(x=(1, 48, 20, 20), w=(64, 48), act=True),
    }
    for name, spec in cases.items():
        o, ci = spec["w"]
        x, w = f32(r.uniform(-1, 1, spec["x"])), f32(r.uniform(-1, 1, (o, ci, 3, 3)))
        bias = f32(r.uniform(-1, 1, o))
        y = conv_ref(x, w, bias, [1, 1], [1, 1, 1, 1], [1, 1], 1)
        c = Case(name, tol_k(ci * 9))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y), {"pads": [1, 1, 1, 1]})
        close_conv_case(c, r, out, y, spec.get("residual", False), spec.get("act", False))


def winograd_one_thread_ranges_cases():
    """A Winograd convolution on a 14 x 14 plane with 256 input channels, whose 49 tiles at 1 thread
    run as two ranges of 24 and 25 in turn (kernels/winograd.hpp: one pass's element blocks of V
    would overflow L1), with bias and ReLU fused. At 2 threads the same tiles run in ranges in
    parallel. Its own generator."""
    r = np.random.default_rng(20261211)
    x, w = f32(r.uniform(-1, 1, (1, 256, 14, 14))), f32(r.uniform(-1, 1, (64, 256, 3, 3)))
    bias = f32(r.uniform(-1, 1, 64))
    y = conv_ref(x, w, bias, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    c = Case("conv2d_winograd_ranges_one_thread_relu", tol_k(256 * 9))
    out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y), {"pads": [1, 1, 1, 1]})
    close_conv_case(c, r, out, y, False, True)


def half_subsampled_cases():
    """16-bit strided 1x1 convolutions (ResNet's downsampling projections, which run over their
    input subsampled first) with a residual add and ReLU fused into the step: stride 2 x 3, rows of
    2100 columns, and (f16 only) a threads_ case large enough that the subsampling's rows split
    over 2 threads. Tolerances: half_conv_residual. Their own generator."""
    r = np.random.default_rng(20261208)
    specs = (
        ("conv2d_subsampled_residual_relu", dict(x=(1, 8, 9, 11), w=(12, 8, 1, 1), attrs={"strides": [2, 3]})),
        ("conv2d_subsampled_long_rows_residual_relu",
         dict(x=(1, 3, 3, 2100), w=(4, 3, 1, 1), attrs={"strides": [2, 3]})),
        ("threads_conv2d_subsampled_residual_relu",
         dict(x=(1, 64, 32, 64), w=(32, 64, 1, 1), attrs={"strides": [2, 1]})),
    )
    for t, half in HALF.items():
        rnd, wid, _ = half
        for name, spec in specs:
            if name.startswith("threads_") and t != "f16":
                continue
            c, out, v = half_conv_residual(r, t, half, name, spec)
            v = rnd(np.maximum(wid(v), f32(0)))
            c.output(c.node("relu", [out], v))
            c.write()


def split_positions_cases():
    """At 2 threads, steps on a 14 x 14 plane that split its positions where they had split output
    channels: a 1x1 convolution run turned around whose channel panels divide evenly over the
    threads (256 -> 64, two panels with AVX-512, four with AVX2), with a residual add and ReLU
    stored in its transpose (PackedConvWeights::by_positions), in f32 and f16; the same on 7 x 7, too
    few positions per thread, which keeps the channel split; a Winograd convolution whose 49
    tiles run in ranges of 24 and 25; and a 1x1 convolution on 14 x 14 that widens the channels,
    which keeps the channel split too. Their own generator."""
    def conv_case(r, name, xs, o, k, residual):
        x = f32(r.uniform(-1, 1, xs))
        w, bias = f32(r.uniform(-1, 1, (o, xs[1], k, k))), f32(r.uniform(-1, 1, o))
        pads = [k // 2] * 4
        y = conv_ref(x, w, bias, [1, 1], pads, [1, 1], 1)
        c = Case(name, tol_k(xs[1] * k * k))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], f32(y), {"pads": pads})
        close_conv_case(c, r, out, y, residual)

    r = np.random.default_rng(20261209)
    for name, (xs, o, k, residual) in {
            "threads_pointwise_positions_residual_relu": ((1, 256, 14, 14), 64, 1, True),
            "threads_pointwise_channels_residual_relu": ((1, 256, 7, 7), 64, 1, True),
            "threads_conv2d_winograd_ranges_14": ((1, 48, 14, 14), 48, 3, False)}.items():
        conv_case(r, name, xs, o, k, residual)
    # The 1x1 one in f16, through the f32 kernels: its input widens and its output rounds in the
    # bands of rows its parts take (conv_position_parts). Tolerances: half_conv_residual.
    half = HALF["f16"]
    c, out, v = half_conv_residual(r, "f16", half, "threads_pointwise_positions_residual_relu",
                                   dict(x=(1, 256, 14, 14), w=(64, 256, 1, 1), attrs={}))
    c.output(c.node("relu", [out], half[0](np.maximum(half[1](v), f32(0)))))
    c.write()
    # A turned-around 1x1 convolution on 14 x 14 that widens the channels (96 -> 192: six panels with
    # AVX-512, twelve with AVX2) keeps the channel split however many positions each thread would
    # get: each part reads the input whole and half of the weights. Its own random stream, so the
    # cases above keep theirs.
    conv_case(np.random.default_rng(20261207), "threads_pointwise_widening_channels_residual_relu",
              (1, 96, 14, 14), 192, 1, True)


def paired_projection_cases():
    """A 1x1 convolution whose output an add sums with a later 1x1 projection's, then relu (ResNet's
    bottleneck exit), which the executor runs as one product over both inputs (conv_pair.hpp): on
    a plane of tiles of positions, its projection strided; turned around and read in place on
    14 x 14, the parts splitting positions (three channel panels with AVX-512) and channels (six);
    a pair 320 deep onto 7 x 7, its inputs meeting inside the first depth block; few positions,
    each part a range of output channels (with AVX-512); batch 2 on one thread, the projection's
    stride (2, 3). The reference adds the two convolutions NumPy computed apart. Their own
    generator."""
    r = np.random.default_rng(20261210)
    for name, (a_in, d_in, o, strides) in {
            "threads_paired_projection_tiles": ((1, 24, 20, 20), (1, 16, 40, 40), 48, [2, 2]),
            "threads_paired_projection_positions": ((1, 64, 14, 14), (1, 64, 14, 14), 96, [1, 1]),
            "threads_paired_projection_channels": ((1, 64, 14, 14), (1, 64, 28, 28), 192, [2, 2]),
            "threads_paired_projection_deep": ((1, 200, 7, 7), (1, 120, 14, 14), 64, [2, 2]),
            "threads_paired_projection_rows": ((1, 16, 8, 8), (1, 24, 8, 8), 128, [1, 1]),
            "paired_projection_batch2": ((2, 8, 6, 6), (2, 12, 11, 16), 16, [2, 3])}.items():
        xa, xd = f32(r.uniform(-1, 1, a_in)), f32(r.uniform(-1, 1, d_in))
        wa, ba = f32(r.uniform(-1, 1, (o, a_in[1], 1, 1))), f32(r.uniform(-1, 1, o))
        wd, bd = f32(r.uniform(-1, 1, (o, d_in[1], 1, 1))), f32(r.uniform(-1, 1, o))
        ya = conv_ref(xa, wa, ba, [1, 1], [0] * 4, [1, 1], 1)
        yd = conv_ref(xd, wd, bd, strides, [0] * 4, [1, 1], 1)
        assert ya.shape == yd.shape
        c = Case(name, tol_k(a_in[1] + d_in[1]))
        a = c.node("conv2d", [c.input(xa, "x_a"), c.const(wa), c.const(ba)], f32(ya))
        d = c.node("conv2d", [c.input(xd, "x_d"), c.const(wd), c.const(bd)], f32(yd), {"strides": strides})
        s = c.node("add", [a, d], f32(ya + yd))
        c.output(c.node("relu", [s], f32(np.maximum(ya + yd, 0))))
        c.write()


def expanded_depthwise_cases():
    """A 1x1 expansion whose output only a depthwise convolution reads (MobileNetV2's and
    EfficientNet's inverted residual blocks), which the executor runs as one step (conv_expand.hpp):
    each part a band of output rows, in strips of 8 (stride 2) or 16 (stride 1) rows, each strip's
    expanded planes over the input rows it reads (the rows between strips computed twice) a block of
    channels at a time. ReLU6 on both at stride 2, 200 channels in two blocks, five strips at one
    thread and the last one long; SiLU on both at stride 1 onto an odd width (partial panels, masked
    runs), 50 rows in three strips at one thread and one of 25 per part at two; a 5x5 at stride 2
    with pads that differ per side, no bias on the expansion, batch 2. The first two end in a 1x1
    projection, so the parts take bands of rows; the third's output is the graph's, so they take
    ranges of channels. The reference is NumPy's convolutions and activations one after the other.
    Their own generator."""
    r = np.random.default_rng(20261211)
    relu6 = lambda v: np.minimum(np.maximum(v, 0), 6)
    silu = lambda v: v / (1 + np.exp(-v))
    for name, (xs, o, k, stride, pads, act, bias) in {
            "threads_expanded_depthwise_s2_relu6": ((1, 8, 90, 40), 200, 3, 2, [1, 1, 1, 1], "relu6", True),
            "threads_expanded_depthwise_s1_silu": ((1, 6, 50, 33), 24, 3, 1, [1, 1, 1, 1], "silu", True),
            "expanded_depthwise_5x5_s2_batch2": ((2, 5, 37, 66), 20, 5, 2, [2, 1, 2, 3], None, False)}.items():
        x = f32(r.uniform(-1, 1, xs))
        we, be = f32(r.uniform(-1, 1, (o, xs[1], 1, 1))), f32(r.uniform(-1, 1, o))
        wd, bd = f32(r.uniform(-1, 1, (o, 1, k, k))), f32(r.uniform(-1, 1, o))
        c = Case(name, tol_k(xs[1] * k * k))
        e = conv_ref(x, we, be if bias else None, [1, 1], [0] * 4, [1, 1], 1)
        out = c.node("conv2d", [c.input(x, "x"), c.const(we)] + ([c.const(be)] if bias else []), f32(e))

        def activate(out, v):
            if act == "relu6":
                v = np.maximum(v, 0)
                out = c.node("relu", [out], f32(v))
                v = np.minimum(v, 6)
                return c.node("minimum", [out, c.const(f32(np.array(6.0)))], f32(v)), v
            if act == "silu":
                v = silu(v)
                return c.node("silu", [out], f32(v)), v
            return out, v

        out, e = activate(out, e)
        d = conv_ref(f32(e), wd, bd, [stride] * 2, pads, [1, 1], o)
        out = c.node("conv2d", [out, c.const(wd), c.const(bd)], f32(d),
                     {"strides": [stride] * 2, "pads": pads, "groups": o})
        out, d = activate(out, d)
        if name.startswith("threads_"):
            # A 1x1 projection after the pair (as in MobileNetV2): the parts take bands of rows.
            wp = f32(r.uniform(-1, 1, (8, o, 1, 1)))
            out = c.node("conv2d", [out, c.const(wp)], f32(conv_ref(f32(d), wp, None, [1, 1], [0] * 4, [1, 1], 1)))
        c.output(out)
        c.write()


def channel_scale_cases():
    """A product x * s, s one scale per channel of x, whose only reader is a 1x1 convolution (a
    squeeze-and-excitation's gate before its projection, as EfficientNet's): the executor runs the
    convolution over x with its weights scaled by s at each run and never writes the product
    (conv.hpp's scaled_conv2d_kernel), when the convolution has at most a quarter as many output
    channels as positions. The scale computed in the graph as the squeeze and excitation compute it (mean,
    1x1 convolutions, SiLU, sigmoid) on a plane of tiles of positions, the projection's bias and a
    residual add in its epilogue; an input scale multiplied on the right, a projection turned
    around on 14 x 14 (no bias, relu after); batch 2 with one rank-3 scale for both images. Two
    products that stay steps of their own: a scale per image of a batch of 2, and a projection
    with more than a quarter as many output channels (16) as positions (36). The reference is NumPy's product and
    convolution one after the other. Their own generator."""
    r = np.random.default_rng(20261212)
    silu = lambda v: v / (1 + np.exp(-v))
    sigmoid = lambda v: 1 / (1 + np.exp(-v))
    for name, (xs, ss, o, squeeze, bias, residual, act) in {
            "threads_channel_scale_tiles": ((1, 24, 30, 30), (1, 24, 1, 1), 16, 8, True, True, None),
            "threads_channel_scale_turned": ((1, 96, 14, 14), (1, 96, 1, 1), 40, 0, False, False, "relu"),
            "channel_scale_batch2": ((2, 12, 9, 11), (12, 1, 1), 20, 0, True, False, None),
            "channel_scale_per_image": ((2, 8, 6, 6), (2, 8, 1, 1), 8, 0, True, False, None),
            "channel_scale_wide": ((1, 64, 6, 6), (1, 64, 1, 1), 16, 0, True, False, None)}.items():
        x = f32(r.uniform(-1, 1, xs))
        c = Case(name, tol_k(xs[1]))
        xi = c.input(x, "x")
        if squeeze:
            w1, b1 = f32(r.uniform(-1, 1, (squeeze, xs[1], 1, 1))), f32(r.uniform(-1, 1, squeeze))
            w2, b2 = f32(r.uniform(-1, 1, (xs[1], squeeze, 1, 1))), f32(r.uniform(-1, 1, xs[1]))
            m = f32(x.astype(np.float64).mean(axis=(2, 3), keepdims=True))
            v = c.node("mean", [xi], m, {"axes": [2, 3], "keepdims": True})
            h = f32(conv_ref(m, w1, b1, [1, 1], [0] * 4, [1, 1], 1))
            v = c.node("conv2d", [v, c.const(w1), c.const(b1)], h)
            h = f32(silu(h.astype(np.float64)))
            v = c.node("silu", [v], h)
            g = f32(conv_ref(h, w2, b2, [1, 1], [0] * 4, [1, 1], 1))
            v = c.node("conv2d", [v, c.const(w2), c.const(b2)], g)
            scale = f32(sigmoid(g.astype(np.float64)))
            si = c.node("sigmoid", [v], scale)
            assert scale.shape == ss
            product = f32(scale.astype(np.float64) * x)
            p = c.node("mul", [si, xi], product)  # the scale on the left, as torchvision's SE writes it
        else:
            scale = f32(r.uniform(0, 1, ss))
            product = f32(x.astype(np.float64) * scale)
            p = c.node("mul", [xi, c.input(scale, "s")], product)
        w = f32(r.uniform(-1, 1, (o, xs[1], 1, 1)))
        b = f32(r.uniform(-1, 1, o)) if bias else None
        y = conv_ref(product, w, b, [1, 1], [0] * 4, [1, 1], 1)
        out = c.node("conv2d", [p, c.const(w)] + ([c.const(b)] if bias else []), f32(y))
        if residual:
            res = f32(r.uniform(-1, 1, y.shape))
            y = y + res
            out = c.node("add", [out, c.input(res, "residual")], f32(y))
        if act == "relu":
            y = np.maximum(y, 0)
            out = c.node("relu", [out], f32(y))
        c.output(out)
        c.write()


def conv_max_pool_cases():
    """A convolution whose output only a stride-2 max pool reads, which the executor runs as one step
    (conv.hpp's pooled_conv2d): the convolution's rows computed a band at a time into a tile and
    pooled from there. A 7x7 stride-2 stem with relu and a 3x3 pool (bands of 8 pool rows, so a 3x3
    window's first row carries over from the band before; at 2 threads each part starts a band of
    its own); a 5x5 with a bias only, batch 2, onto an odd number of rows (the last window clipped);
    a 5x5 with relu6 and a 2x2 pool. Every convolution reads its padded input in place over more
    than 1024 positions and fewer output channels than two GEMM panels, so no SIMD width runs it
    turned around. Their own generator."""
    r = np.random.default_rng(20261205)
    for name, (xs, ws, stride, pad, pool, act) in {
            "stem_relu_3x3": ((1, 3, 80, 64), (16, 3, 7, 7), 2, 3, 3, "relu"),
            "bias_odd_rows_3x3": ((2, 8, 41, 28), (24, 8, 5, 5), 1, 2, 3, None),
            "relu6_2x2": ((1, 6, 36, 32), (12, 6, 5, 5), 1, 2, 2, "relu6")}.items():
        x = f32(r.uniform(-1, 1, xs))
        w, bias = f32(r.uniform(-1, 1, ws)), f32(r.uniform(-1, 1, ws[0]))
        y = f32(conv_ref(x, w, bias, [stride] * 2, [pad] * 4, [1, 1], 1))
        c = Case("conv_max_pool_" + name, tol_k(ws[1] * ws[2] * ws[3]))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], y,
                     {"strides": [stride] * 2, "pads": [pad] * 4})
        if act:
            y = np.maximum(y, f32(0))
            out = c.node("relu", [out], y)
        if act == "relu6":
            y = np.minimum(y, f32(6))
            out = c.node("minimum", [out, c.const(f32(np.array(6.0)))], y)
        pads = [1] * 4 if pool == 3 else [0] * 4
        c.output(c.node("max_pool2d", [out], f32(pool_ref(y, [pool] * 2, [2, 2], pads, "max")),
                        {"kernel": [pool] * 2, "strides": [2, 2], "pads": pads}))
        c.write()


def half_conv_max_pool_cases():
    """The pair conv_max_pool_cases fuses, on f16 through the f32 kernels (kernel_table.hpp's
    widened_packed_conv2d): the relu runs on the f32 sums, the pool over them, and only the pool's
    outputs are rounded, which gives the values of the steps run one by one (rounding is monotonic):
    the convolution rounded, relu and the pool on the rounded values. A 7x7 stride-2 stem with relu
    and a 3x3 pool, and a 5x5 with a bias only and a 2x2 pool, batch 2. Tolerance: half_tol over
    the convolution's depth. Their own generator."""
    r = np.random.default_rng(20261207)
    rnd, wid, ulp = HALF["f16"]
    for name, (xs, ws, stride, pad, pool, act) in {
            "stem_relu_3x3": ((1, 3, 80, 64), (16, 3, 7, 7), 2, 3, 3, True),
            "bias_2x2": ((2, 8, 36, 32), (12, 8, 5, 5), 1, 2, 2, False)}.items():
        x, w, bias, y, k = half_conv(r, rnd, wid, dict(x=xs, w=ws, attrs={"strides": [stride] * 2,
                                                                              "pads": [pad] * 4}))
        yc = rnd(f32(y))
        c = Case("f16_conv_max_pool_" + name, half_tol(ulp, k))
        out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], yc,
                     {"strides": [stride] * 2, "pads": [pad] * 4})
        if act:
            yc = rnd(np.maximum(wid(yc), f32(0)))
            out = c.node("relu", [out], yc)
        pads = [1] * 4 if pool == 3 else [0] * 4
        c.output(c.node("max_pool2d", [out], rnd(f32(pool_ref(wid(yc), [pool] * 2, [2, 2], pads, "max"))),
                        {"kernel": [pool] * 2, "strides": [2, 2], "pads": pads}))
        c.write()


def half_strided_conv_cases():
    """16-bit convolutions at stride 2 whose kernel reads every stride phase: bf16 runs them through
    the 16-bit GEMM over a padded copy of the input split by phase (half16.hpp's plan_half_conv), f16
    through the f32 kernels' implicit runs. A 7x7 stem with relu (sized so the 2-thread run splits
    the positions), a 3x3 onto an odd number of rows and columns, and a 3x3 at strides (1, 2) with
    asymmetric padding, batch 2. Computed in float64 from the 16-bit inputs and rounded once, relu
    on the rounded values. Tolerance: half_tol over the depth. Their own generator."""
    r = np.random.default_rng(20261208)
    specs = (
        ("stem_7x7_s2_relu", dict(x=(1, 3, 80, 64), w=(16, 3, 7, 7), attrs={"strides": [2, 2], "pads": [3, 3, 3, 3]}),
         True),
        ("3x3_s2_odd", dict(x=(1, 16, 15, 17), w=(24, 16, 3, 3), attrs={"strides": [2, 2], "pads": [1, 1, 1, 1]}),
         False),
        ("3x3_s1x2_asymmetric", dict(x=(2, 5, 9, 13), w=(7, 5, 3, 3), attrs={"strides": [1, 2], "pads": [1, 0, 2, 1]}),
         False))
    for t, (rnd, wid, ulp) in HALF.items():
        for name, spec, relu in specs:
            x, w, bias, y, k = half_conv(r, rnd, wid, spec)
            yc = rnd(f32(y))
            c = Case("%s_conv2d_strided_%s" % (t, name), half_tol(ulp, k))
            out = c.node("conv2d", [c.input(x, "x"), c.const(w), c.const(bias)], yc, spec["attrs"])
            if relu:
                out = c.node("relu", [out], rnd(np.maximum(wid(yc), f32(0))))
            c.output(out)
            c.write()


def main():
    for name in os.listdir(HERE):
        if name.endswith(".json") or name.endswith(".safetensors"):
            os.remove(os.path.join(HERE, name))
    unary_cases()
    binary_cases()
    matmul_cases()
    conv_cases()
    conv_blocked_cases()
    winograd_cases()
    depthwise_row_cases()
    softmax_chunked_cases()
    pool_cases()
    reduce_cases()
    threaded_cases()
    movement_cases()
    graph_cases()
    scalar_chain_cases()
    dtype_cases()
    fused_block_cases()
    pow_mod_argmax_cases()
    gemm16_cases()
    subsample_pool_cases()
    half_bulk_cases()
    few_rows_cases()
    half_residual_cases()
    row_band_cases()
    winograd_turned_cases()
    half_subsampled_cases()
    split_positions_cases()
    paired_projection_cases()
    expanded_depthwise_cases()
    channel_scale_cases()
    conv_max_pool_cases()
    half_conv_max_pool_cases()
    half_strided_conv_cases()
    winograd_one_thread_ranges_cases()
    half_panel_cases()


if __name__ == "__main__":
    main()
