"""Lowerings shared by the PyTorch and ONNX exporters, written against GraphBuilder."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .graph import GraphBuilder, Value
from .ops import ExportError


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
