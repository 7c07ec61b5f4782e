"""What every merge-and-split program shares: three small models, a trace helper, and printers.

rectify computes h = relu(x), twice y = x + x, and pool y = -(the sum of each row of relu(x)), all over one
f32 [2, 3] input. label() names a node by its input name, or by its op code after the part its name starts
with (`encoder/Relu`).
"""

from __future__ import annotations

from collections.abc import Callable

import rml
from rml.graph import Graph, NameKind, Node, NodeKind

Model = Callable[[list[rml.Tensor]], list[rml.Tensor]]


def rectify(inputs: list[rml.Tensor]) -> list[rml.Tensor]:
    return [rml.relu(inputs[0])]   # h = relu(x)


def twice(inputs: list[rml.Tensor]) -> list[rml.Tensor]:
    return [rml.add(inputs[0], inputs[0])]   # y = x + x


def pool(inputs: list[rml.Tensor]) -> list[rml.Tensor]:
    # y = -(the sum of each row of relu(x)): the [2, 3] input pools to [2, 1].
    return [rml.neg(rml.sum(rml.relu(inputs[0]), [1], True))]


def trace_graph(model: Model, input_name: str, output_name: str) -> Graph:
    # A trace of `model` over one f32 [2, 3] input called `input_name`, its output called `output_name`:
    # every op as written, nothing optimized or finalized.
    signature = [rml.TensorSpec(input_name, rml.float32, [2, 3])]
    return rml.trace(model, signature, output_names=[output_name]).graph


def label(node: Node) -> str:
    # An input's name, or an operator's op code after the part its name starts with.
    if node.kind == NodeKind.input:
        return node.name
    part, slash, _ = node.name.partition("/")
    return (part + slash if slash else "") + node.op_code.name


def labels(graph: Graph) -> str:
    return " ".join(label(node) for node in graph.nodes())


def io(graph: Graph) -> str:
    # A graph's input names, then its output names.
    return " ".join(graph.input_names()) + " -> " + " ".join(graph.output_names())


def kind_name(kind: NameKind) -> str:
    # What a rename names: a node, an input or an output.
    return kind.name


def x() -> rml.Tensor:
    # The input every program runs, [2, 3].
    return rml.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], dtype=rml.float32)


def values(tensor: rml.Tensor) -> str:
    # A tensor's values, flattened and separated by spaces.
    return " ".join(f"{value:g}" for value in rml.to(tensor, "cpu").reshape(-1).tolist())
