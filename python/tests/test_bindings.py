"""The Python bindings (rml._rml): NumPy interop without copies, errors by class and code, tracing and eager ops
against NumPy, graphs crossing between Python and the C++ loader/saver, surgery, serialization, the executor, and
an exported PyTorch model run through the bindings.

CTest runs this file with the build tree's package first on PYTHONPATH and RML_REQUIRE_BINDINGS=1. The exporters'
own pytest run collects it too, without the extension: it is skipped there, never passed.
"""

from __future__ import annotations

import ast
import gc
import os
import pickle
import threading

import numpy as np
import pytest

if os.environ.get("RML_REQUIRE_BINDINGS"):
    import rml
else:
    rml = pytest.importorskip("rml._rml", reason="the rml extension is not built; CTest's python.bindings runs it")
    import rml  # noqa: F811

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], dtype=np.float32)


def pool(inputs):
    return [rml.neg(rml.sum(rml.relu(inputs[0]), [1], True))]


def traced_pool(input_name="x", output_name="y"):
    return rml.trace(pool, [rml.TensorSpec(input_name, rml.float32, [2, 3])], output_names=[output_name]).graph


def pool_reference(x):
    return -np.maximum(x, 0).sum(axis=1, keepdims=True)


def encoder_and_head():
    """h = relu(x) and y = h + h, the guide's encoder and head."""
    spec = [rml.TensorSpec("x", rml.float32, [2, 3])]
    encoder = rml.trace(lambda i: [rml.relu(i[0])], spec, output_names=["h"]).graph
    spec = [rml.TensorSpec("h", rml.float32, [2, 3])]
    return encoder, rml.trace(lambda i: [rml.add(i[0], i[0])], spec, output_names=["y"]).graph


# ---- tensors and NumPy ----

def test_numpy_array_becomes_a_tensor_without_a_copy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = rml.Tensor(a)
    assert t.shape == (2, 3) and t.dtype == rml.float32
    assert np.shares_memory(np.asarray(t), a)
    a[0, 0] = 42.0  # one buffer: the tensor sees the write
    assert t.tolist()[0][0] == 42.0
    i = np.arange(4, dtype=np.int32)
    assert np.shares_memory(np.asarray(rml.tensor(i)), i)
    assert rml.tensor(i).dtype == rml.int32


def test_tensor_keeps_the_array_alive():
    t = rml.Tensor(np.full((256,), 7.0, dtype=np.float32))
    gc.collect()
    assert np.asarray(t).sum() == 7.0 * 256


def test_tensor_to_numpy_is_a_view_that_keeps_the_tensor_alive():
    view = np.asarray(rml.relu(rml.tensor(X)))
    gc.collect()
    np.testing.assert_array_equal(view, np.maximum(X, 0))
    t = rml.tensor(X.copy())
    assert np.shares_memory(np.asarray(t), t.numpy())


def test_conversions_copy_only_when_they_must():
    f64 = X.astype(np.float64)
    t = rml.tensor(f64)
    assert t.dtype == rml.float32 and not np.shares_memory(np.asarray(t), f64)
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    t = rml.tensor(strided)
    np.testing.assert_array_equal(np.asarray(t), strided)
    assert np.asarray(t).flags.c_contiguous
    assert rml.tensor([[1, 2], [3, 4]]).dtype == rml.int32
    assert rml.tensor([1, 2], dtype=np.float32).dtype == rml.float32
    assert rml.tensor(np.array([1, 2], np.int64)).dtype == rml.int32


def test_a_read_only_array_stays_read_only():
    a = X.copy()
    a.setflags(write=False)
    view = np.asarray(rml.Tensor(a))
    assert np.shares_memory(view, a) and not view.flags.writeable


def test_a_symbolic_tensor_has_no_data_to_give():
    kept = []

    def keep(inputs):
        kept.append(inputs[0])
        return [rml.relu(inputs[0])]
    rml.trace(keep, [rml.TensorSpec("x", rml.float32, [2, 3])])
    symbolic = kept[0]
    assert symbolic.is_symbolic and symbolic.shape == (2, 3) and "symbolic" in repr(symbolic)
    with pytest.raises(rml.FailedPreconditionError, match="holds no data"):
        np.asarray(symbolic)
    with pytest.raises(BufferError):
        memoryview(symbolic)
    with pytest.raises(rml.FailedPreconditionError, match="trace .* has ended"):
        rml.relu(symbolic)


