// The rml-graph JSON document: parse_graph (text + weights -> Graph) and graph_to_json.
//
//   {"format": "rml-graph", "version": 1, "producer": "...", "name": "...",
//    "values":    [{"name": "x", "dtype": "f32", "shape": [2, 12]}, ...],   // id = index
//    "inputs":    [ids], "outputs": [ids],
//    "constants": [{"value": id, "tensor": "<safetensors name>"} | {"value": id, "data": [numbers]}],
//    "nodes":     [{"op": "matmul", "inputs": [ids], "outputs": [ids], "name": "fc1",
//                   "attrs": {"axis": 1, "perm": [1, 0], ...},
//                   "origin": {"module": "layers.2", "file": "model.py", "line": 41},
//                   "device": "cpu:1"}],
//    "metadata":  {"key": "string"}}
//
// `name`, `producer`, `metadata`, and a node's `name`, `attrs`, `origin` and `device` are
// optional. Unknown keys are ignored, so a reader of version 1 reads later additions that do not
// change the meaning of what it knows.
//
// Memory: everything the reader builds from what the document claims (lists, dimensions, ids,
// numbers, names, attributes) is charged against a budget of graph_json_memory_per_byte × the
// document's size + graph_json_memory_base before it is allocated; past it the document is refused
// (INVALID_ARGUMENT, naming the path). docs/safety.md states the bound and its measurement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/io/safetensors.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// The format version this build reads and writes.
inline constexpr std::int64_t graph_format_version = 1;

/// The rml-graph JSON reader builds at most this many bytes per byte of the document, plus
/// graph_json_memory_base (the MessagePack reader's rule; docs/safety.md).
inline constexpr std::size_t graph_json_memory_per_byte = 32;
/// The part of the JSON reader's memory budget that does not depend on the document's size.
inline constexpr std::size_t graph_json_memory_base = std::size_t{16} << 20;

/// Parses an rml-graph document and binds its constants to `weights` (may be null when the
/// graph stores no tensor). Checks, in order: format and version (a newer version is
/// UNSUPPORTED), the types of every field, every id in range, each value defined exactly once and
/// before it is read, and each constant against its stored or inline data. What the document
/// makes the reader build is bounded by graph_json_memory_per_byte × its size +
/// graph_json_memory_base; a document past that is refused. Any other failure is INVALID_ARGUMENT
/// naming the JSON path (`values[3].shape[1]`); nothing throws.
RML_SPLIT_API Result<Graph> parse_graph(std::string_view json, const SafetensorsReader* weights);

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/io/detail/graph_json_impl.hpp"
#endif
