"""Each of the three graphs, traced and run once. A finalized graph runs, and merge and split refuse it."""

from common import io, labels, pool, rectify, trace_graph, twice, values, x

encoder = trace_graph(rectify, "x", "h")
head = trace_graph(twice, "h", "y")
pooled = trace_graph(pool, "x", "y")
for graph in (encoder, head, pooled):
    print(labels(graph), "|", io(graph))
    graph.finalize()   # a finalized graph runs, and merge and split refuse it
    print(values(graph.run([x()])[0]))
# x Relu | x -> h
# 1 0 3 0 5 0
# h Add | h -> y
# 2 -4 6 -8 10 -12
# x Relu Sum Neg | x -> y
# -4 -5
