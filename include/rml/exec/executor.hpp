// Executor: a checked graph compiled into fused kernel steps over one liveness-planned arena;
// run() is safe from several threads at once, run_into() allocates nothing in steady state.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rml/check/infer.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/detail/guard.hpp"
#include "rml/exec/kernel_table.hpp"
#include "rml/exec/memory_plan.hpp"
#include "rml/exec/thread_pool.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// How an executor runs.
struct ExecutorOptions {
  /// Threads for intra-op parallelism (the calling thread included); 0 = all cores. Clamped to
  /// ThreadPool::max_threads(); with `pool`, also to the pool's threads.
  int threads = 0;
  /// The workers to run on. None: the process-wide pool of the graph's CPU device
  /// (ThreadPool::shared), which every executor on that device shares.
  std::shared_ptr<const ThreadPool> pool = nullptr;
  /// The memory one run may use; create() refuses a graph that needs more (rml/exec/detail/guard.hpp).
  MemoryLimits memory{};
};

namespace detail {

/// Where a value's bytes are during a run.
enum class ValueHome : std::uint8_t { none, input, constant, arena, output, alias };

/// One kernel call: a node, or a node with its fused successors (bias add, unary chain).
struct Step {
  Kernel kernel;
  KernelFn fn = nullptr;
  ValueIds inputs;
  ValueId output = 0;
  std::vector<UnaryStep> chain;  ///< fused unary ops (for a unary step: the whole chain, itself first)
  std::int64_t bias = -1;        ///< value id of a fused bias, or -1
  std::size_t scratch_offset = 0;
  std::size_t scratch_bytes = 0;
  /// Constant weights packed at create (PackedWeights for matmul, PackedConvWeights for conv2d).
  std::shared_ptr<const void> packed;
  std::size_t first_node = 0;  ///< index of the node it starts from (for messages)
  std::size_t node_count = 1;  ///< nodes fused into it
};

/// Everything fixed at create: immutable and shared by every run.
struct Program {
  std::vector<TensorType> types;  ///< per value
  std::vector<ValueHome> home;    ///< per value
  std::vector<std::size_t> slot;  ///< per value: input index, arena offset, output index, or alias root
  std::vector<Tensor> constants;  ///< per value (defined for constants only)
  std::vector<Step> steps;
  std::vector<ValueId> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  /// Output positions copied at the end (a graph input, a constant, or a value listed twice).
  std::vector<std::size_t> copied_outputs;
  std::size_t arena_bytes = 0;
  std::size_t intermediate_bytes = 0;  ///< sum of the planned buffers, before sharing
  std::size_t max_arity = 1;
};

/// One run's memory: the arena and the value pointer table.
struct Workspace {
  struct AlignedDelete {
    void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t{kArenaAlignment}); }
  };
  std::unique_ptr<std::byte, AlignedDelete> arena;
  std::vector<std::byte*> ptrs;
  std::vector<const std::byte*> in_ptrs;

  explicit Workspace(const Program& p)
      : arena(static_cast<std::byte*>(::operator new(std::max<std::size_t>(p.arena_bytes, kArenaAlignment),
                                                     std::align_val_t{kArenaAlignment}))),
        ptrs(p.types.size(), nullptr),
        in_ptrs(p.max_arity, nullptr) {}
};

/// Workspaces for concurrent runs: a run takes one (creating it the first time) and gives it back.
class WorkspacePool {
 public:
  std::unique_ptr<Workspace> acquire(const Program& p) {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        auto w = std::move(free_.back());
        free_.pop_back();
        return w;
      }
    }
    return std::make_unique<Workspace>(p);
  }
  void release(std::unique_ptr<Workspace> w) {
    std::lock_guard lock(mu_);
    free_.push_back(std::move(w));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Workspace>> free_;
};

/// Builds the program: compiles and checks every node, fuses, aliases, plans the arena.
class ProgramBuilder {
 public:
  ProgramBuilder(const GraphDef& g, int threads, std::size_t budget) : g_(g), threads_(threads), budget_(budget) {}

