"""Graph surgery: merge graphs side by side or output-into-input, split them at a cut or by a function, and
extract the operators between values. Each call consumes the graphs it is given (they are empty afterwards and
views into them refuse) and returns new ones; a refused call leaves every graph as it was.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Mapping, Sequence, Tuple, Union

from . import _rml
from ._rml import (  # noqa: F401  (re-exported: the names a surgery program needs)
    CrossDevice, Device, Edge, Graph, IoNames, NameKind, Node, NodeKind, OpCode, Rename, Value, ValueCut,
)

Parts = Union[Mapping[str, Graph], Iterable[Tuple[str, Graph]]]
Endpoint = Union[str, Tuple[str, str]]
Connection = Tuple[Endpoint, Endpoint]

__all__ = ["merge", "split", "extract", "min_value_cut", "CrossDevice", "Device", "Edge", "Graph", "IoNames",
           "ModelGraph", "NameKind", "Node", "NodeKind", "OpCode", "Rename", "Value", "ValueCut"]


def _endpoint(end: Endpoint, which: str, index: int) -> Tuple[str, str]:
    # "encoder.h" splits at the first dot (part names from split hold none); a (part, name) pair is taken as is.
    if isinstance(end, str):
        part, dot, name = end.partition(".")
        if not dot or not part or not name:
            raise _rml.InvalidArgumentError(
                f"merge: connection {index}: the {which} end '{end}' is not 'part.name'; write it as 'part.name' "
                "or as a (part, name) pair")
        return part, name
    part, name = end
    return str(part), str(name)


def _enum(kind, value, what: str):
    if isinstance(value, kind):
        return value
    try:
        return kind.__members__[value]
    except (KeyError, TypeError):
        names = ", ".join(f'"{n}"' for n in kind.__members__)
        raise _rml.InvalidArgumentError(f"merge: {what}={value!r} is not one of {names}") from None


def merge(parts: Parts, connections: Sequence[Connection] = (), io_names: Union[str, IoNames] = "prefix_on_collision",
          cross_device: Union[str, CrossDevice] = "move") -> Tuple[Graph, List[Rename]]:
    """Joins `parts` into one graph and returns `(merged, renames)`.

    `parts` is a dict from part name to graph, or a list of `(name, graph)` pairs; a connection
    `("encoder.h", "head.h")` feeds output `h` of part `encoder` into input `h` of part `head`. Operators of
    part `p` are named `p/<name>`. `io_names` is "prefix_on_collision" (a name two parts share becomes
    `<part>/<name>`), "prefix_always" or "keep" (refuses a shared name); `cross_device` is "move" (copy a value
    onto its reader's device) or "refuse". Every part is consumed on success and untouched on failure.
    """
    items = list(parts.items()) if isinstance(parts, Mapping) else [tuple(p) for p in parts]
    links = [(_endpoint(source, "from", i), _endpoint(target, "to", i))
             for i, (source, target) in enumerate(connections)]
    return _rml._merge(items, links, _enum(IoNames, io_names, "io_names"),
                       _enum(CrossDevice, cross_device, "cross_device"))


def split(graph: Graph, cut_or_function: Union[ValueCut, Callable[[Node], str]]
          ) -> Tuple[Dict[str, Graph], List[Tuple[str, str]]]:
    """Splits `graph` at a cut (`graph.min_value_cut()`) or by a function naming each operator's part.

    Returns `(parts, connections)`: parts as a dict in an order every connection runs forward in, connections as
    `("part.output", "part.input")` pairs, so `merge(*split(graph, cut))` rebuilds the graph. The function is asked
    once per operator in `nodes()` order and returns a non-empty str without '/' or '.'; an exception it raises
    comes out of `split` unchanged and leaves the graph as it was. Consumes `graph`.
    """
    return _rml._split(graph, cut_or_function)


def extract(graph: Graph, inputs: Sequence[Union[Value, str]], outputs: Sequence[Union[Value, str]]) -> Graph:
    """The operators computing `outputs` from `inputs` as a graph of their own (values, or value names).

    A graph input keeps its name and any other input value becomes an input named after it; an output keeps its
    graph output name, or is named after its value. Consumes `graph`, freeing the weights it leaves out.
    """
    def values(items):
        return [graph.value(v) if isinstance(v, str) else v for v in items]
    return _rml._extract(graph, values(inputs), values(outputs))


def min_value_cut(graph: Graph, min_flops_before: float = 0.0, max_flops_before: float = 1.0) -> ValueCut:
    """`graph.min_value_cut(...)`: the cut through values that hands the fewest bytes from one side to the other."""
    return graph.min_value_cut(min_flops_before, max_flops_before)


# The merge-and-split guide's spellings, so its programs run with only the module name changed: its graph class
# and CamelCase enumerators name the same objects as rml's (NodeKind.Input is NodeKind.input).
ModelGraph = Graph
NodeKind.Input = NodeKind.input
NodeKind.Op = NodeKind.op
NameKind.Node = NameKind.node
NameKind.Input = NameKind.input
NameKind.Output = NameKind.output
