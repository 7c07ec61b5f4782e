"""Lowerings shared by the PyTorch and ONNX exporters, written against GraphBuilder."""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from .graph import GraphBuilder, Value
from .ops import ExportError


def registrar(table: Dict) -> Callable:
    """`@register(key, ...)` decorators that file a lowering under each key of `table`."""
    def register(*keys):
        def file(fn):
            for key in keys:
                table[key] = fn
            return fn
        return file
    return register


def avg_pool(b: GraphBuilder, x: Value, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
             count_include_pad: bool, extra_end: Sequence[int] = (0, 0)) -> Value:
    """Average pooling with either padding convention and with ceil-mode windows that run past the input.

    rml's avg_pool2d divides by the whole window. When the divisor must leave out padding (count_include_pad
    false) or the cells a ceil-mode window adds past the input, the pooled sum is divided by a constant map of
    how many cells each window counts (computed at export time by pooling a mask of ones).
    """
    total = [pads[0], pads[1], pads[2] + extra_end[0], pads[3] + extra_end[1]]
    pooled = b.op("avg_pool2d", [x], kernel=list(kernel), strides=list(strides), pads=total)
    if (count_include_pad or not any(pads)) and not any(extra_end):
        return pooled
    h, w = x.shape[2:]
    mask = np.pad(np.ones((h, w), np.float32), ((pads[0], pads[2]), (pads[1], pads[3])),
                  constant_values=1.0 if count_include_pad else 0.0)
    mask = np.pad(mask, ((0, extra_end[0]), (0, extra_end[1])))[None, None]
    counted = b.op("avg_pool2d", [b.const(mask)], kernel=list(kernel), strides=list(strides))  # folded
    return b.op("div", [pooled, counted])


def layer_norm(b: GraphBuilder, x: Value, axes: Sequence[int], eps: float, weight: Optional[Value] = None,
               bias: Optional[Value] = None):
    """(x - mean) * rsqrt(var + eps) [* weight] [+ bias] over `axes` (biased variance); returns (y, mean, rstd)."""
    axes = list(axes)
    mean = b.op("mean", [x], axes=axes, keepdims=True)
    centered = b.op("sub", [x, mean])
    var = b.op("mean", [b.op("mul", [centered, centered])], axes=axes, keepdims=True)
    rstd = b.op("rsqrt", [b.op("add", [var, b.scalar(eps)])])
    y = b.op("mul", [centered, rstd])
    if weight is not None:
        y = b.op("mul", [y, weight])
    if bias is not None:
        y = b.op("add", [y, bias])
    return y, mean, rstd


def linear(b: GraphBuilder, x: Value, weight: Value, bias: Optional[Value]) -> Value:
    """x @ weight^T + bias, PyTorch's Linear; the transposed weight is folded into a stored constant."""
    y = b.op("matmul", [x, b.op("transpose", [weight], perm=[1, 0])])
    return b.op("add", [y, bias]) if bias is not None else y


