// Loading and saving rml-graph models: <stem>.json (the graph) + <stem>.safetensors (weights).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/io/graph_json.hpp"
#include "rml/io/safetensors.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

/// What save_graph decides about the constants: which are written inline, and the stored name
/// of every other one (storage shared by several constants is stored once).
struct ConstantLayout {
  std::vector<std::string> stored_name;  // per constant; empty = inline
  std::vector<std::pair<std::string, Tensor>> tensors;
};

RML_SPLIT_API Result<ConstantLayout> layout_constants(const GraphDef& def);

/// What binds a `<stem>.json` to the one `<stem>.safetensors` written with it: a 128-bit pair id
/// derived from the contents (content_pair_id), which the weights file's `__metadata__` also holds
/// under `rml.pair`, and the weights file's size in bytes. Written as
/// `"weights": {"pair": "<32 hex digits>", "bytes": N}`.
struct WeightsBinding {
  std::string pair;
  std::uint64_t bytes = 0;
};

inline constexpr std::string_view weights_pair_key = "rml.pair";

}  // namespace detail

/// The rml-graph JSON text of `def`, with stored constants named by `layout` (and, from
/// save_graph, the binding to its weights file).
RML_SPLIT_API Result<std::string> graph_to_json(const GraphDef& def, const detail::ConstantLayout& layout,
                                                const detail::WeightsBinding* binding = nullptr);

/// How load_graph reads the weights file.
struct LoadOptions {
  /// Map the weights (zero copies, pages read on first use; the default). False reads them into
  /// memory: the load costs a read of the whole file, and nothing done to the file afterwards can
  /// reach the loaded graph (a mapped file cut short under a running program raises SIGBUS at the
  /// first read of a lost page; see detail::MappedFile).
  bool mmap = true;
};

/// Reads `<stem>.json` and its weights `<stem>.safetensors` (mapped, or read with
/// `options.mmap = false`); see parse_graph for the checks. A document save_graph wrote names its
/// weights file by a pair id and size, and is loaded only with that file: never with the weights
/// of another save. NOT_FOUND when the JSON file is missing; DATA_LOSS when the weights file is
/// damaged, missing or from another save; UNSUPPORTED for a newer format version;
/// INVALID_ARGUMENT otherwise, and for a path that is not a regular file (a FIFO or device is
/// refused without reading). Every message starts with the JSON file's path. `stem` may also name
/// the `.json` file itself.
RML_SPLIT_API Result<Graph> load_graph(const std::filesystem::path& stem_or_file, const LoadOptions& options = {});

/// Writes `<stem>.json` and `<stem>.safetensors` (always both; the weights file may hold no
/// tensor) as one pair, once `graph` passes the gate (validate_graph): the JSON records the weights
/// file's size and a pair id that the weights file's `__metadata__` also holds, and load_graph
/// refuses a JSON with the weights of another save. The pair id is a hash of the contents (the
/// JSON and every weight byte), so saving the same graph twice writes identical files. The save
/// replaces the pair in one step, which a crash at any point leaves either old or new
/// (docs/format.md, "Saving"):
///   1. the weights, complete and fsynced, under a temporary `<stem>.safetensors.<random>.tmp`;
///   2. the JSON, complete and fsynced, under a temporary `<stem>.json.<random>.tmp`;
///   3. the weights renamed to `<stem>.safetensors.<pair>`, then the JSON renamed over
///      `<stem>.json`: the commit (loaders now read the new pair, through the staged weights until
///      step 4);
///   4. the staged weights renamed over `<stem>.safetensors`; staged weights of this stem that the
///      committed JSON does not name (left by saves killed before their step 4) are removed; the
///      directory fsynced.
/// Steps 3 and 4 hold an advisory lock on the directory, so concurrent saves commit one after the
/// other. Every file is written exclusively, never through a symlink. A failed save leaves the
/// previous pair as it was and removes what it wrote.
///
/// Constants marked inline are written into the JSON when finite; every other constant is
/// stored, and storage shared by several constants is stored once. INVALID_ARGUMENT for a path
/// that names no file (`""`, `"dir/"`), for a graph the gate refuses (its message, naming the
/// place) and for one that cannot be written (a non-finite float attribute); DATA_LOSS when
/// writing fails or mapped weights it copies from have shrunk. Nothing is written before these
/// checks.
RML_SPLIT_API Status save_graph(const Graph& graph, const std::filesystem::path& stem_or_file);

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/io/detail/graph_io_impl.hpp"
#endif