  Result<std::shared_ptr<Program>> build() {
    auto prog = std::make_shared<Program>();
    p_ = prog.get();
    RML_RETURN_IF_ERROR(compile_nodes());
    bind_sources();
    fuse_and_emit();
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

  /// Node j as a step of a chain over `v`: a unary op, or an elementwise binary op whose other
  /// operand is a constant f32 scalar that does not change v's type (`minimum(v, 6)` after relu).
  [[nodiscard]] std::optional<UnaryStep> chain_step(std::size_t j, ValueId v) const {
    const OpCode op = compiled_[j].op;
    if (is_unary(op)) return UnaryStep{op, compiled_[j].as<UnaryPlan>().gelu_tanh};
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
    for (;;) {
      auto j = sole_reader(s.output, last);
      if (!j) return last;
      const auto step = chain_step(*j, s.output);
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

  /// A matmul with a constant 2-D right-hand side and enough rows for GEMM packs it now.
  void pack_weights_of(Step& s, const NodeDef& node) {
    const auto& mm = s.kernel.as<MatMulPlan>();
    const ValueId b = node.inputs[1];
    if (p_->home[b] != ValueHome::constant || !mm.batch_dims.empty() || mm.m <= kGemvRows || mm.k == 0 || mm.n == 0)
      return;
    auto packed = pack_weights(p_->constants[b].data<float>(), mm.k, mm.n, mm.m, threads_);
    s.scratch_bytes = packed->scratch_bytes();
    s.packed = std::move(packed);
  }

  /// A conv2d with constant weights (but a depthwise one, which runs directly) packs them now.
  void pack_conv_weights_of(Step& s, const NodeDef& node) {
    const auto& cp = s.kernel.as<Conv2dPlan>();
    const ValueId w = node.inputs[1];
    if (p_->home[w] != ValueHome::constant || conv_is_depthwise(cp) || cp.og == 0 || cp.oh * cp.ow == 0 ||
        cp.cg * cp.kh * cp.kw == 0)
      return;
    auto packed = pack_conv_weights(cp, p_->constants[w].data<float>(), threads_);
    s.scratch_bytes = packed->scratch_bytes();
    s.packed = std::move(packed);
  }

  void fuse_and_emit() {
    absorbed_.assign(g_.nodes.size(), 0);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      if (absorbed_[i]) continue;
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
        pack_weights_of(s, node);
        fuse_bias(s, i);
        fuse_unary_chain(s, i);
      } else if (op == OpCode::Conv2d) {
        pack_conv_weights_of(s, node);
        fuse_unary_chain(s, i);
      } else if (is_binary(op)) {
        fuse_unary_chain(s, i);
      }
      p_->home[s.output] = ValueHome::arena;
      p_->steps.push_back(std::move(s));
    }
  }

  [[nodiscard]] std::size_t root(ValueId v) const {
    return p_->home[v] == ValueHome::alias ? p_->slot[v] : v;
  }

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
    for (std::size_t s = 0; s < p_->steps.size(); ++s) {
      if (p_->steps[s].scratch_bytes == 0) continue;
      const auto at = static_cast<std::int64_t>(s);
      buffers.push_back({p_->steps[s].scratch_bytes, at, at, 0});
      owner.push_back(nv + s);
    }
    RML_RETURN_IF_ERROR(sum_buffers_within(buffers, budget_, p_->intermediate_bytes));
    p_->arena_bytes = plan_arena(buffers);
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (owner[i] < nv) p_->slot[owner[i]] = buffers[i].offset;
      else p_->steps[owner[i] - nv].scratch_offset = buffers[i].offset;
    }
    return {};
  }

  const GraphDef& g_;
  int threads_;
  std::size_t budget_;
  Program* p_ = nullptr;
  std::vector<Kernel> compiled_;
  std::vector<std::int64_t> producer_;
  std::vector<std::uint32_t> readers_;
  std::vector<std::uint8_t> is_output_;
  std::vector<std::uint8_t> absorbed_;
};

/// The pool an executor runs on, limited to its thread count; none at one thread. The default is the
/// shared pool of the CPU device the graph's nodes sit on, so one process starts one pool per device.
inline Result<std::shared_ptr<const ThreadPool>> executor_pool(const GraphDef& graph, const ExecutorOptions& options) {
  int threads = ThreadPool::clamp_threads(options.threads);
  if (options.pool)
    threads = options.threads <= 0 ? options.pool->threads() : std::min(threads, options.pool->threads());
  if (threads <= 1) return std::shared_ptr<const ThreadPool>();
  if (options.pool) return options.pool->limited(threads);
  const std::int32_t device = graph.nodes.empty() ? 0 : graph.nodes.front().device.index;
  return ThreadPool::shared(threads, device);
}

}  // namespace detail