def test_reshape_and_tolist():
    t = rml.tensor(X)
    assert t.reshape(-1).tolist() == X.reshape(-1).tolist()
    assert t.reshape(3, 2).shape == (3, 2) and t.reshape([3, 2]).shape == (3, 2)
    assert np.shares_memory(np.asarray(t.reshape(6)), np.asarray(t))
    with pytest.raises(rml.InvalidArgumentError):
        t.reshape(4, 2)


def test_dtypes_rml_does_not_have_are_refused():
    with pytest.raises(rml.InvalidArgumentError, match="f32, f16, bf16, i32, i64 and bool"):
        rml.tensor([1.0], dtype=np.float64)
    with pytest.raises(rml.InvalidArgumentError, match="int32.*rml.int64"):
        rml.tensor(np.array([2**40], np.int64))  # NumPy's default integer still becomes i32, checked
    with pytest.raises(rml.InvalidArgumentError):
        rml.tensor(np.array([1 + 2j]))
    with pytest.raises(rml.InvalidArgumentError, match="only 0 and 1 become bool"):
        rml.tensor([0, 1, 2], dtype="bool")


def test_float16_int64_and_bool_arrays_share_memory_both_ways():
    h = np.array([0.1, -0.0, 65504, np.inf, 2.0**-24, np.nan], np.float16)
    t = rml.tensor(h)  # a float16 array keeps its dtype
    assert t.dtype == rml.float16 and t.dtype == rml.DType.f16 and rml.dtype_name(t.dtype) == "f16"
    back = np.asarray(t)
    assert back.dtype == np.float16 and np.shares_memory(back, h)
    assert memoryview(t).format == "e" and memoryview(t).itemsize == 2
    np.testing.assert_array_equal(back.view(np.uint16), h.view(np.uint16))

    i = np.array([-2**63, 2**62 + 1, -5], np.int64)
    t = rml.tensor(i, dtype=rml.int64)
    assert t.dtype == rml.int64 and memoryview(t).format == "q"
    assert np.shares_memory(np.asarray(t), i) and np.asarray(t).dtype == np.int64
    assert t.tolist() == [-2**63, 2**62 + 1, -5]
    assert rml.tensor(i[2:], dtype="i64").item() == -5
    assert rml.tensor(np.array([3, 4], np.int64)).dtype == rml.int32  # the default is unchanged

    b = np.array([True, False, True])
    t = rml.tensor(b)
    assert t.dtype == rml.bool_ and memoryview(t).format == "?"
    assert np.shares_memory(np.asarray(t), b) and np.asarray(t).dtype == np.bool_
    assert t.tolist() == [True, False, True]
    assert rml.tensor([1, 0], dtype=rml.bool_).tolist() == [True, False]
    assert rml.tensor([1.5, 2.5], dtype=rml.float16).tolist() == [1.5, 2.5]
    for t in (rml.tensor(h), rml.tensor(i, dtype=rml.int64), rml.tensor(b)):
        again = pickle.loads(pickle.dumps(t))
        assert again.dtype == t.dtype and again.equal(t)


def test_bf16_is_made_from_float_data_and_read_back_as_bits_or_float32():
    torch = pytest.importorskip("torch")
    x = np.array([0.1, 1 / 3, -2.5, 3.3e38, 3.4e38, 1e-40, -0.0, np.inf], np.float32)
    t = rml.tensor(x, dtype="bf16")
    assert t.dtype == rml.bfloat16 and t.type == rml.TensorType("bfloat16", [8])
    bits = np.asarray(t)  # NumPy has no bfloat16: the buffer is the bit patterns
    assert bits.dtype == np.uint16 and memoryview(t).format == "H"
    reference = torch.from_numpy(x.copy()).to(torch.bfloat16)  # PyTorch rounds to nearest even too
    np.testing.assert_array_equal(bits, reference.view(torch.int16).numpy().view(np.uint16))
    widened = t.float32()
    assert widened.dtype == np.float32
    np.testing.assert_array_equal(widened, reference.to(torch.float32).numpy())
    assert t.tolist() == reference.to(torch.float32).tolist()
    # uint16 data given for bf16 is taken as bits, so np.asarray round-trips (and so does pickle).
    assert rml.tensor(bits, dtype=rml.bfloat16).equal(t)
    assert pickle.loads(pickle.dumps(t)).equal(t)
    assert "bf16 [8]" in repr(t) and "-2.5" in repr(t)  # the values, not the bits (49184)


