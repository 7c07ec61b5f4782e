// The graph IR: values, constants and nodes as plain reflected structs (GraphDef), and Graph,
// the object users hold, load, edit and run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/ir/device.hpp"
#include "rml/ir/ops.hpp"

namespace rml {

/// A value's id: its index in GraphDef::values.
using ValueId = std::uint32_t;

/// A node's operands or results: up to four held inline, without an allocation.
using ValueIds = SmallVector<ValueId, 4>;

/// Where an exporter found a node (`layers.2 at model.py:41`). Every transformation keeps it.
struct Origin {
  std::string module;
  std::string file;
  std::int64_t line = 0;

  /// `layers.2 at model.py:41`, or the parts that are known.
  [[nodiscard]] std::string to_string() const {
    std::string s = module;
    if (!file.empty()) {
      if (!s.empty()) s += " at ";
      s += file;
      if (line > 0) s += ":" + std::to_string(line);
    }
    return s;
  }
  friend bool operator==(const Origin&, const Origin&) = default;
  static constexpr auto fields() {
    return std::tuple{field("module", &Origin::module), field("file", &Origin::file), field("line", &Origin::line)};
  }
};

/// An attribute: integer, float, bool, string, or a list of integers or floats.
/// The alternative order is stored in files: append only.
using AttrValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, std::vector<double>>;

/// Attributes by name, sorted (so printing and saving are deterministic).
using Attrs = std::map<std::string, AttrValue, std::less<>>;

/// A value: an optional name and its static type.
struct ValueDef {
  std::string name;
  TensorType type;

  friend bool operator==(const ValueDef&, const ValueDef&) = default;
  static constexpr auto fields() { return std::tuple{field("name", &ValueDef::name), field("type", &ValueDef::type)}; }
};

/// A constant: the value it defines and its data, either stored in the weights file under
/// `tensor` or written inline in the JSON (`inline_data`, for small constants).
struct ConstantDef {
  ValueId value = 0;
  std::string tensor;
  Tensor data;
  bool inline_data = false;

  static constexpr auto fields() {
    return std::tuple{field("value", &ConstantDef::value), field("tensor", &ConstantDef::tensor),
                      field("data", &ConstantDef::data), field("inline_data", &ConstantDef::inline_data)};
  }
};

/// An operator application. `op` is the snake_case op name (`matmul`); the loader does not
/// judge it, `infer_types` does.
struct NodeDef {
  std::string op;
  ValueIds inputs;
  ValueIds outputs;
  std::string name;
  Attrs attrs;
  std::optional<Origin> origin;
  Device device;

  static constexpr auto fields() {
    return std::tuple{field("op", &NodeDef::op),           field("inputs", &NodeDef::inputs),
                      field("outputs", &NodeDef::outputs), field("name", &NodeDef::name),
                      field("attrs", &NodeDef::attrs),     field("origin", &NodeDef::origin),
                      field("device", &NodeDef::device)};
  }
};

/// A whole graph as data. Invariants (checked by the gate, validate_graph in rml/ir/validate.hpp,
/// which every loader, Graph's entry points and every edit run): every id in range, every value
/// defined exactly once, as an input, a constant or a node output, before any node reads it, and
/// every type and constant of a size that fits.
struct GraphDef {
  std::string name;
  std::string producer;
  std::vector<ValueDef> values;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<ConstantDef> constants;
  std::vector<NodeDef> nodes;
  std::map<std::string, std::string, std::less<>> metadata;

