"""The NumPy reference interpreter against PyTorch, op by op (it is the exporters' independent check)."""

import numpy as np
import torch
import torch.nn.functional as F

from rml_export.reference import run_op

rng = np.random.default_rng(0)


def close(a, b, tol=1e-5):
    assert a.shape == tuple(b.shape), (a.shape, b.shape)
    assert np.allclose(a, np.asarray(b), atol=tol, rtol=tol), np.max(np.abs(a - np.asarray(b)))


def test_conv2d_groups_strides_dilation_asymmetric_pads():
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    got = run_op("conv2d", [x, w, b], {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2], "groups": 2})
    xp = F.pad(torch.from_numpy(x), (0, 1, 1, 2))  # (left, right, top, bottom)
    want = F.conv2d(xp, torch.from_numpy(w), torch.from_numpy(b), stride=(2, 1), dilation=(1, 2), groups=2)
    close(got, want, 1e-4)


def test_pools():
    x = rng.standard_normal((1, 3, 7, 6)).astype(np.float32)
    t = torch.from_numpy(x)
    close(run_op("max_pool2d", [x], {"kernel": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0]}),
          F.max_pool2d(t, (3, 2), (2, 2), padding=(1, 0)))
    close(run_op("avg_pool2d", [x], {"kernel": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1]}),
          F.avg_pool2d(t, 3, (1, 2), padding=1, count_include_pad=True))


def test_unary_binary_and_reductions():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = torch.from_numpy(x)
    close(run_op("gelu", [x], {}), F.gelu(t))
    close(run_op("gelu", [x], {"approximate": "tanh"}), F.gelu(t, approximate="tanh"))
    close(run_op("silu", [x], {}), F.silu(t))
    close(run_op("erf", [x], {}), torch.erf(t))
    close(run_op("softmax", [x], {"axis": 0}), torch.softmax(t, 0))
    close(run_op("mean", [x], {"axes": [-1], "keepdims": True}), t.mean(-1, keepdim=True))
    close(run_op("less", [x, np.float32(0)], {}), (t < 0).float())
    assert run_op("argmax", [x], {"axis": 1}).dtype == np.int32
    close(run_op("matmul", [x, x.T[None]], {}), torch.matmul(t, t.T[None]))
    close(run_op("matmul", [x[0], x.T], {}), torch.matmul(t[0], t.T))


def test_data_movement_and_indexing():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert run_op("slice", [x], {"starts": [-10], "ends": [100], "axes": [2], "steps": [3]}).shape == (2, 3, 2)
    idx = np.array([[-1, 0]], dtype=np.int32)
    assert np.array_equal(run_op("gather", [x, idx], {"axis": 1}), np.take(x, [[2, 0]], axis=1))
    assert run_op("pad", [x], {"pads": [0, 1, 0, 0, 0, 2], "value": 1.5}).shape == (2, 4, 6)
    cast = run_op("cast", [np.array([-2.7, 3.9, 1e20], dtype=np.float32)], {"to": "i32"})
    assert cast.tolist() == [-2, 3, 2**31 - 1]
    try:
        run_op("gather", [x, np.array([3], dtype=np.int32)], {"axis": 1})
    except IndexError:
        pass
    else:
        raise AssertionError("an out-of-range gather index was accepted")


def test_integer_pow_and_mod_against_torch():
    """Integer pow wraps like torch's (both multiply in the type); mod's two sign rules are torch's remainder
    (the divisor's sign) and fmod (the dividend's)."""
    a = torch.tensor([-7, 7, -7, 7, 0, 5], dtype=torch.int32)
    b = torch.tensor([3, -3, -3, 3, 4, 1], dtype=torch.int32)
    an, bn = a.numpy(), b.numpy()
    assert np.array_equal(run_op("mod", [an, bn], {}), torch.remainder(a, b).numpy())
    assert np.array_equal(run_op("mod", [an, bn], {"fmod": True}), torch.fmod(a, b).numpy())
    base = torch.tensor([3, -2, 2, 7], dtype=torch.int64)
    exp = torch.tensor([41, 63, 64, 0], dtype=torch.int64)
    assert np.array_equal(run_op("pow", [base.numpy(), exp.numpy()], {}), torch.pow(base, exp).numpy())
    for bad in ({"op": "pow", "b": np.array([-1], np.int32)}, {"op": "mod", "b": np.array([0], np.int32)}):
        try:
            run_op(bad["op"], [np.array([2], np.int32), bad["b"]], {})
        except ValueError:
            continue
        raise AssertionError(f"{bad['op']} accepted {bad['b']}")
    x = rng.standard_normal((3, 5)).astype(np.float32)
    assert run_op("argmax", [x], {"axis": 1, "output_dtype": "i64"}).dtype == np.int64
