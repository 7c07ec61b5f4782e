// The definitions behind rml/edit/optimize.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/edit/optimize.hpp"

namespace rml {

namespace detail {

/// Constants larger than this are not folded (folding would store a new weight that big).
inline constexpr std::int64_t kMaxFoldedElements = 1 << 20;

/// Replaces every read of `from` by `to`.
inline void redirect(GraphDef& def, ValueId from, ValueId to) {
  for (NodeDef& n : def.nodes)
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
}

/// Removes the nodes marked in `drop`, keeping the order of the rest.
inline void erase_nodes(GraphDef& def, const std::vector<bool>& drop) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    if (drop[i]) continue;
    if (k != i) def.nodes[k] = std::move(def.nodes[i]);  // a self-move would empty the node
    ++k;
  }
  def.nodes.resize(k);
}

/// The constant defining `v`, or null.
inline const ConstantDef* constant_of(const GraphDef& def, const std::vector<ValueSource>& src, ValueId v) {
  return src[v].kind == ValueSource::Kind::constant ? &def.constants[src[v].index] : nullptr;
}

/// True when every element of constant `c` equals `x` (f32 constants only).
inline bool constant_is(const ConstantDef* c, float x) {
  if (!c || c->data.dtype() != DType::f32 || !c->data.defined()) return false;
  for (float e : c->data.span<float>())
    if (e != x) return false;
  return true;
}

/// The input a node passes through unchanged, if it is an identity on its input's type.
inline std::optional<ValueId> identity_input(const GraphDef& def, const std::vector<ValueSource>& src,
                                             const NodeDef& n) {
  if (n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  const TensorType& out = def.values[n.outputs[0]].type;
  const auto same = [&](std::size_t i) { return i < n.inputs.size() && def.values[n.inputs[i]].type == out; };
  const auto attr_ints = [&](const char* name) -> const std::vector<std::int64_t>* {
    const auto it = n.attrs.find(name);
    return it == n.attrs.end() ? nullptr : std::get_if<std::vector<std::int64_t>>(&it->second);
  };
  switch (node_op_code(n)) {
    case OpCode::Copy:
    case OpCode::Reshape:
    case OpCode::Expand:
    case OpCode::Cast:
      if (same(0)) return n.inputs[0];
      break;
    case OpCode::Concat:
      if (n.inputs.size() == 1 && same(0)) return n.inputs[0];
      break;
    case OpCode::Transpose: {
      const auto* perm = attr_ints("perm");
      bool ident = perm != nullptr && same(0);
      for (std::size_t i = 0; ident && i < perm->size(); ++i) ident = (*perm)[i] == static_cast<std::int64_t>(i);
      if (ident || (same(0) && out.shape.rank() <= 1 && !perm)) return n.inputs[0];
      break;
    }
    case OpCode::Pad: {
      const auto* pads = attr_ints("pads");
      if (pads && same(0) && std::all_of(pads->begin(), pads->end(), [](std::int64_t p) { return p == 0; }))
        return n.inputs[0];
      break;
    }
    case OpCode::Add:
      if (same(0) && constant_is(constant_of(def, src, n.inputs[1]), 0.0F)) return n.inputs[0];
      if (same(1) && constant_is(constant_of(def, src, n.inputs[0]), 0.0F)) return n.inputs[1];
      break;
    case OpCode::Sub:
      if (same(0) && constant_is(constant_of(def, src, n.inputs[1]), 0.0F)) return n.inputs[0];
      break;
    case OpCode::Mul:
      if (same(0) && constant_is(constant_of(def, src, n.inputs[1]), 1.0F)) return n.inputs[0];
      if (same(1) && constant_is(constant_of(def, src, n.inputs[0]), 1.0F)) return n.inputs[1];
      break;
    case OpCode::Div:
      if (same(0) && constant_is(constant_of(def, src, n.inputs[1]), 1.0F)) return n.inputs[0];
      break;
    default:
      break;
  }
  return std::nullopt;
}

/// Drops identities whose input sits on the node's own device (a `copy` between devices stays).
inline bool remove_identities(GraphDef& def, const Device& graph_device) {
  bool changed = false;
  std::vector<bool> is_output(def.values.size(), false), is_input(def.values.size(), false);
  for (ValueId v : def.outputs) is_output[v] = true;
  for (ValueId v : def.inputs) is_input[v] = true;
  std::vector<bool> drop(def.nodes.size(), false);
  auto src = value_sources(def);
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    NodeDef& n = def.nodes[i];
    const auto in = identity_input(def, src, n);
    if (!in || value_device(def, graph_device, src[*in]) != n.device) continue;
    const ValueId out = n.outputs[0];
    if (is_output[out]) {
      // The output keeps its name: it moves to the input value, if that value is free to take it.
      if (is_output[*in] || is_input[*in] || src[*in].kind != ValueSource::Kind::node) continue;
      def.values[*in].name = def.values[out].name;
      for (ValueId& o : def.outputs)
        if (o == out) o = *in;
      is_output[*in] = true;
    }
    redirect(def, out, *in);
    drop[i] = true;
    changed = true;
  }
  if (changed) erase_nodes(def, drop);
  return changed;
}

