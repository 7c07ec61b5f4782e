"""The rml op set (SPEC §4) as the exporters see it: names, arities and shape rules.

The exporters use these rules to record every value's type and to refuse, at export time, a lowering that
would not type-check in rml. They mirror `compile_op` but are written independently of it.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

UNARY = ("neg", "abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "gelu", "silu",
         "sin", "cos")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "less", "greater", "mod")
REDUCTIONS = ("sum", "mean", "max", "min")
DATA_MOVEMENT = ("reshape", "transpose", "concat", "slice", "expand", "pad", "copy")
OTHER = ("where", "matmul", "conv2d", "max_pool2d", "avg_pool2d", "softmax", "argmax", "gather", "cast")
LOGICAL = ("logical_and", "logical_or", "logical_not")
ALL_OPS = frozenset(UNARY + BINARY + REDUCTIONS + DATA_MOVEMENT + OTHER + LOGICAL)

DTYPES = ("f32", "f16", "bf16", "i32", "i64", "bool")
FLOAT_DTYPES = ("f32", "f16", "bf16")
NUMERIC_DTYPES = ("f32", "f16", "bf16", "i32", "i64")
COMPARISONS = ("equal", "less", "greater")
# Ops that take every numeric dtype; the other unary and binary ops, matmul, conv2d, the pools, softmax and
# mean take the float dtypes (16-bit floats compute in f32 and round each result).
NUMERIC_OPS = frozenset(("neg", "abs", "relu", "add", "sub", "mul", "div", "pow", "mod", "maximum", "minimum", "sum",
                         "max", "min") + COMPARISONS)

Type = Tuple[str, Tuple[int, ...]]  # (dtype, shape)


class ExportError(Exception):
    """An export that cannot produce a valid rml graph (an op that does not lower, a bad shape, ...)."""


def broadcast_shapes(*shapes: Sequence[int]) -> Tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ExportError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ExportError(f"{what} {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _pool_or_conv_extent(size: int, kernel: int, stride: int, pad_total: int, dilation: int = 1) -> int:
    extent = size + pad_total - dilation * (kernel - 1) - 1
    if extent < 0:
        raise ExportError(f"window {kernel} (dilation {dilation}) larger than padded input {size + pad_total}")
    return extent // stride + 1


def slice_bounds(dim: int, start: int, end: int, step: int) -> range:
    """NumPy clamping for a positive step."""
    return range(*slice(start, end, step).indices(dim))


def infer(op: str, inputs: Sequence[Type], attrs: Dict) -> Type:
    """The output type of `op` on `inputs`; raises ExportError on anything rml would refuse."""
    if op not in ALL_OPS:
        raise ExportError(f"'{op}' is not an rml op")
    dtypes = [t[0] for t in inputs]
    shapes = [tuple(t[1]) for t in inputs]

    def need(count_min: int, count_max: int = -1, f32: bool = True):
        """The input count, and (with `f32`) the op's dtype rule: every input of one dtype the op admits."""
        count_max = count_min if count_max < 0 else count_max
        if not count_min <= len(inputs) <= count_max:
            raise ExportError(f"{op} takes {count_min}..{count_max} inputs, got {len(inputs)}")
        if any(d not in DTYPES for d in dtypes):
            raise ExportError(f"{op}: unknown dtype in {dtypes}")
        if not f32:
            return
        allowed = ("bool",) if op in LOGICAL else NUMERIC_DTYPES if op in NUMERIC_OPS else FLOAT_DTYPES
        if len(set(dtypes)) != 1 or dtypes[0] not in allowed:
            kinds = "bool" if op in LOGICAL else "numeric" if op in NUMERIC_OPS else "float (f32, f16 or bf16)"
            raise ExportError(f"{op} needs {kinds} inputs of one dtype, got {dtypes}")

    if op in UNARY:
        need(1)
        return dtypes[0], shapes[0]
    if op in LOGICAL:
        need(1 if op == "logical_not" else 2)
        return "bool", broadcast_shapes(*shapes)
    if op in BINARY:
        need(2)
        if op in COMPARISONS:  # bool, except the f32 0/1 mask f32 inputs have always given
            return ("f32" if dtypes[0] == "f32" else "bool"), broadcast_shapes(*shapes)
        if op == "mod" and dtypes[0] in FLOAT_DTYPES and not attrs.get("fmod", False):
            raise ExportError("mod on floats needs fmod=True")
        return dtypes[0], broadcast_shapes(*shapes)
    if op == "where":
        need(3, f32=False)
        if dtypes[0] not in ("bool", "f32") or dtypes[1] != dtypes[2]:
            raise ExportError(f"where needs a bool or f32 condition and two values of one dtype, got {dtypes}")
        return dtypes[1], broadcast_shapes(*shapes)
    if op == "matmul":
        need(2)
        a, b = shapes
        if not a or not b:
            raise ExportError("matmul of a scalar")
        a2 = (1,) + a if len(a) == 1 else a
        b2 = b + (1,) if len(b) == 1 else b
        if a2[-1] != b2[-2]:
            raise ExportError(f"matmul inner dimensions differ: {list(a)} x {list(b)}")
        out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
        if len(a) == 1:
            out = out[:-2] + out[-1:]
        if len(b) == 1:
            out = out[:-1]
        return dtypes[0], out
    if op == "conv2d":
        need(2, 3)
        x, w = shapes[0], shapes[1]
        dtype = dtypes[0]
        groups = attrs.get("groups", 1)
        strides, pads, dil = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
        if len(x) != 4 or len(w) != 4 or x[1] != w[1] * groups or w[0] % groups:
            raise ExportError(f"conv2d: input {list(x)} and weight {list(w)} do not fit groups={groups}")
        if len(inputs) == 3 and shapes[2] != (w[0],):
            raise ExportError(f"conv2d: bias {list(shapes[2])} for {w[0]} channels")
        h = _pool_or_conv_extent(x[2], w[2], strides[0], pads[0] + pads[2], dil[0])
        wd = _pool_or_conv_extent(x[3], w[3], strides[1], pads[1] + pads[3], dil[1])
        return dtype, (x[0], w[0], h, wd)
    if op in ("max_pool2d", "avg_pool2d"):
        need(1)
        x = shapes[0]
        kernel = attrs["kernel"]
        strides, pads = attrs.get("strides", kernel), attrs.get("pads", [0] * 4)
        if len(x) != 4:
            raise ExportError(f"{op} needs NCHW input, got {list(x)}")
        return dtypes[0], (x[0], x[1], _pool_or_conv_extent(x[2], kernel[0], strides[0], pads[0] + pads[2]),
                       _pool_or_conv_extent(x[3], kernel[1], strides[1], pads[1] + pads[3]))
    if op in REDUCTIONS or op == "argmax":
        need(1, f32=op != "argmax")
        if op == "argmax" and dtypes[0] not in NUMERIC_DTYPES:
            raise ExportError(f"argmax needs a numeric input, got {dtypes[0]}")
        x = shapes[0]
        if op == "argmax":
            axes = [normalize_axis(attrs["axis"], len(x))]
        else:
            axes = [normalize_axis(a, len(x)) for a in attrs.get("axes", [])] or list(range(len(x)))
        keep = attrs.get("keepdims", False)
        out = tuple((1 if i in axes else d) for i, d in enumerate(x) if keep or i not in axes)
        if op == "argmax" and attrs.get("output_dtype", "i32") not in ("i32", "i64"):
            raise ExportError(f"argmax output_dtype must be i32 or i64, got {attrs['output_dtype']}")
        return (attrs.get("output_dtype", "i32") if op == "argmax" else dtypes[0]), out
    if op == "softmax":
        need(1)
        normalize_axis(attrs.get("axis", -1), len(shapes[0]))
        return dtypes[0], shapes[0]
    if op == "cast":
        need(1, f32=False)
        if attrs["to"] not in DTYPES:
            raise ExportError(f"cast to unknown dtype {attrs['to']}")
        return attrs["to"], shapes[0]
    if op == "gather":
        need(2, f32=False)
        if dtypes[1] not in ("i32", "i64"):
            raise ExportError("gather indices must be i32 or i64")
        data = shapes[0]
        axis = normalize_axis(attrs.get("axis", 0), len(data))
        return dtypes[0], data[:axis] + shapes[1] + data[axis + 1:]
    # Data movement: any dtype, output has the input's dtype.
    if op == "concat":
        need(1, 1 << 30, f32=False)
        if len(set(dtypes)) != 1:
            raise ExportError(f"concat of mixed dtypes {dtypes}")
        axis = normalize_axis(attrs["axis"], len(shapes[0]))
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis):
                raise ExportError(f"concat shapes {[list(s) for s in shapes]} differ off axis {axis}")
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return dtypes[0], tuple(out)
    need(1, f32=False)
    x = shapes[0]
    if op == "copy":
        return dtypes[0], x
    if op == "reshape":
        target = list(attrs["shape"])
        total = 1
        for d in x:
            total *= d
        if target.count(-1) > 1:
            raise ExportError("reshape with more than one -1")
        known = 1
        for d in target:
            if d != -1:
                known *= d
        if -1 in target:
            if known == 0 or total % known:
                raise ExportError(f"reshape {list(x)} to {target}")
            target[target.index(-1)] = total // known
        elif known != total:
            raise ExportError(f"reshape {list(x)} to {target}: element counts differ")
        return dtypes[0], tuple(target)
    if op == "transpose":
        perm = attrs["perm"]
        if sorted(perm) != list(range(len(x))):
            raise ExportError(f"transpose perm {perm} for rank {len(x)}")
        return dtypes[0], tuple(x[p] for p in perm)
    if op == "slice":
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", list(range(len(starts))))
        steps = attrs.get("steps", [1] * len(starts))
        out = list(x)
        for s, e, a, st in zip(starts, ends, axes, steps):
            if st < 1:
                raise ExportError("slice steps must be >= 1")
            a = normalize_axis(a, len(x))
            out[a] = len(slice_bounds(x[a], s, e, st))
        return dtypes[0], tuple(out)
    if op == "expand":
        target = tuple(attrs["shape"])
        if broadcast_shapes(x, target) != target:
            raise ExportError(f"expand {list(x)} to {list(target)}")
        return dtypes[0], target
    if op == "pad":
        pads = attrs["pads"]
        if len(pads) != 2 * len(x) or any(p < 0 for p in pads):
            raise ExportError(f"pad needs {2 * len(x)} non-negative pads, got {list(pads)}")
        out = tuple(d + pads[i] + pads[i + len(x)] for i, d in enumerate(x))
        if any(d < 0 for d in out):
            raise ExportError(f"pad makes a negative dimension: {list(out)}")
        return dtypes[0], out
    raise ExportError(f"no shape rule for {op}")
