"""Lowerings shared by the PyTorch and ONNX exporters, written against GraphBuilder."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .graph import GraphBuilder, Value


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