/// Runs a checked graph on the CPU. Cheap to copy (copies share the compiled program, the
/// workspaces and the thread pool).
class Executor {
 public:
  /// Checks the graph with infer_types' rules (the gate, then every node; its errors, unchanged),
  /// fuses, plans the arena. OUT_OF_RANGE when a run would need more memory than
  /// `options.memory` allows (by default, the machine's physical memory) or memory runs out.
  static Result<Executor> create(const Graph& graph, ExecutorOptions options = {}) {
    return create(graph.def(), options);
  }
  static Result<Executor> create(const GraphDef& graph, ExecutorOptions options = {}) {
    return detail::guarded("Executor::create", [&] { return create_unguarded(graph, options); });
  }

  /// Runs on `inputs` (in the graph's input order) and returns new output tensors.
  /// INVALID_ARGUMENT for a wrong count, dtype or shape (naming the input) and for a tensor whose
  /// view does not fit its storage; OUT_OF_RANGE for a gather index outside its axis, or when
  /// memory runs out.
  [[nodiscard]] Result<std::vector<Tensor>> run(std::span<const Tensor> inputs) const {
    return detail::guarded("run", [&] { return run_unguarded(inputs); });
  }
  [[nodiscard]] Result<std::vector<Tensor>> run(std::initializer_list<Tensor> inputs) const {
    return run(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }

  /// Runs into caller-allocated, writable outputs of the graph's output types; allocates
  /// nothing in steady state. INVALID_ARGUMENT for wrong inputs or outputs, and for an output that
  /// shares memory with an input, another output or a constant (refused, not handled);
  /// OUT_OF_RANGE as run().
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
    return detail::guarded("run_into", [&] { return run_into_unguarded(inputs, outputs); });
  }

 private:
  static Result<Executor> create_unguarded(const GraphDef& graph, const ExecutorOptions& options) {
    const std::size_t budget = detail::memory_budget(options.memory);
    for (const ConstantDef& c : graph.constants)  // mapped weights whose file shrank: DATA_LOSS, not SIGBUS
      if (c.data.defined()) RML_RETURN_IF_ERROR(c.data.storage()->verify());
    RML_ASSIGN_OR_RETURN(auto pool, detail::executor_pool(graph, options));
    const int threads = pool ? pool->threads() : 1;
    RML_ASSIGN_OR_RETURN(auto program, detail::ProgramBuilder(graph, threads, budget).build());
    std::vector<TensorType> output_types;
    for (ValueId v : program->outputs) output_types.push_back(program->types[v]);
    RML_RETURN_IF_ERROR(detail::check_run_budget(program->arena_bytes, output_types, budget));
    Executor e;
    e.program_ = std::move(program);
    e.workspaces_ = std::make_shared<detail::WorkspacePool>();
    e.pool_ = std::move(pool);
    return e;
  }

