"""Errors by class for the file and serialization calls: the exception hierarchy the merge-and-split programs rely
on, Device.type, serialize/deserialize of every serializable class, and files that fail as exceptions (a FIFO,
/dev/zero, a pair from two saves, weights cut short under a mapping) instead of hanging or killing the interpreter.

CTest's python.bindings runs this file with the build tree's package first on PYTHONPATH and RML_REQUIRE_BINDINGS=1.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("RML_REQUIRE_BINDINGS"):
    import rml
else:
    rml = pytest.importorskip("rml._rml", reason="the rml extension is not built; CTest's python.bindings runs it")
    import rml  # noqa: F811

MLP = Path(__file__).resolve().parents[2] / "tests" / "data" / "torch_mlp"


def relu_graph(name="x"):
    return rml.trace(lambda xs: [rml.relu(xs[0])], [rml.TensorSpec(name, rml.float32, [2, 3])],
                     output_names=["y"]).graph


def test_failed_precondition_is_an_invalid_argument():
    assert issubclass(rml.FailedPreconditionError, rml.InvalidArgumentError)
    assert issubclass(rml.FailedPreconditionError, ValueError)
    assert not issubclass(rml.InvalidArgumentError, rml.FailedPreconditionError)
    assert rml.FailedPreconditionError.code_name == "FAILED_PRECONDITION"
    finalized = relu_graph()
    finalized.finalize()
    with pytest.raises(rml.InvalidArgumentError) as caught:   # as the merge-and-split programs catch it
        rml.graph.merge({"a": finalized, "b": relu_graph()})
    assert type(caught.value) is rml.FailedPreconditionError
    assert caught.value.code_name == "FAILED_PRECONDITION"
    assert "finalized" in str(caught.value)


def test_device_type():
    assert rml.Device.cpu().type == "cpu"
    assert rml.Device.cpu(1).type == "cpu"
    accelerator = rml.Device.gpu()
    assert accelerator.type == ("cpu" if accelerator.is_cpu() else "gpu")


def test_serialize_every_serializable_class():
    t = rml.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    back = rml.deserialize(rml.serialize(t), rml.Tensor)
    assert isinstance(back, rml.Tensor)
    np.testing.assert_array_equal(np.asarray(back), np.arange(6, dtype=np.float32).reshape(2, 3))
    i = rml.deserialize(rml.serialize(rml.Tensor(np.array([7, -8], dtype=np.int32))), rml.Tensor)
    assert i.dtype == rml.int32 and np.asarray(i).tolist() == [7, -8]
    tt = rml.TensorType(rml.int32, [4, 5])
    assert rml.deserialize(rml.serialize(tt), rml.TensorType) == tt
    assert rml.deserialize(rml.serialize(rml.Device.cpu(2)), rml.Device) == rml.Device.cpu(2)
    g = relu_graph("q")
    back_graph = rml.deserialize(rml.serialize(g))   # Graph is the default
    assert isinstance(back_graph, rml.Graph)
    assert rml.structural_equal(g, back_graph)
    assert not rml.structural_equal(relu_graph("p"), back_graph)


def test_serialize_refusals():
    with pytest.raises(rml.InvalidArgumentError, match="Graph, Tensor, TensorType, Device, NodeDef, ValueDef and Origin, not dict"):
        rml.serialize({})
    with pytest.raises(rml.InvalidArgumentError, match="type must be one of"):
        rml.deserialize(rml.serialize(rml.Device.cpu()), int)
    tensor_bytes = rml.serialize(rml.Tensor(np.ones(3, np.float32)))
    with pytest.raises(rml.InvalidArgumentError, match="holds a Tensor"):
        rml.deserialize(tensor_bytes)
    with pytest.raises(rml.DataLossError):
        rml.deserialize(tensor_bytes[:-3], rml.Tensor)
    with pytest.raises(rml.Error):
        rml.deserialize(b"\x00garbage")


def test_serialize_to_file_any_class(tmp_path):
    path = tmp_path / "t.msgpack"
    rml.serialize_to_file(rml.Tensor(np.array([1.5, 2.5], np.float32)), path)
    assert np.asarray(rml.deserialize_from_file(path, rml.Tensor)).tolist() == [1.5, 2.5]
    with pytest.raises(rml.InvalidArgumentError, match="holds a Tensor"):
        rml.deserialize_from_file(path)
    with pytest.raises(rml.InvalidArgumentError):
        rml.serialize_to_file(relu_graph(), str(tmp_path / "dir") + "/")   # names a directory, not a file


def test_files_that_are_not_regular_fail_at_once(tmp_path):
    os.mkfifo(tmp_path / "f.json")
    with pytest.raises(rml.InvalidArgumentError, match="is a FIFO"):
        rml.load_graph(tmp_path / "f")
    os.symlink("/dev/zero", tmp_path / "z.json")
    with pytest.raises(rml.InvalidArgumentError, match="is a character device"):
        rml.load_graph(tmp_path / "z")
    with pytest.raises(rml.InvalidArgumentError):
        rml.deserialize_from_file("/dev/zero")
    with pytest.raises(rml.InvalidArgumentError, match="the path is empty"):
        rml.save_graph(relu_graph(), "")


def test_a_pair_from_two_saves_is_data_loss(tmp_path):
    g = rml.load_graph(MLP)
    other = relu_graph()
    for d in ("a", "b", "c"):
        (tmp_path / d).mkdir()
    rml.save_graph(g, tmp_path / "a" / "m")
    rml.save_graph(other, tmp_path / "b" / "m")
    shutil.copy(tmp_path / "b" / "m.safetensors", tmp_path / "a" / "m.safetensors")
    with pytest.raises(rml.DataLossError, match="different saves"):
        rml.load_graph(tmp_path / "a" / "m")
    assert rml.structural_equal(rml.load_graph(tmp_path / "b" / "m"), other)
    # Two saves of one graph write the same files (the pair id is a hash of the contents).
    rml.save_graph(g, tmp_path / "a" / "m")
    rml.save_graph(g, tmp_path / "c" / "m")
    for name in ("m.json", "m.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()


def test_weights_cut_short_under_a_mapping_raise(tmp_path):
    rml.save_graph(rml.load_graph(MLP), tmp_path / "m")
    g = rml.load_graph(tmp_path / "m")
    os.truncate(tmp_path / "m.safetensors", 8)
    with pytest.raises(rml.DataLossError, match="shrank"):
        rml.Executor.create(g)
    with pytest.raises(rml.DataLossError, match="shrank"):
        rml.serialize(g)
    with pytest.raises(rml.DataLossError, match="shrank"):
        rml.save_graph(g, tmp_path / "copy")
    with pytest.raises(rml.DataLossError):
        rml.load_graph(tmp_path / "m")
