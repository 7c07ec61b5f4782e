# Type stubs for rml.graph: merge, split, extract.
from typing import Callable, Dict, Iterable, List, Mapping, Sequence, Tuple, Union

from . import (
    CrossDevice as CrossDevice, Device as Device, Edge as Edge, Graph as Graph, IoNames as IoNames,
    NameKind as NameKind, Node as Node, NodeKind as NodeKind, OpCode as OpCode, Rename as Rename, Value as Value,
    ValueCut as ValueCut,
)

ModelGraph = Graph

Parts = Union[Mapping[str, Graph], Iterable[Tuple[str, Graph]]]
Endpoint = Union[str, Tuple[str, str]]
Connection = Tuple[Endpoint, Endpoint]

def merge(parts: Parts, connections: Sequence[Connection] = (), io_names: Union[str, IoNames] = "prefix_on_collision",
          cross_device: Union[str, CrossDevice] = "move") -> Tuple[Graph, List[Rename]]: ...
def split(graph: Graph, cut_or_function: Union[ValueCut, Callable[[Node], str]]
          ) -> Tuple[Dict[str, Graph], List[Tuple[str, str]]]: ...
def extract(graph: Graph, inputs: Sequence[Union[Value, str]], outputs: Sequence[Union[Value, str]]) -> Graph: ...
def min_value_cut(graph: Graph, min_flops_before: float = 0.0, max_flops_before: float = 1.0) -> ValueCut: ...
