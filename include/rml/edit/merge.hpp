// merge: join graphs side by side or output-into-input into one graph; Graph::merge grows a graph in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/edit/detail/common.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// How merge names the merged graph's inputs and outputs.
enum class IoNames : std::uint8_t {
  prefix_on_collision,  ///< a name two parts use becomes `<part>/<name>`; others stay
  prefix_always,        ///< every name becomes `<part>/<name>`
  keep,                 ///< every name stays; a name two parts use is refused
};

/// What merge does with a connection whose ends sit on two devices.
enum class CrossDevice : std::uint8_t {
  move,    ///< insert a `copy` onto the input's device
  refuse,  ///< refuse the merge
};

/// What a Rename names.
enum class NameKind : std::uint8_t { node, input, output };

struct MergeOptions {
  IoNames io_names = IoNames::prefix_on_collision;
  CrossDevice cross_device = CrossDevice::move;
};

/// A graph and the name the merged graph knows it by (not empty, no `/`).
struct GraphPart {
  std::string name;
  Graph graph;
};

/// One end of a connection: a part and one of its output (from) or input (to) names.
struct Endpoint {
  std::string part;
  std::string name;
};

/// Feeds output `from` of one part into input `to` of another.
struct Connection {
  Endpoint from;
  Endpoint to;

  /// `encoder.h -> head.h`.
  [[nodiscard]] std::string to_string() const { return from.part + "." + from.name + " -> " + to.part + "." + to.name; }
};

/// A name a merge changed.
struct Rename {
  std::string part;
  NameKind kind = NameKind::node;
  std::string from;
  std::string to;
};

struct MergedGraph {
  Graph graph;
  std::vector<Rename> renames;
};

namespace detail {

inline constexpr ValueId kNoValue = std::numeric_limits<ValueId>::max();

}  // namespace detail

/// Joins `parts` into one graph. Each connection feeds an output of one part into an input of
/// another; connected outputs and inputs are not the merged graph's. Operators of part `p` are
/// named `p/<name>`; inputs and outputs follow `options.io_names`. On success every part's
/// graph is consumed (empty); on failure every part is as it was.
///
/// Errors: INVALID_ARGUMENT for no parts, a bad or repeated part name, a consumed part, a
/// connection naming a missing part, output or input, an input fed twice, ends that differ in
/// dtype or shape, ends on two devices under CrossDevice::refuse, connections that form a cycle,
/// or a name two parts share under IoNames::keep; FAILED_PRECONDITION for a finalized part.
RML_SPLIT_API Result<MergedGraph> merge(std::vector<GraphPart>& parts, const std::vector<Connection>& connections = {},
                                        MergeOptions options = {});

namespace detail {

/// Graph::merge: `second` merges into `first`, which keeps every name; a name of `second` that
/// `first` already uses takes the first free `<name>_<n>`. Each io_map pair feeds an output of
/// `first` into an input of `second` (moving it when the two sit on two devices).
RML_SPLIT_API Result<std::vector<Rename>> merge_into(Graph& first, Graph& second,
                                                     const std::vector<std::pair<std::string, std::string>>& io_map);

}  // namespace detail

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/edit/detail/merge_impl.hpp"
#endif
