"""GraphBuilder: collects values, constants and nodes of an rml graph and writes `<stem>.json` + `.safetensors`.

Exporters call `input`, `param`, `const` and `op`. An op whose inputs are all constants is folded at once (computed
by the NumPy reference), so shape arithmetic and weight preprocessing (a transposed Linear weight, a batch norm
folded into a convolution) never reach the graph. Ids are given when the graph is written, after dead nodes are
dropped: parameters first (in order of first use), then the inputs, then constants and node outputs in the order
the nodes that read or produce them were emitted.
"""

from __future__ import annotations

import json
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import ops, reference
from .ops import ExportError
from .safetensors import write_safetensors

FORMAT_VERSION = 1
INLINE_LIMIT = 16  # derived constants with at most this many (finite) elements are written inline


class Value:
    """A tensor of the graph being built. `data` is set for constants (any NumPy dtype until written)."""

    __slots__ = ("dtype", "shape", "data", "name", "kind", "param_name", "id", "producer")

    def __init__(self, dtype: str, shape, kind: str, name: str = "", data=None, param_name: str = ""):
        self.dtype, self.shape, self.kind, self.name = dtype, tuple(int(d) for d in shape), kind, name
        self.data, self.param_name = data, param_name
        self.id: Optional[int] = None
        self.producer: Optional[Node] = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    def __repr__(self):
        return f"Value({self.name or '?'}: {self.dtype} {list(self.shape)})"