# ---- errors ----

def test_errors_have_a_class_and_a_code_name_per_code():
    expected = {
        rml.InvalidArgumentError: "INVALID_ARGUMENT", rml.FailedPreconditionError: "FAILED_PRECONDITION",
        rml.NotFoundError: "NOT_FOUND", rml.OutOfRangeError: "OUT_OF_RANGE", rml.UnsupportedError: "UNSUPPORTED",
        rml.DataLossError: "DATA_LOSS", rml.InternalError: "INTERNAL",
    }
    for cls, name in expected.items():
        assert issubclass(cls, rml.Error) and cls.code_name == name and rml.code_name(cls.code) == name


def test_failures_raise_their_codes_class(tmp_path):
    with pytest.raises(rml.NotFoundError) as missing:
        rml.load_graph(tmp_path / "nothing")
    assert missing.value.code_name == "NOT_FOUND" and "nothing.json" in str(missing.value)
    assert isinstance(missing.value, LookupError)

    graph = traced_pool()
    with pytest.raises(rml.FailedPreconditionError, match="not finalized"):
        graph.run([X])
    with pytest.raises(rml.InvalidArgumentError, match="broadcast") as bad:
        rml.add(rml.tensor(X), rml.tensor([1.0, 2.0]))
    assert bad.value.code_name == "INVALID_ARGUMENT" and isinstance(bad.value, ValueError)
    with pytest.raises(rml.OutOfRangeError):
        rml.gather(rml.tensor(X), rml.tensor([5]), 0)
    with pytest.raises(rml.UnsupportedError):
        rml.to(rml.tensor(X), "gpu")
    with pytest.raises(rml.DataLossError):
        rml.deserialize(rml.serialize(graph)[:-7])


def test_a_run_with_the_wrong_input_names_it():
    graph = traced_pool()
    graph.finalize()
    with pytest.raises(rml.InvalidArgumentError, match="x"):
        graph.run([np.zeros((3, 3), np.float32)])


# ---- eager ops against NumPy ----

def test_eager_ops_match_numpy():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    m = rng.standard_normal((4, 5)).astype(np.float32)
    ta, tb = rml.tensor(a), rml.tensor(b)

    def close(t, ref):
        np.testing.assert_allclose(np.asarray(t), ref, rtol=1e-5, atol=1e-6)

    close(rml.relu(ta), np.maximum(a, 0))
    close(rml.add(ta, tb), a + b)
    close(ta * 2.0 - tb, a * 2.0 - b)
    close(rml.sum(ta, [1], True), a.sum(axis=1, keepdims=True))
    close(rml.mean(ta), a.mean())
    close(rml.max(ta, [-1]), a.max(axis=-1))
    close(rml.matmul(ta, rml.tensor(m)), a @ m)
    close(ta @ m, a @ m)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    close(rml.softmax(ta), e / e.sum(axis=-1, keepdims=True))
    close(rml.transpose(ta, [2, 0, 1]), a.transpose(2, 0, 1))
    close(rml.concat([ta, ta], 1), np.concatenate([a, a], axis=1))
    close(rml.slice(ta, [1], [4], [2], [2]), a[:, :, 1:4:2])
    close(rml.gather(ta, rml.tensor([2, -1]), 2), a[:, :, [2, -1]])
    close(rml.where(rml.greater(ta, 0.0), ta, 0.0), np.where(a > 0, a, 0))
    arg = rml.argmax(ta, 1)
    assert arg.dtype == rml.int32 and np.array_equal(np.asarray(arg), a.argmax(axis=1))
    close(rml.cast(rml.tensor([1.7, -2.7]), rml.int32), np.array([1, -2], np.int32))


