#!/usr/bin/python3
"""Converts the ONNX backend node tests (Debian's libonnx-testdata) into rml conformance cases.

For every `<src>/<case>/model.onnx` with `test_data_set_0/{input,output}_<i>.pb` it tries to lower the model with
rml_export.from_onnx and to convert its data to rml dtypes (float16, bfloat16, int64 and bool kept as f16, bf16, i64
and bool; other integers -> i32 when every value fits; double -> f32: such cases are computed in f32 and marked
`double`). A converted case is also run by the NumPy
reference interpreter, so a lowering that computes something else is caught here, in Python, and reported.

Writes into --out:
  <case>/model.json, model.safetensors    the lowered graph
  <case>/data.safetensors                 `input.<i>` and `output.<i>` (expected, from the ONNX test data)
  manifest.tsv        one converted case a line: name, atol, rtol, notes
  unsupported.tsv     one case a line: name, reason (the model or data cannot be represented or lowered)
  mismatch.tsv        cases that lowered but whose reference-interpreter result differs: name, detail
Exit status 0 unless the source directory is missing.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from rml_export import ExportError, from_onnx, reference  # noqa: E402
from rml_export.safetensors import BF16Array, write_safetensors  # noqa: E402

DEFAULT_SRC = "/usr/share/libonnx-testdata/data/node"
ATOL, RTOL = 1e-5, 1e-4  # |got - expected| <= ATOL + RTOL * |expected| (exact for integer and bool outputs)
# 16-bit outputs: rml rounds each op's result to the storage type; the references may round once. A few units
# of the last place: f16 has 11 significant bits (2^-11 = 4.9e-4), bf16 8 (2^-8 = 3.9e-3).
TOLERANCES = {"f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)}
_RML_DTYPE = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
              np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}


def _rml_dtype(array) -> str:
    return "bf16" if isinstance(array, BF16Array) else _RML_DTYPE[array.dtype]


class Unsupported(Exception):
    pass


def _to_rml(array: np.ndarray, what: str, notes: set) -> np.ndarray:
    if isinstance(array, BF16Array) or array.dtype in (np.float32, np.float16, np.int64, np.bool_):
        return array
    if array.dtype == np.float64:
        notes.add("double")
        return array.astype(np.float32)
    if array.dtype.kind in "iu":
        info = np.iinfo(np.int32)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise Unsupported(f"{what}: {array.dtype} values outside the i32 range")
        if array.dtype not in (np.int32, np.int64):
            notes.add(str(array.dtype))
        return array.astype(np.int32)
    raise Unsupported(f"{what}: {array.dtype} tensors")


_SEED_ANY_DTYPE = {"reshape", "transpose", "concat", "slice", "expand", "pad", "copy", "gather", "cast"}


def _needs_new_rules(graph) -> bool:
    """Whether the graph uses f16, bf16, i64 or bool, or an op on i32 that only f32 had before them (integer
    arithmetic): rml's op tables admit those op by op."""
    values = graph["values"]
    if any(v["dtype"] in ("f16", "bf16", "i64", "bool") for v in values):
        return True
    return any(n["op"] not in _SEED_ANY_DTYPE and n["op"] != "argmax" and
               any(values[i]["dtype"] != "f32" for i in n["inputs"]) for n in graph["nodes"])


def _read_pb(path: str) -> np.ndarray:
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    if not tensor.name and tensor.data_type == 0:
        raise Unsupported(f"{os.path.basename(path)} is not a tensor (sequence or optional)")
    if tensor.data_type == onnx.TensorProto.STRING:
        raise Unsupported(f"{os.path.basename(path)}: STRING tensors")
    if tensor.data_type == onnx.TensorProto.BFLOAT16:  # onnx gives the float32 values, or the bits as integers
        data = numpy_helper.to_array(tensor)
        return BF16Array.from_float(data) if data.dtype.kind == "f" else BF16Array(data.astype(np.uint16))
    return numpy_helper.to_array(tensor)


def _close(got: np.ndarray, expected, atol: float = ATOL, rtol: float = RTOL) -> str:
    if isinstance(expected, BF16Array):
        expected = expected.to_float32()
    if got.shape != expected.shape:
        return f"shape {list(got.shape)} != {list(expected.shape)}"
    if expected.dtype.kind in "iub":
        bad = np.count_nonzero(got != expected)
        return f"{bad} integer or bool values differ" if bad else ""
    expected = expected.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(expected)
    same_inf = np.isinf(expected) & (got == expected)
    ok = both_nan | same_inf | (np.abs(got.astype(np.float64) - expected) <= atol + rtol * np.abs(expected))
    if not np.all(ok):
        i = int(np.argmin(ok.reshape(-1)))
        return f"element {i}: {got.reshape(-1)[i]!r} vs {expected.reshape(-1)[i]!r}"
    return ""


# Inputs that rml needs at export time (its shapes are static): shapes, axes, pads, counts. A node test feeding
# one of these from a graph input has it bound to its test value, as an initializer, before lowering.
STATIC_ARGS = {"Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1}, "Unsqueeze": {1},
               "Split": {1}, "Pad": {1, 2, 3}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "OneHot": {1, 2},
               "Trilu": {1}, "CumSum": {1}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1},
               "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
               "ReduceSumSquare": {1}, "Resize": {1, 2, 3}, "Upsample": {1}}