/// Folds operators whose inputs are all constants into constants, through the eager hook.
inline bool fold_constants(GraphDef& def, const ExecHooks* hooks) {
  if (!hooks) return false;
  bool changed = false;
  auto src = value_sources(def);
  std::vector<bool> drop(def.nodes.size(), false);
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    const NodeDef& n = def.nodes[i];
    if (n.inputs.empty() || node_op_code(n) == OpCode::count_ || node_op_code(n) == OpCode::Copy) continue;
    std::vector<Tensor> inputs;
    for (ValueId v : n.inputs)
      if (const ConstantDef* c = constant_of(def, src, v); c && c->data.defined()) inputs.push_back(c->data);
    if (inputs.size() != n.inputs.size()) continue;
    bool small = true;
    for (ValueId v : n.outputs) small = small && def.values[v].type.shape.numel() <= kMaxFoldedElements;
    if (!small) continue;
    auto out = hooks->eager(n, inputs);
    if (!out.ok() || out->size() != n.outputs.size()) continue;  // left for finalize() to report
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      const ValueId v = n.outputs[o];
      if ((*out)[o].type() != def.values[v].type) continue;
      ConstantDef c;
      c.value = v;
      c.data = std::move((*out)[o]);
      c.inline_data = c.data.numel() <= 16;
      if (!c.inline_data)  // inline data has no stored name
        c.tensor = "folded." + (n.name.empty() ? op_display_name(def, i) : n.name) + "." + std::to_string(o);
      src[v] = {ValueSource::Kind::constant, static_cast<std::uint32_t>(def.constants.size()), 0};
      def.constants.push_back(std::move(c));
    }
    drop[i] = true;
    changed = true;
  }
  if (changed) erase_nodes(def, drop);
  return changed;
}

/// Merges operators that apply the same op with the same attributes to the same inputs on one device.
inline bool eliminate_common_subexpressions(GraphDef& def) {
  bool changed = false;
  std::map<std::tuple<std::string, ValueIds, std::string, std::int32_t, std::uint8_t>, std::size_t> seen;
  std::vector<bool> is_output(def.values.size(), false);
  for (ValueId v : def.outputs) is_output[v] = true;
  std::vector<bool> drop(def.nodes.size(), false);
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    const NodeDef& n = def.nodes[i];
    auto key = std::make_tuple(n.op, n.inputs, to_debug_string(n.attrs), n.device.index,
                               static_cast<std::uint8_t>(n.device.kind));
    const auto [it, fresh] = seen.emplace(std::move(key), i);
    if (fresh) continue;
    const NodeDef& first = def.nodes[it->second];
    bool outputs_free = first.outputs.size() == n.outputs.size();
    for (ValueId v : n.outputs) outputs_free = outputs_free && !is_output[v];
    if (!outputs_free) continue;
    for (std::size_t o = 0; o < n.outputs.size(); ++o) redirect(def, n.outputs[o], first.outputs[o]);
    drop[i] = true;
    changed = true;
  }
  if (changed) erase_nodes(def, drop);
  return changed;
}