class Node:
    """An emitted op: the values it reads and writes, its attributes, name and origin."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "name", "origin")

    def __init__(self, op, inputs, outputs, attrs, name, origin):
        self.op, self.inputs, self.outputs, self.attrs = op, inputs, outputs, attrs
        self.name, self.origin = name, origin


def rml_dtype_of(array: np.ndarray) -> str:
    kind = np.asarray(array).dtype.kind
    if kind == "f":
        return "f32"
    if kind in "iu":
        return "i32"
    if kind == "b":
        return "f32"
    raise ExportError(f"no rml dtype for NumPy dtype {np.asarray(array).dtype}")


def to_rml_array(array: np.ndarray, what: str) -> np.ndarray:
    """Converts constant data to what rml stores: f32, or i32 when every value fits; booleans become 0/1."""
    array = np.asarray(array)
    if array.dtype.kind in "fb":
        return np.array(array, dtype=np.float32, order="C")
    if array.dtype.kind in "iu":
        info = np.iinfo(np.int32)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise ExportError(f"{what}: integer values outside the i32 range")
        return np.array(array, dtype=np.int32, order="C")
    raise ExportError(f"{what}: unsupported dtype {array.dtype}")


def _clean_attr(value):
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_clean_attr(v) for v in value]
    raise ExportError(f"attribute value {value!r} has no rml type")


class GraphBuilder:
    def __init__(self, name: str, producer: str):
        self.name, self.producer = name, producer
        self.inputs: List[Value] = []
        self.outputs: List[Value] = []
        self.nodes: List[Node] = []
        self.params: Dict[str, Value] = {}
        self.metadata: Dict[str, str] = {}
        self.origin: Optional[dict] = None  # attached to nodes emitted while set
        self.node_name: str = ""  # name for the next emitted node (then cleared)

    # -- definitions -------------------------------------------------------------------------------------
    def input(self, name: str, dtype: str, shape) -> Value:
        v = Value(dtype, shape, "input", name)
        self.inputs.append(v)
        return v

    def param(self, name: str, array) -> Value:
        """A framework parameter, stored under its own name (e.g. `layers.0.bias`); one value per name."""
        if name not in self.params:
            array = np.asarray(array)
            self.params[name] = Value(rml_dtype_of(array), array.shape, "param", name, array, param_name=name)
        return self.params[name]

    def const(self, array, name: str = "") -> Value:
        """A derived constant: stored as `const.<id>`, or inline when tiny."""
        array = np.asarray(array)
        return Value(rml_dtype_of(array), array.shape, "const", name, array)

    def scalar(self, number: float) -> Value:
        return self.const(np.asarray(number, dtype=np.float32))

    def output(self, value: Value, name: str = ""):
        """Marks `value` as a graph output; a constant, an input or a repeated output is given its own `copy`."""
        if value.kind != "node" or any(v is value for v in self.outputs):
            value = self.op("copy", [value], fold=False)
        self.outputs.append(value)
        if name:
            value.name = name

    # -- nodes -------------------------------------------------------------------------------------------
    def op(self, op: str, inputs: Sequence[Value], name: str = "", fold: bool = True, **attrs) -> Value:
        """Emits `op` (or, with `fold`, computes it when every input is constant); returns its output value."""
        attrs = {k: _clean_attr(v) for k, v in attrs.items() if v is not None}
        for v in inputs:
            if not isinstance(v, Value):
                raise ExportError(f"{op}: input {v!r} is not a graph value")
        if fold and inputs and all(v.is_const for v in inputs):
            # Folding also serves the exporters' integer shape arithmetic, which rml's f32-only ops would refuse.
            try:
                return self.const(reference.run_op(op, [v.data for v in inputs], attrs))
            except (ValueError, IndexError, TypeError) as e:
                raise ExportError(f"folding {op}: {e}") from None
        dtype, shape = ops.infer(op, [(v.dtype, v.shape) for v in inputs], attrs)
        out = Value(dtype, shape, "node", name or self.node_name)
        self.node_name = ""
        node = Node(op, list(inputs), [out], attrs, name, self.origin)
        out.producer = node
        self.nodes.append(node)
        return out

    # -- output ------------------------------------------------------------------------------------------
    def _live_nodes(self) -> List[Node]:
        live = set()
        stack = [v.producer for v in self.outputs if v.producer is not None]
        while stack:
            node = stack.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            stack.extend(v.producer for v in node.inputs if v.producer is not None)
        return [n for n in self.nodes if id(n) in live]

    def finish(self):
        """Numbers the values; returns (graph JSON dict, [(tensor name, array)])."""
        if not self.outputs:
            raise ExportError("the graph has no outputs")
        nodes = self._live_nodes()
        ordered: List[Value] = []
        seen = set()

        def number(v: Value):
            if id(v) not in seen:
                seen.add(id(v))
                v.id = len(ordered)
                ordered.append(v)

        for n in nodes:
            for v in n.inputs:
                if v.kind == "param":
                    number(v)
        for v in self.inputs:
            number(v)
        for n in nodes:
            for v in n.inputs:
                number(v)
            for v in n.outputs:
                number(v)
        for v in self.outputs:
            number(v)

        values, constants, tensors = [], [], []
        used_names = set()
        for v in ordered:
            name = v.param_name if v.kind == "param" else v.name
            if not name or name in used_names:  # unnamed, or a second value under one name
                name = f"v{v.id}"
                while name in used_names:
                    name += "_"
            used_names.add(name)
            values.append({"name": name, "dtype": v.dtype, "shape": list(v.shape)})
            if v.is_const:
                data = to_rml_array(v.data, f"constant {name}")
                if v.dtype != rml_dtype_of(data):
                    raise ExportError(f"constant {name}: data is {data.dtype}, value is {v.dtype}")
                if v.kind == "param":
                    constants.append({"value": v.id, "tensor": v.param_name})
                    tensors.append((v.param_name, data))
                elif data.size <= INLINE_LIMIT and (data.dtype.kind == "i" or np.all(np.isfinite(data))):
                    constants.append({"value": v.id, "data": data.reshape(-1).tolist()})
                else:
                    constants.append({"value": v.id, "tensor": f"const.{v.id}"})
                    tensors.append((f"const.{v.id}", data))

        node_names = set()
        json_nodes = []
        for n in nodes:
            entry = {"op": n.op, "inputs": [v.id for v in n.inputs], "outputs": [v.id for v in n.outputs]}
            if n.name and n.name not in node_names:
                node_names.add(n.name)
                entry["name"] = n.name
            if n.attrs:
                entry["attrs"] = n.attrs
            if n.origin:
                entry["origin"] = n.origin
            json_nodes.append(entry)

        graph = {"format": "rml-graph", "version": FORMAT_VERSION, "producer": self.producer}
        graph.update({"values": values, "inputs": [v.id for v in self.inputs],
                      "outputs": [v.id for v in self.outputs], "constants": constants, "nodes": json_nodes})
        return graph, tensors

    def write(self, stem) -> Dict:
        """Writes `<stem>.json` and `<stem>.safetensors`; returns the graph JSON dict."""
        graph, tensors = self.finish()
        self.save(stem, graph, tensors)
        return graph

    def save(self, stem, graph: Dict, tensors) -> None:
        """Writes what `finish` returned as `<stem>.json` and `<stem>.safetensors`."""
        text = _dumps(graph)
        with open(f"{stem}.json", "w") as f:
            f.write(text)
        write_safetensors(f"{stem}.safetensors", tensors, {"format": "rml-graph", "producer": self.producer,
                                                          **self.metadata})


def _dumps(graph: Dict) -> str:
    """JSON with one value/constant/node per line: diffable and still compact."""
    def check_finite(obj):
        if isinstance(obj, float) and not math.isfinite(obj):
            raise ExportError(f"non-finite number {obj} cannot be written to JSON")
        if isinstance(obj, dict):
            for v in obj.values():
                check_finite(v)
        elif isinstance(obj, list):
            for v in obj:
                check_finite(v)

    check_finite(graph)
    lines = ["{"]
    keys = list(graph)
    for i, key in enumerate(keys):
        comma = "," if i + 1 < len(keys) else ""
        value = graph[key]
        if key in ("values", "constants", "nodes") and value:
            lines.append(f'  "{key}": [')
            lines.extend("    " + json.dumps(item, separators=(", ", ": ")) + ("," if j + 1 < len(value) else "")
                         for j, item in enumerate(value))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f'  "{key}": {json.dumps(value)}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"
