"""ONNX → rml-graph: lowers each ONNX node (default domain, opset <= 17) onto the rml op set.

Initializers become constants stored under their ONNX names. Nodes whose inputs are all constant are folded
while lowering (Shape → Gather → Concat → Reshape chains collapse to a constant shape), so shape arguments are
known when the node that reads them is lowered. FLOAT16, BFLOAT16, INT64 and BOOL tensors keep their type (rml's
f16, bf16, i64 and bool); other integers become i32 (constants only when every value fits), and doubles become f32
when `allow_double` is set. With `narrow=True`, the seed format's rules instead: INT64 becomes i32 (when it fits),
BOOL an f32 0/1 mask, 16-bit floats f32, so that readers of f32/i32-only files can read the result.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import lower, ops
from .graph import GraphBuilder, Value
from .safetensors import BF16Array
from .ops import ExportError, normalize_axis

MAX_OPSET = 17

_FLOAT_TYPES = {onnx.TensorProto.FLOAT}
_NARROW_INT_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
_COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
_INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8,
              onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


_KEPT_TYPES = {onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.BFLOAT16: "bf16", onnx.TensorProto.INT64: "i64",
               onnx.TensorProto.BOOL: "bool"}


def rml_dtype_of_onnx(elem_type: int, allow_double: bool, what: str, narrow: bool = True) -> str:
    if not narrow and elem_type in _KEPT_TYPES:
        return _KEPT_TYPES[elem_type]
    if elem_type in _FLOAT_TYPES or elem_type in (onnx.TensorProto.BOOL, onnx.TensorProto.FLOAT16,
                                                  onnx.TensorProto.BFLOAT16):
        return "f32"
    if elem_type == onnx.TensorProto.DOUBLE:
        if allow_double:
            return "f32"
        raise ExportError(f"{what} is double (use allow_double to compute it in f32)")
    if elem_type in _INT_TYPES:
        return "i32"
    raise ExportError(f"{what} has element type {onnx.TensorProto.DataType.Name(elem_type)}")


class _Context:
    def __init__(self, builder: GraphBuilder, opset: int, allow_double: bool):
        self.b, self.opset, self.allow_double = builder, opset, allow_double
        self.node: Optional[onnx.NodeProto] = None
        self.uses: Dict[str, int] = {}  # how many node inputs and graph outputs read each tensor name
        # i32 values whose ONNX type has at most 16 bits (exact in f32), by id; holding them keeps the ids unique
        self.narrow: Dict[int, Value] = {}

    def selecting(self, inputs: Sequence[Value], compute, floats_only: bool = False) -> Value:
        """Runs `compute` on f32 inputs for ops that only compare or select values (max, min, clip, max pool,
        comparisons). Integer inputs qualify when their ONNX type has at most 16 bits, or they are constants that
        f32 holds exactly; an integer result is cast back to i32. Other inputs of one numeric dtype are, unless
        narrowing, computed in it (rml's maximum, minimum and comparisons take every numeric dtype; with
        `floats_only`, as for max pooling, the float dtypes)."""
        if all(v.dtype == "f32" for v in inputs):
            return compute(list(inputs))

        def exact(v):
            return v.dtype == "f32" or id(v) in self.narrow or (v.dtype == "i32" and v.is_const and (
                np.asarray(v.data).size == 0 or np.max(np.abs(np.asarray(v.data))) < 2**24))

        if not all(exact(v) for v in inputs):
            live = {v.dtype for v in inputs if not v.is_const} or {inputs[0].dtype}
            if not self.b.narrow and len(live) == 1 and live <= set(
                    ops.FLOAT_DTYPES if floats_only else ops.NUMERIC_DTYPES):
                return compute(list(inputs))
            raise ExportError(f"integer {self.node.op_type} (rml arithmetic is f32; only integers of at most "
                              f"16 bits are compared exactly through it)")
        y = compute([self.to_f32(v) for v in inputs])
        if any(v.dtype == "i32" for v in inputs) and self.node.op_type not in _COMPARISONS:
            y = self.op("cast", y, to="i32")
            self.narrow[id(y)] = y
        return y

    def op(self, op: str, *inputs, **attrs) -> Value:
        return self.b.op(op, [self.value(x) for x in inputs], **attrs)

    def value(self, x) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, (int, float)):
            return self.b.scalar(float(x))
        return self.b.const(np.asarray(x))

    def const_data(self, v: Optional[Value], what: str) -> Optional[np.ndarray]:
        """The data of an input that must be known at export time (a shape, axes, pads...)."""
        if v is None:
            return None
        if not v.is_const:
            raise ExportError(f"{what} must be a constant")
        return np.asarray(v.data)

    def const_ints(self, v: Optional[Value], what: str) -> Optional[List[int]]:
        data = self.const_data(v, what)
        return None if data is None else [int(i) for i in data.reshape(-1)]

    def to_f32(self, v: Value) -> Value:
        return v if v.dtype == "f32" else self.op("cast", v, to="f32")

    def to_dtype(self, v: Value, dtype: str) -> Value:
        return v if v.dtype == dtype else self.op("cast", v, to=dtype)

    def dtype_of_onnx(self, elem_type: int, what: str) -> str:
        return rml_dtype_of_onnx(elem_type, self.allow_double, what, self.b.narrow)


def _attrs(node: onnx.NodeProto) -> Dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode("utf-8") for s in v]
        out[a.name] = v
    return out


HANDLERS: Dict[str, Callable] = {}


_handles = lower.registrar(HANDLERS)


def _unary(op):
    return lambda ctx, x, **a: ctx.op(op, x)


for _n, _op in (("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Exp", "exp"), ("Log", "log"),
                ("Sqrt", "sqrt"), ("Abs", "abs"), ("Neg", "neg"), ("Erf", "erf"), ("Sin", "sin"), ("Cos", "cos"),
                ("Reciprocal", "reciprocal")):
    HANDLERS[_n] = _unary(_op)


@_handles("Identity")
def _identity(ctx, x, **a):
    return x


@_handles("Dropout")
def _dropout(ctx, x, ratio=None, training_mode=None, **a):
    if training_mode is not None and (not training_mode.is_const or np.any(training_mode.data)):
        raise ExportError("dropout in training mode")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return [x, ctx.b.const(np.ones(x.shape, dtype=np.float32))]
    return x


@_handles("Gelu")
def _gelu(ctx, x, approximate="none", **a):
    return ctx.op("gelu", x, approximate=approximate)


def _scalar_fn(expr):
    return lambda ctx, x, **a: expr(ctx, x, a)


HANDLERS["LeakyRelu"] = _scalar_fn(lambda c, x, a: c.op("add", c.op("relu", x),
                                                         c.op("mul", c.op("minimum", x, 0.0), a.get("alpha", 0.01))))
HANDLERS["Softplus"] = _scalar_fn(lambda c, x, a: c.op("log", c.op("add", c.op("exp", x), 1.0)))
HANDLERS["Softsign"] = _scalar_fn(lambda c, x, a: c.op("div", x, c.op("add", c.op("abs", x), 1.0)))
HANDLERS["HardSigmoid"] = _scalar_fn(lambda c, x, a: c.op("maximum", c.op("minimum", c.op(
    "add", c.op("mul", x, a.get("alpha", 0.2)), a.get("beta", 0.5)), 1.0), 0.0))
HANDLERS["HardSwish"] = _scalar_fn(lambda c, x, a: c.op("mul", x, c.op("maximum", c.op("minimum", c.op(
    "add", c.op("mul", x, 1.0 / 6.0), 0.5), 1.0), 0.0)))
HANDLERS["Tan"] = _scalar_fn(lambda c, x, a: c.op("div", c.op("sin", x), c.op("cos", x)))
HANDLERS["Sinh"] = _scalar_fn(lambda c, x, a: c.op("mul", c.op("sub", c.op("exp", x), c.op("exp", c.op("neg", x))),
                                                    0.5))
HANDLERS["Cosh"] = _scalar_fn(lambda c, x, a: c.op("mul", c.op("add", c.op("exp", x), c.op("exp", c.op("neg", x))),
                                                    0.5))
HANDLERS["Asinh"] = _scalar_fn(lambda c, x, a: c.op("log", c.op("add", x, c.op("sqrt", c.op("add", c.op(
    "mul", x, x), 1.0)))))
HANDLERS["Acosh"] = _scalar_fn(lambda c, x, a: c.op("log", c.op("add", x, c.op("sqrt", c.op("sub", c.op(
    "mul", x, x), 1.0)))))
HANDLERS["Atanh"] = _scalar_fn(lambda c, x, a: c.op("mul", c.op("log", c.op("div", c.op("add", x, 1.0), c.op(
    "sub", 1.0, x))), 0.5))
HANDLERS["Mish"] = _scalar_fn(lambda c, x, a: c.op("mul", x, c.op("tanh", HANDLERS["Softplus"](c, x))))
HANDLERS["ThresholdedRelu"] = _scalar_fn(
    lambda c, x, a: c.op("where", c.op("greater", x, a.get("alpha", 1.0)), x, 0.0))
HANDLERS["Sign"] = _scalar_fn(lambda c, x, a: c.op("sub", c.op("greater", x, 0.0), c.op("less", x, 0.0)))


def _elu_like(ctx, x, alpha, scale=1.0):
    neg = ctx.op("mul", ctx.op("sub", ctx.op("exp", ctx.op("minimum", x, 0.0)), 1.0), alpha)
    y = ctx.op("add", ctx.op("relu", x), neg)
    return ctx.op("mul", y, scale) if scale != 1.0 else y


HANDLERS["Elu"] = _scalar_fn(lambda c, x, a: _elu_like(c, x, a.get("alpha", 1.0)))
HANDLERS["Selu"] = _scalar_fn(lambda c, x, a: _elu_like(c, x, a.get("alpha", 1.67326319217681884765625),
                                                        a.get("gamma", 1.05070102214813232421875)))


@_handles("Celu")
def _celu(ctx, x, alpha=1.0, **a):
    neg = ctx.op("mul", ctx.op("sub", ctx.op("exp", ctx.op("div", ctx.op("minimum", x, 0.0), alpha)), 1.0), alpha)
    return ctx.op("add", ctx.op("relu", x), neg)


@_handles("PRelu")
def _prelu(ctx, x, slope, **a):
    return ctx.op("add", ctx.op("relu", x), ctx.op("mul", ctx.op("minimum", x, 0.0), slope))


@_handles("Clip")
def _clip(ctx, x, lo=None, hi=None, min=None, max=None, **a):
    lo = lo if lo is not None else (None if min is None else ctx.b.scalar(min))
    hi = hi if hi is not None else (None if max is None else ctx.b.scalar(max))
    bounds = [v for v in (lo, hi) if v is not None]

    def clip(xs):
        y, rest = xs[0], xs[1:]
        if lo is not None:  # a constant lower bound of 0 is a relu, which executors fuse into the producing kernel
            low, rest = rest[0], rest[1:]
            zero = low.is_const and low.data.size == 1 and float(low.data.reshape(-1)[0]) == 0.0
            y = ctx.op("relu", y) if zero else ctx.op("maximum", y, low)
        return ctx.op("minimum", y, rest[0]) if hi is not None else y

    return ctx.selecting([x] + bounds, clip)


def _binary(op):
    def lowering(ctx, a, b, **attrs):
        if attrs.get("broadcast") == 1 and "axis" in attrs:
            raise ExportError("legacy broadcast with axis")
        if a.dtype == "bool" or b.dtype == "bool":
            return _logical(ctx, op, a, b)
        if a.dtype == "i32" and b.dtype == "i32" and not (a.is_const and b.is_const):
            if op in ("maximum", "minimum", "equal", "less", "greater"):
                return ctx.selecting([a, b], lambda xs: ctx.op(op, *xs))
            if ctx.b.narrow:
                raise ExportError(f"integer {ctx.node.op_type} (narrowed, rml arithmetic is f32)")
        return ctx.op(op, a, b)  # unless narrowing, integer arithmetic is rml's (i32, i64; div truncates)
    return lowering


def _logical(ctx, op, a, b):
    """And (lowered as mul) and Or (maximum) on bool values; comparisons of bools through their 0/1 values."""
    if op == "mul":
        return ctx.op("logical_and", a, b)
    if op == "maximum":
        return ctx.op("logical_or", a, b)
    return ctx.op(op, ctx.to_dtype(a, "i32"), ctx.to_dtype(b, "i32"))


def _complement(ctx, x):
    """1 - x for an f32 0/1 mask, logical_not for a bool."""
    return ctx.op("logical_not", x) if x.dtype == "bool" else ctx.op("sub", 1.0, x)


def _xor(ctx, a, b, **k):
    if a.dtype == "bool":
        return ctx.op("logical_and", ctx.op("logical_or", a, b), ctx.op("logical_not", ctx.op("logical_and", a, b)))
    return ctx.op("abs", ctx.op("sub", a, b))


@_handles("Pow")
def _pow(ctx, base, exponent, **a):
    if base.dtype not in ops.FLOAT_DTYPES and ctx.b.narrow:
        raise ExportError("integer Pow base (narrowed, rml arithmetic is f32)")
    # A float base: integer exponents are exact in f32 up to 2^24. An integer base: rml's integer pow (wraps;
    # a negative exponent fails the run), with a float exponent only when it is a constant holding integers.
    if base.dtype not in ops.FLOAT_DTYPES and exponent.dtype in ops.FLOAT_DTYPES:
        data = _float_data(exponent) if exponent.is_const else None
        if data is None or not np.all(np.isfinite(data) & (data == np.trunc(data))):
            raise ExportError("integer Pow with a float exponent that is not a constant holding integers")
    return ctx.op("pow", base, ctx.to_dtype(exponent, base.dtype))


def _float_data(v) -> np.ndarray:
    data = v.data
    return data.to_float32() if hasattr(data, "to_float32") else np.asarray(data, dtype=np.float64)


@_handles("Mod")
def _mod(ctx, a, b, fmod=0, **k):
    if a.dtype not in ops.FLOAT_DTYPES and ctx.b.narrow:
        raise ExportError("integer Mod (narrowed, rml arithmetic is f32)")
    if a.dtype in ops.FLOAT_DTYPES and not fmod:
        raise ExportError("Mod on floats with fmod=0 (ONNX requires fmod=1)")
    return ctx.op("mod", a, ctx.to_dtype(b, a.dtype), fmod=bool(fmod))


for _n, _op in (("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"),
                ("Equal", "equal"), ("Less", "less"), ("Greater", "greater"), ("And", "mul"), ("Or", "maximum")):
    HANDLERS[_n] = _binary(_op)
HANDLERS["GreaterOrEqual"] = lambda ctx, a, b, **k: _complement(ctx, _binary("less")(ctx, a, b))
HANDLERS["LessOrEqual"] = lambda ctx, a, b, **k: _complement(ctx, _binary("greater")(ctx, a, b))
HANDLERS["Not"] = lambda ctx, x, **k: _complement(ctx, x)
HANDLERS["Xor"] = _xor


def _variadic(op, mean=False):
    def lowering(ctx, *xs, **a):
        y = xs[0]
        for x in xs[1:]:
            y = _binary(op)(ctx, y, x)
        if len(xs) == 1 and not mean:
            return y
        return ctx.op("div", y, float(len(xs))) if mean else y
    return lowering


HANDLERS["Sum"], HANDLERS["Max"], HANDLERS["Min"] = _variadic("add"), _variadic("maximum"), _variadic("minimum")
HANDLERS["Mean"] = _variadic("add", mean=True)


@_handles("Where")
def _where(ctx, cond, a, b, **k):
    if (a.dtype != "f32" or b.dtype != "f32") and ctx.b.narrow:
        if not (a.is_const and b.is_const and cond.is_const):
            raise ExportError("integer Where (narrowed, rml where is f32)")
    return ctx.op("where", cond, a, b)


# -- linear algebra, convolution, normalisation -----------------------------------------------------------------
@_handles("MatMul")
def _matmul(ctx, a, b, **k):
    return ctx.op("matmul", a, b)


@_handles("Gemm")
def _gemm(ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0, **k):
    if transA:
        a = ctx.op("transpose", a, perm=[1, 0])
    if transB:
        b = ctx.op("transpose", b, perm=[1, 0])
    if alpha != 1.0:  # scale the smaller (often constant) operand
        if b.is_const or not a.is_const and math.prod(b.shape) <= math.prod(a.shape):
            b = ctx.op("mul", b, alpha)
        else:
            a = ctx.op("mul", a, alpha)
    y = ctx.op("matmul", a, b)
    if c is not None and beta != 0.0:
        y = ctx.op("add", y, c if beta == 1.0 else ctx.op("mul", c, beta))
    return y


def _to_2d(ctx, x, what):
    """A 1-D (N, C, L) tensor as (N, C, 1, L) for the 2-D ops; returns (x, restore)."""
    if len(x.shape) == 4:
        return x, lambda y: y
    if len(x.shape) == 3:
        n, c, l = x.shape
        return ctx.op("reshape", x, shape=[n, c, 1, l]), \
            lambda y: ctx.op("reshape", y, shape=[y.shape[0], y.shape[1], y.shape[3]])
    raise ExportError(f"{what} on a rank-{len(x.shape)} tensor (only 1-D and 2-D spatial)")


def _spatial(values, default, rank1d):
    values = list(values) if values is not None else None
    if values is None:
        return default
    return ([1] + values if len(values) == 1 else values) if rank1d else values


def _auto_pads(auto_pad, in_hw, kernel, strides, dilations, pads):
    if auto_pad in ("NOTSET", "", None):
        return [pads[0], pads[1], pads[2], pads[3]]
    if auto_pad == "VALID":
        return [0, 0, 0, 0]
    begin, end = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begin.append(large if auto_pad == "SAME_LOWER" else small)
        end.append(small if auto_pad == "SAME_LOWER" else large)
    return [begin[0], begin[1], end[0], end[1]]


def _window_attrs(ctx, x4, kernel, rank1d, a):
    strides = _spatial(a.get("strides"), [1, 1], rank1d)
    dilations = _spatial(a.get("dilations"), [1, 1], rank1d)
    pads = a.get("pads")
    if pads is None:
        pads = [0, 0, 0, 0]
    elif rank1d:
        pads = [0, pads[0], 0, pads[1]]
    pads = _auto_pads(a.get("auto_pad", "NOTSET"), x4.shape[2:], kernel, strides, dilations, pads)
    return strides, dilations, pads


def _conv_operands_2d(ctx, x, w, what):
    """Input and weight of a 1-D or 2-D (transposed) convolution as 2-D ones; returns (x, w, restore, is_1d)."""
    x4, restore = _to_2d(ctx, x, what)
    rank1d = len(x.shape) == 3
    if rank1d:
        w = ctx.op("reshape", w, shape=[w.shape[0], w.shape[1], 1, w.shape[2]])
    return x4, w, restore, rank1d


@_handles("Conv")
def _conv(ctx, x, w, bias=None, **a):
    x4, w, restore, rank1d = _conv_operands_2d(ctx, x, w, "Conv")
    strides, dilations, pads = _window_attrs(ctx, x4, list(w.shape[2:]), rank1d, a)
    inputs = [x4, w] + ([bias] if bias is not None else [])
    return restore(ctx.op("conv2d", *inputs, strides=strides, pads=pads, dilations=dilations,
                          groups=a.get("group", 1)))


def _pool_pads_ceil(x4, kernel, strides, pads, dilations, ceil_mode):
    if not ceil_mode:
        return pads
    pads = list(pads)
    for axis in range(2):
        size = x4.shape[2 + axis] + pads[axis] + pads[2 + axis]
        span = dilations[axis] * (kernel[axis] - 1) + 1
        out_ceil = -(-(size - span) // strides[axis]) + 1
        if (out_ceil - 1) * strides[axis] >= x4.shape[2 + axis] + pads[axis]:
            out_ceil -= 1  # the last window must start inside the input or its begin padding
        pads[2 + axis] += (out_ceil - 1) * strides[axis] + span - size
    return pads


@_handles("MaxPool", "AveragePool")
def _pool(ctx, x, **a):
    is_max = ctx.node.op_type == "MaxPool"
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ExportError("MaxPool with an Indices output")
    if a.get("storage_order", 0):
        raise ExportError("storage_order=1")
    x4, restore = _to_2d(ctx, x, ctx.node.op_type)
    rank1d = len(x.shape) == 3
    kernel = _spatial(a["kernel_shape"], None, rank1d)
    strides, dilations, pads = _window_attrs(ctx, x4, kernel, rank1d, a)
    if dilations != [1, 1]:
        raise ExportError("pooling with dilations")
    ceiled = _pool_pads_ceil(x4, kernel, strides, pads, dilations, a.get("ceil_mode", 0))
    if is_max:
        return restore(ctx.selecting([x4], lambda xs: ctx.op("max_pool2d", xs[0], kernel=kernel, strides=strides,
                                                              pads=ceiled), floats_only=True))
    extra = [ceiled[2] - pads[2], ceiled[3] - pads[3]]
    return restore(lower.avg_pool(ctx.b, x4, kernel, strides, pads, bool(a.get("count_include_pad", 0)), extra))


@_handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx, x, **a):
    axes = list(range(2, len(x.shape)))
    return ctx.op("mean" if ctx.node.op_type == "GlobalAveragePool" else "max", x, axes=axes, keepdims=True)


@_handles("BatchNormalization")
def _batch_norm(ctx, x, scale, bias, mean, var, epsilon=1e-5, training_mode=0, **a):
    if training_mode or len([o for o in ctx.node.output if o]) > 1:
        raise ExportError("BatchNormalization in training mode")
    shape = [x.shape[1]] + [1] * (len(x.shape) - 2)
    factor = ctx.op("mul", ctx.op("rsqrt", ctx.op("add", var, float(epsilon))), scale)
    shift = ctx.op("sub", bias, ctx.op("mul", mean, factor))
    conv = x.producer
    if (conv is not None and conv.op == "conv2d" and ctx.uses[ctx.node.input[0]] == 1 and factor.is_const
            and shift.is_const and all(v.is_const for v in conv.inputs[1:])):
        # Fold into the convolution that only this node reads: w' = w * factor, b' = b * factor + shift.
        w = conv.inputs[1]
        conv.inputs[1] = ctx.op("mul", w, ctx.op("reshape", factor, shape=[-1] + [1] * (len(w.shape) - 1)))
        conv_bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        folded = shift if conv_bias is None else ctx.op("add", ctx.op("mul", conv_bias, factor), shift)
        conv.inputs[2:] = [folded]
        return x
    return ctx.op("add", ctx.op("mul", x, ctx.op("reshape", factor, shape=shape)),
                  ctx.op("reshape", shift, shape=shape))


@_handles("LayerNormalization")
def _layer_norm(ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1, **a):
    axis = normalize_axis(axis, len(x.shape))
    return list(lower.layer_norm(ctx.b, x, range(axis, len(x.shape)), epsilon, scale, bias))


@_handles("InstanceNormalization")
def _instance_norm(ctx, x, scale, bias, epsilon=1e-5, **a):
    shape = [x.shape[1]] + [1] * (len(x.shape) - 2)
    return lower.layer_norm(ctx.b, x, range(2, len(x.shape)), epsilon, ctx.op("reshape", scale, shape=shape),
                            ctx.op("reshape", bias, shape=shape))[0]


@_handles("MeanVarianceNormalization")
def _mvn(ctx, x, axes=(0, 2, 3), **a):
    mean = ctx.op("mean", x, axes=list(axes), keepdims=True)
    centered = ctx.op("sub", x, mean)
    var = ctx.op("mean", ctx.op("mul", centered, centered), axes=list(axes), keepdims=True)
    return ctx.op("div", centered, ctx.op("add", ctx.op("sqrt", var), 1e-9))


# -- reductions, softmax, argmax --------------------------------------------------------------------------------
def _reduce_axes(ctx, x, axes_input, a):
    if axes_input is not None:
        axes = ctx.const_ints(axes_input, "reduction axes")
    else:
        axes = a.get("axes")
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return None
        return list(range(len(x.shape)))
    return [normalize_axis(int(i), len(x.shape)) for i in axes]


def _reduction(kind):
    def lowering(ctx, x, axes_input=None, **a):
        axes = _reduce_axes(ctx, x, axes_input, a)
        if axes is None:
            return x
        keep = bool(a.get("keepdims", 1))
        if kind in ("sum", "mean", "max", "min"):
            return ctx.op(kind, x, axes=axes, keepdims=keep)
        if kind == "l1":
            return ctx.op("sum", ctx.op("abs", x), axes=axes, keepdims=keep)
        if kind == "sum_square":
            return ctx.op("sum", ctx.op("mul", x, x), axes=axes, keepdims=keep)
        if kind == "l2":
            return ctx.op("sqrt", ctx.op("sum", ctx.op("mul", x, x), axes=axes, keepdims=keep))
        if kind == "log_sum":
            return ctx.op("log", ctx.op("sum", x, axes=axes, keepdims=keep))
        peak = ctx.op("max", x, axes=axes, keepdims=True)  # log_sum_exp, shifted for stability
        total = ctx.op("sum", ctx.op("exp", ctx.op("sub", x, peak)), axes=axes, keepdims=keep)
        return ctx.op("add", ctx.op("log", total), peak if keep else ctx.op("reshape", peak, shape=total.shape))
    return lowering


for _n, _k in (("ReduceSum", "sum"), ("ReduceMean", "mean"), ("ReduceMax", "max"), ("ReduceMin", "min"),
               ("ReduceL1", "l1"), ("ReduceL2", "l2"), ("ReduceSumSquare", "sum_square"),
               ("ReduceLogSum", "log_sum"), ("ReduceLogSumExp", "log_sum_exp")):
    HANDLERS[_n] = _reduction(_k)


def _over_axis(ctx, x, axis, compute):
    """Softmax-like ops: from opset 13 `compute(x, axis)` (axis default -1); before, the input is coerced to 2-D
    at `axis` (default 1) and computed along its second axis."""
    rank = len(x.shape)
    if ctx.opset >= 13:
        return compute(x, normalize_axis(-1 if axis is None else axis, rank))
    axis = normalize_axis(1 if axis is None else axis, rank)
    flat = ctx.op("reshape", x, shape=[math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])
    return ctx.op("reshape", compute(flat, 1), shape=list(x.shape))


def _hardmax(ctx, y, axis):  # a one-hot of the first maximum
    index = ctx.op("cast", ctx.op("argmax", y, axis=axis, keepdims=True), to="f32")
    shape = [1] * len(y.shape)
    shape[axis] = y.shape[axis]
    return ctx.op("equal", index, ctx.b.const(np.arange(y.shape[axis], dtype=np.float32).reshape(shape)))


HANDLERS["Softmax"] = lambda ctx, x, axis=None, **a: _over_axis(ctx, x, axis, lambda y, ax: ctx.op(
    "softmax", y, axis=ax))
HANDLERS["LogSoftmax"] = lambda ctx, x, axis=None, **a: _over_axis(ctx, x, axis, lambda y, ax: lower.log_softmax(
    ctx.b, y, ax))
HANDLERS["Hardmax"] = lambda ctx, x, axis=None, **a: _over_axis(ctx, x, axis, lambda y, ax: _hardmax(ctx, y, ax))



@_handles("ArgMax", "ArgMin")
def _argmax(ctx, x, axis=0, keepdims=1, select_last_index=0, **a):
    if ctx.node.op_type == "ArgMin":
        x = ctx.op("neg", x)
    axis = normalize_axis(axis, len(x.shape))
    if not select_last_index:  # ONNX's indices are INT64: i64 unless narrowing (then no attribute: the seed format)
        wide = {} if ctx.b.narrow else {"output_dtype": "i64"}
        return ctx.op("argmax", x, axis=axis, keepdims=bool(keepdims), **wide)
    size = x.shape[axis]
    reversed_x = ctx.op("gather", x, ctx.b.const(np.arange(size - 1, -1, -1, dtype=np.int32)), axis=axis)
    index = ctx.op("cast", ctx.op("argmax", reversed_x, axis=axis, keepdims=bool(keepdims)), to="f32")
    return ctx.op("cast", ctx.op("sub", float(size - 1), index), to="i32")


# -- data movement ----------------------------------------------------------------------------------------------
@_handles("Reshape")
def _reshape(ctx, x, shape, allowzero=0, **a):
    target = ctx.const_ints(shape, "Reshape shape")
    if not allowzero:
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    _, resolved = ops.infer("reshape", [(x.dtype, x.shape)], {"shape": target})  # records -1 resolved
    return ctx.op("reshape", x, shape=list(resolved))


@_handles("Flatten")
def _flatten(ctx, x, axis=1, **a):
    axis = axis + len(x.shape) if axis < 0 else axis  # axis may equal the rank
    return ctx.op("reshape", x, shape=[math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])


@_handles("Squeeze")
def _squeeze(ctx, x, axes_input=None, axes=None, **a):
    axes = ctx.const_ints(axes_input, "Squeeze axes") if axes_input is not None else axes
    rank = len(x.shape)
    drop = {normalize_axis(i, rank) for i in axes} if axes else {i for i, d in enumerate(x.shape) if d == 1}
    return ctx.op("reshape", x, shape=[d for i, d in enumerate(x.shape) if i not in drop])


@_handles("Unsqueeze")
def _unsqueeze(ctx, x, axes_input=None, axes=None, **a):
    axes = ctx.const_ints(axes_input, "Unsqueeze axes") if axes_input is not None else axes
    rank = len(x.shape) + len(axes)
    shape = list(x.shape)
    for i in sorted(normalize_axis(i, rank) for i in axes):
        shape.insert(i, 1)
    return ctx.op("reshape", x, shape=shape)


@_handles("Transpose")
def _transpose(ctx, x, perm=None, **a):
    return ctx.op("transpose", x, perm=list(perm) if perm is not None else list(range(len(x.shape)))[::-1])


@_handles("Concat")
def _concat(ctx, *xs, axis, **a):
    return ctx.op("concat", *xs, axis=axis)


@_handles("Slice")
def _slice(ctx, x, starts=None, ends=None, axes=None, steps=None, **a):
    def ints(v, what):  # inputs from opset 10, attributes before
        return ctx.const_ints(v, what) if isinstance(v, Value) else (list(v) if v is not None else None)

    starts, ends, axes, steps = (ints(v, f"Slice {w}") for v, w in ((starts, "starts"), (ends, "ends"),
                                                                     (axes, "axes"), (steps, "steps")))
    rank = len(x.shape)
    axes = [normalize_axis(i, rank) for i in (axes or range(len(starts)))]
    steps = steps or [1] * len(starts)
    forward = [(s, e, ax, st) for s, e, ax, st in zip(starts, ends, axes, steps) if st > 0]
    y = x
    if forward:
        clamp = lambda v: max(min(v, 2**31 - 1), -2**31)  # noqa: E731 (i64 sentinels to the attribute range)
        y = ctx.op("slice", y, starts=[clamp(f[0]) for f in forward], ends=[clamp(f[1]) for f in forward],
                   axes=[f[2] for f in forward], steps=[f[3] for f in forward])
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if st < 0:  # a reversed range is a gather of constant indices
            index = np.arange(x.shape[ax])[slice(s, e, st)].astype(np.int32)
            y = ctx.op("gather", y, ctx.b.const(index), axis=ax)
        elif st == 0:
            raise ExportError("Slice step 0")
    return y


@_handles("Split")
def _split(ctx, x, split=None, axis=0, num_outputs=None, **a):
    axis = normalize_axis(axis, len(x.shape))
    sizes = ctx.const_ints(split, "Split sizes") if isinstance(split, Value) else split
    count = len(ctx.node.output)
    if not sizes:
        size = -(-x.shape[axis] // count)
        sizes = [min(size, x.shape[axis] - i * size) for i in range(count)]
    outs, start = [], 0
    for size in sizes:
        outs.append(ctx.op("slice", x, starts=[start], ends=[start + size], axes=[axis], steps=[1]))
        start += size
    return outs


@_handles("Gather")
def _gather(ctx, data, indices, axis=0, **a):
    if indices.dtype not in ("i32", "i64"):
        raise ExportError("Gather with non-integer indices")
    return ctx.op("gather", data, indices, axis=axis)


@_handles("Expand")
def _expand(ctx, x, shape, **a):
    target = ctx.const_ints(shape, "Expand shape")
    rank = max(len(target), len(x.shape))
    full = [1] * (rank - len(target)) + target
    padded = [1] * (rank - len(x.shape)) + list(x.shape)
    out = [max(d, t) if 1 in (d, t) else d for d, t in zip(padded, full)]
    return ctx.op("expand", x, shape=out)


@_handles("Tile")
def _tile(ctx, x, repeats, **a):
    reps = ctx.const_ints(repeats, "Tile repeats")
    y = x
    for axis, r in enumerate(reps):
        if r == 1:
            continue
        shape = list(y.shape)
        with_axis = shape[:axis] + [1] + shape[axis:]
        expanded = shape[:axis] + [r] + shape[axis:]
        y = ctx.op("expand", ctx.op("reshape", y, shape=with_axis), shape=expanded)
        y = ctx.op("reshape", y, shape=shape[:axis] + [r * shape[axis]] + shape[axis + 1:])
    return y


@_handles("Pad")
def _pad(ctx, x, pads=None, constant_value=None, axes=None, mode="constant", value=0.0, **a):
    if mode not in ("constant", "edge", "reflect"):
        raise ExportError(f"Pad mode '{mode}'")
    if axes is not None:
        raise ExportError("Pad with axes")
    pads = ctx.const_ints(pads, "Pad pads") if isinstance(pads, Value) else list(a.get("paddings", pads or []))
    fill = value
    if constant_value is not None:
        fill = float(ctx.const_data(constant_value, "Pad value").reshape(-1)[0]) if constant_value.shape != (0,) \
            else 0.0
    rank = len(x.shape)
    if any(p < 0 for p in pads):  # negative pads crop
        x = ctx.op("slice", x, starts=[max(0, -p) for p in pads[:rank]],
                   ends=[d - max(0, -p) for d, p in zip(x.shape, pads[rank:])], axes=list(range(rank)),
                   steps=[1] * rank)
        pads = [max(0, p) for p in pads]
    return lower.pad(ctx.b, x, pads, mode, float(fill))


@_handles("DepthToSpace")
def _depth_to_space(ctx, x, blocksize, mode="DCR", **a):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = ctx.op("transpose", ctx.op("reshape", x, shape=[n, b, b, c // (b * b), h, w]), perm=[0, 3, 4, 1, 5, 2])
    else:
        y = ctx.op("transpose", ctx.op("reshape", x, shape=[n, c // (b * b), b, b, h, w]), perm=[0, 1, 4, 2, 5, 3])
    return ctx.op("reshape", y, shape=[n, c // (b * b), h * b, w * b])


@_handles("SpaceToDepth")
def _space_to_depth(ctx, x, blocksize, **a):
    n, c, h, w = x.shape
    b = blocksize
    y = ctx.op("reshape", x, shape=[n, c, h // b, b, w // b, b])
    y = ctx.op("transpose", y, perm=[0, 3, 5, 1, 2, 4])
    return ctx.op("reshape", y, shape=[n, c * b * b, h // b, w // b])


@_handles("Trilu")
def _trilu(ctx, x, k=None, upper=1, **a):
    return lower.trilu(ctx.b, x, ctx.const_ints(k, "Trilu k")[0] if k is not None else 0, bool(upper))


@_handles("CumSum")
def _cumsum(ctx, x, axis, exclusive=0, reverse=0, **a):
    return lower.cumsum(ctx.b, x, ctx.const_ints(axis, "CumSum axis")[0], bool(exclusive), bool(reverse))


@_handles("IsInf")
def _isinf(ctx, x, detect_negative=1, detect_positive=1, **a):
    if detect_negative and detect_positive:
        return ctx.op("equal", ctx.op("abs", x), float("inf"))
    if detect_positive:
        return ctx.op("equal", x, float("inf"))
    if detect_negative:
        return ctx.op("equal", x, float("-inf"))
    return ctx.b.const(np.zeros(x.shape, dtype=np.float32))


HANDLERS["IsNaN"] = lambda ctx, x, **a: ctx.op("sub", 1.0, ctx.op("equal", x, x))  # NaN is the value != itself


@_handles("Shrink")
def _shrink(ctx, x, bias=0.0, lambd=0.5, **a):
    inner = ctx.op("where", ctx.op("greater", x, lambd), ctx.op("sub", x, bias), 0.0)
    return ctx.op("where", ctx.op("less", x, -lambd), ctx.op("add", x, bias), inner)


@_handles("OneHot")
def _one_hot(ctx, indices, depth, values, axis=-1, **a):
    d = int(ctx.const_data(depth, "OneHot depth").reshape(-1)[0])
    off, on = (float(v) for v in ctx.const_data(values, "OneHot values").reshape(-1))
    index = ctx.to_f32(indices)
    index = ctx.op("add", index, ctx.op("mul", ctx.op("less", index, 0.0), float(d)))  # negative indices wrap
    rank = len(indices.shape) + 1
    ax = normalize_axis(axis, rank)
    shape = list(indices.shape)
    shape.insert(ax, 1)
    grid = [1] * rank
    grid[ax] = d
    hot = ctx.op("equal", ctx.op("reshape", index, shape=shape),
                 ctx.b.const(np.arange(d, dtype=np.float32).reshape(grid)))
    y = ctx.op("add", ctx.op("mul", hot, on - off), off)
    return y if values.dtype == "f32" else ctx.op("cast", y, to="i32")


@_handles("EyeLike")
def _eye_like(ctx, x, dtype=None, k=0, **a):
    target = x.dtype if dtype is None else ctx.dtype_of_onnx(dtype, "EyeLike dtype")
    return ctx.b.const(np.eye(x.shape[0], x.shape[1], k), dtype=target)


@_handles("ConvTranspose")
def _conv_transpose(ctx, x, w, bias=None, **a):
    """Works out the padding (explicit, auto_pad or from output_shape); lower.conv_transpose2d does the rest."""
    x4, w, restore, rank1d = _conv_operands_2d(ctx, x, w, "ConvTranspose")
    h, wd = x4.shape[2:]
    groups = a.get("group", 1)
    kernel = list(w.shape[2:])
    strides = _spatial(a.get("strides"), [1, 1], rank1d)
    dilations = _spatial(a.get("dilations"), [1, 1], rank1d)
    out_pad = _spatial(a.get("output_padding"), [0, 0], rank1d)
    reach = [dl * (k - 1) + 1 for k, dl in zip(kernel, dilations)]
    full = [(i - 1) * s + r + op for i, s, r, op in zip((h, wd), strides, reach, out_pad)]
    pads = a.get("pads")
    pads = [0, 0, 0, 0] if pads is None else ([0, pads[0], 0, pads[1]] if rank1d else list(pads))
    out_shape = a.get("output_shape")
    auto_pad = a.get("auto_pad", "NOTSET")
    if out_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = _spatial(out_shape, None, rank1d) if out_shape is not None else [h * strides[0], wd * strides[1]]
        total = [f - t for f, t in zip(full, target)]
        if auto_pad == "SAME_UPPER":
            pads = [total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2]
        else:  # SAME_LOWER, or an explicit output_shape: the odd cell (or the extra output row) at the end
            pads = [total[0] - total[0] // 2, total[1] - total[1] // 2, total[0] // 2, total[1] // 2]
    out = lower.conv_transpose2d(ctx.b, x4, w, bias, strides, pads, dilations, out_pad, groups)
    return restore(out)


@_handles("Resize", "Upsample")
def _resize(ctx, x, roi=None, scales=None, sizes=None, mode="nearest", coordinate_transformation_mode=None,
            nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=0, **a):
    """Separable per axis: a gather of constant indices per tap, weighted by constant coefficients and summed."""
    if ctx.node.op_type == "Upsample":  # opset 7-9: scales as an input (or attribute), asymmetric coordinates
        scales, sizes = (roi if roi is not None else a.get("scales")), None
        coordinate_transformation_mode, nearest_mode = "asymmetric", "floor"
    elif ctx.opset < 11:  # Resize-10: (X, scales), Upsample's rules
        scales, coordinate_transformation_mode, nearest_mode = roi, "asymmetric", "floor"
    coordinate_mode = coordinate_transformation_mode or "half_pixel"
    rank = len(x.shape)
    if sizes is not None and sizes.shape != (0,):
        out = ctx.const_ints(sizes, "Resize sizes")
        factors = [o / i for o, i in zip(out, x.shape)]
    else:
        factors = [float(f) for f in (ctx.const_data(scales, "Resize scales").reshape(-1)
                                      if isinstance(scales, Value) else scales)]
        out = [int(math.floor(i * f)) for i, f in zip(x.shape, factors)]
    if len(out) != rank:
        raise ExportError(f"Resize to {out} for a rank-{rank} input")
    if mode not in ("nearest", "linear", "cubic"):
        raise ExportError(f"Resize mode '{mode}'")
    y = x
    for axis in range(rank):
        if out[axis] == x.shape[axis] and factors[axis] == 1.0:
            continue
        y = lower.resample_axis(ctx.b, y, axis, factors[axis], out[axis], mode, coordinate_mode, nearest_mode,
                                cubic_coeff_a, bool(exclude_outside))
    return y


@_handles("Einsum")
def _einsum(ctx, *operands, equation, **a):
    return lower.einsum(ctx.b, equation, operands)


@_handles("LRN")
def _lrn(ctx, x, size, alpha=1e-4, beta=0.75, bias=1.0, **a):
    return lower.local_response_norm(ctx.b, x, size, alpha, beta, bias, (size - 1) // 2)


# -- types and constants ----------------------------------------------------------------------------------------
@_handles("Cast", "CastLike")
def _cast(ctx, x, like=None, to=None, **a):
    elem = to if like is None else None
    if like is not None:
        target = like.dtype
    else:
        if elem == onnx.TensorProto.BOOL and ctx.b.narrow:
            return ctx.op("sub", 1.0, ctx.op("equal", ctx.to_f32(x), 0.0)) if not x.is_const else \
                ctx.b.const(np.asarray(x.data) != 0)
        target = ctx.dtype_of_onnx(elem, "Cast target")
    if x.is_const and x.dtype == target == "i32":
        return x
    return x if x.dtype == target else ctx.op("cast", x, to=target)


@_handles("Constant")
def _constant(ctx, **a):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in a:
            data = np.asarray(a[key])
            if key.startswith("value_float"):
                data = data.astype(np.float32)
            elif key.startswith("value_int"):
                data = data.astype(np.int64)
            return _const_from_numpy(ctx, data, "Constant")
    raise ExportError("Constant without a tensor, float or int value")


def _const_from_numpy(ctx, data: np.ndarray, what: str) -> Value:
    if data.dtype == np.float64:
        if not ctx.allow_double:
            raise ExportError(f"{what} is double")
        data = data.astype(np.float32)
    elif data.dtype.kind == "f" and (ctx.b.narrow or data.dtype != np.float16):
        data = data.astype(np.float32)
    elif data.dtype.kind not in "fiub":
        raise ExportError(f"{what} of dtype {data.dtype}")
    return ctx.b.const(data)


@_handles("ConstantOfShape")
def _constant_of_shape(ctx, shape, value=None, **a):
    dims = ctx.const_ints(shape, "ConstantOfShape shape")
    fill = np.asarray(value if value is not None else np.zeros(1, np.float32)).reshape(-1)
    return _const_from_numpy(ctx, np.full(dims, fill[0], dtype=fill.dtype), "ConstantOfShape value")


@_handles("Shape")
def _shape(ctx, x, start=0, end=None, **a):
    return ctx.b.const(np.asarray(x.shape[slice(start, end)], dtype=np.int64))


@_handles("Size")
def _size(ctx, x, **a):
    return ctx.b.const(np.asarray(math.prod(x.shape), dtype=np.int64))


@_handles("Range")
def _range(ctx, start, limit, delta, **a):
    values = [ctx.const_data(v, "Range bound").reshape(()) for v in (start, limit, delta)]
    return _const_from_numpy(ctx, np.arange(values[0], values[1], values[2]).astype(values[0].dtype), "Range")


# ----------------------------------------------------------------------------------------------------------------
def from_onnx(model_or_path, stem=None, *, allow_double: bool = False,
              input_shapes: Optional[Dict[str, Sequence[int]]] = None, narrow: bool = False) -> Dict:
    """Lowers an ONNX model (a ModelProto or a path) onto the rml op set.

    FLOAT16, BFLOAT16, INT64 and BOOL tensors keep their type (f16, bf16, i64, bool), and each graph output has
    its ONNX type. `narrow=True` applies the seed format's rules instead (16-bit floats f32, INT64 i32, BOOL an f32
    0/1 mask), for readers of f32/i32-only files.

    Writes `<stem>.json` and `<stem>.safetensors` when `stem` is given; returns the graph JSON dict.
    Raises ExportError: `cannot lower ONNX op 'X' (node 'n'): <reason>`, or for a model rml cannot represent.
    """
    is_path = isinstance(model_or_path, (str, bytes)) or hasattr(model_or_path, "__fspath__")
    model = onnx.load(model_or_path) if is_path else model_or_path
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset > MAX_OPSET:
        raise ExportError(f"ONNX opset {opset} is newer than the supported {MAX_OPSET}")
    graph = model.graph
    builder = GraphBuilder(graph.name, f"rml-export-onnx 0.1 (onnx {onnx.__version__}, opset {opset})", narrow)
    ctx = _Context(builder, opset, allow_double)
    env: Dict[str, Value] = {}
    for node in graph.node:
        for name in node.input:
            ctx.uses[name] = ctx.uses.get(name, 0) + 1
    for out in graph.output:
        ctx.uses[out.name] = ctx.uses.get(out.name, 0) + 1
    for init in graph.initializer:
        data = numpy_helper.to_array(init)
        if data.dtype == np.float64 and not allow_double:
            raise ExportError(f"initializer '{init.name}' is double")
        if init.data_type == onnx.TensorProto.BFLOAT16 and not narrow:
            data = BF16Array.from_float(data)  # NumPy has no bfloat16: onnx gives the (exact) float32 values
        elif data.dtype.kind == "f" and (narrow or data.dtype != np.float16):
            data = data.astype(np.float32)
        env[init.name] = builder.param(init.name, data)
    for inp in graph.input:
        if inp.name in env:
            continue
        t = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise ExportError(f"input '{inp.name}' is not a tensor")
        dims = list(input_shapes[inp.name]) if input_shapes and inp.name in input_shapes else None
        if dims is None:
            dims = []
            for d in t.shape.dim:
                if not d.HasField("dim_value"):
                    raise ExportError(f"input '{inp.name}' has a dynamic dimension '{d.dim_param}' "
                                      f"(give input_shapes)")
                dims.append(d.dim_value)
        env[inp.name] = builder.input(inp.name, ctx.dtype_of_onnx(t.elem_type, f"input '{inp.name}'"), dims)
        if t.elem_type in _NARROW_INT_TYPES:
            ctx.narrow[id(env[inp.name])] = env[inp.name]
    for i, node in enumerate(graph.node):
        label = node.name or f"#{i}"
        if node.domain not in ("", "ai.onnx"):
            raise ExportError(f"cannot lower ONNX op '{node.domain}.{node.op_type}' (node '{label}')")
        handler = HANDLERS.get(node.op_type)
        if handler is None:
            raise ExportError(f"cannot lower ONNX op '{node.op_type}' (node '{label}')")
        ctx.node = node
        builder.origin = {"module": node.name} if node.name else None
        try:
            missing = [n for n in node.input if n and n not in env]
            if missing:
                raise ExportError(f"input '{missing[0]}' is not defined")
            args = [env[n] if n else None for n in node.input]
            while args and args[-1] is None:
                args.pop()
            outs = handler(ctx, *args, **_attrs(node))
        except (ExportError, KeyError, TypeError, ValueError, IndexError) as e:
            raise ExportError(f"cannot lower ONNX op '{node.op_type}' (node '{label}'): {e}") from None
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        for name, v in zip(node.output, outs):
            if not name:
                continue
            env[name] = v
            if v.producer is not None and not v.name:
                v.name = name
                if node.name and not v.producer.name:
                    v.producer.name = node.name
        if len([n for n in node.output if n]) > len(outs):
            raise ExportError(f"cannot lower ONNX op '{node.op_type}' (node '{label}'): only {len(outs)} outputs")
    for out in graph.output:
        if out.name not in env:
            raise ExportError(f"graph output '{out.name}' is not computed")
        v = env[out.name]
        elem = out.type.tensor_type.elem_type if out.type.HasField("tensor_type") else 0
        if not narrow and elem in _KEPT_TYPES and v.dtype != _KEPT_TYPES[elem]:
            # An output the lowering computed in another dtype (an f32 0/1 mask, an i32 through f32) gets its type.
            v = builder.op("cast", [v], to=_KEPT_TYPES[elem])
        builder.output(v, out.name)
    return builder.write(stem) if stem else builder.finish()[0]
