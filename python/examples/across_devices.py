"""Graphs on two devices: the encoder on the CPU, the head on an accelerator (BLOCKED without one)."""

import rml
from common import io, rectify, trace_graph, twice, values, x
from rml.graph import Graph

accelerator = rml.Device.gpu()   # the CPU on a host with no accelerator
if accelerator.type == "cpu":
    print("BLOCKED: this section needs an accelerator")
    raise SystemExit(3)


def two_parts() -> dict[str, Graph]:
    # The encoder computes on the CPU, and the head serves on the accelerator.
    parts = {"encoder": trace_graph(rectify, "x", "h"), "head": trace_graph(twice, "h", "y")}
    parts["head"].to(accelerator)
    return parts


connections = [("encoder.h", "head.h")]

# cross_device="move", the default: the merged graph moves h onto the head's device.
merged, _ = rml.graph.merge(two_parts(), connections)
merged.finalize()
y = merged.run([x()])[0]
print(y.device == accelerator, values(y))   # True 2 0 6 0 10 0: y is on the accelerator

# cross_device="refuse": a connection between two devices refuses the merge.
parts = two_parts()
try:
    rml.graph.merge(parts, connections, cross_device="refuse")
except rml.InvalidArgumentError as error:
    print(error.code_name)   # INVALID_ARGUMENT, naming the connection and its devices
print(io(parts["encoder"]), "|", io(parts["head"]))
# x -> h | h -> y: a refused merge leaves every part as it was