def _bind_static_inputs(model: onnx.ModelProto, inputs: list, notes: set):
    """Moves graph inputs used only as static arguments into initializers; returns the remaining inputs."""
    graph = model.graph
    initialized = {t.name for t in graph.initializer}
    graph_inputs = [i for i in graph.input if i.name not in initialized]
    uses = {}
    for node in graph.node:
        for pos, name in enumerate(node.input):
            uses.setdefault(name, []).append(pos in STATIC_ARGS.get(node.op_type, ()))
    kept_infos, kept_data = [], []
    for info, data in zip(graph_inputs, inputs):
        if uses.get(info.name) and all(uses[info.name]):
            graph.initializer.append(numpy_helper.from_array(data, info.name))
            notes.add(f"bound:{info.name}")
        else:
            kept_infos.append(info)
            kept_data.append(data)
    if len(kept_infos) != len(graph_inputs):
        del graph.input[:]
        graph.input.extend(kept_infos)
    return kept_data


def convert(case_dir: str, out_dir: str):
    """Returns (notes) for a converted case; raises Unsupported / ExportError / AssertionError otherwise."""
    data_dir = os.path.join(case_dir, "test_data_set_0")
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    notes: set = set()
    for info in list(model.graph.input) + list(model.graph.output):
        if not info.type.HasField("tensor_type"):
            raise Unsupported(f"'{info.name}' is not a tensor")
    inputs = [_read_pb(p) for p in sorted(glob.glob(os.path.join(data_dir, "input_*.pb")),
                                          key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
    outputs = [_read_pb(p) for p in sorted(glob.glob(os.path.join(data_dir, "output_*.pb")),
                                           key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
    graph_inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    if len(inputs) != len(graph_inputs) or len(outputs) != len(model.graph.output):
        raise Unsupported("test data does not match the graph's inputs/outputs (optional inputs omitted)")
    # The test data of a BFLOAT16 tensor may be stored as UINT16 bits (NumPy has no bfloat16).
    for data, infos in ((inputs, graph_inputs), (outputs, list(model.graph.output))):
        for k, info in enumerate(infos):
            if info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 and not isinstance(data[k], BF16Array):
                if data[k].dtype != np.uint16:
                    raise Unsupported(f"'{info.name}' is BFLOAT16 but its test data is {data[k].dtype}")
                data[k] = BF16Array(data[k])
    inputs = _bind_static_inputs(model, inputs, notes)
    graph_inputs = list(model.graph.input)
    rml_inputs = [_to_rml(a, f"input {i}", notes) for i, a in enumerate(inputs)]
    rml_outputs = [_to_rml(a, f"output {i}", notes) for i, a in enumerate(outputs)]
    shapes = {info.name: list(a.shape) for info, a in zip(graph_inputs, inputs)}
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, "model")
    graph = from_onnx(model, stem, allow_double=True, input_shapes=shapes)
    if _needs_new_rules(graph):
        notes.add("newrules")  # the C++ suite reports such a case refused at create apart from the failures
    atol, rtol = ATOL, RTOL
    for i, (vid, a) in enumerate(zip(graph["outputs"], rml_outputs)):
        spec = graph["values"][vid]
        want = _rml_dtype(a)
        if want in TOLERANCES:
            atol, rtol = max(atol, TOLERANCES[want][0]), max(rtol, TOLERANCES[want][1])
            notes.add(want)
        if spec["dtype"] != want or spec["shape"] != list(a.shape):
            raise Unsupported(f"output {i} lowers to {spec['dtype']} {spec['shape']}, "
                              f"expected {want} {list(a.shape)}")
    tensors = [(f"input.{i}", a) for i, a in enumerate(rml_inputs)]
    tensors += [(f"output.{i}", a) for i, a in enumerate(rml_outputs)]
    write_safetensors(os.path.join(out_dir, "data.safetensors"), tensors, {"case": os.path.basename(case_dir)})
    g, weights = reference.load(stem)
    with np.errstate(all="ignore"):
        got = reference.run_graph(g, weights, rml_inputs)
    for i, (x, e) in enumerate(zip(got, rml_outputs)):
        problem = _close(x, e, atol, rtol)
        if problem:
            raise AssertionError(f"output {i}: {problem}")
    return notes, atol, rtol


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=DEFAULT_SRC)
    parser.add_argument("--out", required=True)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.src):
        print(f"convert_node_tests: {args.src} not found (install libonnx-testdata)", file=sys.stderr)
        return 1
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    converted, unsupported, mismatched = [], [], []
    for case_dir in sorted(glob.glob(os.path.join(args.src, "test_*"))):
        name = os.path.basename(case_dir)
        out_dir = os.path.join(args.out, name)
        try:
            notes, atol, rtol = convert(case_dir, out_dir)
            converted.append((name, notes, atol, rtol))
        except (Unsupported, ExportError) as e:
            unsupported.append((name, str(e).replace("\t", " ").replace("\n", " ")))
            shutil.rmtree(out_dir, ignore_errors=True)
        except AssertionError as e:
            mismatched.append((name, str(e)))
            shutil.rmtree(out_dir, ignore_errors=True)
        except Exception as e:  # a converter bug must not hide the other cases
            detail = traceback.format_exc() if args.verbose else f"{type(e).__name__}: {e}"
            unsupported.append((name, f"converter error: {detail}".replace("\t", " ").replace("\n", " ")))
            shutil.rmtree(out_dir, ignore_errors=True)
    with open(os.path.join(args.out, "manifest.tsv"), "w") as f:
        for name, notes, atol, rtol in converted:
            f.write(f"{name}\t{atol}\t{rtol}\t{','.join(sorted(notes))}\n")
    with open(os.path.join(args.out, "unsupported.tsv"), "w") as f:
        for name, reason in unsupported:
            f.write(f"{name}\t{reason}\n")
    with open(os.path.join(args.out, "mismatch.tsv"), "w") as f:
        for name, detail in mismatched:
            f.write(f"{name}\t{detail}\n")
    print(f"ONNX node tests: {len(converted)} converted, {len(unsupported)} unsupported, "
          f"{len(mismatched)} lowered but differ in the NumPy reference (listed in mismatch.tsv)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
