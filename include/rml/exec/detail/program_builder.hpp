// The program builder: every node compiled and bound to its kernel, fusion, aliasing, weight
// packing and the arena plan. Defined where the kernels are (see rml/core/linkage.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "rml/check/infer.hpp"
#include "rml/core/checked.hpp"
#include "rml/exec/detail/guard.hpp"
#include "rml/exec/detail/program.hpp"
#include "rml/exec/kernel_table.hpp"
#include "rml/exec/kernels/attention.hpp"
#include "rml/exec/kernels/conv_expand.hpp"
#include "rml/exec/kernels/conv_pair.hpp"
#include "rml/exec/kernels/fused.hpp"
#include "rml/exec/memory_plan.hpp"
#include "rml/ir/graph.hpp"

namespace rml::detail {

/// Builds the program: compiles and checks every node, fuses, aliases, plans the arena.
class ProgramBuilder {
 public:
  ProgramBuilder(const GraphDef& g, const BuildOptions& options)
      : g_(g),
        threads_(options.threads),
        budget_(options.budget),
        winograd_(options.winograd),
        parallel_min_work_(options.parallel_min_work),
        widen_16bit_(options.widen_16bit_weights) {}

  Result<std::shared_ptr<Program>> build() {
    auto prog = std::make_shared<Program>();
    p_ = prog.get();
    RML_RETURN_IF_ERROR(compile_nodes());
    bind_sources();
    fuse_and_emit();
    mark_serial_steps();
    RML_RETURN_IF_ERROR(place_values());
    return prog;
  }

 private:
  // Same walk and messages as infer_types, keeping each node's kernel.
  Status compile_nodes() {
    std::vector<std::uint8_t> defined;
    RML_RETURN_IF_ERROR(define_sources(g_, defined));
    std::vector<TensorType> scratch;
    compiled_.reserve(g_.nodes.size());
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      auto c = compile_graph_node(g_, i, defined, scratch);
      if (!c.ok()) return c.error();
      compiled_.push_back(std::move(c->kernel));
    }
    RML_RETURN_IF_ERROR(check_outputs(g_, defined));
    for (const ValueDef& v : g_.values) p_->types.push_back(v.type);
    return {};
  }

