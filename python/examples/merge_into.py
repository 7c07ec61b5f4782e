"""A second graph merged into a first one, which keeps every name it has."""

from common import io, kind_name, labels, rectify, trace_graph, values, x

first = trace_graph(rectify, "x", "h")
second = trace_graph(rectify, "x", "h")
# first's output h feeds second's input x. first keeps every name, and a name of second that
# first already uses takes the first free <name>_<n>.
renames = first.merge(second, [("h", "x")])
print(labels(first), "|", io(first))   # x Relu Relu | x -> h
for rename in renames:
    print(rename.part, kind_name(rename.kind), rename.from_, "->", rename.to)
# second node Relu_1 -> Relu_1_1
print(len(second.input_names()), len(second.output_names()))   # 0 0: second is consumed

first.finalize()
print(values(first.run([x()])[0]))   # 1 0 3 0 5 0: relu(relu(x))
