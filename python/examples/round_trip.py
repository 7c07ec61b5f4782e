"""A split merged back: the parts compute what the source computed."""

import rml
from common import io, labels, pool, trace_graph, values, x

pooled = trace_graph(pool, "x", "y")
# split returns the parts and connections merge takes, so the parts merge back into the source's inputs and
# outputs, by name, with its operators named <part>/<name>.
merged, _ = rml.graph.merge(*rml.graph.split(pooled, pooled.min_value_cut()))
print(labels(merged), "|", io(merged))   # x before/Relu before/Sum after/Neg | x -> y

merged.finalize()
traced = trace_graph(pool, "x", "y")   # the same model traced again, for comparison
traced.finalize()
print(values(merged.run([x()])[0]), "|", values(traced.run([x()])[0]))   # -4 -5 | -4 -5
