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
from .safetensors import BF16Array, write_safetensors

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


def rml_dtype_of(array, narrow: bool = True) -> str:
    """The rml dtype of constant data. float16 is f16, BF16Array bf16, int64 i64 and bool bool, unless `narrow`
    (the seed format's rules, for readers of f32 and i32 only): then floats are f32, integers i32, bools f32."""
    if isinstance(array, BF16Array):
        return "f32" if narrow else "bf16"
    dtype = np.asarray(array).dtype
    if dtype.kind == "f":
        return "f16" if dtype == np.float16 and not narrow else "f32"
    if dtype.kind in "iu":
        return "i64" if dtype == np.int64 and not narrow else "i32"
    if dtype.kind == "b":
        return "f32" if narrow else "bool"
    raise ExportError(f"no rml dtype for NumPy dtype {dtype}")


# The NumPy dtype constant data of each rml dtype is held in while exporting (bf16: float32 holding bf16 values).
CARRIER = {"f32": np.float32, "f16": np.float16, "bf16": np.float32, "i32": np.int32, "i64": np.int64,
           "bool": np.bool_}


def as_carrier(array, dtype: str, what: str) -> np.ndarray:
    """`array` as the NumPy data of an rml `dtype` value: integers range-checked, numbers that become bool 0 or
    1 only, floats rounded to f16 or bf16 (nearest, ties to even)."""
    if isinstance(array, BF16Array):
        array = array.to_float32()
    array = np.asarray(array)
    if dtype in ("i32", "i64") and array.dtype.kind in "iub":
        info = np.iinfo(CARRIER[dtype])
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise ExportError(f"{what}: integer values outside the {dtype} range")
    if dtype == "bool" and array.dtype.kind != "b" and array.size and not np.isin(array, (0, 1)).all():
        raise ExportError(f"{what}: values other than 0 and 1 cannot be bool")
    if dtype == "bf16":
        return BF16Array.from_float(array).to_float32()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(array, dtype=CARRIER[dtype], order="C")


def to_rml_array(array, what: str, dtype: str = ""):
    """Converts constant data to what rml stores for `dtype` (by default the narrowed f32/i32 of the seed
    format: f32, or i32 when every value fits; booleans become 0/1). bf16 becomes a BF16Array."""
    if not dtype:
        dtype = rml_dtype_of(array, narrow=True)
    if isinstance(array, np.ndarray) and array.dtype.kind not in "fiub":
        raise ExportError(f"{what}: unsupported dtype {array.dtype}")
    data = as_carrier(array, dtype, what)
    return BF16Array.from_float(data) if dtype == "bf16" else data


def _json_exact(array: np.ndarray) -> bool:
    """Whether every element reads back exactly from a JSON number: floats finite, integers within ±2^53."""
    if array.dtype.kind == "f":
        return bool(np.all(np.isfinite(array)))
    if array.dtype.kind in "iu":
        return not array.size or (int(array.min()) >= -2**53 and int(array.max()) <= 2**53)
    return True


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
    def __init__(self, name: str, producer: str, narrow: bool = False):
        """`narrow`: the seed format's rules (f32 and i32 only: float16/bfloat16/float64 become f32, int64 i32 when
        it fits, bool an f32 0/1 mask) for readers of the original format; otherwise each dtype is kept."""
        self.name, self.producer, self.narrow = name, producer, narrow
        self.float_as: Optional[str] = None  # "f16": float32 data is a float16 model traced in f32 (from_torch)
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
            dtype = self.dtype_of(array)
            array = as_carrier(array, dtype, f"parameter {name}")
            self.params[name] = Value(dtype, array.shape, "param", name, array, param_name=name)
        return self.params[name]

    def dtype_of(self, array) -> str:
        return rml_dtype_of(array, self.narrow)

    def const(self, array, name: str = "", dtype: str = "") -> Value:
        """A derived constant: stored as `const.<id>`, or inline when tiny. Its dtype is the data's (see
        rml_dtype_of), or `dtype`."""
        dtype = dtype or self.dtype_of(array)
        array = as_carrier(array, dtype, f"constant {name or '(derived)'}")
        return Value(dtype, array.shape, "const", name, array)

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
        inputs = self._promote_constants(op, list(inputs))
        if fold and inputs and all(v.is_const for v in inputs):
            # Folding also serves the exporters' integer shape arithmetic, which rml's ops may refuse (mixed
            # integer widths). A result whose op type-checks gets the op's dtype (rounded to f16 or bf16).
            try:
                result = reference.run_op(op, [v.data for v in inputs], attrs)
            except (ValueError, IndexError, TypeError) as e:
                raise ExportError(f"folding {op}: {e}") from None
            try:
                dtype = ops.infer(op, [(v.dtype, v.shape) for v in inputs], attrs)[0]
            except ExportError:
                dtype = ""
            if dtype in ("f16", "bf16"):
                return self.const(result, dtype=dtype)
            return self.const(result)
        dtype, shape = ops.infer(op, [(v.dtype, v.shape) for v in inputs], attrs)
        out = Value(dtype, shape, "node", name or self.node_name)
        self.node_name = ""
        node = Node(op, list(inputs), [out], attrs, name, self.origin)
        out.producer = node
        self.nodes.append(node)
        return out

    def _promote_constants(self, op: str, inputs: List[Value]) -> List[Value]:
        """A derived constant (a scalar, an epsilon) next to values of another dtype of its kind takes their dtype:
        f32 constants beside f16 or bf16 values, i32 constants beside i64 ones. Parameters are never converted."""
        same = {"matmul": range(2), "conv2d": range(3), "where": range(1, 3)}.get(
            op, range(len(inputs)) if op in ops.BINARY or op == "concat" else range(0))
        positions = [i for i in same if i < len(inputs)]
        live = {inputs[i].dtype for i in positions if inputs[i].kind != "const"}
        if len(live) != 1:
            return inputs
        target = live.pop()
        out = list(inputs)
        for i in positions:
            v = inputs[i]
            if v.kind == "const" and v.dtype != target and (
                    (v.dtype in ops.FLOAT_DTYPES and target in ops.FLOAT_DTYPES) or
                    (v.dtype in ("i32", "i64") and target in ("i32", "i64"))):
                out[i] = self.const(v.data, v.name, dtype=target)
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
                data = to_rml_array(v.data, f"constant {name}", v.dtype)
                values_of = data.to_float32() if isinstance(data, BF16Array) else data
                if v.kind == "param":
                    constants.append({"value": v.id, "tensor": v.param_name})
                    tensors.append((v.param_name, data))
                elif data.size <= INLINE_LIMIT and _json_exact(values_of):
                    inline = values_of.reshape(-1)
                    constants.append({"value": v.id, "data": (inline.astype(np.int64) if inline.dtype.kind == "b"
                                                              else inline).tolist()})
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
