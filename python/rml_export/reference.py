"""A NumPy interpreter of the rml op set (SPEC §4): the independent reference for exported graphs.

`run_op(op, inputs, attrs)` computes one node; `run_graph(graph_json, tensors, inputs)` runs a whole
rml-graph and `load(stem)` reads one from disk. It is written for clarity, not speed, and is used to
check exporters against PyTorch / ONNX before (and besides) running the C++ executor.
"""

from __future__ import annotations

import json
import math
from typing import Dict, List, Sequence

import numpy as np

from .safetensors import BF16Array, read_safetensors

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def _gelu(x, approximate):
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))
    else:
        y = 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)))
    return y


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


_UNARY = {
    "neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, 0), "sigmoid": _sigmoid, "tanh": np.tanh,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x, "erf": lambda x: _erf(x.astype(np.float64)), "sin": np.sin, "cos": np.cos,
    "silu": lambda x: x * _sigmoid(x),
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal, "less": np.less, "greater": np.greater,
    "mod": np.fmod,  # floats: fmod only (ops.py refuses the other); integers below
}


def _windows(x, kernel, strides, dilations=(1, 1)):
    """[N, C, H, W] -> [N, C, OH, OW, kH, kW] strided view (no copy)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    eh, ew = dilations[0] * (kh - 1) + 1, dilations[1] * (kw - 1) + 1
    oh, ow = (h - eh) // strides[0] + 1, (w - ew) // strides[1] + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, oh, ow, kh, kw),
        (s[0], s[1], s[2] * strides[0], s[3] * strides[1], s[2] * dilations[0], s[3] * dilations[1]), writeable=False)


def _pad_hw(x, pads, value):
    return np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=value)


def _conv2d(x, w, b, attrs):
    groups = attrs.get("groups", 1)
    xp = _pad_hw(x, attrs.get("pads", [0] * 4), 0.0)
    win = _windows(xp, w.shape[2:], attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]))
    n, c, oh, ow, kh, kw = win.shape
    cg, og = c // groups, w.shape[0] // groups
    outs = []
    for g in range(groups):
        part = win[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        outs.append(np.einsum("nchwij,ocij->nohw", part, wg, optimize=True))
    y = np.concatenate(outs, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def _pool(x, attrs, kind):
    kernel = attrs["kernel"]
    strides = attrs.get("strides", kernel)
    pads = attrs.get("pads", [0] * 4)
    xp = _pad_hw(x, pads, -np.inf if kind == "max" else 0.0)
    win = _windows(xp, kernel, strides)
    return win.max(axis=(4, 5)) if kind == "max" else win.mean(axis=(4, 5))


def _axes(attrs, rank):
    axes = attrs.get("axes") or list(range(rank))
    return tuple(a % rank if rank else 0 for a in axes)


def run_op(op: str, inputs: Sequence[np.ndarray], attrs: Dict) -> np.ndarray:
    """Computes one rml op in NumPy. Inputs keep their dtype for data movement; float arithmetic is done in f32
    (f16 and bf16 results are rounded by the caller, run_graph or the exporters' folding, which know the value's
    dtype); integer arithmetic is exact (div truncates toward zero); comparisons and logical ops give bool (an f32
    value's 0/1 mask is made from it by the caller, as for every value recorded f32)."""
    inputs = [i.to_float32() if isinstance(i, BF16Array) else i for i in inputs]
    x = inputs[0] if inputs else None
    if op in ("logical_and", "logical_or"):
        return getattr(np, op)(inputs[0] != 0, inputs[1] != 0)
    if op == "logical_not":
        return np.logical_not(x != 0)
    if op in ("neg", "abs") and x.dtype.kind in "iu":  # exporters' integer folding
        return _UNARY[op](x)
    if op in _UNARY:
        return _f32(_UNARY[op](_f32(x)))
    if op == "gelu":
        return _f32(_gelu(_f32(x), attrs.get("approximate", "none")))
    if op in _BINARY:
        a, b = inputs
        if op in ("equal", "less", "greater"):
            if a.dtype.kind in "iub" and b.dtype.kind in "iub":
                return _BINARY[op](a, b)  # exact
            with np.errstate(all="ignore"):
                return _BINARY[op](_f32(a), _f32(b))
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":  # exact integer arithmetic
            if op == "div":
                if np.any(b == 0):
                    raise ValueError("integer division by zero")
                q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))  # toward zero, exact past 2^53
                return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))
            if op in ("add", "sub", "mul", "maximum", "minimum"):
                return _BINARY[op](a, b)
            if op == "pow":
                if np.any(b < 0):
                    raise ValueError("integer pow with a negative exponent")
                return np.power(a, b)  # wraps as mul does
            if op == "mod":
                if np.any(b == 0):
                    raise ValueError("integer mod by zero")
                r = np.fmod(a, b) if attrs.get("fmod", False) else np.mod(a, b)  # C's sign / Python's sign
                return r.astype(np.result_type(a, b))
        with np.errstate(all="ignore"):
            return _f32(_BINARY[op](_f32(a), _f32(b)))
    if op == "where":
        c, a, b = inputs
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":  # exporters' integer folding
            return np.where(c != 0, a, b)
        return _f32(np.where(c != 0, a, b))
    if op == "matmul":
        return _f32(np.matmul(_f32(inputs[0]), _f32(inputs[1])))
    if op == "conv2d":
        return _f32(_conv2d(_f32(x), _f32(inputs[1]), _f32(inputs[2]) if len(inputs) > 2 else None, attrs))
    if op == "max_pool2d":
        return _f32(_pool(_f32(x), attrs, "max"))
    if op == "avg_pool2d":
        return _f32(_pool(_f32(x), attrs, "avg"))
    if op in ("sum", "mean", "max", "min"):
        fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op]
        if x.dtype.kind in "iu" and op != "mean":  # exact, in the input's dtype
            return np.asarray(fn(x, axis=_axes(attrs, x.ndim), keepdims=attrs.get("keepdims", False))).astype(x.dtype)
        return _f32(fn(_f32(x), axis=_axes(attrs, x.ndim), keepdims=attrs.get("keepdims", False)))
    if op == "softmax":
        axis = attrs.get("axis", -1)
        e = np.exp(_f32(x) - np.max(x, axis=axis, keepdims=True))
        return _f32(e / np.sum(e, axis=axis, keepdims=True))
    if op == "argmax":
        y = np.argmax(x, axis=attrs["axis"])
        if attrs.get("keepdims", False):
            y = np.expand_dims(y, attrs["axis"])
        return y.astype(np.int64 if attrs.get("output_dtype", "i32") == "i64" else np.int32)
    if op == "cast":
        to = attrs["to"]
        if to == "bool":
            return x != 0  # NaN is true
        if to in ("f32", "f16", "bf16"):
            return _f32(x)  # rounded to f16 or bf16 by the caller
        target = np.int32 if to == "i32" else np.int64
        if x.dtype.kind in "iub":
            info = np.iinfo(target)
            return np.clip(x, info.min, info.max).astype(target)
        info = np.iinfo(target)  # truncating and saturating, NaN 0 (as rml's cast)
        t = np.atleast_1d(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)))
        hi, lo = t >= float(info.max) + 1, t < float(info.min)  # 2^31 (2^63) exactly
        out = np.where(hi | lo, 0.0, t).astype(target)
        out[hi], out[lo] = info.max, info.min
        return out.reshape(x.shape)
    if op == "reshape":
        return x.reshape(attrs["shape"])
    if op == "transpose":
        return np.array(np.transpose(x, attrs["perm"]), order="C")
    if op == "concat":
        return np.concatenate(inputs, axis=attrs["axis"])
    if op == "slice":
        index = [slice(None)] * x.ndim
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", list(range(len(starts))))
        steps = attrs.get("steps", [1] * len(starts))
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[a] = slice(s, e, st)
        return np.array(x[tuple(index)], order="C")
    if op == "expand":
        return np.array(np.broadcast_to(x, attrs["shape"]), order="C")
    if op == "pad":
        pads = attrs["pads"]
        r = x.ndim
        return np.pad(x, [(pads[i], pads[i + r]) for i in range(r)], constant_values=attrs.get("value", 0.0))
    if op == "copy":
        return x.copy()
    if op == "gather":
        axis = attrs.get("axis", 0)
        idx = inputs[1]
        if np.any(idx >= x.shape[axis]) or np.any(idx < -x.shape[axis]):
            raise IndexError(f"gather index out of range for axis {axis} of size {x.shape[axis]}")
        return np.take(x, idx.astype(np.int64), axis=axis)
    raise NotImplementedError(f"reference: no rml op '{op}'")


