"""rml.InferenceSession, ONNX Runtime's Python API over rml: feeds by name, outputs by name, NodeArg-like
descriptions, strict feeds (nothing narrowed, named errors), zero-copy in and out, run_into.

The reference is PyTorch's output for the MLP fixture (tests/data/torch_mlp.expected.safetensors), read with
NumPy. CTest runs this file with the build tree's package first on PYTHONPATH and RML_REQUIRE_BINDINGS=1;
without the extension it is skipped, never passed.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

if os.environ.get("RML_REQUIRE_BINDINGS"):
    import rml
else:
    rml = pytest.importorskip("rml._rml", reason="the rml extension is not built; CTest's python.session runs it")
    import rml  # noqa: F811

from rml_export.safetensors import read_safetensors

DATA = os.environ.get("RML_TEST_DATA") or os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data")
MLP = os.path.join(DATA, "torch_mlp")


@pytest.fixture(scope="module")
def reference():
    tensors, _ = read_safetensors(MLP + ".expected.safetensors")
    return tensors["x"], tensors["y"]


@pytest.fixture(scope="module")
def session():
    return rml.InferenceSession(MLP, threads=2)


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_inputs_and_outputs_are_described_as_onnx_runtime_does(session):
    (x,) = session.get_inputs()
    (y,) = session.get_outputs()
    assert (x.name, x.shape, x.type, x.dtype) == ("x", [2, 12], "tensor(float)", np.dtype(np.float32))
    assert (y.name, y.shape, y.type) == ("y", [2, 4], "tensor(float)")
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert "x" in repr(x)


def test_run_by_name_matches_pytorch(session, reference):
    x, y = reference
    outputs = session.run(None, {"x": x})
    assert isinstance(outputs, list) and len(outputs) == 1
    assert outputs[0].dtype == np.float32 and outputs[0].shape == (2, 4)
    close(outputs[0], y)
    close(session.run(["y"], {"x": x})[0], y)


def test_every_model_form_loads(tmp_path, reference):
    x, y = reference
    graph = rml.load_graph(MLP)
    packed = str(tmp_path / "mlp.msgpack")
    rml.serialize_to_file(graph, packed)
    for model in (MLP, MLP + ".json", packed, graph):
        close(rml.InferenceSession(model, threads=1).run(None, {"x": x})[0], y)
    with pytest.raises(rml.NotFoundError, match="no such file"):
        rml.InferenceSession(os.path.join(DATA, "no_such_model"))
    with pytest.raises(rml.UnsupportedError, match="CUDAExecutionProvider"):
        rml.InferenceSession(MLP, providers=["CUDAExecutionProvider"])
    rml.InferenceSession(MLP, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(
    "feeds, error, message",
    [
        ({}, rml.InvalidArgumentError, r"input 'x' \(f32 \[2, 12\]\) is not fed"),
        ({"x": np.zeros((2, 12), np.float32), "z": np.zeros(3, np.float32)}, rml.InvalidArgumentError,
         r"no input 'z' \(its inputs: x\)"),
        ({"x": np.zeros((3, 12), np.float32)}, rml.InvalidArgumentError, r"input 'x' must be f32 \[2, 12\], got f32 \[3, 12\]"),
        ({"x": np.zeros((2, 12), np.float64)}, rml.InvalidArgumentError, r"input 'x' must be float32 .*got float64"),
        ({"x": np.zeros((2, 12), np.int64)}, rml.InvalidArgumentError, r"input 'x' must be float32 .*got int64"),
        ({"x": np.zeros((2, 12), np.int32)}, rml.InvalidArgumentError, r"input 'x' must be float32 .*got int32"),
        ({"x": np.zeros((2, 12), np.complex64)}, rml.InvalidArgumentError, r"input 'x' must be float32 .*got complex64"),
        ({"x": np.zeros((12, 2), np.float32).T}, rml.InvalidArgumentError, r"input 'x' is not C-contiguous"),
        ({"x": np.full((2, 12), "a")}, TypeError, r"input 'x'.*dtype <U1 holds no numbers"),
        ({"x": np.empty((2, 12), object)}, TypeError, r"input 'x'.*dtype object holds no numbers"),
        ({"x": [[0.5] * 12] * 2}, rml.InvalidArgumentError, r"got float64"),
    ],
    ids=["missing", "extra", "shape", "float64", "int64", "int32", "complex", "strided", "str", "object", "list"],
)
def test_bad_feeds_raise_naming_the_input(session, feeds, error, message):
    with pytest.raises(error, match=message):
        session.run(None, feeds)


def test_bad_calls_raise_clearly(session, reference):
    x, _ = reference
    with pytest.raises(rml.InvalidArgumentError, match=r"no output 'logits' \(its outputs: y\)"):
        session.run(["logits"], {"x": x})
    with pytest.raises(TypeError, match="takes a dict"):
        session.run(None, [x])
    with pytest.raises(TypeError, match="names must be str"):
        session.run(None, {0: x})


def test_feeds_are_read_in_place_and_outputs_not_copied():
    # 4 MiB in and 4 MiB out; NumPy reports its allocations to tracemalloc, rml's C++ ones are not traced. A copy
    # of the feed (astype, ascontiguousarray) or of the output (np.array) would show as 4 MiB traced.
    import tracemalloc

    spec = [rml.TensorSpec("x", rml.float32, [1024, 1024])]
    session = rml.InferenceSession(rml.trace(lambda i: [rml.relu(i[0])], spec, output_names=["y"]).graph, threads=1)
    x = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    session.run(None, {"x": x})  # warm up
    tracemalloc.start()
    try:
        (y,) = session.run(None, {"x": x})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert peak < 1 << 20, f"{peak} bytes traced: a feed or an output was copied"
    assert not y.flags.owndata


def test_run_into_writes_preallocated_arrays(session, reference):
    x, y = reference
    out = np.full((2, 4), np.nan, np.float32)
    assert session.run_into({"x": x}, {"y": out}) is None
    close(out, y)
    with pytest.raises(rml.InvalidArgumentError, match=r"output 'y' must be float32"):
        session.run_into({"x": x}, {"y": np.zeros((2, 4), np.float64)})
    with pytest.raises(rml.InvalidArgumentError, match=r"output 0 \(\"y\"\) must be a writable f32 \[2, 4\]"):
        session.run_into({"x": x}, {"y": np.zeros((2, 5), np.float32)})
    readonly = np.zeros((2, 4), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(rml.InvalidArgumentError, match="read-only"):
        session.run_into({"x": x}, {"y": readonly})


def test_runs_from_several_threads_agree(session, reference):
    x, y = reference
    results = []

    def work():
        for _ in range(20):
            results.append(session.run(None, {"x": x})[0])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    for r in results:
        close(r, y)


def test_executor_run_with_a_dict_says_what_to_do_instead():
    ex = rml.Executor.create(rml.load_graph(MLP))
    with pytest.raises(rml.InvalidArgumentError, match="InferenceSession"):
        ex.run({"x": np.zeros((2, 12), np.float32)})


def test_string_and_object_arrays_are_refused_everywhere():
    ex = rml.Executor.create(rml.load_graph(MLP))
    with pytest.raises(TypeError, match="holds no numbers"):
        ex.run([np.full((2, 12), "a")])
    with pytest.raises(TypeError, match="holds no numbers"):
        rml.tensor(np.empty(3, object))
    with pytest.raises(TypeError):  # an implicit conversion that fails: pybind11's "incompatible arguments"
        rml.relu(["a", "b"])
