"""rml: neural-network inference graphs, from Python, under the names the C++ library uses.

    import rml
    graph = rml.load_graph("mlp")             # mlp.json + mlp.safetensors
    graph.finalize()
    (y,) = graph.run([np.ones((2, 12), np.float32)])
    np.asarray(y)                              # shares y's memory

Models run by name as with ONNX Runtime: `rml.InferenceSession("mlp").run(None, {"x": x})`.

Ops (`rml.relu`, `rml.add`, `rml.sum(x, [1], True)`, ...) compute at once on concrete tensors and record a
node inside `rml.trace`. Graph surgery lives in `rml.graph` (merge, split, extract). Every failure raises a
subclass of `rml.Error` (`rml.InvalidArgumentError`, ...) whose `code_name` says its code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, List, Sequence, Union

from . import _rml
from ._rml import *  # noqa: F401,F403  (the C++ names: Tensor, Graph, relu, load_graph, ...)
from ._rml import Graph, Tensor, TensorSpec

__version__ = _rml.__version__


@dataclass(frozen=True)
class TraceResult:
    """What `trace` returns: the graph it recorded, every op as written, nothing optimized or finalized."""

    graph: Graph


TraceFunction = Callable[[List[Tensor]], Union[Tensor, Sequence[Tensor]]]


def trace(fn: TraceFunction, signature: Iterable[TensorSpec], name: str = "traced",
          output_names: Sequence[str] = ()) -> TraceResult:
    """Calls `fn` on symbolic tensors built from `signature` and records every rml op it applies.

    `fn` takes the list of input tensors and returns a Tensor or a list of them; the outputs are named
    `output_names` (default `output_<i>`). An op's type error raises its rml.Error at the line that wrote
    it; any exception `fn` raises comes out of `trace` unchanged.
    """
    return TraceResult(_rml._trace(fn, list(signature), name, list(output_names)))


from . import graph  # noqa: E402  (rml.graph.merge / split / extract need the names above)