def test_conv2d_and_pooling_match_a_direct_loop():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    bias = np.array([0.5, -1.0, 2.0], np.float32)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 3, 5, 5), np.float32)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                ref[0, o, i, j] = (padded[0, :, i:i + 3, j:j + 3] * w[o]).sum() + bias[o]
    np.testing.assert_allclose(np.asarray(rml.conv2d(x, w, bias, pads=[1, 1, 1, 1])), ref, rtol=1e-4, atol=1e-5)
    pooled = np.asarray(rml.max_pool2d(rml.tensor(x), [2, 2]))
    np.testing.assert_array_equal(pooled, x[:, :, :4, :4].reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))


def test_executor_options_reach_the_convolution_path():
    # 48 channels, 3x3, stride 1, constant weights: Winograd pays from 48 channels (docs/ops.md).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 48, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((48, 48, 3, 3)) / 20).astype(np.float32)
    graph = rml.trace(lambda inputs: rml.conv2d(inputs[0], w, None, pads=[1, 1, 1, 1]),
                      [rml.TensorSpec("x", "f32", list(x.shape))], output_names=["y"]).graph
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # [1, 48, 32, 32, 3, 3]
    ref = np.einsum("ncijkl,ockl->noij", windows, w.astype(np.float64))
    options = rml.ExecutorOptions(threads=1, winograd=rml.Winograd.off, parallel_min_work=0)
    assert options.winograd == rml.Winograd.off and options.parallel_min_work == 0
    assert not options.widen_16bit_weights
    results = {}
    for transform in (rml.Winograd.off, rml.Winograd.f2, rml.Winograd.f4):
        options.winograd = transform
        results[transform] = np.asarray(rml.Executor.create(graph, options).run([x])[0])
        np.testing.assert_allclose(results[transform], ref, rtol=1e-3, atol=1e-3)
    # The transforms round differently from the direct path: each option took its own path.
    assert not np.array_equal(results[rml.Winograd.off], results[rml.Winograd.f2])
    assert not np.array_equal(results[rml.Winograd.f2], results[rml.Winograd.f4])
    assert rml.ExecutorOptions().winograd == rml.Winograd.f2
    # Even halves at 2 threads, and runs whose split follows the threads (tests/exec checks uneven
    # splits bit for bit), give the same bits.
    assert rml.ExecutorOptions().balance_threads
    even = rml.ExecutorOptions(threads=2, parallel_min_work=0, balance_threads=False)
    assert not even.balance_threads
    first = np.asarray(rml.Executor.create(graph, even).run([x])[0])
    np.testing.assert_allclose(first, ref, rtol=1e-3, atol=1e-3)
    balanced = rml.Executor.create(graph, rml.ExecutorOptions(threads=2, parallel_min_work=0))
    for _ in range(5):
        assert np.array_equal(np.asarray(balanced.run([x])[0]), first)


def test_profile_names_each_step_by_its_nodes():
    # relu(x @ w + b), then a sum over rows: matmul, bias add and relu fuse into one step; the sum is
    # the second.
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    graph = rml.trace(lambda inputs: rml.sum(rml.relu(rml.add(rml.matmul(inputs[0], w), b)), [1], True),
                      [rml.TensorSpec("x", "f32", [2, 8])], output_names=["y"]).graph
    executor = rml.Executor.create(graph, rml.ExecutorOptions(threads=1))
    steps = executor.profile([np.ones((2, 8), np.float32)], runs=3)
    assert executor.step_count == len(steps) == 2
    assert [(s.op, s.first_node, s.node_count) for s in steps] == [("matmul", 0, 3), ("sum", 3, 1)]
    assert str(steps[1].output) == "f32 [2, 1]"
    assert all(s.seconds >= 0 for s in steps) and sum(s.seconds for s in steps) > 0
    with pytest.raises(rml.Error, match="profile: runs must be at least 1, got 0"):
        executor.profile([np.ones((2, 8), np.float32)], runs=0)


# ---- tracing ----

