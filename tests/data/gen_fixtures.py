#!/usr/bin/env python3
"""Writes the io fixtures under tests/data/ with NumPy alone (safetensors written by hand).

torch_mlp: the MLP the rml-graph seed describes, nn.Sequential(Linear(12, 16), ReLU, Linear(16, 16),
ReLU, Linear(16, 4)) at batch 2, laid out as a PyTorch export lays it out: 15 values, 6 constants,
8 nodes; biases keep their parameter names (values 0-2), x is value 3, each transposed weight is
stored as const.<id>, and the output is value 14, f32 [2, 4]. Its reference output, computed here
by NumPy in float64 and rounded to float32, is torch_mlp.expected.safetensors (tensors x and y).

Run: /usr/bin/python3 tests/data/gen_fixtures.py  (deterministic; rewrites the files)
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# NumPy has no bfloat16: a uint16 array holds bf16 bit patterns.
SAFETENSORS_DTYPES = {np.dtype("float32"): "F32", np.dtype("int32"): "I32", np.dtype("float16"): "F16",
                      np.dtype("uint16"): "BF16", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, np.ndarray of a SAFETENSORS_DTYPES dtype), stored in order with no gaps."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name, array in tensors:
        array = np.asarray(array, order="C")  # keeps rank 0 (ascontiguousarray would make it rank 1)
        dtype = SAFETENSORS_DTYPES[array.dtype]
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def dump_graph(graph):
    """JSON with one value, constant or node per line."""
    lines = ["{"]
    items = list(graph.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if key in ("values", "constants", "nodes") and value:
            lines.append('  "%s": [' % key)
            lines += ["    " + json.dumps(v) + ("," if j + 1 < len(value) else "") for j, v in enumerate(value)]
            lines.append("  ]" + comma)
        else:
            lines.append("  %s: %s%s" % (json.dumps(key), json.dumps(value), comma))
    return "\n".join(lines + ["}"]) + "\n"


def torch_mlp():
    rng = np.random.default_rng(20261129)
    sizes = [(12, 16), (16, 16), (16, 4)]
    # PyTorch's default Linear init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
    weights, biases = [], []
    for fan_in, fan_out in sizes:
        bound = 1.0 / np.sqrt(fan_in)
        weights.append(rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32))
        biases.append(rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32))
    x = rng.standard_normal((2, 12)).astype(np.float32)

    values = [
        {"name": "layers.0.bias", "dtype": "f32", "shape": [16]},
        {"name": "layers.2.bias", "dtype": "f32", "shape": [16]},
        {"name": "layers.4.bias", "dtype": "f32", "shape": [4]},
        {"name": "x", "dtype": "f32", "shape": [2, 12]},
    ]
    constants = [{"value": i, "tensor": values[i]["name"]} for i in range(3)]
    stored = [(values[i]["name"], biases[i]) for i in range(3)]
    nodes = []
    current = 3
    for layer, (fan_in, fan_out) in enumerate(sizes):
        w_id = len(values)
        values.append({"name": "v%d" % (w_id + 3), "dtype": "f32", "shape": [fan_in, fan_out]})
        constants.append({"value": w_id, "tensor": "const.%d" % w_id})
        stored.append(("const.%d" % w_id, weights[layer].T.copy()))
        mm = len(values)
        values.append({"dtype": "f32", "shape": [2, fan_out]})
        nodes.append({"op": "matmul", "inputs": [current, w_id], "outputs": [mm],
                      "origin": {"module": "layers.%d" % (2 * layer), "file": "mlp.py", "line": 12}})
        add = len(values)
        last = layer == len(sizes) - 1
        values.append({"name": "y" if last else "", "dtype": "f32", "shape": [2, fan_out]})
        nodes.append({"op": "add", "inputs": [mm, layer], "outputs": [add],
                      "origin": {"module": "layers.%d" % (2 * layer), "file": "mlp.py", "line": 12}})
        current = add
        if not last:
            relu = len(values)
            values.append({"dtype": "f32", "shape": [2, fan_out]})
            nodes.append({"op": "relu", "inputs": [add], "outputs": [relu],
                          "origin": {"module": "layers.%d" % (2 * layer + 1), "file": "mlp.py", "line": 13}})
            current = relu
    for v in values:
        if not v.get("name"):
            v.pop("name", None)
    assert len(values) == 15 and len(constants) == 6 and len(nodes) == 8 and current == 14
    graph = {"format": "rml-graph", "version": 1, "producer": "rml tests/data/gen_fixtures.py (numpy)",
             "values": values, "inputs": [3], "outputs": [14], "constants": constants, "nodes": nodes}
    with open(os.path.join(HERE, "torch_mlp.json"), "w") as f:
        f.write(dump_graph(graph))
    write_safetensors(os.path.join(HERE, "torch_mlp.safetensors"), stored)

    h = x.astype(np.float64)
    for layer in range(3):
        h = h @ weights[layer].T.astype(np.float64) + biases[layer].astype(np.float64)
        if layer < 2:
            h = np.maximum(h, 0.0)
    write_safetensors(os.path.join(HERE, "torch_mlp.expected.safetensors"),
                      [("x", x), ("y", h.astype(np.float32))])


if __name__ == "__main__":
    torch_mlp()
