"""The operators between two values, extracted as a graph of their own."""

import rml
from common import io, labels, pool, trace_graph, values, x

pooled = trace_graph(pool, "x", "y")
# The operators between x and the sums: the Relu and the Sum, not the Neg after them.
(sums,) = pooled.find_nodes(rml.graph.OpCode.Sum)
pooling = rml.graph.extract(pooled, [pooled.node("x").output(0)], [sums.output(0)])
print(labels(pooling), "|", io(pooling))
# x Relu Sum | x -> Sum_2_0: a graph input keeps its name, and an output with none is named after its value
print(len(pooled.input_names()))   # 0: the extract consumed the graph

pooling.finalize()
print(values(pooling.run([x()])[0]))   # 4 5: each row's sum of relu(x)