def test_a_trace_records_the_ops_and_runs_like_numpy():
    graph = traced_pool()
    assert [n.op_code for n in graph.nodes()] == [None, rml.OpCode.Relu, rml.OpCode.Sum, rml.OpCode.Neg]
    assert graph.nodes()[0].kind == rml.NodeKind.input
    assert graph.node("Sum_2").attrs() == {"axes": [1], "keepdims": True}
    graph.finalize()
    np.testing.assert_allclose(np.asarray(graph.run([X])[0]), pool_reference(X))


def test_tensor_operators_record_while_tracing():
    def affine(inputs):
        x, = inputs
        return (x * 3.0 + 1.0) @ np.eye(3, dtype=np.float32)
    graph = rml.trace(affine, [rml.TensorSpec("x", "f32", [2, 3])], output_names=["y"]).graph
    assert [n.op_code.name for n in graph.nodes()[1:]] == ["Mul", "Add", "MatMul"]
    graph.finalize()
    np.testing.assert_allclose(np.asarray(graph.run([X])[0]), X * 3 + 1, rtol=1e-6)


def test_a_trace_function_exception_comes_out_unchanged():
    class Stop(Exception):
        pass
    raised = Stop("stop here")

    def fails(inputs):
        rml.relu(inputs[0])
        raise raised
    with pytest.raises(Stop) as caught:
        rml.trace(fails, [rml.TensorSpec("x", rml.float32, [2, 3])])
    assert caught.value is raised


def test_a_type_error_inside_a_trace_raises_at_the_op():
    def bad(inputs):
        return [rml.matmul(inputs[0], inputs[0])]
    with pytest.raises(rml.InvalidArgumentError, match="matmul"):
        rml.trace(bad, [rml.TensorSpec("x", rml.float32, [2, 3])])
    with pytest.raises(rml.InvalidArgumentError, match="^trace: the function returned a list holding a float"):
        rml.trace(lambda inputs: [1.0], [rml.TensorSpec("x", rml.float32, [2, 3])])
    with pytest.raises(rml.InvalidArgumentError, match="output names"):
        rml.trace(pool, [rml.TensorSpec("x", rml.float32, [2, 3])], output_names=["a", "b"])


# ---- graphs between Python and the C++ loader, saver and serializer ----

def test_a_traced_graph_saved_and_loaded_runs_the_same(tmp_path):
    graph = traced_pool()
    rml.save_graph(graph, tmp_path / "pool")
    assert (tmp_path / "pool.json").exists()
    loaded = rml.load_graph(str(tmp_path / "pool"))
    assert loaded.input_names() == ["x"] and loaded.output_names() == ["y"]
    rml.assert_structural_equal(loaded, graph)
    loaded.finalize()
    np.testing.assert_allclose(np.asarray(loaded.run([X])[0]), pool_reference(X))


def test_weights_made_in_python_survive_a_save_and_a_serialization(tmp_path):
    w = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)

    def linear(inputs):
        return [rml.add(rml.matmul(inputs[0], w), 1.0)]
    graph = rml.trace(linear, [rml.TensorSpec("x", rml.float32, [2, 3])], "linear", ["y"]).graph
    rml.save_graph(graph, tmp_path / "linear")
    loaded = rml.load_graph(tmp_path / "linear")
    copy = rml.deserialize(rml.serialize(loaded))
    rml.assert_structural_equal(copy, loaded)
    rml.serialize_to_file(copy, tmp_path / "linear.rmlpack")
    again = rml.deserialize_from_file(tmp_path / "linear.rmlpack")
    again.finalize()
    np.testing.assert_allclose(np.asarray(again.run([X])[0]), X @ w + 1.0, rtol=1e-5)


def test_node_and_value_definitions_match_the_saved_json_and_serialize(tmp_path):
    import json
    graph = traced_pool()
    rml.save_graph(graph, tmp_path / "pool")
    saved = json.loads((tmp_path / "pool.json").read_text())  # the reference: the file, read by Python's json
    ops = [n for n in graph.nodes() if n.kind == rml.NodeKind.op]
    assert len(ops) == len(saved["nodes"])
    for node, want in zip(ops, saved["nodes"]):
        d = node.node_def()
        assert (d.op, d.inputs, d.outputs) == (want["op"], want["inputs"], want["outputs"])
        assert d.attrs == want.get("attrs", {})
        back = rml.deserialize(rml.serialize(d), rml.NodeDef)
        assert isinstance(back, rml.NodeDef) and back == d
        assert (back.op, back.inputs, back.outputs, back.attrs) == (d.op, d.inputs, d.outputs, d.attrs)
    for id, want in enumerate(saved["values"]):
        v = graph.value_def(id)
        assert v.name == want.get("name", "") and v.type.shape == tuple(want["shape"])
        assert rml.dtype_name(v.type.dtype) == want["dtype"]
        assert rml.deserialize(rml.serialize(v), rml.ValueDef) == v
    with pytest.raises(rml.OutOfRangeError):
        graph.value_def(len(saved["values"]))