  static constexpr auto fields() {
    return std::tuple{field("name", &GraphDef::name),       field("producer", &GraphDef::producer),
                      field("values", &GraphDef::values),   field("inputs", &GraphDef::inputs),
                      field("outputs", &GraphDef::outputs), field("constants", &GraphDef::constants),
                      field("nodes", &GraphDef::nodes),     field("metadata", &GraphDef::metadata)};
  }
};

static_assert(has_unique_field_names<NodeDef>() && has_unique_field_names<GraphDef>() &&
              has_unique_field_names<ConstantDef>() && has_unique_field_names<ValueDef>());

namespace detail {

/// What a Graph owns. Views hold a weak_ptr to it, so a destroyed or reassigned graph is
/// noticed; a consumed graph keeps its body but records who consumed it.
struct GraphBody {
  GraphDef def;
  Device device;
  bool finalized = false;
  /// Non-empty once a merge, split or extract consumed the graph: the call's name.
  std::string consumed_by;
  /// Bumped on every structural edit, so views taken before it can tell.
  std::uint64_t epoch = 0;
  /// The epoch at which `def` last passed the gate (validate_graph); anything else means "not
  /// checked since the last edit". Atomic because checked entry points on a const Graph may set
  /// it from several threads; copying a body copies it.
  struct CheckedEpoch : std::atomic<std::uint64_t> {
    static constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();
    CheckedEpoch() noexcept : std::atomic<std::uint64_t>(never) {}
    CheckedEpoch(const CheckedEpoch& o) noexcept : std::atomic<std::uint64_t>(o.load(std::memory_order_acquire)) {}
    CheckedEpoch& operator=(const CheckedEpoch& o) noexcept {
      store(o.load(std::memory_order_acquire), std::memory_order_release);
      return *this;
    }
  };
  mutable CheckedEpoch valid_epoch;
  /// The compiled form after finalize() (an rml::Executor, type-erased so ir/ needs no exec/).
  std::shared_ptr<const void> compiled;
};

}  // namespace detail

/// What a Node view stands for: a graph input, or an operator.
enum class NodeKind : std::uint8_t { input, op };

class Node;
class Value;
class Edge;

namespace detail {
/// Implements Graph's editing members; defined in rml/edit/edit.hpp (included by rml/rml.hpp).
/// The members below are templates over it, so a program that calls one without including the
/// edit headers fails to compile naming this type, instead of failing to link.
struct GraphEditor;
}  // namespace detail

/// A graph: what load_graph and trace return, and what merge, split, extract, optimize,
/// finalize and run work on. Copying a graph copies its structure and shares its weights; views
/// (Node, Value, Edge) taken into a graph stop working once it is consumed, destroyed or assigned over.
class Graph {
 public:
  Graph() : body_(std::make_shared<detail::GraphBody>()) {}
  explicit Graph(GraphDef def) : body_(std::make_shared<detail::GraphBody>()) { body_->def = std::move(def); }
  Graph(const Graph& other) : body_(std::make_shared<detail::GraphBody>(*other.body())) {}
  Graph(Graph&& other) noexcept : body_(std::exchange(other.body_, nullptr)) {}
  Graph& operator=(const Graph& other) {
    if (this != &other) body_ = std::make_shared<detail::GraphBody>(*other.body());
    return *this;
  }
  Graph& operator=(Graph&& other) noexcept {
    if (this != &other) body_ = std::exchange(other.body_, nullptr);
    return *this;
  }
  ~Graph() = default;

  /// The graph as data.
  [[nodiscard]] const GraphDef& def() const noexcept { return body()->def; }
  /// A graph holding `def` once it passes the gate (validate_graph); INVALID_ARGUMENT naming the
  /// place otherwise. What the readers return; prefer it to the constructor for data from outside.
  static Result<Graph> from_def(GraphDef def);
  /// OK when the graph passes the gate (rml/ir/validate.hpp), INVALID_ARGUMENT naming the place
  /// otherwise. Cheap when nothing changed since the last check: the result is kept until
  /// mutable_def() or an edit. Every entry point that indexes the graph (views, infer_types,
  /// Executor::create, finalize, the surgery calls) runs it first.
  [[nodiscard]] Status validate() const;

  /// The graph as data, for editing; bumps the epoch so existing views notice, and so the next
  /// checked entry point runs the gate again.
  [[nodiscard]] GraphDef& mutable_def() {
    ensure_body();
    ++body_->epoch;
    return body_->def;
  }
  [[nodiscard]] const std::string& name() const noexcept { return def().name; }
  [[nodiscard]] bool finalized() const noexcept { return body()->finalized; }
  /// True once merge, split or extract consumed this graph (it is then empty).
  [[nodiscard]] bool consumed() const noexcept { return !body()->consumed_by.empty(); }
  [[nodiscard]] const Device& device() const noexcept { return body()->device; }

