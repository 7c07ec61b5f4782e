#!/usr/bin/env python3
"""Writes the attention-block cases under tests/data/attention/ with NumPy alone.

Each case is a small rml-graph model (<case>.json + <case>.safetensors, the layout of
tests/data/ops/gen_ops.py, whose Case class writes them): softmax(Q K^T * scale + mask) V as the
exporters emit it, or a near miss of it. Expected outputs are computed in float64 and rounded to
float32. The graph's metadata adds "steps": how many steps Executor::create must make of it (1 for
a block that fuses whole; the near misses must not fuse, and run as the listed count).

Run: /usr/bin/python3 tests/data/attention/gen_attention.py  (deterministic; rewrites every case)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ops"))
import gen_ops  # noqa: E402  (tests/data/ops/gen_ops.py: Case, f32, tol_k)
from gen_ops import Case, f32, tol_k  # noqa: E402

gen_ops.HERE = HERE  # Case.write writes beside this script
rng = np.random.default_rng(14)


def randn(*shape, scale=1.0):
    return f32(rng.standard_normal(shape) * scale)


def softmax(s, axis=-1):
    z = np.exp(s - s.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def heads(c, x, nh, perm=(0, 2, 1, 3)):
    """x [b, s, nh * d] as [b, nh, s, d] (or another perm): reshape then transpose, as nn.MultiheadAttention."""
    b, s, hd = c.arrays[x].shape
    r = c.node("reshape", [x], c.arrays[x].reshape(b, s, nh, hd // nh), {"shape": [b, s, nh, hd // nh]})
    return c.node("transpose", [r], np.ascontiguousarray(c.arrays[r].transpose(perm)), {"perm": list(perm)})


def block(c, q, kt, v, scale=None, mask=None, mask_left=False, axis=-1, extra=None):
    """The block over values q [.., sq, d], kt [.., d, sk], v [.., sk, dv]: returns the output value.
    scale: ("mul", c), ("mul_left", c), ("div", c) or ("mul_vec", array) (not a scalar: no fusion).
    extra: "scores_output" (the scores also an output), "probs_twice" (the probabilities also negated
    into an output)."""
    qd, kd, vd = (c.arrays[x].astype(np.float64) for x in (q, kt, v))
    sd = qd @ kd
    s = c.node("matmul", [q, kt], f32(sd))
    if extra == "scores_output":
        c.output(s)
    if scale is not None:
        kind, k = scale
        kc = c.const(f32(k))
        kd64 = c.arrays[kc].astype(np.float64)
        sd = sd / kd64 if kind == "div" else sd * kd64
        inputs = [kc, s] if kind == "mul_left" else [s, kc]
        s = c.node("div" if kind == "div" else "mul", inputs, f32(sd))
    if isinstance(mask, tuple):  # ("where", cond, fill, fill_when_true): a masked fill
        _, cond, fill, when = mask
        hit = (c.arrays[cond] != 0) == when
        sd = np.where(hit, np.float64(fill), sd)
        fc = c.const(f32(fill))
        s = c.node("where", [cond, fc, s] if when else [cond, s, fc], f32(sd))
    elif mask is not None:
        sd = sd + c.arrays[mask].astype(np.float64)
        s = c.node("add", [mask, s] if mask_left else [s, mask], f32(sd))
    pd = softmax(sd, axis)
    p = c.node("softmax", [s], f32(pd), {"axis": axis})
    if extra == "probs_twice":
        c.output(c.node("neg", [p], f32(-pd)))
    return c.node("matmul", [p, v], f32(pd @ vd))


def mha_case(name, b, nh, s, d, scale, mask_shape=None, mask_kind="input", big=1.0, k_perm="two", steps=2):
    """Self-attention over three [b, s, nh * d] inputs as the PyTorch exporter emits nn.MultiheadAttention:
    reshape + transpose per head, K transposed again (or once with perm [0, 2, 3, 1], as ONNX does), the
    output transposed back and reshaped (a graph output: that reshape is a copy step of its own)."""
    c = Case(name, tol_k(d + s))
    xs = [c.input(randn(b, s, nh * d, scale=big), n) for n in ("q", "k", "v")]
    q, v = heads(c, xs[0], nh), heads(c, xs[2], nh)
    if k_perm == "two":
        k = heads(c, xs[1], nh)
        kt = c.node("transpose", [k], np.ascontiguousarray(c.arrays[k].transpose(0, 1, 3, 2)), {"perm": [0, 1, 3, 2]})
    else:
        kt = heads(c, xs[1], nh, (0, 2, 3, 1))
    mask = None
    if mask_shape is not None:
        m = randn(*mask_shape)
        m[..., ::3] = -1e4  # every third key masked out
        mask = c.input(m, "mask") if mask_kind == "input" else c.const(m)
    o = block(c, q, kt, v, scale, mask, mask_left=True)
    t = c.node("transpose", [o], np.ascontiguousarray(c.arrays[o].transpose(0, 2, 1, 3)), {"perm": [0, 2, 1, 3]})
    c.output(c.node("reshape", [t], c.arrays[t].reshape(b, s, nh * d), {"shape": [b, s, nh * d]}))
    c.meta["steps"] = str(steps)
    c.write()


def direct_case(name, q_shape, kt_shape, v_shape, scale=None, mask=None, axis=-1, extra=None, steps=1,
                k_rows=False):
    """Q, K^T (or K, transposed in the graph when k_rows) and V as inputs."""
    c = Case(name, tol_k(q_shape[-1] + kt_shape[-1]))
    q = c.input(randn(*q_shape), "q")
    if k_rows:
        perm = list(range(len(kt_shape)))
        perm[-2:] = perm[-1], perm[-2]
        k = c.input(np.ascontiguousarray(randn(*kt_shape).transpose(perm)), "k")
        kt = c.node("transpose", [k], np.ascontiguousarray(c.arrays[k].transpose(perm)), {"perm": perm})
    else:
        kt = c.input(randn(*kt_shape), "kt")
    v = c.input(randn(*v_shape), "v")
    m = None
    if mask is not None:
        kind, arr = mask[:2]
        m = c.input(arr, "mask") if kind == "input" else c.const(arr)
        if len(mask) == 4:  # a where condition, its fill and whether it fills where true
            m = ("where", m, mask[2], mask[3])
    c.output(block(c, q, kt, v, scale, m, axis=axis, extra=extra))
    c.meta["steps"] = str(steps)
    c.write()


def main():
    for name in os.listdir(HERE):
        if name.endswith(".json") or name.endswith(".safetensors"):
            os.remove(os.path.join(HERE, name))
    # The exporters' multi-head pattern: odd head dim and sequence, scale by mul, an input key mask
    # [b, 1, 1, s] added on the left; every transpose absorbed (2 steps: the block, the output's reshape copy).
    mha_case("attn_mha_mask_input", 2, 3, 13, 7, ("mul", 7 ** -0.5), (2, 1, 1, 13))
    # ONNX's K transpose in one perm [0, 2, 3, 1]; scale by div; a constant causal-style mask [s, s].
    mha_case("attn_mha_onnx_div_const_mask", 1, 2, 11, 5, ("div", 5 ** 0.5), (11, 11), mask_kind="const", k_perm="one")
    # No scale, no mask (the real-size encoders, whose scale the exporter folded into the Q weights).
    mha_case("attn_mha_plain", 1, 4, 9, 3, None)
    # Scores far beyond exp's f32 range: the row maximum must be subtracted first.
    mha_case("attn_mha_large_scores", 1, 2, 6, 4, ("mul", 1.0), None, big=12.0)
    # Enough query rows for several row blocks (130 = 64 + 64 + 2) and two threads; a constant [s, s] mask.
    mha_case("threads_attn_mha", 1, 4, 130, 16, ("mul", 0.25), (130, 130), mask_kind="const")
    # Cross attention, rank 3, sq != sk: scale div; a constant causal-style mask with -inf [5, 9].
    m = f32(np.triu(np.full((5, 9), -np.inf), 5) + rng.standard_normal((5, 9)))
    direct_case("attn_cross_div_inf_mask", (4, 5, 7), (4, 7, 9), (4, 9, 3), ("div", 2.5), ("const", m))
    # Scale multiplied on the left; a mask broadcast along the keys ([5, 1]: stride 0 across a row).
    direct_case("attn_mask_column", (2, 5, 6), (2, 6, 8), (2, 8, 5), ("mul_left", 0.5), ("input", randn(5, 1)))
    # Rank 2 (one head, no batch), K as rows transposed in the graph: the transpose is absorbed.
    direct_case("attn_rank2_k_rows", (11, 6), (6, 17), (17, 4), ("mul", 0.4), k_rows=True)
    # Q broadcast over the batch ([1, 5, 4] against K^T [3, 4, 6]): a batch stride of 0.
    direct_case("attn_broadcast_q", (1, 5, 4), (3, 4, 6), (3, 6, 2), ("mul", 0.3))
    # mask [3] across keys, rank 1: broadcast along every leading dim.
    direct_case("attn_mask_rank1", (2, 4, 5), (2, 5, 3), (2, 3, 2), None, ("input", randn(3)))
    # A masked fill as the GPT export writes it: where(cond, -inf, s), cond an f32 constant [1, 1, s, s]
    # (nonzero: masked), after the scale.
    tri = np.triu(np.ones((1, 1, 7, 7), dtype=np.float32), 1)
    direct_case("attn_where_fill_f32", (2, 3, 7, 5), (2, 3, 5, 7), (2, 3, 7, 4), ("mul", 0.45),
                ("const", tri, -np.inf, True))
    # where(cond, s, fill) with a bool input condition [7] (keys kept where true).
    keep = np.array([True, False, True, True, False, True, True])
    direct_case("attn_where_keep_bool", (2, 5, 3), (2, 3, 7), (2, 7, 6), None, ("input", keep, -1e9, False))
    # Near misses: each runs unfused, as matmul (with its scalar scale fused), softmax, matmul, ...
    # the scores are also a graph output: matmul, mul, softmax, matmul.
    direct_case("attn_miss_scores_output", (2, 5, 4), (2, 4, 6), (2, 6, 3), ("mul", 0.5), extra="scores_output",
                steps=4)
    # the probabilities are read twice (also negated into an output): matmul+mul, softmax, neg, matmul.
    direct_case("attn_miss_probs_twice", (2, 5, 4), (2, 4, 6), (2, 6, 3), ("mul", 0.5), extra="probs_twice",
                steps=4)
    # softmax over the query axis.
    direct_case("attn_miss_softmax_axis", (2, 6, 4), (2, 4, 6), (2, 6, 3), ("mul", 0.5), axis=-2, steps=3)
    # a scale that is not a scalar (one value per key): matmul, mul, softmax, matmul.
    direct_case("attn_miss_vector_scale", (2, 5, 4), (2, 4, 6), (2, 6, 3), ("mul", randn(6)), steps=4)


if __name__ == "__main__":
    main()