  [[nodiscard]] Result<std::vector<Tensor>> run_unguarded(std::span<const Tensor> inputs) const {
    RML_RETURN_IF_ERROR(check_inputs(inputs));
    std::vector<Tensor> outputs;
    outputs.reserve(program_->outputs.size());
    for (ValueId v : program_->outputs) outputs.push_back(Tensor::zeros(program_->types[v]));
    RML_RETURN_IF_ERROR(run_unchecked(inputs, outputs));
    return outputs;
  }
  Status run_into_unguarded(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
    RML_RETURN_IF_ERROR(check_inputs(inputs));
    const auto& p = *program_;
    if (outputs.size() != p.outputs.size())
      return invalid_argument("run_into: expects " + std::to_string(p.outputs.size()) + " outputs, got " +
                              std::to_string(outputs.size()));
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      const TensorType& want = p.types[p.outputs[k]];
      if (!outputs[k].defined() || outputs[k].type() != want || !outputs[k].storage()->writable())
        return invalid_argument("run_into: " + detail::io_label("output", k, p.output_names[k]) +
                                " must be a writable " + want.to_string() + " tensor, got " +
                                (outputs[k].defined() ? outputs[k].type().to_string() : std::string("none")));
    }
    RML_RETURN_IF_ERROR(detail::check_run_views(inputs, outputs, program_->constants, label()));
    return run_unchecked(inputs, outputs);
  }

 public:
  [[nodiscard]] const std::vector<std::string>& input_names() const noexcept { return program_->input_names; }
  [[nodiscard]] const std::vector<std::string>& output_names() const noexcept { return program_->output_names; }
  [[nodiscard]] TensorType input_type(std::size_t i) const { return program_->types.at(program_->inputs.at(i)); }
  [[nodiscard]] TensorType output_type(std::size_t i) const { return program_->types.at(program_->outputs.at(i)); }
  /// Bytes of the planned arena (intermediates and scratch, shared by liveness).
  [[nodiscard]] std::size_t arena_bytes() const noexcept { return program_->arena_bytes; }
  /// What the intermediates and scratch would take without sharing.
  [[nodiscard]] std::size_t intermediate_bytes() const noexcept { return program_->intermediate_bytes; }
  /// Kernel calls per run (after fusion and aliasing).
  [[nodiscard]] std::size_t step_count() const noexcept { return program_->steps.size(); }
  [[nodiscard]] int threads() const noexcept { return pool_ ? pool_->threads() : 1; }

 private:
  Executor() = default;

  /// Names an input or output for check_run_views' messages.
  [[nodiscard]] detail::IoLabels label() const { return {&program_->input_names, &program_->output_names}; }

  Status check_inputs(std::span<const Tensor> inputs) const {
    RML_RETURN_IF_ERROR(detail::check_run_views(inputs, {}, {}, label()));
    const auto& p = *program_;
    if (inputs.size() != p.inputs.size())
      return invalid_argument("run: the graph takes " + std::to_string(p.inputs.size()) + " inputs, got " +
                              std::to_string(inputs.size()));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const TensorType& want = p.types[p.inputs[k]];
      if (!inputs[k].defined() || inputs[k].type() != want)
        return invalid_argument("run: " + detail::io_label("input", k, p.input_names[k]) + " must be " +
                                want.to_string() + ", got " +
                                (inputs[k].defined() ? inputs[k].type().to_string() : std::string("no data")));
    }
    return {};
  }

  Status run_unchecked(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
    const auto& p = *program_;
    auto ws = workspaces_->acquire(p);
    struct Return {
      detail::WorkspacePool& pool;
      std::unique_ptr<detail::Workspace>& ws;
      ~Return() { pool.release(std::move(ws)); }
    } give_back{*workspaces_, ws};

    std::byte** ptrs = ws->ptrs.data();
    std::byte* arena = ws->arena.get();
    for (std::size_t v = 0; v < p.types.size(); ++v) {
      switch (p.home[v]) {
        case detail::ValueHome::input: ptrs[v] = const_cast<std::byte*>(inputs[p.slot[v]].raw_data()); break;
        case detail::ValueHome::constant: ptrs[v] = const_cast<std::byte*>(p.constants[v].raw_data()); break;
        case detail::ValueHome::arena: ptrs[v] = arena + p.slot[v]; break;
        case detail::ValueHome::output: ptrs[v] = outputs[p.slot[v]].mutable_raw_data(); break;
        default: break;
      }
    }
    for (std::size_t v = 0; v < p.types.size(); ++v)
      if (p.home[v] == detail::ValueHome::alias) ptrs[v] = ptrs[p.slot[v]];

    const ThreadPool* pool = pool_.get();
    for (const detail::Step& s : p.steps) {
      for (std::size_t i = 0; i < s.inputs.size(); ++i) ws->in_ptrs[i] = ptrs[s.inputs[i]];
      std::byte* out = ptrs[s.output];
      detail::Epilogue epi{s.bias >= 0 ? reinterpret_cast<const float*>(ptrs[s.bias]) : nullptr, s.chain};
      const detail::KernelArgs args{std::span<const std::byte* const>(ws->in_ptrs.data(), s.inputs.size() - (s.bias >= 0)),
                                    std::span<std::byte* const>(&out, 1), pool, arena + s.scratch_offset,
                                    epi.empty() ? nullptr : &epi, s.packed.get()};
      Status st = s.fn(s.kernel, args);
      if (!st.ok())
        return st.with_prefix("node " + std::to_string(s.first_node) + " (" + std::string(op_name(s.kernel.op)) +
                              "): ");
    }
    for (std::size_t k : p.copied_outputs) {
      const std::size_t n = outputs[k].nbytes();
      if (n) std::memcpy(outputs[k].mutable_raw_data(), ptrs[p.outputs[k]], n);
    }
    return {};
  }

  std::shared_ptr<const detail::Program> program_;
  std::shared_ptr<detail::WorkspacePool> workspaces_;
  std::shared_ptr<const ThreadPool> pool_;  ///< none at 1 thread
};

}  // namespace rml