def load(stem):
    """Reads `<stem>.json` and `<stem>.safetensors`; returns (graph dict, tensors by name)."""
    with open(f"{stem}.json") as f:
        graph = json.load(f)
    try:
        tensors, _ = read_safetensors(f"{stem}.safetensors")
    except FileNotFoundError:
        tensors = {}
    return graph, tensors


# The NumPy dtype each rml dtype is held in here; bf16 as float32 holding bf16 values (NumPy has no bfloat16).
_NP_DTYPE = {"f32": np.float32, "i32": np.int32, "f16": np.float16, "bf16": np.float32, "i64": np.int64,
             "bool": np.bool_}


def round_to(array: np.ndarray, dtype: str) -> np.ndarray:
    """A node's result as a value of `dtype`: floats rounded to f16 or bf16 (nearest, ties to even, from f32),
    bools as an f32 0/1 mask for an f32 value. Integer and bool results must already have their dtype."""
    array = np.asarray(array)
    if dtype == "bf16" and array.dtype.kind == "f":
        return BF16Array.from_float(array).to_float32()
    if dtype in ("f32", "f16") and array.dtype.kind in "fb":
        with np.errstate(over="ignore"):
            return array.astype(np.float32).astype(_NP_DTYPE[dtype])
    return array


def run_graph(graph: Dict, tensors: Dict[str, np.ndarray], inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Runs an rml-graph given as its parsed JSON and its stored tensors; checks every recorded type. Each node's
    result is rounded to its value's dtype, as rml rounds each op's result (f16, bf16). A bf16 value is a
    float32 array (inputs may be given as BF16Array)."""
    values = graph["values"]
    env: Dict[int, np.ndarray] = {}

    def bind(vid, array, what):
        spec = values[vid]
        if isinstance(array, BF16Array):
            array = array.to_float32()
        array = np.asarray(array)
        if array.dtype != _NP_DTYPE[spec["dtype"]] or list(array.shape) != list(spec["shape"]):
            raise ValueError(f"{what}: {array.dtype} {list(array.shape)} but value {vid} ({spec.get('name', '')}) "
                             f"is recorded as {spec['dtype']} {spec['shape']}")
        env[vid] = array

    if len(inputs) != len(graph["inputs"]):
        raise ValueError(f"expected {len(graph['inputs'])} inputs, got {len(inputs)}")
    for vid, array in zip(graph["inputs"], inputs):
        bind(vid, array, f"input {vid}")
    for c in graph["constants"]:
        spec = values[c["value"]]
        if "tensor" in c:
            data = tensors[c["tensor"]]
        else:
            data = np.asarray(c["data"], dtype=np.float32 if spec["dtype"] == "bf16" else _NP_DTYPE[spec["dtype"]])
            data = data.reshape(spec["shape"])
        bind(c["value"], data, f"constant {c['value']}")
    for i, node in enumerate(graph["nodes"]):
        out = run_op(node["op"], [env[v] for v in node["inputs"]], node.get("attrs", {}))
        bind(node["outputs"][0], round_to(out, values[node["outputs"][0]]["dtype"]), f"node {i} ({node['op']})")
    return [env[v] for v in graph["outputs"]]
