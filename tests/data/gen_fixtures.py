#!/usr/bin/env python3
"""Writes the io fixtures under tests/data/ with NumPy alone (safetensors written by hand).

torch_mlp: the MLP the rml-graph seed describes, nn.Sequential(Linear(12, 16), ReLU, Linear(16, 16),
ReLU, Linear(16, 4)) at batch 2, laid out as a PyTorch export lays it out: 15 values, 6 constants,
8 nodes; biases keep their parameter names (values 0-2), x is value 3, each transposed weight is
stored as const.<id>, and the output is value 14, f32 [2, 4]. Its reference output, computed here
by NumPy in float64 and rounded to float32, is torch_mlp.expected.safetensors (tensors x and y).

dtypes: tensors of the f16, bf16, i64 and bool dtypes written by NumPy and PyTorch (see dtypes()).

Run: /usr/bin/python3 tests/data/gen_fixtures.py  (deterministic; rewrites the files)
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class BF16Bits:
    """A bfloat16 tensor for write_safetensors, given as its uint16 bit patterns (NumPy has no bf16)."""

    def __init__(self, bits):
        self.bits = np.asarray(bits, dtype=np.uint16)


# A uint16 array also holds bf16 bit patterns.
ST_DTYPES = {np.dtype("float32"): "F32", np.dtype("int32"): "I32", np.dtype("float16"): "F16",
             np.dtype("uint16"): "BF16", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, np.ndarray float32/int32/float16/int64/bool or BF16Bits), stored in
    order with no gaps (so a 2- or 8-byte tensor after an odd-sized one is misaligned)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name, array in tensors:
        if isinstance(array, BF16Bits):
            array, dtype = np.asarray(array.bits, order="C"), "BF16"
        else:
            array = np.asarray(array, order="C")  # keeps rank 0 (ascontiguousarray would make it rank 1)
            dtype = ST_DTYPES[array.dtype]
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


def dtypes():
    """dtypes.safetensors: one tensor of each new dtype, written by NumPy (bf16 bits by PyTorch),
    in an order that leaves the I64 tensor misaligned; and float32 sources with their f16 (NumPy)
    and bf16 (PyTorch) roundings, against which rml's own conversions are checked bit for bit.

    The hand-written values are repeated in tests/io/test_dtypes.cpp."""
    import torch  # only for bfloat16 rounding, which NumPy lacks

    f16 = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 2.0 ** -14, 2.0 ** -24, np.inf, -np.inf, np.nan, 0.1, -1 / 3],
                   dtype=np.float16).reshape(3, 4)
    boolean = np.array([True, False, False, True, True])
    i64 = np.array([-2 ** 63, -2 ** 53 - 1, -1, 0, 1, 2 ** 53 + 1, 2 ** 63 - 1], dtype=np.int64)
    bf16_exact = BF16Bits([0x0000, 0x8000, 0x3F80, 0xC020, 0x7F7F, 0x0080, 0x0001, 0x7F80, 0xFF80, 0x7FC0])

    # Sources: every kind of float32 (random bit patterns), exact ties for both formats, the
    # overflow edges (65504, 65520 for f16; the bf16 maximum), subnormals of both.
    rng = np.random.default_rng(20261201)
    rand = rng.integers(0, 2 ** 32, size=4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 65504.0, 65519.996, 65520.0,
             2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -24 * 1.5, 2.0 ** -24 * 2.5, 5.9604645e-08, 6.1e-05, 3.3895314e38,
             3.4028235e38, -0.0, 1e-40, -1e-45, np.inf, -np.inf, np.nan, 0.1, 1 / 3, -65536.0]
    src = np.concatenate([np.array(edges, dtype=np.float32), rand]).astype(np.float32)
    with np.errstate(over="ignore"):
        f16_of_src = src.astype(np.float16)
    bf16_of_src = torch.from_numpy(src.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)

    write_safetensors(os.path.join(HERE, "dtypes.safetensors"),
                      [("f16", f16), ("bool", boolean), ("i64", i64), ("bf16", bf16_exact),
                       ("src", src), ("f16_of_src", f16_of_src), ("bf16_of_src", BF16Bits(bf16_of_src))],
                      {"producer": "tests/data/gen_fixtures.py (numpy %s, torch %s)" % (np.__version__,
                                                                                    torch.__version__)})


if __name__ == "__main__":
    torch_mlp()
    dtypes()
