"""Graphs on two CPU devices: the encoder on cpu:0, the head on cpu:1, each with its own workspace and threads.

The guide's accelerator section, on the devices every host has: it runs here, where across_devices.py is BLOCKED.
"""

import rml
from common import io, labels, rectify, trace_graph, twice, values, x
from rml.graph import Graph, NodeKind

second_cpu = rml.Device.cpu(1)


def two_parts() -> dict[str, Graph]:
    # The encoder computes on cpu:0, and the head serves on cpu:1.
    parts = {"encoder": trace_graph(rectify, "x", "h"), "head": trace_graph(twice, "h", "y")}
    parts["head"].to(second_cpu)
    return parts


connections = [("encoder.h", "head.h")]

# cross_device="move", the default: the merged graph copies h onto the head's device.
merged, _ = rml.graph.merge(two_parts(), connections)
print(labels(merged), "|", io(merged))   # x encoder/Relu head/Copy head/Add | x -> y
for node in merged.nodes():
    if node.kind == NodeKind.op:
        print(node.name, "on", node.device())
# encoder/Relu_1 on cpu:0
# head/Copy_h on cpu:1
# head/Add_1 on cpu:1
merged.finalize()
print(values(merged.run([x()])[0]))   # 2 0 6 0 10 0

# cross_device="refuse": a connection between two devices refuses the merge, naming both.
parts = two_parts()
try:
    rml.graph.merge(parts, connections, cross_device="refuse")
except rml.InvalidArgumentError as error:
    print(error.code_name, "|", error)
# INVALID_ARGUMENT | merge: connection encoder.h -> head.h joins cpu:0 to cpu:1, which CrossDevice::Refuse
# refuses; merge with CrossDevice::Move to copy the value across
print(io(parts["encoder"]), "|", io(parts["head"]))   # x -> h | h -> y: a refused merge leaves every part as it was
