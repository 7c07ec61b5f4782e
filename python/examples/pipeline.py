"""One graph fed into another: the encoder's output h feeds the head's input h."""

import rml
from common import io, labels, rectify, trace_graph, twice, values, x

# The encoder's output h feeds the head's input h, and neither is the merged graph's any longer.
parts = {"encoder": trace_graph(rectify, "x", "h"), "head": trace_graph(twice, "h", "y")}
merged, _ = rml.graph.merge(parts, [("encoder.h", "head.h")])
print(labels(merged), "|", io(merged))   # x encoder/Relu head/Add | x -> y

merged.optimize()   # optional: the graph optimizer runs over the merged graph
merged.finalize()
# The same input through the two graphs one after the other, for comparison.
encoder = trace_graph(rectify, "x", "h")
head = trace_graph(twice, "h", "y")
encoder.finalize()
head.finalize()
print(values(merged.run([x()])[0]), "|", values(head.run(encoder.run([x()]))[0]))   # 2 0 6 0 10 0 | 2 0 6 0 10 0