  // ---- views (rml/ir/views.hpp) ----

  /// Graph inputs first (NodeKind::input, named after the input), then operators in order.
  [[nodiscard]] std::vector<Node> nodes() const;
  /// The node called `name` (an input's name, an operator's name or its `<OpCode>_<i>`);
  /// NOT_FOUND when there is none.
  [[nodiscard]] Result<Node> node(std::string_view name) const;
  /// The operators of one op code, in order.
  [[nodiscard]] std::vector<Node> find_nodes(OpCode code) const;
  /// Every value: inputs, constants and node outputs, by id.
  [[nodiscard]] std::vector<Value> values() const;
  /// The value called `name` (its own name or `<node>_<port>`); NOT_FOUND when there is none.
  [[nodiscard]] Result<Value> value(std::string_view name) const;
  /// One edge per operator input that reads a graph input or another operator's output.
  [[nodiscard]] std::vector<Edge> edges() const;
  [[nodiscard]] std::vector<std::string> input_names() const;
  [[nodiscard]] std::vector<std::string> output_names() const;

  // ---- placement ----

  /// Places the whole graph (every node) on `device`. FAILED_PRECONDITION once finalized.
  Status to(const Device& device) {
    if (finalized()) return failed_precondition("to: the graph is finalized; place it before finalize()");
    ensure_body();
    body_->device = device;
    for (NodeDef& n : body_->def.nodes) n.device = device;
    return {};
  }

  // ---- editing and running (defined in rml/edit/) ----

  // The return types are deduced so that they are only needed once rml/edit is included.

  /// `Result<ValueCut>`: the cheapest cut through values (rml/edit/cut.hpp). INVALID_ARGUMENT
  /// when the graph has fewer than two operators or the options admit no cut.
  template <typename E = detail::GraphEditor>
  auto min_value_cut() const {
    return E::min_value_cut(*this);
  }
  template <typename E = detail::GraphEditor, typename Options>
  auto min_value_cut(const Options& options) const {
    return E::min_value_cut(*this, options);
  }
  /// `Result<std::vector<Rename>>`: merges `second` into this graph, feeding each `io_map` pair's
  /// output of this graph into the named input of `second` (rml/edit/merge.hpp). Consumes
  /// `second`; returns the names of `second` it changed.
  template <typename E = detail::GraphEditor>
  auto merge(Graph& second, const std::vector<std::pair<std::string, std::string>>& io_map = {}) {
    return E::merge_into(*this, second, io_map);
  }
  /// `Status`: dead code, constant folding, CSE, identity removal and fusion-friendly rewrites
  /// (rml/edit/optimize.hpp). FAILED_PRECONDITION once finalized.
  template <typename E = detail::GraphEditor>
  auto optimize() {
    return E::optimize(*this);
  }
  /// `Status`: type-checks and compiles the graph for run(); merge, split and extract refuse it
  /// afterwards (rml/edit/run.hpp).
  template <typename E = detail::GraphEditor>
  auto finalize() {
    return E::finalize(*this);
  }
  /// `Result<std::vector<Tensor>>`: runs a finalized graph. FAILED_PRECONDITION before finalize().
  template <typename E = detail::GraphEditor>
  auto run(const std::vector<Tensor>& inputs) const {
    return E::run(*this, inputs);
  }

  // For rml/edit and rml/exec: the shared body that views track.
  [[nodiscard]] const std::shared_ptr<detail::GraphBody>& body_ptr() {
    ensure_body();
    return body_;
  }
  [[nodiscard]] std::shared_ptr<const detail::GraphBody> body_ptr() const noexcept { return body_; }

 private:
  friend struct detail::GraphEditor;

  [[nodiscard]] const detail::GraphBody* body() const noexcept {
    static const detail::GraphBody empty;
    return body_ ? body_.get() : &empty;
  }
  void ensure_body() {
    if (!body_) body_ = std::make_shared<detail::GraphBody>();
  }

  std::shared_ptr<detail::GraphBody> body_;
};

}  // namespace rml

// The gate and the view classes need Graph complete; they define Graph's checked members.
#include "rml/ir/validate.hpp"
#include "rml/ir/views.hpp"
