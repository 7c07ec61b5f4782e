#!/usr/bin/env python3
"""Writes the `rml` tool's test inputs (tests/cli/data/) and the outputs of `rml run` that depend
on numbers (tests/cli/expected/run_*.txt), with NumPy alone from tests/data/torch_mlp.*.

The run outputs are computed here in float64 from the stored weights, independently of rml, and
printed the way `rml run` prints them (%.4g). The other expected files are written by hand.

Run: /usr/bin/python3 tests/cli/gen_data.py  (deterministic; rewrites the files)
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = {"F32": "<f4", "I32": "<i4"}[entry["dtype"]]
        out[name] = np.frombuffer(blob[8 + n + begin:8 + n + end], dtype=dtype).reshape(entry["shape"])
    return out


def mlp(weights, x):
    """torch_mlp in float64: (matmul, add bias, relu) x 2, then matmul, add bias."""
    h = x.astype(np.float64)
    for layer, (w, b) in enumerate([("const.4", "layers.0.bias"), ("const.8", "layers.2.bias"),
                                    ("const.12", "layers.4.bias")]):
        h = h @ weights[w].astype(np.float64) + weights[b].astype(np.float64)
        if layer < 2:
            h = np.maximum(h, 0.0)
    return h.astype(np.float32)


def g4(v):
    """A number as `rml run` prints it: %.4g, with nan, inf and -inf spelled out."""
    return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") if np.isinf(v) else "%.4g" % v


def run_output(input_origin, x, y, name="y"):
    """What `rml run` prints for input x and output y. Statistics over the finite elements in
    float64; NaN and infinities counted. The digest line is masked by run_cli.cmake."""
    flat = y.reshape(-1)
    finite = flat[np.isfinite(flat)].astype(np.float64)
    stats = "  min %s  max %s  mean %s  std %s" % (g4(finite.min()), g4(finite.max()), g4(finite.mean()),
                                                  g4(finite.std()))
    if np.isnan(flat).any():
        stats += "  NaN %d" % np.isnan(flat).sum()
    if np.isinf(flat).any():
        stats += "  Inf %d" % np.isinf(flat).sum()
    first = flat[:8]
    return ("input x: f32 %s from %s\n" % (list(x.shape), input_origin) +
            "output %s: f32 %s\n" % (name, list(y.shape)) + stats + "\n" +
            "  first %d: %s\n" % (len(first), " ".join(g4(v) for v in first)) +
            "  sha256 <digest>\n" +
            "latency: <time>\n")


def write_json(name, graph):
    with open(os.path.join(HERE, "data", name), "w") as f:
        json.dump(graph, f, indent=1)
        f.write("\n")


def tiny_graph(**changes):
    """x f32 [2, 4] -> relu -> add(+ inline bias) -> y; small enough to need no weights file."""
    graph = {
        "format": "rml-graph", "version": 1, "producer": "tests/cli/gen_data.py",
        "values": [{"name": "x", "dtype": "f32", "shape": [2, 4]},
                   {"name": "bias", "dtype": "f32", "shape": [4]},
                   {"dtype": "f32", "shape": [2, 4]},
                   {"name": "y", "dtype": "f32", "shape": [2, 4]}],
        "inputs": [0], "outputs": [3],
        "constants": [{"value": 1, "data": [0.5, -0.5, 1.0, -1.0]}],
        "nodes": [{"op": "relu", "inputs": [0], "outputs": [2]},
                  {"op": "add", "inputs": [2, 1], "outputs": [3]}],
    }
    graph.update(changes)
    return graph


def main():
    weights = read_safetensors(os.path.join(DATA, "torch_mlp.safetensors"))
    reference = read_safetensors(os.path.join(DATA, "torch_mlp.expected.safetensors"))
    x = reference["x"]
    assert np.allclose(mlp(weights, x), reference["y"], rtol=1e-6, atol=1e-6)

    np.save(os.path.join(HERE, "data", "x.npy"), x)
    np.save(os.path.join(HERE, "data", "x_f64.npy"), x.astype(np.float64))
    np.save(os.path.join(HERE, "data", "x_3x12.npy"), np.zeros((3, 12), np.float32))
    np.save(os.path.join(HERE, "data", "x_f16.npy"), x.astype(np.float16))
    with open(os.path.join(HERE, "data", "x.npy"), "rb") as f:
        whole = f.read()
    with open(os.path.join(HERE, "data", "x_truncated.npy"), "wb") as f:
        f.write(whole[:len(whole) - 20])

    # The first bytes of a MessagePack map whose first key is cut short.
    with open(os.path.join(HERE, "data", "truncated.msgpack"), "wb") as f:
        f.write(b"\x83\xa6form")

    # Graphs the checker or the loader refuses.
    bad_shape = tiny_graph()
    bad_shape["values"][3]["shape"] = [2, 3]
    write_json("bad_shape.json", bad_shape)
    unknown_op = tiny_graph()
    unknown_op["nodes"][0]["op"] = "frobnicate"
    write_json("unknown_op.json", unknown_op)
    write_json("newer_version.json", tiny_graph(version=2))
    # log over [-1, 1, 0, 4]: NaN, 0, -inf, log 4.
    np.save(os.path.join(HERE, "data", "log_input.npy"), np.array([-1, 1, 0, 4], np.float32))  # see run_log.txt
    write_json("log.json", tiny_graph(values=[{"name": "x", "dtype": "f32", "shape": [4]},
                                              {"name": "y", "dtype": "f32", "shape": [4]}],
                                      outputs=[1], constants=[], nodes=[{"op": "log", "inputs": [0], "outputs": [1]}]))
    # One operator: nothing to cut.
    write_json("tiny_relu.json", tiny_graph(values=tiny_graph()["values"][:1] + [{"name": "y", "dtype": "f32", "shape": [2, 4]}],
                                            outputs=[1], constants=[],
                                            nodes=[{"op": "relu", "inputs": [0], "outputs": [1]}]))

    expected = os.path.join(HERE, "expected")
    with open(os.path.join(expected, "run_torch_mlp.txt"), "w") as f:
        f.write(run_output("tests/data/torch_mlp.expected.safetensors", x, reference["y"]))
    with open(os.path.join(expected, "run_torch_mlp_npy.txt"), "w") as f:
        f.write(run_output("tests/cli/data/x.npy", x, reference["y"]))
    log_x = np.array([-1, 1, 0, 4], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_y = np.log(log_x)
    with open(os.path.join(expected, "run_log.txt"), "w") as f:
        f.write(run_output("tests/cli/data/log_input.npy", log_x, log_y))


if __name__ == "__main__":
    main()
