#!/usr/bin/python3
"""The peer of bench_surgery: onnx.compose.merge_models and onnx.utils.Extractor on ONNX models
with the same structure as the rml graphs: for merge, blocks of relu, neg, add over f32 [1, 16]
values; for extract, a line of relu, neg, tanh (onnx 1.12's Extractor is exponential on diamonds).

Prints one line per measurement: `<what>_<size> <seconds>` (best of three runs, one above 20 k
nodes), e.g. `merge_10000 0.41`. Usage: surgery_onnx.py merge:10000 extract:300 ...
"""
import sys
import time

import onnx
from onnx import TensorProto, compose, helper, utils


def chain(prefix: str, nodes: int, input_name: str, output_name: str) -> onnx.ModelProto:
    """`nodes` operators: blocks h = relu(v); n = neg(v); v' = h + n, from input_name to output_name."""
    body = []
    current = input_name
    blocks = nodes // 3
    for b in range(blocks):
        h, n = f"{prefix}h{b}", f"{prefix}n{b}"
        out = output_name if b == blocks - 1 else f"{prefix}v{b}"
        body.append(helper.make_node("Relu", [current], [h], name=f"{prefix}relu{b}"))
        body.append(helper.make_node("Neg", [current], [n], name=f"{prefix}neg{b}"))
        body.append(helper.make_node("Add", [h, n], [out], name=f"{prefix}add{b}"))
        current = out
    graph = helper.make_graph(
        body, prefix + "graph",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def line(nodes: int) -> onnx.ModelProto:
    """`nodes` operators in a line, relu, neg, tanh over and over, from x through v0, v1, ... to y."""
    kinds = ("Relu", "Neg", "Tanh")
    body = []
    for i in range(nodes):
        source = "x" if i == 0 else f"v{i - 1}"
        out = "y" if i == nodes - 1 else f"v{i}"
        body.append(helper.make_node(kinds[i % 3], [source], [out], name=f"op{i}"))
    graph = helper.make_graph(
        body, "line",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    for arg in sys.argv[1:]:
        what, size = arg.split(":")[0], int(arg.split(":")[1])
        repeats = 3 if size <= 20000 else 1
        if what == "merge":
            first = chain("a_", size // 2, "x", "h")
            second = chain("b_", size // 2, "h_in", "y")
            seconds = best(lambda: compose.merge_models(first, second, io_map=[("h", "h_in")]), repeats)
        else:
            # Extractor's search compares protobufs against a list of the nodes found so far and
            # recurses once per node: cubic, and exponential on the diamonds above. A line is the
            # most it can do; a few hundred nodes already take seconds.
            extractor = utils.Extractor(line(size))
            seconds = best(lambda: extractor.extract_model([f"v{size // 4}"], [f"v{3 * size // 4}"]), repeats)
        print(f"{what}_{size} {seconds:.6f}", flush=True)


if __name__ == "__main__":
    main()
