"""A graph split by a function that names each operator's part by its op code."""

import rml
from common import io, labels, pool, trace_graph
from rml.graph import Node


def by_code(node: Node) -> str:
    # Each operator's part, by its code. split asks once per operator, in nodes() order.
    if node.op_code == rml.graph.OpCode.Relu:
        return "rectify"
    if node.op_code == rml.graph.OpCode.Sum:
        return "pool"
    return "negate"


pooled = trace_graph(pool, "x", "y")
parts, connections = rml.graph.split(pooled, by_code)
for name, part in parts.items():   # in an order every connection runs forward in
    print(f"{name}:", labels(part), "|", io(part))
# rectify: x Relu | x -> Relu_1_0
# pool: Relu_1_0 Sum | Relu_1_0 -> Sum_2_0
# negate: Sum_2_0 Neg | Sum_2_0 -> y
for source, target in connections:
    print(source, "->", target)
# rectify.Relu_1_0 -> pool.Relu_1_0
# pool.Sum_2_0 -> negate.Sum_2_0