  void bind_sources() {
    const std::size_t nv = g_.values.size();
    p_->home.assign(nv, ValueHome::none);
    p_->slot.assign(nv, 0);
    p_->constants.resize(nv);
    producer_.assign(nv, -1);
    readers_.assign(nv, 0);
    p_->inputs = g_.inputs;
    p_->outputs = g_.outputs;
    for (std::size_t k = 0; k < g_.inputs.size(); ++k) {
      p_->home[g_.inputs[k]] = ValueHome::input;
      p_->slot[g_.inputs[k]] = k;
      p_->input_names.push_back(g_.values[g_.inputs[k]].name);
    }
    for (const ConstantDef& c : g_.constants) {
      p_->home[c.value] = ValueHome::constant;
      p_->constants[c.value] = c.data;
    }
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      for (ValueId v : g_.nodes[i].inputs) ++readers_[v];
      producer_[g_.nodes[i].outputs[0]] = static_cast<std::int64_t>(i);
    }
    is_output_.assign(nv, 0);
    for (ValueId v : g_.outputs) {
      is_output_[v] = 1;
      p_->output_names.push_back(g_.values[v].name);
    }
  }

  /// The single node reading `v`, when exactly one does and `v` is not a graph output.
  [[nodiscard]] std::optional<std::size_t> sole_reader(ValueId v, std::size_t after) const {
    if (readers_[v] != 1 || is_output_[v]) return std::nullopt;
    for (std::size_t j = after + 1; j < g_.nodes.size(); ++j)
      for (ValueId in : g_.nodes[j].inputs)
        if (in == v) return j;
    return std::nullopt;
  }

  /// Defined before node `i` runs (a source, or produced by an earlier node).
  [[nodiscard]] bool available_at(ValueId v, std::size_t i) const {
    return producer_[v] < static_cast<std::int64_t>(i);
  }

  /// Whether step `s` is a 16-bit convolution whose kernel runs a fused residual add and unary chain
  /// over its rounded outputs, each op rounded as if it ran alone (half_epilogue).
  [[nodiscard]] static bool rounds_half_epilogue(const Step& s) noexcept {
    return s.fn == &widened_packed_conv2d<f16> || s.fn == &half_conv2d_kernel<bf16>;
  }

  /// Node j as a step of a chain over `v`: a unary op, or an elementwise binary op whose other
  /// operand is a constant f32 scalar that does not change v's type (`minimum(v, 6)` after relu).
  /// Chains run on f32, and on 16-bit values (unary ops only) after a step that rounds_half_epilogue.
  [[nodiscard]] std::optional<UnaryStep> chain_step(std::size_t j, ValueId v, bool half) const {
    const OpCode op = compiled_[j].op;
    const DType dt = p_->types[v].dtype;
    if (dt != DType::f32 && !(half && is_half_dtype(dt))) return std::nullopt;
    if (is_unary(op)) return UnaryStep{op, compiled_[j].as<UnaryPlan>().gelu_tanh};
    if (dt != DType::f32) return std::nullopt;  // a 16-bit chain takes unary ops only
    const bool scalar_op = op == OpCode::Add || op == OpCode::Sub || op == OpCode::Mul || op == OpCode::Div ||
                           op == OpCode::Maximum || op == OpCode::Minimum;
    const NodeDef& node = g_.nodes[j];
    if (!scalar_op || node.inputs.size() != 2 || node.inputs[0] == node.inputs[1]) return std::nullopt;
    const bool left = node.inputs[1] == v;
    const ValueId c = left ? node.inputs[0] : node.inputs[1];
    const TensorType& ct = p_->types[c];
    if (p_->home[c] != ValueHome::constant || ct.dtype != DType::f32 || ct.shape.numel() != 1 ||
        p_->types[v].dtype != DType::f32 || p_->types[node.outputs[0]] != p_->types[v])
      return std::nullopt;
    return UnaryStep{op, false, p_->constants[c].data<float>()[0], left};
  }

  /// Extends `s` with the chain steps (see chain_step) that alone read its output; returns the last
  /// node fused.
  std::size_t fuse_unary_chain(Step& s, std::size_t last) {
    const bool half = rounds_half_epilogue(s);
    for (;;) {
      auto j = sole_reader(s.output, last);
      if (!j) return last;
      const auto step = chain_step(*j, s.output, half);
      if (!step) return last;
      s.chain.push_back(*step);
      s.output = g_.nodes[*j].outputs[0];
      absorbed_[*j] = 1;
      ++s.node_count;
      last = *j;
    }
  }

  /// matmul followed by `add` of a row vector [n] (or [1, ..., 1, n]) becomes a bias epilogue.
  void fuse_bias(Step& s, std::size_t i) {
    if (s.kernel.dtype != DType::f32) return;  // the epilogue's bias is f32
    auto j = sole_reader(s.output, i);
    if (!j || compiled_[*j].op != OpCode::Add) return;
    const NodeDef& add = g_.nodes[*j];
    const ValueId other = add.inputs[0] == s.output ? add.inputs[1] : add.inputs[0];
    if (add.inputs[0] == add.inputs[1]) return;
    const TensorType& bt = p_->types[other];
    const auto& mm = compiled_[i].as<MatMulPlan>();
    const Shape& out = p_->types[s.output].shape;
    const bool row_vector = bt.shape.rank() >= 1 && bt.shape.dims().back() == mm.n && bt.shape.numel() == mm.n &&
                            bt.shape.rank() <= out.rank() && out.rank() >= 1 && out.dims().back() == mm.n;
    if (!row_vector || p_->types[add.outputs[0]] != p_->types[s.output] || !available_at(other, i)) return;
    s.bias = other;
    s.inputs.push_back(other);  // read by the step, for liveness
    s.output = add.outputs[0];
    absorbed_[*j] = 1;
    ++s.node_count;
  }

  /// A conv2d over packed f32 weights, or a 16-bit one that rounds_half_epilogue, followed by `add`
  /// of a tensor of the output's own type (a residual connection) adds it in the epilogue, before
  /// any activation that follows. The tensor must be defined before the conv; the arena never
  /// places the output over it (a step's output and inputs are live together).
  void fuse_residual(Step& s, std::size_t i) {
    if (!(s.kernel.dtype == DType::f32 && s.packed) && !rounds_half_epilogue(s)) return;
    auto j = sole_reader(s.output, i);
    if (!j || compiled_[*j].op != OpCode::Add) return;
    const NodeDef& add = g_.nodes[*j];
    if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return;
    const ValueId other = add.inputs[0] == s.output ? add.inputs[1] : add.inputs[0];
    if (p_->types[other] != p_->types[s.output] || p_->types[add.outputs[0]] != p_->types[s.output] ||
        !available_at(other, i))
      return;
    s.residual = other;
    s.inputs.push_back(other);  // read by the step, for liveness
    s.output = add.outputs[0];
    absorbed_[*j] = 1;
    ++s.node_count;
  }

  /// Whether conv2d node n's weights, and its bias when it has one, are constants.
  [[nodiscard]] bool constant_conv_params(const NodeDef& n, bool has_bias) const {
    const auto constant = [&](std::size_t k) {
      return k < n.inputs.size() && p_->home[n.inputs[k]] == ValueHome::constant;
    };
    return constant(1) && (!has_bias || constant(2));
  }
  /// Conv2d node n's constant f32 weights, and its bias or null (constant_conv_params holds).
  [[nodiscard]] const float* conv_weights(const NodeDef& n) const { return p_->constants[n.inputs[1]].data<float>(); }
  [[nodiscard]] const float* conv_bias(const NodeDef& n, bool has_bias) const {
    return has_bias ? p_->constants[n.inputs[2]].data<float>() : nullptr;
  }

  /// A 1x1 f32 convolution whose output an add sums with the output of a later 1x1 projection (at
  /// any stride) that alone feeds the add, its input defined before the convolution: ResNet's
  /// bottleneck exit, conv3 + downsample. Both run as one product over both inputs
  /// (paired_conv2d_kernel), so the sum is written once rather than written, read back as the
  /// projection's residual and written again. The step takes the convolution's place, reading both
  /// inputs; the projection and the add are absorbed (their outputs' only reader is the add, and
  /// the add's output is defined nowhere else). Each output sums a's depth then d's in one chain,
  /// and the biases summed: not the unpaired steps' bits, within the conformance tolerances.
  bool fuse_projection(Step& s, std::size_t i) {
    const NodeDef& node = g_.nodes[i];
    if (s.kernel.dtype != DType::f32) return false;
    const auto& a = s.kernel.as<Conv2dPlan>();
    if (!constant_conv_params(node, a.has_bias) || channel_scale_[i]) return false;
    const auto j = sole_reader(s.output, i);
    if (!j || compiled_[*j].op != OpCode::Add) return false;
    const NodeDef& add = g_.nodes[*j];
    if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return false;
    const ValueId other = add.inputs[0] == s.output ? add.inputs[1] : add.inputs[0];
    const std::int64_t d = producer_[other];
    if (d <= static_cast<std::int64_t>(i) || absorbed_[static_cast<std::size_t>(d)]) return false;
    const auto dn = static_cast<std::size_t>(d);
    const NodeDef& proj = g_.nodes[dn];
    if (compiled_[dn].op != OpCode::Conv2d || compiled_[dn].dtype != DType::f32 || sole_reader(other, dn) != j ||
        channel_scale_[dn])
      return false;
    const auto& dp = compiled_[dn].as<Conv2dPlan>();
    if (!conv_pair_fits(a, dp) || !constant_conv_params(proj, dp.has_bias) || !available_at(proj.inputs[0], i) ||
        p_->types[other] != p_->types[s.output] || p_->types[add.outputs[0]] != p_->types[s.output])
      return false;
    auto pair = pair_conv_weights(a, conv_weights(node), conv_bias(node, a.has_bias), dp, conv_weights(proj),
                                  conv_bias(proj, dp.has_bias), threads_);
    s.fn = &paired_conv2d_kernel;
    s.inputs = {node.inputs[0], proj.inputs[0]};
    s.scratch_bytes = pair->scratch_bytes();
    s.part_bytes = pair->packed->part_bytes();
    s.part_count = pair->packed->part_count();
    s.packed = std::move(pair);
    s.output = add.outputs[0];
    absorbed_[dn] = absorbed_[*j] = 1;
    s.node_count += 2;
    return true;
  }

  /// A 1x1 f32 convolution over packed weights with no residual (and its chain, ending at node
  /// `last`) whose output only a depthwise f32 convolution reads, both with constant weights and
  /// biases, the pair as expand_depthwise_fits takes it: MobileNetV2's and EfficientNet's expansion
  /// and the depthwise convolution after it run as one step (expanded_depthwise_kernel), in strips
  /// of rows a block of channels at a time, so the expanded tensor is never written. The
  /// expansion's chain goes into the step's constants, the depthwise convolution's chain becomes
  /// the step's; both must be empty, a clamp or SiLU (finish_of), which give the same bits however
  /// the rows split. Each value is computed as the unfused steps compute it (the same bits) but
  /// SiLU's after the depthwise convolution: through the packet exp everywhere, where that pass ran
  /// its tails through std::exp.
  bool fuse_depthwise(Step& s, std::size_t i, std::size_t last) {
    if (s.kernel.dtype != DType::f32 || s.fn != &conv2d_kernel<float> || !s.packed || s.residual >= 0) return false;
    const NodeDef& node = g_.nodes[i];
    const auto j = sole_reader(s.output, last);
    if (!j || compiled_[*j].op != OpCode::Conv2d || compiled_[*j].dtype != DType::f32) return false;
    const NodeDef& dw = g_.nodes[*j];
    const auto& e = s.kernel.as<Conv2dPlan>();
    const auto& d = compiled_[*j].as<Conv2dPlan>();
    if (dw.inputs[0] != s.output || !expand_depthwise_fits(e, d) || !constant_conv_params(node, e.has_bias) ||
        !constant_conv_params(dw, d.has_bias))
      return false;
    const auto simple = [](std::span<const UnaryStep> chain) {
      return finish_of(Epilogue{nullptr, chain, nullptr}, BiasAlong::rows).has_value();
    };
    if (!simple(s.chain)) return false;
    Step t = s;
    t.fn = &expanded_depthwise_kernel;
    t.inputs = {node.inputs[0]};
    t.chain.clear();
    t.output = dw.outputs[0];
    ++t.node_count;
    std::vector<std::uint8_t> absorbed = absorbed_;
    absorbed_[*j] = 1;
    const std::size_t last_fused = fuse_unary_chain(t, *j);
    if (!simple(t.chain)) {  // another chain after the depthwise convolution: the steps stay apart
      absorbed_ = std::move(absorbed);
      return false;
    }
    // Bands of rows when a convolution alone reads the output (a 1x1 projection, split by
    // positions), else channels (a squeeze and excitation's mean and product read whole planes).
    const auto reader = sole_reader(t.output, last_fused);
    const bool by_channels = !reader || compiled_[*reader].op != OpCode::Conv2d;
    auto fused = expand_depthwise_weights(e, conv_weights(node), conv_bias(node, e.has_bias), s.chain, d,
                                          conv_weights(dw), conv_bias(dw, d.has_bias), threads_, by_channels);
    t.scratch_bytes = 0;
    t.part_bytes = fused->part_bytes();
    t.part_count = fused->parts;
    t.packed = std::move(fused);
    s = std::move(t);
    return true;
  }

  /// A conv2d over packed f32 weights, with no residual and an epilogue its GEMM applies as it
  /// stores, followed by a max pool that alone reads its output, runs the pool inside
  /// (pooled_conv2d) when with_max_pool takes the pair: the convolution's output is then never
  /// written, only the pool's.
  ///
  /// An f16 convolution through the f32 kernels (widened_packed_conv2d) too, with no chain or a
  /// relu: it then pools its f32 outputs and rounds the pool's. Rounding to f16 is monotonic and
  /// keeps 0, so the maximum of the rounded values is the rounded maximum, and relu commutes with
  /// the rounding as well: the values of the unfused steps, which round each op's result.
  void fuse_max_pool(Step& s, std::size_t i) {
    const bool widened = s.fn == &widened_packed_conv2d<f16>;
    if (!widened && s.fn != &conv2d_kernel<float>) return;  // not a pair, a scaled or a 16-bit step
    if (!s.packed || s.residual >= 0 || !finish_of(Epilogue{nullptr, s.chain, nullptr}, BiasAlong::rows)) return;
    if (widened && !(s.chain.empty() || (s.chain.size() == 1 && s.chain[0].op == OpCode::Relu))) return;
    auto j = sole_reader(s.output, i);
    if (!j || compiled_[*j].op != OpCode::MaxPool2d || compiled_[*j].dtype != s.kernel.dtype) return;
    const auto& cp = s.kernel.as<Conv2dPlan>();
    const auto& pw = *static_cast<const PackedConvWeights*>(s.packed.get());
    auto fused = with_max_pool(cp, pw, compiled_[*j].as<Pool2dPlan>());
    if (!fused) return;
    set_conv_scratch(s, *fused, widened ? widened_conv_scratch_bytes(cp, *fused) : fused->scratch_bytes());
    s.packed = std::move(fused);
    s.output = g_.nodes[*j].outputs[0];
    absorbed_[*j] = 1;
    ++s.node_count;
  }

  /// The value of a constant f32 scalar (one element, any rank), or none.
  [[nodiscard]] std::optional<float> scalar_constant(ValueId v) const {
    const TensorType& t = p_->types[v];
    if (p_->home[v] != ValueHome::constant || t.dtype != DType::f32 || t.shape.numel() != 1) return std::nullopt;
    return p_->constants[v].data<float>()[0];
  }

  /// A constant f32 of `width` values laid along the trailing dimensions of `x` (leading 1s allowed):
  /// what layer norm's weight and bias look like.
  [[nodiscard]] bool trailing_constant(ValueId v, const Shape& x, std::int64_t width) const {
    const TensorType& t = p_->types[v];
    if (p_->home[v] != ValueHome::constant || t.dtype != DType::f32 || t.shape.numel() != width) return false;
    const Dims& d = t.shape.dims();
    std::size_t lead = 0;
    while (lead < d.size() && d[lead] == 1) ++lead;
    const std::size_t kept = d.size() - lead;
    if (kept > x.rank()) return false;
    return std::equal(d.begin() + static_cast<std::ptrdiff_t>(lead), d.end(),
                      x.dims().end() - static_cast<std::ptrdiff_t>(kept));
  }

  /// The nodes reading `v`, each once, in order.
  [[nodiscard]] std::vector<std::size_t> readers_of(ValueId v, std::size_t after) const {
    std::vector<std::size_t> out;
    for (std::size_t j = after + 1; j < g_.nodes.size(); ++j)
      if (std::find(g_.nodes[j].inputs.begin(), g_.nodes[j].inputs.end(), v) != g_.nodes[j].inputs.end())
        out.push_back(j);
    return out;
  }

  /// Node j is binary `op` over exactly `a` and `b` (either order unless `ordered`), typed like `v`.
  [[nodiscard]] bool is_binary_of(std::size_t j, OpCode op, ValueId a, ValueId b, ValueId typed_like,
                                  bool ordered = false) const {
    const ValueIds& in = g_.nodes[j].inputs;
    if (compiled_[j].op != op || in.size() != 2) return false;
    const bool forward = in[0] == a && in[1] == b, backward = !ordered && in[0] == b && in[1] == a;
    return (forward || backward) && p_->types[g_.nodes[j].outputs[0]] == p_->types[typed_like];
  }

  /// The layer-norm chain as the exporters lower nn.LayerNorm (rml_export/lower.py), starting at its
  /// first mean (node i) over the trailing axes of x, keepdims:
  ///   mu = mean(x); c = x - mu; var = mean(c * c | pow(c, 2)); r = rsqrt(var + eps); y = c * r
  ///   (or s = sqrt(var + eps); y = c / s), then optionally y * gamma and y + beta (constants of the
  /// normalised width). Every intermediate must have no reader outside the chain and not be an output;
  /// anything else leaves the ops to run one by one. Returns whether it fused.
  bool fuse_layer_norm(Step& s, std::size_t i) {
    const ValueId x = g_.nodes[i].inputs[0], mu = g_.nodes[i].outputs[0];
    const TensorType& xt = p_->types[x];
    const auto& rp = compiled_[i].as<ReducePlan>();
    if (xt.dtype != DType::f32 || !rp.simple || rp.inner != 1 || rp.reduce <= 0 ||
        p_->types[mu].shape.rank() != xt.shape.rank())
      return false;
    const auto sub = sole_reader(mu, i);
    if (!sub || !is_binary_of(*sub, OpCode::Sub, x, mu, x, true)) return false;
    const ValueId c = g_.nodes[*sub].outputs[0];
    const auto c_readers = readers_of(c, *sub);
    if (is_output_[c] || c_readers.size() != 2) return false;
    const std::size_t sq = c_readers[0], fin = c_readers[1];
    const NodeDef& sq_node = g_.nodes[sq];
    const bool by_mul = is_binary_of(sq, OpCode::Mul, c, c, x);
    const bool by_pow = compiled_[sq].op == OpCode::Pow && sq_node.inputs.size() == 2 && sq_node.inputs[0] == c &&
                        sq_node.inputs[1] != c && scalar_constant(sq_node.inputs[1]) == 2.0f &&
                        p_->types[sq_node.outputs[0]] == xt;
    if (!(by_mul || by_pow) || readers_[c] != (by_mul ? 3u : 2u)) return false;
    const auto mean2 = sole_reader(sq_node.outputs[0], sq);
    if (!mean2 || compiled_[*mean2].op != OpCode::Mean) return false;
    const auto& rp2 = compiled_[*mean2].as<ReducePlan>();
    const ValueId var = g_.nodes[*mean2].outputs[0];
    if (!rp2.simple || rp2.inner != 1 || rp2.reduce != rp.reduce || rp2.outer != rp.outer ||
        p_->types[var] != p_->types[mu])
      return false;
    const auto add = sole_reader(var, *mean2);
    if (!add || compiled_[*add].op != OpCode::Add || g_.nodes[*add].inputs.size() != 2) return false;
    const NodeDef& add_node = g_.nodes[*add];
    const ValueId eps_v = add_node.inputs[0] == var ? add_node.inputs[1] : add_node.inputs[0];
    const auto eps = scalar_constant(eps_v);
    if (!eps || !is_binary_of(*add, OpCode::Add, var, eps_v, var)) return false;
    const ValueId ve = add_node.outputs[0];
    const auto root_node = sole_reader(ve, *add);
    if (!root_node || (compiled_[*root_node].op != OpCode::Rsqrt && compiled_[*root_node].op != OpCode::Sqrt) ||
        p_->types[g_.nodes[*root_node].outputs[0]] != p_->types[var])
      return false;
    const bool divide = compiled_[*root_node].op == OpCode::Sqrt;
    const ValueId root_v = g_.nodes[*root_node].outputs[0];
    if (sole_reader(root_v, *root_node) != fin ||
        !(divide ? is_binary_of(fin, OpCode::Div, c, root_v, x, true) : is_binary_of(fin, OpCode::Mul, c, root_v, x)))
      return false;
    auto plan = std::make_shared<LayerNormPlan>();
    plan->rows = rp.outer, plan->width = rp.reduce, plan->eps = *eps, plan->divide = divide;
    std::vector<std::size_t> chain = {*sub, sq, *mean2, *add, *root_node, fin};
    ValueId y = g_.nodes[fin].outputs[0];
    s.inputs = {x};
    // Optional weight, then bias: a mul, then an add, by a constant of the normalised width.
    for (const OpCode op : {OpCode::Mul, OpCode::Add}) {
      const auto j = sole_reader(y, chain.back());
      if (!j || compiled_[*j].op != op || g_.nodes[*j].inputs.size() != 2) continue;
      const ValueIds& in = g_.nodes[*j].inputs;
      const ValueId other = in[0] == y ? in[1] : in[0];
      if (!trailing_constant(other, xt.shape, rp.reduce) || !is_binary_of(*j, op, y, other, x)) continue;
      (op == OpCode::Mul ? plan->has_gamma : plan->has_beta) = true;
      s.inputs.push_back(other);
      chain.push_back(*j);
      y = g_.nodes[*j].outputs[0];
    }
    for (std::size_t j : chain) absorbed_[j] = 1;
    s.fn = &layer_norm_kernel;
    s.output = y;
    s.packed = std::move(plan);
    s.node_count = 1 + chain.size();
    return true;
  }

  /// An operand read in place: operand dim k is dim perm[k] of `base` (contiguous), through the
  /// transposes listed (each read by the next alone, and not an output).
  struct PermutedView {
    ValueId base = 0;
    Dims perm;
    std::vector<std::size_t> transposes;
  };

  /// The permutation transpose node j applies: its output dim k is its input's dim perm[k].
  [[nodiscard]] Dims transpose_perm(std::size_t j) const {
    const NodeDef& t = g_.nodes[j];
    if (const auto it = t.attrs.find("perm"); it != t.attrs.end())
      if (const auto* perm = std::get_if<std::vector<std::int64_t>>(&it->second)) return *perm;  // checked at compile
    const std::size_t rank = p_->types[t.inputs[0]].shape.rank();
    Dims perm(rank);
    for (std::size_t k = 0; k < rank; ++k) perm[k] = static_cast<std::int64_t>(rank - 1 - k);
    return perm;
  }

  /// `v` as read directly, then through each transpose that produces it alone (up to three).
  [[nodiscard]] std::vector<PermutedView> views_of(ValueId v) const {
    PermutedView view{v, Dims(p_->types[v].shape.rank()), {}};
    for (std::size_t k = 0; k < view.perm.size(); ++k) view.perm[k] = static_cast<std::int64_t>(k);
    std::vector<PermutedView> out = {view};
    for (int depth = 0; depth < 3; ++depth) {
      const std::int64_t t = producer_[view.base];
      if (t < 0 || compiled_[static_cast<std::size_t>(t)].op != OpCode::Transpose ||
          absorbed_[static_cast<std::size_t>(t)] || readers_[view.base] != 1 || is_output_[view.base])
        break;
      const Dims tp = transpose_perm(static_cast<std::size_t>(t));
      for (std::int64_t& k : view.perm) k = tp[static_cast<std::size_t>(k)];
      view.base = g_.nodes[static_cast<std::size_t>(t)].inputs[0];
      view.transposes.push_back(static_cast<std::size_t>(t));
      out.push_back(view);
    }
    return out;
  }

  /// Element strides of the operand `dims` (strides `st`) aligned to the right of a rank-`rank` result,
  /// 0 where the operand is missing or has size 1 (broadcast), as an AttentionOperand: batch strides,
  /// then the row and column strides of its trailing matrix. A `matrix` operand (Q, K^T, V, the output)
  /// is as tall and wide as the result: a size-1 row or column gets a stride Eigen's maps accept.
  [[nodiscard]] static AttentionOperand aligned_operand(const Dims& dims, const Dims& st, std::size_t rank,
                                                        bool matrix = true) {
    Dims s(rank, 0);
    const std::size_t off = rank - dims.size();
    for (std::size_t k = 0; k < dims.size(); ++k) s[off + k] = dims[k] == 1 ? 0 : st[k];
    AttentionOperand o;
    o.batch.assign(s.begin(), s.end() - 2);
    o.row = s[rank - 2], o.col = s[rank - 1];
    if (matrix) {
      const std::int64_t rows = dims[dims.size() - 2], cols = dims.back();
      if (cols == 1) o.col = 1;
      if (rows == 1) o.row = cols;
    }
    return o;
  }

  [[nodiscard]] AttentionOperand operand_of(const PermutedView& w, std::size_t rank) const {
    const Dims& bd = p_->types[w.base].shape.dims();
    const Dims cs = contiguous_strides(bd);
    Dims dims, st;
    for (std::int64_t k : w.perm) {
      dims.push_back(bd[static_cast<std::size_t>(k)]);
      st.push_back(cs[static_cast<std::size_t>(k)]);
    }
    return aligned_operand(dims, st, rank);
  }

  /// The attention block as the exporters emit it (rml_export/lower.py for nn.MultiheadAttention and
  /// hand-written heads), from its first matmul, node i:
  ///   s = matmul(q, kt); [s = s * c | c * s | s / c, c a constant f32 scalar]; [s = s + mask | mask + s,
  ///   mask any f32 value broadcast to s; or s = where(cond, fill, s) | where(cond, s, fill), cond bool or
  ///   f32 broadcast to s, fill a constant f32 scalar]; p = softmax(s) over the last axis; o = matmul(p, v),
  /// every intermediate read by the next op alone and not an output, with q, kt, v and the mask defined
  /// before node i. Transposes producing q, kt or v, and one reading o, are absorbed as strides when
  /// rows stay contiguous. Fills attention_at_ and marks the absorbed nodes; the step runs at node i.
  void fuse_attention(std::size_t i) {
    const NodeDef& mm1 = g_.nodes[i];
    if (absorbed_[i] || transposed_weight_[i] >= 0 || mm1.inputs.size() != 2 || mm1.inputs[0] == mm1.inputs[1]) return;
    const ValueId qv = mm1.inputs[0], ktv = mm1.inputs[1];
    ValueId cur = mm1.outputs[0];
    const TensorType st = p_->types[cur];
    const std::size_t rank = st.shape.rank();
    if (st.dtype != DType::f32 || rank < 2 || p_->types[qv].shape.rank() < 2 || p_->types[ktv].shape.rank() < 2) return;
    const Dims& sd = st.shape.dims();
    const std::int64_t sq = sd[rank - 2], sk = sd[rank - 1], d = p_->types[qv].shape.dims().back();
    auto plan = std::make_shared<AttentionPlan>();
    std::vector<std::size_t> chain;
    std::size_t last = i;
    const auto next = [&](OpCode op) -> std::optional<std::size_t> {
      const auto j = sole_reader(cur, last);
      if (!j || compiled_[*j].op != op || absorbed_[*j]) return std::nullopt;
      return j;
    };
    const auto take = [&](std::size_t j) {
      chain.push_back(j);
      cur = g_.nodes[j].outputs[0];
      last = j;
    };
    // Scale: by a constant scalar, multiplied on either side or divided on the right.
    for (const OpCode op : {OpCode::Mul, OpCode::Div}) {
      const auto j = next(op);
      if (!j) continue;
      const ValueIds& in = g_.nodes[*j].inputs;
      const ValueId other = in[0] == cur ? in[1] : in[0];
      const auto c = scalar_constant(other);
      if (!c || !is_binary_of(*j, op, cur, other, cur, op == OpCode::Div)) return;  // not a scale: no fusion
      plan->scale_kind = op == OpCode::Mul ? AttentionPlan::Scale::mul : AttentionPlan::Scale::div;
      plan->scale = *c;
      take(*j);
      break;
    }
    ValueId mask = 0;
    if (const auto j = next(OpCode::Add)) {
      const ValueIds& in = g_.nodes[*j].inputs;
      mask = in[0] == cur ? in[1] : in[0];
      if (p_->types[mask].dtype != DType::f32 || !available_at(mask, i) ||
          !is_binary_of(*j, OpCode::Add, cur, mask, cur))
        return;
      plan->mask_kind = AttentionPlan::Mask::add;
      take(*j);
    } else if (const auto w = next(OpCode::Where)) {
      // A masked fill: where(c, fill, s) or where(c, s, fill), fill a constant f32 scalar.
      const ValueIds& in = g_.nodes[*w].inputs;
      mask = in[0];
      const bool s_second = in[2] == cur && in[1] != cur;
      const auto fill = scalar_constant(s_second ? in[1] : in[2]);
      const DType cd = p_->types[mask].dtype;
      if (mask == cur || !(s_second || (in[1] == cur && in[2] != cur)) || !fill ||
          (cd != DType::f32 && cd != DType::boolean) || !available_at(mask, i) ||
          p_->types[g_.nodes[*w].outputs[0]] != st)
        return;
      plan->mask_kind = s_second ? AttentionPlan::Mask::fill_true : AttentionPlan::Mask::fill_false;
      plan->bool_condition = cd == DType::boolean;
      plan->fill = *fill;
      take(*w);
    }
    if (plan->mask_kind != AttentionPlan::Mask::none)
      plan->mask =
          aligned_operand(p_->types[mask].shape.dims(), contiguous_strides(p_->types[mask].shape.dims()), rank, false);
    const auto sm = next(OpCode::Softmax);
    if (!sm) return;
    const auto& ap = compiled_[*sm].as<AxisPlan>();
    if (ap.inner != 1 || ap.axis != sk || p_->types[g_.nodes[*sm].outputs[0]] != st) return;
    take(*sm);
    const auto mm2 = next(OpCode::MatMul);
    if (!mm2 || g_.nodes[*mm2].inputs[0] != cur || g_.nodes[*mm2].inputs[1] == cur) return;
    const ValueId vv = g_.nodes[*mm2].inputs[1];
    const TensorType& vt = p_->types[vv];
    take(*mm2);
    const TensorType& ot = p_->types[cur];
    if (vt.dtype != DType::f32 || vt.shape.rank() < 2 || ot.shape.rank() != rank ||
        !std::equal(sd.begin(), sd.end() - 1, ot.shape.dims().begin()))
      return;
    const std::int64_t dv = ot.shape.dims().back();
    if (sq <= 0 || sk <= 0 || d <= 0 || dv <= 0) return;
    // Q, K^T and V in place: the deepest view whose rows are contiguous (K^T's columns or rows).
    const auto pick = [&](ValueId v, auto&& usable) -> std::optional<PermutedView> {
      auto views = views_of(v);
      for (auto it = views.rbegin(); it != views.rend(); ++it)
        if (available_at(it->base, i) && usable(operand_of(*it, rank))) return *it;
      return std::nullopt;
    };
    const auto rows_contiguous = [](const AttentionOperand& o) { return o.col == 1; };
    const auto q_view = pick(qv, rows_contiguous);
    const auto k_view = pick(ktv, [&](const AttentionOperand& o) { return o.col == 1 || o.row == 1 || d == 1; });
    const auto v_view = pick(vv, rows_contiguous);
    if (!q_view || !k_view || !v_view) return;
    plan->q = operand_of(*q_view, rank);
    plan->k = operand_of(*k_view, rank);
    plan->v = operand_of(*v_view, rank);
    plan->k_rows = plan->k.col != 1;  // then K^T's rows have stride 1: K's rows are contiguous
    // The output, or the transpose that alone reads it, written through strides.
    const Dims& od = ot.shape.dims();
    plan->out = aligned_operand(od, contiguous_strides(od), rank);
    if (const auto t = next(OpCode::Transpose)) {
      const Dims tp = transpose_perm(*t);
      const Dims tcs = contiguous_strides(p_->types[g_.nodes[*t].outputs[0]].shape.dims());
      Dims st_out(rank, 0);
      for (std::size_t m = 0; m < rank; ++m) st_out[static_cast<std::size_t>(tp[m])] = tcs[m];
      const AttentionOperand o = aligned_operand(od, st_out, rank);
      if (o.col == 1) {
        plan->out = o;
        take(*t);
      }
    }
    plan->sq = sq, plan->sk = sk, plan->d = d, plan->dv = dv;
    plan->batch_dims.assign(sd.begin(), sd.end() - 2);
    for (std::int64_t b : plan->batch_dims) plan->batches *= b;
    // A score block of up to 64 rows and 64 KiB, one per thread.
    plan->block_rows = std::clamp<std::int64_t>(16384 / sk, 1, std::min<std::int64_t>(64, sq));
    plan->threads = threads_;
    const auto bytes = checked_mul(plan->block_floats(), static_cast<std::int64_t>(sizeof(float)) * threads_);
    if (!bytes) return;
    Step s;
    s.kernel = compiled_[i];
    s.fn = &attention_kernel;
    s.inputs = {q_view->base, k_view->base, v_view->base};
    if (plan->mask_kind != AttentionPlan::Mask::none) s.inputs.push_back(mask);
    s.output = cur;
    s.first_node = i;
    s.scratch_bytes = static_cast<std::size_t>(*bytes);
    for (const auto* view : {&*q_view, &*k_view, &*v_view})
      chain.insert(chain.end(), view->transposes.begin(), view->transposes.end());
    s.node_count = 1 + chain.size();
    s.packed = std::move(plan);
    for (std::size_t j : chain) absorbed_[j] = 1;
    attention_at_[i] = static_cast<std::int64_t>(attention_steps_.size());
    attention_steps_.push_back(std::move(s));
  }

  void find_attention() {
    attention_at_.assign(g_.nodes.size(), -1);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (compiled_[i].op == OpCode::MatMul && compiled_[i].dtype == DType::f32) fuse_attention(i);
  }

  /// `v` is one value per channel of `x` ([n, c, h, w]) broadcast over the rest, the same for every
  /// image: f32 of c values, its dimensions aligned to x's right 1, c, 1, 1 (leading ones dropped).
  [[nodiscard]] bool per_channel_of(ValueId v, const Shape& x) const {
    const TensorType& t = p_->types[v];
    if (t.dtype != DType::f32 || x.rank() != 4 || t.shape.rank() > 4) return false;
    const Dims& d = t.shape.dims();
    const std::size_t skip = 4 - d.size();  // x's leading axes that v has no dimension for
    for (std::size_t a = skip; a < 4; ++a)
      if (d[a - skip] != (a == 1 ? x.dims()[1] : 1)) return false;
    return true;
  }

  /// A product x * s (either order) whose only reader is a 1x1 f32 convolution with constant
  /// weights that reads it as its input, s one scale per channel of x (per_channel_of), and the
  /// convolution with at most a quarter as many output channels as positions: the convolution runs
  /// over x with its weights scaled by s at each run (scaled_conv2d_kernel), and the product is
  /// absorbed. A squeeze-and-excitation's gate before its projection (EfficientNet-B0's): the
  /// product read and wrote c * plane floats, the scaling reads and writes o * c, which the product
  /// then reads from L2 rather than from where they were packed. In-model profiles (Zen 5, 1 thread,
  /// product and projection against the fused step, µs): onto 112 x 112 164 -> 92, 56 x 56 121 -> 73
  /// and 154 -> 113, 28 x 28 54 -> 49 and 96 -> 80; onto 14 x 14 (o 80-112, 196 positions) 46 -> 46,
  /// 89 -> 90, 98 -> 87, 118 -> 134, 164 -> 165, 176 -> 187, hence the quarter. Each output sums
  /// w * s * x with the weight and scale multiplied first: not the unfused steps' bits, within the
  /// conformance tolerances. A convolution so marked is never paired (fuse_projection).
  void find_channel_scales() {
    channel_scale_.assign(g_.nodes.size(), std::nullopt);
    for (std::size_t m = 0; m < g_.nodes.size(); ++m) {
      const NodeDef& mul = g_.nodes[m];
      if (absorbed_[m] || compiled_[m].op != OpCode::Mul || compiled_[m].dtype != DType::f32 || mul.inputs.size() != 2)
        continue;
      const auto j = sole_reader(mul.outputs[0], m);
      if (!j || absorbed_[*j] || compiled_[*j].op != OpCode::Conv2d || g_.nodes[*j].inputs[0] != mul.outputs[0])
        continue;
      // An f32 convolution whose weights pack (so its step is conv2d_kernel's over them until
      // fuse_channel_scale), and as a 1x1 one never through Winograd, im2col or a subsampled copy.
      const auto& cp = compiled_[*j].as<Conv2dPlan>();
      if (!conv_is_pointwise(cp) || cp.groups != 1 || !constant_conv_params(g_.nodes[*j], cp.has_bias) ||
          !packs_conv_weights(compiled_[*j], g_.nodes[*j]) || 4 * cp.o > cp.oh * cp.ow)
        continue;
      const TensorType& y = p_->types[mul.outputs[0]];
      for (const auto& [x, scale] : {std::pair{mul.inputs[0], mul.inputs[1]}, std::pair{mul.inputs[1], mul.inputs[0]}})
        if (p_->types[x] == y && x != scale && per_channel_of(scale, y.shape)) {
          channel_scale_[*j] = ChannelScale{x, scale};
          absorbed_[m] = 1;
          break;
        }
    }
  }

  /// Conv2d node i's step over its packed weights reads the product's operands in place of the
  /// product (find_channel_scales), scaling its weights at each run: the scaled copy goes first in
  /// the step's scratch.
  void fuse_channel_scale(Step& s, std::size_t i) {
    if (!channel_scale_[i]) return;
    const auto* pw = static_cast<const PackedConvWeights*>(s.packed.get());  // set: find_channel_scales
    s.fn = &scaled_conv2d_kernel;
    s.inputs[0] = channel_scale_[i]->x;
    s.inputs.push_back(channel_scale_[i]->scale);  // after the bias: scaled_conv2d_kernel's operand
    s.scratch_bytes += static_cast<std::size_t>(scaled_weights_floats(*pw)) * sizeof(float);
    ++s.node_count;
  }

  /// A matmul with a constant 2-D right-hand side (or the transpose of one, found by
  /// find_transposed_weights) and enough rows for GEMM packs it now.
  void pack_weights_of(Step& s, const NodeDef& node, std::size_t i) {
    const auto& mm = s.kernel.as<MatMulPlan>();
    ValueId b = node.inputs[1];
    const bool transposed = transposed_weight_[i] >= 0;
    if (transposed) b = static_cast<ValueId>(transposed_weight_[i]);
    if (s.kernel.dtype != DType::f32 || p_->home[b] != ValueHome::constant || !packable(mm)) return;
    auto packed = pack_weights(p_->constants[b].data<float>(), mm.k, mm.n, mm.m, threads_, transposed);
    s.scratch_bytes = packed->scratch_bytes();
    s.packed = std::move(packed);
    s.inputs[1] = b;  // what the step reads (the transpose it replaced never runs)
  }

  [[nodiscard]] static bool packable(const MatMulPlan& mm) {
    return mm.batch_dims.empty() && mm.m > kGemvRows && mm.k > 0 && mm.n > 0;
  }

  /// Whether a matmul of `dtype` packs a constant right-hand side: f32 with enough rows for GEMM;
  /// f16/bf16 whenever the weights stay 16-bit (the 16-bit GEMM has no per-call packing to save).
  [[nodiscard]] bool packable(const MatMulPlan& mm, DType dtype) const {
    if (is_half_dtype(dtype)) return !widen_16bit_ && mm.batch_dims.empty() && mm.m > 0 && mm.k > 0 && mm.n > 0;
    return dtype == DType::f32 && packable(mm);
  }

  /// A 16-bit matmul with a constant 2-D right-hand side (or the transpose of one) packs it as
  /// 16-bit panels and runs through the 16-bit GEMM (kernels/half16.hpp).
  void pack_half_matmul_of(Step& s, const NodeDef& node, std::size_t i) {
    const auto& mm = s.kernel.as<MatMulPlan>();
    const bool transposed = transposed_weight_[i] >= 0;
    const ValueId b = transposed ? static_cast<ValueId>(transposed_weight_[i]) : node.inputs[1];
    if (!is_half_dtype(s.kernel.dtype) || p_->home[b] != ValueHome::constant || !packable(mm, s.kernel.dtype)) return;
    const Tensor& w = p_->constants[b];
    if (s.kernel.dtype == DType::f16 && packable(mm)) {
      // As pack_widened_conv_of: the f32 GEMM over weights widened now, when the product is no GEMV
      // (a GEMV streams its weights once, and the 16-bit ones are half the bytes).
      auto packed = pack_weights(widen_weights(w)->data.data(), mm.k, mm.n, mm.m, threads_, transposed);
      s.scratch_bytes = widened_matmul_scratch_bytes(*packed);
      s.packed = std::move(packed);
      s.fn = &widened_packed_matmul<f16>;
      s.inputs[1] = b;
      return;
    }
    if (s.kernel.dtype == DType::bf16) {
      s.packed = pack_half_matmul(w.data<bf16>(), mm.k, mm.n, threads_, transposed);
      s.fn = &half_matmul_kernel<bf16>;
    } else {
      s.packed = pack_half_matmul(w.data<f16>(), mm.k, mm.n, threads_, transposed);
      s.fn = &half_matmul_kernel<f16>;
    }
    s.scratch_bytes = static_cast<const Half16Packed*>(s.packed.get())->scratch;
    s.inputs[1] = b;
  }

  /// A 16-bit conv2d (not depthwise) with constant weights: bf16 runs through the 16-bit GEMM,
  /// reading the weights where they are; f16 through the f32 kernels (pack_widened_conv_of).
  void plan_half_conv_of(Step& s, const NodeDef& node) {
    const auto& cp = s.kernel.as<Conv2dPlan>();
    if (!is_half_dtype(s.kernel.dtype) || widen_16bit_ || p_->home[node.inputs[1]] != ValueHome::constant ||
        conv_is_depthwise(cp) || cp.og == 0 || cp.oh * cp.ow == 0 || cp.cg * cp.kh * cp.kw == 0)
      return;
    if (s.kernel.dtype == DType::f16) {
      pack_widened_conv_of(s, node);
      return;
    }
    s.packed = plan_half_conv<bf16>(cp, threads_);
    s.fn = &half_conv2d_kernel<bf16>;
    s.scratch_bytes = static_cast<const Half16Packed*>(s.packed.get())->scratch;
  }

  /// An f16 conv2d (not depthwise) with constant weights widens them to f32 and packs them as an f32
  /// convolution's, Winograd included: the f32 kernels with a conversion pass on either side are
  /// faster than the 16-bit GEMM's f16 path, which widens its operand inside the multiply loop
  /// (bf16 keeps that path: VDPBF16PS multiplies bf16 pairs at twice the f32 rate).
  void pack_widened_conv_of(Step& s, const NodeDef& node) {
    const auto& cp = s.kernel.as<Conv2dPlan>();
    auto packed = pack_conv_weights(cp, widen_weights(p_->constants[node.inputs[1]])->data.data(), threads_, winograd_);
    set_conv_scratch(s, *packed, widened_conv_scratch_bytes(cp, *packed));
    s.packed = std::move(packed);
    s.fn = &widened_packed_conv2d<f16>;
  }

  /// `matmul(x, transpose(W))` with W a constant 2-D f32 and the transpose read by that matmul alone
  /// (how a Linear layer's weight looks when nothing folded the transpose): the matmul packs W as
  /// stored, and the transpose is absorbed.
  void find_transposed_weights() {
    transposed_weight_.assign(g_.nodes.size(), -1);
    for (std::size_t j = 0; j < g_.nodes.size(); ++j) {
      const NodeDef& t = g_.nodes[j];
      if (compiled_[j].op != OpCode::Transpose || t.inputs.size() != 1) continue;
      const ValueId w = t.inputs[0], wt = t.outputs[0];
      const DType dt = p_->types[w].dtype;
      if (p_->home[w] != ValueHome::constant || (dt != DType::f32 && !is_half_dtype(dt)) ||
          p_->types[w].shape.rank() != 2)
        continue;
      // perm [1, 0] (not the identity): the copy walks W down its columns.
      const auto& copy = compiled_[j].as<StridedCopyPlan>();
      if (copy.dims.size() != 2 || copy.in_offset != 0 || copy.in_strides != Dims{1, p_->types[w].shape.dims()[1]})
        continue;
      const auto mm = sole_reader(wt, j);
      if (!mm || compiled_[*mm].op != OpCode::MatMul || g_.nodes[*mm].inputs[1] != wt ||
          g_.nodes[*mm].inputs[0] == wt || !packable(compiled_[*mm].as<MatMulPlan>(), compiled_[*mm].dtype))
        continue;
      transposed_weight_[*mm] = static_cast<std::int64_t>(w);
      absorbed_[j] = 1;
    }
  }

  /// A 16-bit matmul or conv2d with constant weights widens them to f32 now, when asked to.
  void widen_weights_of(Step& s, const NodeDef& node) {
    const ValueId w = node.inputs[1];
    if (!widen_16bit_ || !is_half_dtype(s.kernel.dtype) || p_->home[w] != ValueHome::constant) return;
    s.packed = widen_weights(p_->constants[w]);
  }

  /// Whether pack_conv_weights_of packs conv2d `kernel`'s weights (node's).
  [[nodiscard]] bool packs_conv_weights(const Kernel& kernel, const NodeDef& node) const {
    const auto& cp = kernel.as<Conv2dPlan>();
    return kernel.dtype == DType::f32 && p_->home[node.inputs[1]] == ValueHome::constant && !conv_is_depthwise(cp) &&
           cp.og > 0 && cp.oh * cp.ow > 0 && cp.cg * cp.kh * cp.kw > 0;
  }
  /// A conv2d with constant weights (but a depthwise one, which runs directly) packs them now.
  void pack_conv_weights_of(Step& s, const NodeDef& node) {
    if (!packs_conv_weights(s.kernel, node)) return;
    const auto& cp = s.kernel.as<Conv2dPlan>();
    const ValueId w = node.inputs[1];
    auto packed = pack_conv_weights(cp, p_->constants[w].data<float>(), threads_, winograd_);
    set_conv_scratch(s, *packed, packed->scratch_bytes());
    s.packed = std::move(packed);
  }

  /// An f32 depthwise convolution by rows through a padded copy pads each part's planes in that part's region.
  void plan_depthwise_parts(Step& s) const {
    if (s.kernel.dtype != DType::f32 || s.packed) return;
    const auto& cp = s.kernel.as<Conv2dPlan>();
    if (!conv_is_depthwise(cp) || !depthwise_padded(cp)) return;
    s.scratch_bytes = 0;
    s.part_bytes = static_cast<std::size_t>(depthwise_rows_floats(cp)) * sizeof(float);
    s.part_count = threads_;
  }

  /// A step over packed conv2d weights: `shared` bytes of scratch for the step, and each part's own
  /// in the part regions.
  static void set_conv_scratch(Step& s, const PackedConvWeights& pw, std::size_t shared) {
    s.scratch_bytes = shared;
    s.part_bytes = pw.part_bytes();
    s.part_count = pw.part_count();
  }

  void fuse_and_emit() {
    absorbed_.assign(g_.nodes.size(), 0);
    find_transposed_weights();
    find_attention();
    find_channel_scales();
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      if (absorbed_[i]) continue;
      if (attention_at_[i] >= 0) {
        Step& s = attention_steps_[static_cast<std::size_t>(attention_at_[i])];
        p_->home[s.output] = ValueHome::arena;
        p_->steps.push_back(std::move(s));
        continue;
      }
      const NodeDef& node = g_.nodes[i];
      Step s;
      s.kernel = compiled_[i];
      s.fn = find_kernel(s.kernel);
      s.inputs = node.inputs;
      s.output = node.outputs[0];
      s.first_node = i;
      s.scratch_bytes = scratch_bytes(s.kernel, threads_);
      const OpCode op = s.kernel.op;
      // reshape and copy of an intermediate that is not itself an output: no step, an alias.
      if ((op == OpCode::Reshape || op == OpCode::Copy) && !is_output_[s.output]) {
        p_->home[s.output] = ValueHome::alias;
        p_->slot[s.output] = root(node.inputs[0]);
        continue;
      }
      if (is_unary(op)) {
        s.chain.push_back(UnaryStep{op, s.kernel.as<UnaryPlan>().gelu_tanh});
        fuse_unary_chain(s, i);
        if (s.chain.size() == 1) s.chain.clear();
      } else if (op == OpCode::MatMul) {
        widen_weights_of(s, node);
        pack_weights_of(s, node, i);
        pack_half_matmul_of(s, node, i);
        fuse_bias(s, i);
        fuse_unary_chain(s, i);
      } else if (op == OpCode::Conv2d) {
        widen_weights_of(s, node);
        if (!fuse_projection(s, i)) {
          pack_conv_weights_of(s, node);
          fuse_channel_scale(s, i);
          plan_depthwise_parts(s);
          plan_half_conv_of(s, node);
          fuse_residual(s, i);
        }
        const std::size_t last = fuse_unary_chain(s, i);
        if (!fuse_depthwise(s, i, last)) fuse_max_pool(s, i);
      } else if (is_binary(op)) {
        fuse_unary_chain(s, i);
      } else if (op == OpCode::Mean) {
        fuse_layer_norm(s, i);
      }
      p_->home[s.output] = ValueHome::arena;
      p_->steps.push_back(std::move(s));
    }
  }

  /// A step's work in multiply-adds (matmul, conv2d), or elements touched times the ops run over them
  /// for the rest, each such element counted as 16 multiply-adds (one core here: ~50 G multiply-adds/s
  /// in GEBP, 1.5-5 G elements/s through an elementwise pass); saturating.
  [[nodiscard]] std::int64_t step_work(const Step& s) const {
    const auto mul = [](std::int64_t a, std::int64_t b) {
      return checked_mul(a, b).value_or(std::numeric_limits<std::int64_t>::max());
    };
    const Kernel& k = s.kernel;
    const std::int64_t out = p_->types[s.output].shape.numel();
    if (s.fn == &attention_kernel) {
      const auto& a = *static_cast<const AttentionPlan*>(s.packed.get());
      const std::int64_t scores = mul(mul(a.batches, a.sq), a.sk);
      return mul(scores, a.d + a.dv + 16 * 5);  // two products, and exp and four passes per score
    }
    if (k.op == OpCode::MatMul) {
      // Multiply-adds, but at least 4 per element of a B of 256 K floats or more (1 MB, L2): a product
      // of a few rows runs at the speed B streams from memory, and such a B pays a split. ResNet-18's
      // classifier (1 x 512 by 512 x 1000, 2 MB of weights) took 127-131 us at 2 threads on one,
      // 85-88 split (Zen 4). A B that stays in L2 streams from there, too fast to pay a hand-off.
      const auto& mm = k.as<MatMulPlan>();
      std::int64_t batches = 1;
      for (std::int64_t d : mm.batch_dims) batches = mul(batches, d);
      constexpr std::int64_t kL2Floats = std::int64_t{1} << 18;
      const std::int64_t streamed = mm.b_numel >= kL2Floats ? mul(mm.b_numel, 4) : 0;
      return std::max(mul(mul(batches, mm.m), mul(mm.n, std::max<std::int64_t>(mm.k, 1))), streamed);
    }
    if (k.op == OpCode::Conv2d) {
      // Multiply-adds, but at least the elements read and written (16 each, as below; bounded by
      // twice the larger count): a 1x1 convolution over few channels runs at memory speed. A
      // depthwise multiply-add costs about 8 of the GEMM's (MobileNetV2's 56x56 ones, 4 M
      // multiply-adds, take 300 us on one core, as long as a 30 M multiply-add GEMM).
      const auto& cp = k.as<Conv2dPlan>();
      // The convolution's own output: a fused max pool's is smaller.
      const std::int64_t conv_out = mul(mul(cp.n, cp.o), mul(cp.oh, cp.ow));
      const std::int64_t macs = mul(conv_out, std::max<std::int64_t>(cp.cg * cp.kh * cp.kw, 1));
      const std::int64_t moved =
          mul(std::max(conv_out, p_->types[s.inputs[0]].shape.numel()), 32);  // >= 16 x (in + out)
      return std::max(conv_is_depthwise(cp) ? mul(macs, 8) : macs, moved);
    }
    // Everything else reads its inputs about once: the largest input or the output, per chained op.
    std::int64_t touched = out;
    for (ValueId v : s.inputs) touched = std::max(touched, p_->types[v].shape.numel());
    const bool transcendental = k.op == OpCode::Softmax || s.fn == &layer_norm_kernel;
    return mul(mul(touched, 16), static_cast<std::int64_t>(1 + s.chain.size() + (transcendental ? 4 : 0)));
  }

  void mark_serial_steps() {
    if (threads_ <= 1) return;
    for (Step& s : p_->steps) s.serial = step_work(s) < parallel_min_work_;
  }

  [[nodiscard]] std::size_t root(ValueId v) const { return p_->home[v] == ValueHome::alias ? p_->slot[v] : v; }

  Status place_values() {
    const std::size_t nv = g_.values.size();
    // A graph output computed by a step is written straight into the caller's tensor.
    std::vector<std::uint8_t> taken(nv, 0);
    for (std::size_t k = 0; k < g_.outputs.size(); ++k) {
      const ValueId v = g_.outputs[k];
      if (p_->home[v] == ValueHome::arena && !taken[v]) {
        p_->home[v] = ValueHome::output;
        p_->slot[v] = k;
        taken[v] = 1;
      } else {
        p_->copied_outputs.push_back(k);
      }
    }
    // Liveness over steps, through aliases.
    std::vector<std::int64_t> first(nv, -1), last(nv, -1);
    for (std::size_t s = 0; s < p_->steps.size(); ++s) {
      const Step& st = p_->steps[s];
      p_->max_arity = std::max(p_->max_arity, st.inputs.size());
      for (ValueId v : st.inputs) last[root(v)] = static_cast<std::int64_t>(s);
      first[st.output] = static_cast<std::int64_t>(s);
    }
    std::vector<ArenaBuffer> buffers;
    std::vector<std::size_t> owner;  // value id, or nv + step index for scratch
    for (std::size_t v = 0; v < nv; ++v) {
      if (p_->home[v] != ValueHome::arena) continue;
      const auto bytes = static_cast<std::size_t>(*p_->types[v].checked_nbytes());
      buffers.push_back({bytes, first[v], std::max(first[v], last[v]), 0});
      owner.push_back(v);
    }
    // Parts' scratch: at several threads, the part regions, as many as the most parts a step uses,
    // each as large as the largest part in whole cache lines, live through the whole run. At 1
    // thread, where there is no other core, each step's part follows its own scratch.
    std::int64_t regions = 0;
    std::vector<std::size_t> part_at(p_->steps.size(), 0);  // in the step's scratch, when not in regions
    const auto lines = [](std::size_t bytes) { return (bytes + 63) / 64 * 64; };
    for (std::size_t s = 0; s < p_->steps.size(); ++s) {
      Step& st = p_->steps[s];
      if (st.part_count <= 0) continue;
      st.part_stride = lines(st.part_bytes);
      if (threads_ > 1) {
        regions = std::max(regions, st.part_count);
        p_->part_stride = std::max(p_->part_stride, st.part_stride);
        continue;
      }
      part_at[s] = lines(st.scratch_bytes);
      const auto own = checked_mul(static_cast<std::int64_t>(st.part_stride), st.part_count);
      const auto total = own ? checked_add(*own, static_cast<std::int64_t>(part_at[s])) : std::nullopt;
      if (!total) return out_of_range("Executor::create: the parts' scratch overflows 64 bits");
      st.scratch_bytes = static_cast<std::size_t>(*total);
    }
    for (std::size_t s = 0; s < p_->steps.size(); ++s) {
      if (p_->steps[s].scratch_bytes == 0) continue;
      const auto at = static_cast<std::int64_t>(s);
      buffers.push_back({p_->steps[s].scratch_bytes, at, at, 0});
      owner.push_back(nv + s);
    }
    const auto region_bytes = checked_mul(static_cast<std::int64_t>(p_->part_stride), regions);
    if (!region_bytes) return out_of_range("Executor::create: the parts' scratch overflows 64 bits");
    if (*region_bytes > 0) {
      buffers.push_back(
          {static_cast<std::size_t>(*region_bytes), 0, static_cast<std::int64_t>(p_->steps.size()) - 1, 0});
      owner.push_back(nv + p_->steps.size());
    }
    RML_RETURN_IF_ERROR(sum_buffers_within(buffers, budget_, p_->intermediate_bytes));
    p_->arena_bytes = plan_arena(buffers);
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (owner[i] < nv)
        p_->slot[owner[i]] = buffers[i].offset;
      else if (owner[i] - nv < p_->steps.size())
        p_->steps[owner[i] - nv].scratch_offset = buffers[i].offset;
      else
        p_->part_offset = buffers[i].offset;
    }
    for (std::size_t s = 0; s < p_->steps.size(); ++s) {
      Step& st = p_->steps[s];
      if (st.part_count <= 0) continue;
      st.part_offset = threads_ > 1 ? p_->part_offset : st.scratch_offset + part_at[s];
      if (threads_ > 1) st.part_stride = p_->part_stride;
    }
    return {};
  }

  const GraphDef& g_;
  int threads_;
  std::size_t budget_;
  Winograd winograd_;
  std::int64_t parallel_min_work_;
  Program* p_ = nullptr;
  std::vector<Kernel> compiled_;
  std::vector<std::int64_t> producer_;
  std::vector<std::uint32_t> readers_;
  std::vector<std::uint8_t> is_output_;
  std::vector<std::uint8_t> absorbed_;
  bool widen_16bit_ = false;
  std::vector<std::int64_t> transposed_weight_;  ///< per matmul node: the constant it packs transposed, or -1
  std::vector<std::int64_t> attention_at_;       ///< per node: its fused attention step in attention_steps_, or -1
  std::vector<Step> attention_steps_;
  /// Per conv2d node whose input a squeeze-and-excitation's product made (find_channel_scales): that
  /// product's full-size operand and its per-channel scale; the product is absorbed.
  struct ChannelScale {
    ValueId x = 0, scale = 0;
  };
  std::vector<std::optional<ChannelScale>> channel_scale_;
};

RML_SPLIT_API Result<std::shared_ptr<Program>> build_program(const GraphDef& graph, const BuildOptions& options) {
  return ProgramBuilder(graph, options).build();
}

}  // namespace rml::detail
