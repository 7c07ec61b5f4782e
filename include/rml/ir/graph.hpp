// The graph IR: values, constants and nodes as plain reflected structs (GraphDef), and Graph,
// the object users hold, load, edit and run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/reflect.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/ir/device.hpp"

namespace rml {

/// A value's id: its index in GraphDef::values.
using ValueId = std::uint32_t;

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
using AttrValue =
    std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, std::vector<double>>;

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
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::string name;
  Attrs attrs;
  std::optional<Origin> origin;
  Device device;

  static constexpr auto fields() {
    return std::tuple{field("op", &NodeDef::op),         field("inputs", &NodeDef::inputs),
                      field("outputs", &NodeDef::outputs), field("name", &NodeDef::name),
                      field("attrs", &NodeDef::attrs),   field("origin", &NodeDef::origin),
                      field("device", &NodeDef::device)};
  }
};

/// A whole graph as data. Invariants (checked by the loader, kept by every edit): every value
/// is defined exactly once, as an input, a constant or a node output, before any node reads it.
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
    return std::tuple{field("name", &GraphDef::name),           field("producer", &GraphDef::producer),
                      field("values", &GraphDef::values),       field("inputs", &GraphDef::inputs),
                      field("outputs", &GraphDef::outputs),     field("constants", &GraphDef::constants),
                      field("nodes", &GraphDef::nodes),         field("metadata", &GraphDef::metadata)};
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
  /// The compiled form after finalize() (an rml::Executor, type-erased so ir/ needs no exec/).
  std::shared_ptr<const void> compiled;
};

}  // namespace detail

/// A graph: what load_graph and trace return, and what merge, split, extract, optimize,
/// finalize and run work on. Copying a graph copies its structure and shares its weights.
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
  /// The graph as data, for editing; bumps the epoch so existing views notice.
  [[nodiscard]] GraphDef& mutable_def() {
    ensure_body();
    ++body_->epoch;
    return body_->def;
  }
  [[nodiscard]] const std::string& name() const noexcept { return def().name; }
  [[nodiscard]] bool finalized() const noexcept { return body()->finalized; }
  /// True once merge, split or extract consumed this graph.
  [[nodiscard]] bool consumed() const noexcept { return !body()->consumed_by.empty(); }
  [[nodiscard]] const Device& device() const noexcept { return body()->device; }

  // For rml/edit and rml/exec: the shared body that views track.
  [[nodiscard]] const std::shared_ptr<detail::GraphBody>& body_ptr() {
    ensure_body();
    return body_;
  }
  [[nodiscard]] std::shared_ptr<const detail::GraphBody> body_ptr() const noexcept { return body_; }

 private:
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