def test_a_node_def_made_in_python_round_trips_and_differs_where_it_should():
    d = rml.NodeDef("max_pool2d", [0], [1], name="pool", attrs={"kernel": [2, 2], "strides": [2, 2]},
                    origin=rml.Origin("net.pool", "model.py", 12), device=rml.Device("cpu:1"))
    back = rml.deserialize(rml.serialize(d), rml.NodeDef)
    assert back == d
    assert (back.name, back.attrs, back.device, back.origin) == ("pool", {"kernel": [2, 2], "strides": [2, 2]},
                                                                  rml.Device("cpu:1"), rml.Origin("net.pool", "model.py", 12))
    other = rml.deserialize(rml.serialize(d), rml.NodeDef)
    other.attrs = {"kernel": [3, 3], "strides": [2, 2]}
    assert other != d
    other = rml.deserialize(rml.serialize(d), rml.NodeDef)
    other.inputs = [2]
    assert other != d
    assert rml.deserialize(rml.serialize(rml.Origin("m", "f.py", 3)), rml.Origin) == rml.Origin("m", "f.py", 3)
    with pytest.raises(rml.InvalidArgumentError, match="ValueDef"):
        rml.deserialize(rml.serialize(d), rml.ValueDef)
    with pytest.raises(rml.InvalidArgumentError, match="NodeDef"):
        rml.serialize(object())


def test_a_traced_graph_with_inline_constants_loads_back_structurally_equal(tmp_path):
    graph = rml.trace(lambda i: [rml.add(i[0], 1.0)], [rml.TensorSpec("x", rml.float32, [2, 3])], "plus", ["y"]).graph
    rml.save_graph(graph, tmp_path / "plus")
    rml.assert_structural_equal(rml.load_graph(tmp_path / "plus"), graph)


def test_graphs_and_tensors_pickle():
    graph = pickle.loads(pickle.dumps(traced_pool()))
    rml.assert_structural_equal(graph, traced_pool())
    t = pickle.loads(pickle.dumps(rml.tensor([1, 2, 3])))
    assert t.dtype == rml.int32 and t.tolist() == [1, 2, 3]


def test_a_run_converts_plain_data_to_the_inputs_dtype():
    graph = traced_pool()
    graph.finalize()
    (y,) = graph.run([[[1, -2, 3], [-4, 5, -6]]])  # integers, for an f32 input
    np.testing.assert_allclose(np.asarray(y), pool_reference(X))
    with pytest.raises(rml.InvalidArgumentError, match="x"):
        graph.run([rml.tensor([[1, -2, 3], [-4, 5, -6]])])  # an i32 tensor is the caller's to cast


def test_assert_structural_equal_names_the_difference():
    a, b = traced_pool(), traced_pool(output_name="z")
    assert not rml.structural_equal(a, b)
    with pytest.raises(rml.InvalidArgumentError, match="name"):
        rml.assert_structural_equal(a, b)
    assert rml.structural_equal(a, b, map_names=True)


# ---- surgery ----

def test_merge_takes_a_dict_or_pairs_and_endpoints_as_strings_or_pairs():
    encoder, head = encoder_and_head()
    merged, renames = rml.graph.merge({"encoder": encoder, "head": head}, [("encoder.h", "head.h")])
    assert merged.input_names() == ["x"] and merged.output_names() == ["y"] and encoder.consumed and head.consumed
    first = renames[0]
    assert (first.part, first.kind, first.from_, first.to) == ("encoder", rml.NameKind.node, "Relu_1", "encoder/Relu_1")
    encoder, head = encoder_and_head()
    merged, _ = rml.graph.merge([("encoder", encoder), ("head", head)], [(("encoder", "h"), ("head", "h"))],
                                io_names=rml.IoNames.prefix_always)
    assert merged.input_names() == ["encoder/x"]
    merged.finalize()
    np.testing.assert_allclose(np.asarray(merged.run([X])[0]), 2 * np.maximum(X, 0))


