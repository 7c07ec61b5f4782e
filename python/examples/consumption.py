"""What merge, split and extract consume, and what a refused call leaves."""

import rml
from common import io, pool, rectify, trace_graph, twice
from rml.graph import Node


def refuse_neg(node: Node) -> str:
    # A partition function that raises on the Neg.
    if node.op_code == rml.graph.OpCode.Neg:
        raise ValueError("no part for Neg")
    return "first"


parts = {"encoder": trace_graph(rectify, "x", "h"), "head": trace_graph(twice, "h", "y")}
connections = [("encoder.h", "head.h")]
(relu,) = parts["encoder"].find_nodes(rml.graph.OpCode.Relu)   # a view taken before

# A merge consumes every part's graph, and a view into one refuses from then on.
merged, _ = rml.graph.merge(parts, connections)
print(io(merged), "|", len(parts["encoder"].input_names()), len(parts["head"].input_names()))   # x -> y | 0 0
try:
    relu.check()
except rml.InvalidArgumentError as error:
    print(error.code_name, "|", error)
# INVALID_ARGUMENT | the node 'Relu_1' is no longer in its graph: that graph no longer exists (a merge,
# a split or an extract consumed it, or it was destroyed or assigned over)

# A refused merge leaves every part as it was.
again = {"encoder": trace_graph(rectify, "x", "h"), "head": trace_graph(twice, "h", "y")}
try:
    rml.graph.merge(again, [("encoder.h", "head.z")])
except rml.InvalidArgumentError as error:
    print(error.code_name, "|", error)   # INVALID_ARGUMENT | merge: part 'head' has no input 'z'
again["encoder"].finalize()
try:
    rml.graph.merge(again, connections)
except rml.InvalidArgumentError as error:   # a FailedPreconditionError is also an InvalidArgumentError
    print(error.code_name, "|", error)
# FAILED_PRECONDITION | merge: part 'encoder' is finalized; merge before finalize()
print(io(again["encoder"]), "|", io(again["head"]))   # x -> h | h -> y

# An exception the partition function raises leaves split as that same exception, and the graph as it was.
pooled = trace_graph(pool, "x", "y")
try:
    rml.graph.split(pooled, refuse_neg)
except ValueError as error:
    print(type(error).__name__, "|", error)   # ValueError | no part for Neg
print(io(pooled))   # x -> y
