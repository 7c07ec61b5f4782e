"""Two graphs merged side by side, under each io_names mode."""

import rml
from common import io, kind_name, labels, rectify, trace_graph, twice
from rml.graph import Graph


def two_parts() -> list[tuple[str, Graph]]:
    # An encoder and a head that both read an input named x.
    return [("encoder", trace_graph(rectify, "x", "h")), ("head", trace_graph(twice, "x", "y"))]


# io_names="prefix_on_collision", the default: a name both parts use takes its part's name as a prefix.
merged, renames = rml.graph.merge(two_parts())
print(labels(merged), "|", io(merged))
# encoder/x head/x encoder/Relu head/Add | encoder/x head/x -> h y
for rename in renames:   # every name the merge changed
    print(rename.part, kind_name(rename.kind), rename.from_, "->", rename.to)
# encoder input x -> encoder/x
# head input x -> head/x
# encoder node Relu_1 -> encoder/Relu_1
# head node Add_1 -> head/Add_1

# io_names="prefix_always": every input and output name takes the prefix.
always, _ = rml.graph.merge(two_parts(), io_names="prefix_always")
print(io(always))   # encoder/x head/x -> encoder/h head/y

# io_names="keep" keeps every name, so it refuses a name both parts use.
parts = two_parts()
try:
    rml.graph.merge(parts, io_names="keep")
except rml.InvalidArgumentError as error:
    print(error.code_name, "|", error)
# INVALID_ARGUMENT | merge: parts 'encoder' and 'head' both have an input named 'x', which IoNames::Keep
# keeps; merge with IoNames::PrefixOnCollision or PrefixAlways
print(io(parts[0][1]), "|", io(parts[1][1]))   # x -> h | x -> y: a refused merge leaves every part as it was
