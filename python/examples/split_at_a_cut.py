"""A graph split at its cheapest cut through values."""

import rml
from common import io, label, labels, pool, trace_graph

pooled = trace_graph(pool, "x", "y")
# The cheapest cut: the values the nodes before it hand to the nodes after it, and their bytes.
cut = pooled.min_value_cut()
print(" ".join(label(value.producer()) for value in cut.values), cut.bytes)
# Sum 8: the [2, 1] f32 sums cross, the cheapest value to hand on

parts, connections = rml.graph.split(pooled, cut)
for name, part in parts.items():
    print(f"{name}:", labels(part), "|", io(part))
# before: x Relu Sum | x -> Sum_2_0
# after: Sum_2_0 Neg | Sum_2_0 -> y
for source, target in connections:
    print(source, "->", target)
# before.Sum_2_0 -> after.Sum_2_0: a value with no name of its own is named <node>_<port>
print(len(pooled.input_names()))   # 0: the split consumed the graph
