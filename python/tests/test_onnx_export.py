"""from_onnx on hand-built ONNX graphs: Gemm attributes, folded shape subgraphs, pooling, errors."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rml_export import ExportError, from_onnx, reference

rng = np.random.default_rng(3)


def model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def run(m, tmp_path, *inputs, **options):
    stem = str(tmp_path / "m")
    graph = from_onnx(m, stem, **options)
    g, w = reference.load(stem)
    return graph, reference.run_graph(g, w, list(inputs))


def test_gemm_transposes_alpha_beta(tmp_path):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    c = rng.standard_normal((5,)).astype(np.float32)
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
              [f32("a", [4, 3])], [f32("y", [3, 5])], [("b", b), ("c", c)])
    graph, (y,) = run(m, tmp_path, a)
    assert np.allclose(y, 0.5 * a.T @ b.T + 2.0 * c, atol=1e-5)
    assert [n["op"] for n in graph["nodes"]] == ["transpose", "matmul", "add"]  # b^T * alpha and 2c folded


def test_shape_subgraph_is_folded(tmp_path):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
             helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
             helper.make_node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [("i0", np.array(0, np.int64)), ("ax", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64))]
    graph, (y,) = run(model(nodes, [f32("x", [2, 3, 4])], [f32("y", [2, 12])], inits), tmp_path, x)
    assert [n["op"] for n in graph["nodes"]] == ["reshape"] and graph["nodes"][0]["attrs"]["shape"] == [2, 12]
    assert np.array_equal(y, x.reshape(2, 12))


def test_average_pool_excluding_padding(tmp_path):
    x = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    _, (y,) = run(model([node], [f32("x", [1, 1, 5, 5])], [f32("y", [1, 1, 5, 5])]), tmp_path, x)
    padded = np.pad(x[0, 0], 1)
    ones = np.pad(np.ones((5, 5)), 1)
    want = np.array([[padded[i:i + 3, j:j + 3].sum() / ones[i:i + 3, j:j + 3].sum() for j in range(5)]
                     for i in range(5)])
    assert np.allclose(y[0, 0], want, atol=1e-5)


def test_unsupported_op_is_named():
    m = model([helper.make_node("Det", ["x"], ["y"], name="det0")], [f32("x", [2, 2])], [f32("y", [])])
    with pytest.raises(ExportError, match=r"cannot lower ONNX op 'Det' \(node 'det0'\)"):
        from_onnx(m)


def test_dynamic_dimensions_need_shapes():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", ["batch", 3])], [f32("y", ["batch", 3])])
    with pytest.raises(ExportError, match="dynamic dimension 'batch'"):
        from_onnx(m)
    graph = from_onnx(m, input_shapes={"x": [2, 3]})
    assert graph["values"][graph["inputs"][0]]["shape"] == [2, 3]


def test_newer_opset_is_refused():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", [1])], [f32("y", [1])], opset=18)
    with pytest.raises(ExportError, match="opset 18"):
        from_onnx(m)


def test_command_line(tmp_path):
    import subprocess
    import sys
    m = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", ["n", 3])], [f32("y", ["n", 3])])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    env = {"PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1]), "PYTHONDONTWRITEBYTECODE": "1"}
    ok = subprocess.run([sys.executable, "-m", "rml_export", "onnx", str(path), str(tmp_path / "out"),
                         "--shape", "x=2,3"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "1 nodes" in ok.stdout and (tmp_path / "out.json").exists()
    bad = subprocess.run([sys.executable, "-m", "rml_export", "onnx", str(path), str(tmp_path / "bad")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "dynamic dimension 'n'" in bad.stderr


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("name", ["cnn", "transformer", "gpt"])
def test_zoo_models_across_opsets(tmp_path, name, opset, narrow):
    """torch.onnx.export at several opsets (attributes become inputs at 13, ...) lowers to the same math."""
    import warnings

    import torch

    import models
    model, inputs = models.build(name, 2)
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, opset_version=opset)
    with torch.no_grad():
        want = model(*inputs).numpy()
    # int64 token ids stay i64 (gather takes i64 indices), or are narrowed to i32 for f32/i32-only readers.
    feeds = [t.numpy().astype(np.int32) if not t.is_floating_point() and narrow else t.numpy() for t in inputs]
    _, (got,) = run(onnx.load(path), tmp_path, *feeds, narrow=narrow)
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, np.max(np.abs(want)))


def test_dynamic_batch_export_with_given_shapes(tmp_path):
    """A model exported with a symbolic batch: its Shape/Gather/Concat chains fold once the shape is given."""
    import warnings

    import torch

    import models
    model, (idx,) = models.build("gpt", 2)
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (idx,), path, opset_version=14, input_names=["idx"], output_names=["logits"],
                          dynamic_axes={"idx": {0: "batch", 1: "time"}, "logits": {0: "batch", 1: "time"}})
    stem = str(tmp_path / "m")
    graph = from_onnx(path, stem, input_shapes={"idx": [2, 8]})
    assert graph["values"][graph["inputs"][0]] == {"name": "idx", "dtype": "i64", "shape": [2, 8]}
    narrowed = from_onnx(path, input_shapes={"idx": [2, 8]}, narrow=True)
    assert narrowed["values"][narrowed["inputs"][0]] == {"name": "idx", "dtype": "i32", "shape": [2, 8]}
    g, w = reference.load(stem)
    (got,) = reference.run_graph(g, w, [idx.numpy()])
    with torch.no_grad():
        want = model(idx).numpy()
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, np.max(np.abs(want)))


def test_batch_norm_after_conv_is_folded(tmp_path):
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    stats = [("s", rng.uniform(0.5, 1.5, 3)), ("b", rng.uniform(-1, 1, 3)), ("m", rng.uniform(-1, 1, 3)),
             ("v", rng.uniform(0.5, 1.5, 3))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=1e-3)]
    inits = [("w", w)] + [(n, a.astype(np.float32)) for n, a in stats]
    graph, (y,) = run(model(nodes, [f32("x", [1, 2, 5, 5])], [f32("y", [1, 3, 5, 5])], inits), tmp_path, x)
    assert [n["op"] for n in graph["nodes"]] == ["conv2d"]
    s, b, m, v = (a.reshape(1, 3, 1, 1) for _, a in stats)
    import torch
    conv = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    assert np.allclose(y, (conv - m) / np.sqrt(v + 1e-3) * s + b, atol=1e-4)


def test_integer_selection_is_exact_only_for_narrow_types(tmp_path):
    def graph_for(elem):
        info = [helper.make_tensor_value_info(n, elem, [4]) for n in ("a", "b")]
        return model([helper.make_node("Max", ["a", "b"], ["y"])], info,
                     [helper.make_tensor_value_info("y", elem, [4])])

    a = np.array([0, 200, 17, 255], np.int32)
    b = np.array([3, 100, 18, 254], np.int32)
    graph, (y,) = run(graph_for(TensorProto.UINT8), tmp_path, a, b, narrow=True)
    assert [n["op"] for n in graph["nodes"]] == ["cast", "cast", "maximum", "cast"]
    assert y.dtype == np.int32 and y.tolist() == [3, 200, 18, 255]
    with pytest.raises(ExportError, match="integer Max"):
        from_onnx(graph_for(TensorProto.INT32), narrow=True)
    # Without narrowing, narrow integer types still go exactly through f32; others use rml's own integer
    # maximum: exact on i64 beyond 2^53, where f32 (and f64) are not.
    graph, (y,) = run(graph_for(TensorProto.UINT8), tmp_path, a, b)
    assert [n["op"] for n in graph["nodes"]] == ["cast", "cast", "maximum", "cast"]
    graph, (y,) = run(graph_for(TensorProto.INT32), tmp_path, a + 2**30, b)
    assert [n["op"] for n in graph["nodes"]] == ["maximum"] and y.tolist() == (a + 2**30).tolist()
    big = np.array([2**62 + 1, -5, 2**53 + 1, 0], np.int64)
    other = np.array([2**62, -4, 2**53, 1], np.int64)
    graph, (y,) = run(graph_for(TensorProto.INT64), tmp_path, big, other)
    assert graph["values"][graph["outputs"][0]]["dtype"] == "i64"
    assert y.dtype == np.int64 and y.tolist() == [2**62 + 1, -4, 2**53 + 1, 1]


def test_float16_bfloat16_int64_bool_are_imported_without_narrowing(tmp_path):
    """FLOAT16 weights and inputs stay f16 (each op rounded), INT64 i64, BOOL bool; narrow=True gives f32/i32."""
    x16 = rng.standard_normal((2, 3)).astype(np.float16)
    w16 = rng.standard_normal((3, 4)).astype(np.float16)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"]),
             helper.make_node("Greater", ["m", "zero"], ["mask"]), helper.make_node("Not", ["mask"], ["off"]),
             helper.make_node("Cast", ["off"], ["count"], to=TensorProto.INT64),
             helper.make_node("Add", ["count", "big"], ["total"])]
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4]),
               helper.make_tensor_value_info("off", TensorProto.BOOL, [2, 4]),
               helper.make_tensor_value_info("total", TensorProto.INT64, [2, 4])],
              [("w", w16), ("zero", np.zeros((), np.float16)), ("big", np.full((4,), 2**40, np.int64))])
    graph, (y, off, total) = run(m, tmp_path, x16)
    types = {v["name"]: v["dtype"] for v in graph["values"]}
    assert (types["x"], types["w"], types["y"], types["off"], types["total"]) == ("f16", "f16", "f16", "bool", "i64")
    assert [n["op"] for n in graph["nodes"]] == ["matmul", "relu", "greater", "logical_not", "cast", "add"]
    # NumPy: the product of the f16 values in f32, rounded to f16 once, as rml does (an ulp apart at most, 2^-10
    # relative, if the two sum in different orders).
    want = np.maximum(x16.astype(np.float32) @ w16.astype(np.float32), 0).astype(np.float16)
    assert y.dtype == np.float16
    assert np.max(np.abs(y.astype(np.float32) - want.astype(np.float32))) <= 2**-10 * max(1.0, np.max(np.abs(want)))
    assert off.dtype == np.bool_ and off.tolist() == (want <= 0).tolist()
    assert total.dtype == np.int64 and total.tolist() == (2**40 + (want <= 0)).tolist()
    with pytest.raises(ExportError, match="outside the i32 range"):  # narrowing cannot hold 2^40 in i32
        from_onnx(m, narrow=True)
    m.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.full((4,), 7, np.int64), "big"))
    with pytest.raises(ExportError, match="integer Add"):  # nor compute on integers but through f32
        from_onnx(m, narrow=True)
    del m.graph.node[5]
    del m.graph.output[2]
    narrowed = from_onnx(m, narrow=True)
    assert {v["dtype"] for v in narrowed["values"]} == {"f32"}  # the bool an f32 0/1 mask, as in the seed format


def test_bfloat16_initializers_keep_their_bits(tmp_path):
    w = np.array([[0.1, -2.5], [3e38, 1e-39]], np.float32)
    init = helper.make_tensor("w", TensorProto.BFLOAT16, [2, 2], [0, 0, 0, 0])
    bits = ((w.view(np.uint32).astype(np.uint64) + 0x7FFF + ((w.view(np.uint32) >> 16) & 1)) >> 16).astype(np.uint16)
    init.ClearField("int32_data")
    init.int32_data.extend(int(b) for b in bits.reshape(-1))
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 2])], [init])
    stem = str(tmp_path / "b")
    result = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), stem)
    assert {v["dtype"] for v in result["values"]} == {"bf16"}
    from rml_export.safetensors import read_safetensors
    tensors, _ = read_safetensors(stem + ".safetensors")
    assert np.array_equal(tensors["w"].bits, bits)