def test_merge_refuses_bad_arguments_and_leaves_the_parts():
    graph = traced_pool()
    with pytest.raises(rml.InvalidArgumentError, match="same Graph object"):
        rml.graph.merge({"a": graph, "b": graph})
    with pytest.raises(rml.InvalidArgumentError, match="part.name"):
        rml.graph.merge({"a": graph}, [("a", "b.x")])
    with pytest.raises(rml.InvalidArgumentError, match="io_names"):
        rml.graph.merge({"a": graph}, io_names="sometimes")
    with pytest.raises(rml.InvalidArgumentError, match="itself"):
        graph.merge(graph, [])
    assert graph.input_names() == ["x"] and not graph.consumed


def test_split_by_a_function_and_merge_back_compute_the_same():
    graph = traced_pool()
    asked = []

    def by_code(node):
        asked.append(node.name)
        return "first" if node.op_code == rml.OpCode.Relu else "second"
    parts, connections = rml.graph.split(graph, by_code)
    assert asked == ["Relu_1", "Sum_2", "Neg_3"] and list(parts) == ["first", "second"]
    assert connections == [("first.Relu_1_0", "second.Relu_1_0")]
    merged, _ = rml.graph.merge(parts, connections)
    merged.finalize()
    np.testing.assert_allclose(np.asarray(merged.run([X])[0]), pool_reference(X))


def test_a_partition_function_that_fails_leaves_the_graph():
    graph = traced_pool()
    with pytest.raises(rml.InvalidArgumentError, match="node 'Relu_1': it returned int, not a str"):
        rml.graph.split(graph, lambda node: 3)
    error = KeyError("mine")

    def raises(node):
        raise error
    with pytest.raises(KeyError) as caught:
        rml.graph.split(graph, raises)
    assert caught.value is error
    assert graph.input_names() == ["x"] and len(graph.nodes()) == 4


def test_extract_by_views_or_names_and_stale_views():
    graph = traced_pool()
    relu = graph.find_nodes(rml.OpCode.Relu)[0]
    part = rml.graph.extract(graph, ["x"], ["Sum_2_0"])
    assert part.output_names() == ["Sum_2_0"] and graph.consumed
    with pytest.raises(rml.InvalidArgumentError, match="no longer in its graph"):
        relu.check()
    with pytest.raises(rml.InvalidArgumentError):
        relu.output(0)
    part.finalize()
    np.testing.assert_allclose(np.asarray(part.run([X])[0]), np.maximum(X, 0).sum(axis=1, keepdims=True))


def test_views_of_values_and_edges():
    graph = traced_pool()
    cut = graph.min_value_cut()
    assert [v.name for v in cut.values] == ["Sum_2_0"] and cut.bytes == 8 and cut.values[0].shape == (2, 1)
    assert cut.values[0].producer().name == "Sum_2"
    assert [(e.from_.name, e.to.name, e.port) for e in graph.edges()] == [("x", "Relu_1", 0), ("Relu_1", "Sum_2", 0),
                                                                          ("Sum_2", "Neg_3", 0)]
    assert [n.name for n in graph.value("x").consumers()] == ["Relu_1"]
    with pytest.raises(rml.NotFoundError):
        graph.node("nothing")


def test_graphs_on_two_cpus():
    encoder, head = encoder_and_head()
    head.to("cpu:1")
    assert head.device == rml.Device.cpu(1)
    with pytest.raises(rml.InvalidArgumentError, match="cpu:0 to cpu:1"):
        rml.graph.merge({"encoder": encoder, "head": head}, [("encoder.h", "head.h")], cross_device="refuse")
    merged, _ = rml.graph.merge({"encoder": encoder, "head": head}, [("encoder.h", "head.h")])
    assert rml.OpCode.Copy in [n.op_code for n in merged.nodes()]
    merged.finalize()
    np.testing.assert_allclose(np.asarray(merged.run([X])[0]), 2 * np.maximum(X, 0))