/// Drops operators and constants no output depends on, then renumbers the values densely
/// (inputs, constants, node outputs, in that order).
inline void eliminate_dead_code(GraphDef& def) {
  const auto src = value_sources(def);
  std::vector<bool> live_value(def.values.size(), false), live_node(def.nodes.size(), false);
  std::vector<ValueId> stack(def.outputs.begin(), def.outputs.end());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (live_value[v]) continue;
    live_value[v] = true;
    if (src[v].kind != ValueSource::Kind::node || live_node[src[v].index]) continue;
    live_node[src[v].index] = true;
    for (ValueId in : def.nodes[src[v].index].inputs) stack.push_back(in);
  }
  for (std::size_t i = 0; i < def.nodes.size(); ++i)
    if (live_node[i])
      for (ValueId v : def.nodes[i].outputs) live_value[v] = true;
  std::vector<ValueId> remap(def.values.size(), kNoValue);
  std::vector<ValueDef> values;
  const auto keep = [&](ValueId v) {
    if (remap[v] == kNoValue) {
      remap[v] = static_cast<ValueId>(values.size());
      values.push_back(std::move(def.values[v]));
    }
    return remap[v];
  };
  for (ValueId& v : def.inputs) v = keep(v);
  std::vector<ConstantDef> constants;
  for (ConstantDef& c : def.constants) {
    if (!live_value[c.value]) continue;
    c.value = keep(c.value);
    constants.push_back(std::move(c));
  }
  std::vector<NodeDef> nodes;
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    if (!live_node[i]) continue;
    NodeDef& n = def.nodes[i];
    for (ValueId& v : n.inputs) v = remap[v];
    for (ValueId& v : n.outputs) v = keep(v);
    nodes.push_back(std::move(n));
  }
  for (ValueId& v : def.outputs) v = remap[v];
  def.values = std::move(values);
  def.constants = std::move(constants);
  def.nodes = std::move(nodes);
}

/// For a matmul whose sole reader adds a bias computed after it, schedules the bias's
/// computation before the matmul, so the executor can fuse the add into the GEMM's epilogue.
inline bool schedule_bias_before_matmul(GraphDef& def) {
  bool changed = false;
  for (std::size_t m = 0; m < def.nodes.size(); ++m) {
    if (node_op_code(def.nodes[m]) != OpCode::MatMul || def.nodes[m].outputs.size() != 1) continue;
    const auto src = value_sources(def);
    const auto readers = value_readers(def);
    const ValueId mm = def.nodes[m].outputs[0];
    if (readers[mm].size() != 1) continue;
    const NodeDef& add = def.nodes[readers[mm][0]];
    if (node_op_code(add) != OpCode::Add || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    const ValueId bias = add.inputs[0] == mm ? add.inputs[1] : add.inputs[0];
    if (src[bias].kind != ValueSource::Kind::node || src[bias].index < m) continue;
    // The bias's cone among the nodes after the matmul; give up if it reads the matmul.
    std::vector<bool> cone(def.nodes.size(), false);
    cone[src[bias].index] = true;
    bool blocked = false;
    for (std::size_t i = src[bias].index + 1; i-- > m + 1 && !blocked;) {
      if (!cone[i]) continue;
      for (ValueId in : def.nodes[i].inputs) {
        if (in == mm) blocked = true;
        if (src[in].kind == ValueSource::Kind::node && src[in].index > m) cone[src[in].index] = true;
        if (src[in].kind == ValueSource::Kind::node && src[in].index == m) blocked = true;
      }
    }
    if (blocked) continue;
    std::vector<NodeDef> nodes;
    nodes.reserve(def.nodes.size());
    for (std::size_t i = 0; i < m; ++i) nodes.push_back(std::move(def.nodes[i]));
    for (std::size_t i = m + 1; i < def.nodes.size(); ++i)
      if (cone[i]) nodes.push_back(std::move(def.nodes[i]));
    for (std::size_t i = m; i < def.nodes.size(); ++i)
      if (!cone[i]) nodes.push_back(std::move(def.nodes[i]));
    def.nodes = std::move(nodes);
    changed = true;
  }
  return changed;
}

RML_SPLIT_API Status optimize_graph(Graph& graph) {
  if (graph.consumed())
    return invalid_argument("optimize: the graph is empty: a merge, a split or an extract consumed it");
  if (graph.finalized()) return failed_precondition("optimize: the graph is finalized; optimize before finalize()");
  RML_RETURN_IF_ERROR(check_structure(graph, "optimize"));
  GraphDef def = graph.def();  // work on a copy (weights shared): the graph changes only on success
  const ExecHooks* hooks = exec_hooks.load(std::memory_order_acquire);
  // Unnamed operators keep the names they were shown under, though their positions change.
  materialize_node_names(def);
  for (int round = 0; round < 8; ++round) {
    bool changed = remove_identities(def, graph.device());
    changed = fold_constants(def, hooks) || changed;
    changed = eliminate_common_subexpressions(def) || changed;
    if (!changed) break;
  }
  eliminate_dead_code(def);
  schedule_bias_before_matmul(def);
  if (const Status s = validate_graph(def); !s.ok())
    return internal_error("optimize: produced a graph that fails validation (a bug in rml): " + s.message());
  graph.mutable_def() = std::move(def);
  return {};
}
}  // namespace detail
}  // namespace rml