def resize_taps(in_size: int, scale: float, out_size: int, mode: str, coordinate_mode: str, nearest_mode: str,
                 cubic_a: float, exclude_outside: bool):
    """Per output position, the input indices and weights ONNX's Resize reference combines along one axis."""
    taps = {"nearest": 2, "linear": 2, "cubic": 4}[mode]
    out_width = scale * in_size  # the reference uses the unrounded width for align_corners
    index = np.zeros((out_size, taps), dtype=np.int32)
    weight = np.zeros((out_size, taps), dtype=np.float64)
    for o in range(out_size):
        if coordinate_mode == "align_corners":
            x = 0.0 if out_width == 1 else o * (in_size - 1) / (out_width - 1)
        elif coordinate_mode == "asymmetric":
            x = o / scale
        elif coordinate_mode == "pytorch_half_pixel":
            x = -0.5 if out_width == 1 else (o + 0.5) / scale - 0.5
        elif coordinate_mode == "half_pixel":
            x = (o + 0.5) / scale - 0.5
        elif coordinate_mode == "tf_half_pixel_for_nn":
            x = (o + 0.5) / scale
        else:
            raise ExportError(f"Resize coordinate_transformation_mode '{coordinate_mode}'")
        base = math.ceil(x) - 1  # the taps sit left of x; an integral x is the last of the left half
        ratio = x - base
        if mode == "nearest":
            if ratio == 1.0:
                coeffs = [0.0, 1.0]
            else:
                up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
                      "ceil": True}[nearest_mode]
                coeffs = [0.0, 1.0] if up else [1.0, 0.0]
        elif mode == "linear":
            coeffs = [1.0 - ratio, ratio]
        else:
            a, r = cubic_a, ratio
            coeffs = [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                      ((a + 2) * r - (a + 3)) * r * r + 1,
                      ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                      ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a]
        first = base - (taps // 2 - 1)
        positions = np.arange(first, first + taps)
        coeffs = np.asarray(coeffs)
        if exclude_outside:
            coeffs = np.where((positions < 0) | (positions >= in_size), 0.0, coeffs)
            coeffs = coeffs / coeffs.sum()
        index[o] = np.clip(positions, 0, in_size - 1)  # the reference pads with edge values
        weight[o] = coeffs
    return index, weight


def resample_axis(b: GraphBuilder, x: Value, axis: int, scale: float, out_size: int, mode: str, coordinate_mode: str,
                  nearest_mode: str = "round_prefer_floor", cubic_a: float = -0.75,
                  exclude_outside: bool = False) -> Value:
    """Resizes `x` along `axis`: one gather of constant indices per tap, times constant weights, summed."""
    index, weight = resize_taps(x.shape[axis], scale, out_size, mode, coordinate_mode, nearest_mode, cubic_a,
                                exclude_outside)
    shape = [1] * len(x.shape)
    shape[axis] = out_size
    total = None
    for t in range(index.shape[1]):
        if not np.any(weight[:, t]):
            continue
        picked = b.op("gather", [x, b.const(index[:, t].copy())], axis=axis)
        if not np.all(weight[:, t] == 1.0):
            picked = b.op("mul", [picked, b.const(weight[:, t].astype(np.float32).reshape(shape))])
        total = picked if total is None else b.op("add", [total, picked])
    return total


def einsum(b: GraphBuilder, equation: str, operands: Sequence[Value]) -> Value:
    """One- and two-operand einsum as transpose, sum, reshape and one batched matmul (no repeated subscripts
    within an operand, no ellipsis)."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if "." in equation or len(terms) != len(operands) or len(terms) not in (1, 2):
        raise ExportError(f"einsum '{equation}' (one or two operands without ellipsis)")
    if not arrow:  # implicit output: the subscripts seen once, in alphabetical order
        out = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    sizes = {}
    for term, v in zip(terms, operands):
        if len(set(term)) != len(term) or len(term) != len(v.shape):
            raise ExportError(f"einsum '{equation}': repeated or mismatched subscripts in '{term}'")
        for c, d in zip(term, v.shape):
            if sizes.setdefault(c, d) != d and 1 not in (d, sizes[c]):
                raise ExportError(f"einsum '{equation}': '{c}' has sizes {sizes[c]} and {d}")

    def reduce_unique(term: str, v: Value, keep: str):
        """Sums the subscripts of `term` that are not in `keep`."""
        axes = [i for i, c in enumerate(term) if c not in keep]
        if axes:
            v = b.op("sum", [v], axes=axes)
            term = "".join(c for c in term if c in keep)
        return term, v

    def permute(term: str, v: Value, order: str):
        if term != order:
            v = b.op("transpose", [v], perm=[term.index(c) for c in order])
        return v

    if len(terms) == 1:
        term, v = reduce_unique(terms[0], operands[0], out)
        return permute(term, v, out)
    (ta, tb), (a, c) = terms, operands
    ta, a = reduce_unique(ta, a, out + tb)
    tb, c = reduce_unique(tb, c, out + ta)
    batch = "".join(ch for ch in ta if ch in tb and ch in out)
    contract = "".join(ch for ch in ta if ch in tb and ch not in out)
    left = "".join(ch for ch in ta if ch not in tb)
    right = "".join(ch for ch in tb if ch not in ta)
    size = lambda chars: math.prod(sizes[ch] for ch in chars)  # noqa: E731
    a = b.op("reshape", [permute(ta, a, batch + left + contract)], shape=[size(batch), size(left), size(contract)])
    c = b.op("reshape", [permute(tb, c, batch + contract + right)], shape=[size(batch), size(contract), size(right)])
    y = b.op("reshape", [b.op("matmul", [a, c])], shape=[sizes[ch] for ch in batch + left + right])
    return permute(batch + left + right, y, out)


def local_response_norm(b: GraphBuilder, x: Value, size: int, alpha: float, beta: float, bias: float,
                        before: int) -> Value:
    """x / (bias + alpha / size * sum of x^2 over `size` channels, `before` of them preceding) ^ beta.

    ONNX centres an even window with floor((size-1)/2) channels before, PyTorch with size // 2."""
    n, c = x.shape[:2]
    rest = math.prod(x.shape[2:])
    squares = b.op("reshape", [b.op("mul", [x, x])], shape=[n, 1, c, rest])
    # A channel window is a [size, 1] average pool over the channel axis; zero padding counts, as the sum wants.
    window = b.op("avg_pool2d", [squares], kernel=[size, 1], strides=[1, 1],
                  pads=[before, 0, size - 1 - before, 0])
    scale = b.op("add", [b.op("mul", [window, b.scalar(alpha)]), b.scalar(bias)])  # alpha/size * sum = alpha * mean
    denominator = b.op("pow", [scale, b.scalar(beta)])
    return b.op("div", [x, b.op("reshape", [denominator], shape=list(x.shape))])


def trilu(b: GraphBuilder, x: Value, offset: int, upper: bool) -> Value:
    """The upper (or lower) triangle of the last two axes from diagonal `offset`, the rest zero. Data movement
    only, so exact for f32 and i32: masked-out cells gather a zero appended to each flattened matrix."""
    *batch, n, m = x.shape
    keep = np.triu(np.ones((n, m), bool), offset) if upper else np.tril(np.ones((n, m), bool), offset)
    index = np.where(keep.reshape(-1), np.arange(n * m), n * m).astype(np.int32)
    zero = b.op("expand", [b.const(np.zeros([1] * (len(batch) + 1), np.float32 if x.dtype == "f32" else np.int32))],
                shape=batch + [1])
    flat = b.op("concat", [b.op("reshape", [x], shape=batch + [n * m]), zero], axis=-1)
    return b.op("reshape", [b.op("gather", [flat, b.const(index)], axis=len(batch))], shape=list(x.shape))


def cumsum(b: GraphBuilder, x: Value, axis: int, exclusive: bool = False, reverse: bool = False) -> Value:
    """Cumulative sum along `axis` as a matmul with a constant triangular matrix (the axis moved last)."""
    if x.dtype != "f32":
        raise ExportError("integer cumulative sum (rml matmul is f32)")
    rank = len(x.shape)
    axis = axis + rank if axis < 0 else axis
    d = x.shape[axis]
    i, j = np.meshgrid(np.arange(d), np.arange(d), indexing="ij")  # y[j] = sum_i x[i] * m[i, j]
    m = (i >= j) if reverse else (i <= j)
    if exclusive:
        m &= i != j
    perm = [p for p in range(rank) if p != axis] + [axis]
    moved = b.op("transpose", [x], perm=perm) if axis != rank - 1 else x
    y = b.op("matmul", [moved, b.const(m.astype(np.float32))])
    return b.op("transpose", [y], perm=[int(p) for p in np.argsort(perm)]) if axis != rank - 1 else y


def pad(b: GraphBuilder, x: Value, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Value:
    """Pads with `pads` = (begin..., end...) per axis. `constant` is rml's pad; `edge` and `reflect` are a gather
    of constant indices along each padded axis."""
    rank = len(x.shape)
    if not any(pads):
        return x
    if mode == "constant":
        return b.op("pad", [x], pads=list(pads), value=value)
    for axis in range(rank):
        begin, end = pads[axis], pads[axis + rank]
        if begin or end:
            d = x.shape[axis]
            index = np.arange(-begin, d + end)
            if mode == "edge":
                index = np.clip(index, 0, d - 1)
            elif mode == "reflect":
                if begin >= d or end >= d:
                    raise ExportError("reflect padding wider than the axis")
                index = np.abs(index)
                index = np.where(index >= d, 2 * (d - 1) - index, index)
            else:
                raise ExportError(f"pad mode '{mode}'")
            x = b.op("gather", [x, b.const(index.astype(np.int32))], axis=axis)
    return x


def conv_transpose2d(b: GraphBuilder, x: Value, w: Value, bias: Optional[Value], strides: Sequence[int],
                     pads: Sequence[int], dilations: Sequence[int], out_pad: Sequence[int], groups: int) -> Value:
    """Transposed convolution (NCHW; `w` is [C_in, C_out / groups, kH, kW]; pads top, left, bottom, right):
    zero-stuff the input by the stride, then a stride-1 convolution with the flipped, transposed weights over
    the kernel's reach, less the padding (negative padding crops the result)."""
    n, c, h, wd = x.shape
    kernel = list(w.shape[2:])
    reach = [dl * (k - 1) + 1 for k, dl in zip(kernel, dilations)]
    # 1. zero-stuff: [N, C, H, W] -> [N, C, (H-1)*sh+1, (W-1)*sw+1]
    sh, sw = strides
    y = x
    if sh > 1 or sw > 1:
        y = b.op("reshape", [y], shape=[n, c, h, 1, wd, 1])
        y = b.op("pad", [y], pads=[0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1], value=0.0)
        y = b.op("reshape", [y], shape=[n, c, h * sh, wd * sw])
        y = b.op("slice", [y], starts=[0, 0], ends=[(h - 1) * sh + 1, (wd - 1) * sw + 1], axes=[2, 3], steps=[1, 1])
    # 2. weights [C_in, C_out/g, kh, kw] -> [C_out, C_in/g, kh, kw], flipped in space
    cin, cout_g = w.shape[0], w.shape[1]
    wt = b.op("reshape", [w], shape=[groups, cin // groups, cout_g] + kernel)
    wt = b.op("transpose", [wt], perm=[0, 2, 1, 3, 4])
    wt = b.op("reshape", [wt], shape=[groups * cout_g, cin // groups] + kernel)
    for axis in (2, 3):
        if wt.shape[axis] > 1:
            wt = b.op("gather", [wt, b.const(np.arange(wt.shape[axis] - 1, -1, -1, dtype=np.int32))], axis=axis)
    # 3. a stride-1 convolution; negative padding (crop) is applied to its output
    begin = [r - 1 - p for r, p in zip(reach, pads[:2])]
    end = [r - 1 - p + op for r, p, op in zip(reach, pads[2:], out_pad)]
    inputs = [y, wt] + ([bias] if bias is not None else [])
    out = b.op("conv2d", inputs, strides=[1, 1], dilations=list(dilations), groups=groups,
               pads=[max(0, begin[0]), max(0, begin[1]), max(0, end[0]), max(0, end[1])])
    crop_begin = [max(0, -v) for v in begin]
    crop_end = [max(0, -v) for v in end]
    if any(crop_begin) or any(crop_end):
        out = b.op("slice", [out], starts=crop_begin, ends=[out.shape[2] - crop_end[0], out.shape[3] - crop_end[1]],
                   axes=[2, 3], steps=[1, 1])
    return out


def log_softmax(b: GraphBuilder, x: Value, axis: int) -> Value:
    """x - max - log(sum(exp(x - max))) along `axis` (shifted for stability)."""
    shifted = b.op("sub", [x, b.op("max", [x], axes=[axis], keepdims=True)])
    total = b.op("sum", [b.op("exp", [shifted])], axes=[axis], keepdims=True)
    return b.op("sub", [shifted, b.op("log", [total])])


def adaptive_avg_pool2d(b: GraphBuilder, x: Value, out_h: int, out_w: int) -> Value:
    """PyTorch's adaptive average pooling: output cell i averages input rows floor(i*H/oh) .. ceil((i+1)*H/oh).
    Whole windows are an avg_pool2d (or a mean); otherwise the pooling is separable, two matmuls with constant
    averaging matrices."""
    h, w = x.shape[2:]
    if (out_h, out_w) == (1, 1):
        return b.op("mean", [x], axes=[2, 3], keepdims=True)
    if h % out_h == 0 and w % out_w == 0:
        kernel = [h // out_h, w // out_w]
        return b.op("avg_pool2d", [x], kernel=kernel, strides=kernel)

    def averaging(size: int, out: int) -> np.ndarray:  # [size, out]: column i averages window i
        m = np.zeros((size, out), np.float32)
        for i in range(out):
            start, end = (i * size) // out, -(-((i + 1) * size) // out)
            m[start:end, i] = 1.0 / (end - start)
        return m

    y = b.op("matmul", [x, b.const(averaging(w, out_w))]) if out_w != w else x  # [N, C, H, ow]
    if out_h != h:
        y = b.op("transpose", [y], perm=[0, 1, 3, 2])
        y = b.op("transpose", [b.op("matmul", [y, b.const(averaging(h, out_h))])], perm=[0, 1, 3, 2])
    return y