# ---- running ----

def test_executor_runs_from_several_threads():
    graph = traced_pool()
    executor = rml.Executor.create(graph, rml.ExecutorOptions(threads=1))
    assert executor.input_names == ["x"] and executor.output_names == ["y"]
    assert str(executor.output_type(0)) == "f32 [2, 1]"
    with pytest.raises(rml.OutOfRangeError):
        executor.input_type(1)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(8)]
    results = [None] * len(inputs)

    def work(i):
        for _ in range(50):
            results[i] = np.asarray(executor.run([inputs[i]])[0])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, y in zip(inputs, results):
        np.testing.assert_allclose(y, pool_reference(x), rtol=1e-6)


def test_optimize_drops_dead_code_and_identities():
    def wasteful(inputs):
        x, = inputs
        rml.exp(x)  # read by nothing
        return [rml.relu(rml.copy(x)) * 1.0]
    graph = rml.trace(wasteful, [rml.TensorSpec("x", rml.float32, [2, 3])], output_names=["y"]).graph
    graph.optimize()
    assert [n.op_code for n in graph.nodes()] == [None, rml.OpCode.Relu]
    graph.finalize()
    np.testing.assert_allclose(np.asarray(graph.run([X])[0]), np.maximum(X, 0))


def test_optimize_merges_common_subexpressions():
    def redundant(inputs):
        x, = inputs
        return [rml.add(rml.relu(x), rml.relu(x))]
    graph = rml.trace(redundant, [rml.TensorSpec("x", rml.float32, [2, 3])], output_names=["y"]).graph
    graph.optimize()
    assert len(graph.find_nodes(rml.OpCode.Relu)) == 1 and len(graph.find_nodes(rml.OpCode.Add)) == 1
    graph.finalize()
    np.testing.assert_allclose(np.asarray(graph.run([X])[0]), 2 * np.maximum(X, 0))


# ---- the exporters hand a graph straight to the bindings ----

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "zoo")


@pytest.mark.parametrize("stem", ["mlp_b2", "cnn_b2", "transformer_b1", "gpt_b2", "cnn_b2_onnx"])
def test_committed_zoo_models_run_like_their_pytorch_outputs(stem):
    from rml_export.safetensors import read_safetensors

    model = stem.removesuffix("_onnx")
    reference, meta = read_safetensors(os.path.join(DATA, model + ".expected.safetensors"))
    graph = rml.load_graph(os.path.join(DATA, stem))
    graph.finalize()
    inputs = [reference[f"input.{i}"] for i in range(len(graph.input_names()))]
    outputs = graph.run(inputs)
    for i, y in enumerate(outputs):
        expected = reference[f"output.{i}"]
        # The fixture's own tolerance: max abs error <= 1e-4 * max(1, max|output|).
        assert np.abs(np.asarray(y) - expected).max() <= 1e-4 * max(1.0, np.abs(expected).max()), meta

@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_an_exported_zoo_model_runs_like_pytorch(tmp_path, name):
    torch = pytest.importorskip("torch") if not os.environ.get("RML_REQUIRE_BINDINGS") else __import__("torch")
    import models
    import rml_export

    model, inputs = models.build(name, 2)
    rml_export.from_torch(model, inputs, str(tmp_path / name))
    graph = rml.load_graph(tmp_path / name)
    graph.finalize()
    with torch.no_grad():
        expected = model(*inputs).numpy()
    (y,) = graph.run([t.numpy() for t in inputs])
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-4, atol=1e-5)


# ---- the type stubs ----

def test_the_stubs_declare_every_public_name():
    def declared(stub):
        with open(os.path.join(os.path.dirname(rml.__file__), stub), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets)
            elif isinstance(node, ast.ImportFrom):
                names.update(a.asname for a in node.names if a.asname)
        return names
    public = {n for n in dir(rml._rml) if not n.startswith("_")} | {"trace", "TraceResult", "TraceFunction", "graph"}
    assert public <= declared("__init__.pyi")
    assert set(rml.graph.__all__) <= declared("graph.pyi")
