// Executor: a checked graph compiled into fused kernel steps over one liveness-planned arena;
// run() is safe from several threads at once, run_into() allocates nothing in steady state.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
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

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/conv_algorithm.hpp"
#include "rml/exec/detail/guard.hpp"
#include "rml/exec/detail/kernel_args.hpp"
#include "rml/exec/detail/program.hpp"
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
  /// The Winograd transform 3x3 stride-1 convolutions with constant weights may take where it pays
  /// (docs/ops.md says which, and the rounding error measured); Winograd::off keeps them all direct.
  Winograd winograd = Winograd::f2;
  /// Widen the f16/bf16 constant weights of matmul and conv2d to f32 once, here, and run them
  /// through the f32 kernels instead of the 16-bit GEMM: an f32 copy of every such weight, and
  /// slower on the sizes measured (docs/ops.md, "16-bit floats" and "16-bit GEMM").
  bool widen_16bit_weights = false;
  /// A step whose estimated work (multiply-adds, or elements touched) is below this runs on the
  /// calling thread and never wakes the pool; 0 lets every step split as its kernel sees fit (tests
  /// use it to exercise the parallel paths on small inputs). The default is measured on a 2-vCPU
  /// AVX-512 machine: about 5 us of one core's work (see detail::kParallelMinWork).
  std::int64_t parallel_min_work = detail::kParallelMinWork;
  /// Move each step's two-part split toward the faster thread after every run (thread_pool.hpp,
  /// part_share); false keeps even halves. Outputs are the same bits either way.
  bool balance_threads = true;
};

namespace detail {

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

/// Tests set this in (0, 1) to make every step of every executor that balances its threads
/// (ExecutorOptions::balance_threads) split two-part jobs at that share, and learn none; 0 leaves
/// the steps their own.
inline std::atomic<float> part_share_for_testing{0.0f};

/// Restores this thread's even split when a run ends, however it ends.
struct EvenSplitOnExit {
  ~EvenSplitOnExit() { part_share = 0.5f; }
};

}  // namespace detail

/// One kernel step of a profiled run (Executor::profile): a node with the nodes fused into it.
struct StepTime {
  OpCode op = OpCode::Relu;    ///< the first node's op
  std::size_t first_node = 0;  ///< index of that node in the graph
  std::size_t node_count = 1;  ///< nodes the step runs (fused bias, activations, residual)
  TensorType output;           ///< the step's output
  double seconds = 0;          ///< wall time, summed over the profiled runs
};

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

  /// Runs `runs` times (after one untimed run) and times every kernel step: one StepTime per step,
  /// in run order, its seconds summed over the runs. Inputs are checked as run() checks them;
  /// INVALID_ARGUMENT for `runs` < 1. The clock is read twice per step, which costs well under a
  /// microsecond; the steps themselves run as in run().
  [[nodiscard]] Result<std::vector<StepTime>> profile(std::span<const Tensor> inputs, int runs) const {
    return detail::guarded("profile", [&]() -> Result<std::vector<StepTime>> {
      if (runs < 1) return invalid_argument("profile: runs must be at least 1, got " + std::to_string(runs));
      RML_RETURN_IF_ERROR(check_inputs(inputs));
      const auto& p = *program_;
      std::vector<Tensor> outputs = new_outputs();
      std::vector<double> seconds(p.steps.size(), 0.0);
      RML_RETURN_IF_ERROR(run_unchecked(inputs, outputs));
      for (int r = 0; r < runs; ++r) RML_RETURN_IF_ERROR(run_unchecked(inputs, outputs, seconds.data()));
      std::vector<StepTime> times;
      times.reserve(p.steps.size());
      for (std::size_t i = 0; i < p.steps.size(); ++i) {
        const detail::Step& s = p.steps[i];
        times.push_back({s.kernel.op, s.first_node, s.node_count, p.types[s.output], seconds[i]});
      }
      return times;
    });
  }
  [[nodiscard]] Result<std::vector<StepTime>> profile(std::initializer_list<Tensor> inputs, int runs) const {
    return profile(std::span<const Tensor>(inputs.begin(), inputs.size()), runs);
  }

 private:
  static Result<Executor> create_unguarded(const GraphDef& graph, const ExecutorOptions& options) {
    const std::size_t budget = detail::memory_budget(options.memory);
    for (const ConstantDef& c : graph.constants) {  // mapped weights whose file shrank: DATA_LOSS, not SIGBUS
      if (!c.data.defined()) continue;
      RML_RETURN_IF_ERROR(c.data.storage()->verify());
      RML_RETURN_IF_ERROR(
          detail::check_bool_bytes(c.data, [&] { return "constant of value " + std::to_string(c.value); }));
    }
    RML_ASSIGN_OR_RETURN(auto pool, detail::executor_pool(graph, options));
    const int threads = pool ? pool->threads() : 1;
    const detail::BuildOptions build{threads, budget, options.winograd, options.widen_16bit_weights,
                                     options.parallel_min_work};
    RML_ASSIGN_OR_RETURN(auto program, detail::build_program(graph, build));
    std::vector<TensorType> output_types;
    for (ValueId v : program->outputs) output_types.push_back(program->types[v]);
    RML_RETURN_IF_ERROR(detail::check_run_budget(program->arena_bytes, output_types, budget));
    Executor e;
    e.program_ = std::move(program);
    e.workspaces_ = std::make_shared<detail::WorkspacePool>();
    if (pool && options.balance_threads) {
      e.shares_ = std::shared_ptr<std::atomic<float>[]>(new std::atomic<float>[e.program_->steps.size()]);
      for (std::size_t i = 0; i < e.program_->steps.size(); ++i) e.shares_[i].store(0.5f, std::memory_order_relaxed);
    }
    e.pool_ = std::move(pool);
    return e;
  }

  [[nodiscard]] Result<std::vector<Tensor>> run_unguarded(std::span<const Tensor> inputs) const {
    RML_RETURN_IF_ERROR(check_inputs(inputs));
    std::vector<Tensor> outputs = new_outputs();
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
  /// Steps that run on the calling thread alone (ExecutorOptions::parallel_min_work); 0 at one thread.
  [[nodiscard]] std::size_t serial_step_count() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(program_->steps.begin(), program_->steps.end(), [](const detail::Step& s) { return s.serial; }));
  }

 private:
  Executor() = default;

  /// Zeroed tensors of the graph's output types.
  [[nodiscard]] std::vector<Tensor> new_outputs() const {
    std::vector<Tensor> outputs;
    outputs.reserve(program_->outputs.size());
    for (ValueId v : program_->outputs) outputs.push_back(Tensor::zeros(program_->types[v]));
    return outputs;
  }

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
      RML_RETURN_IF_ERROR(detail::check_bool_bytes(
          inputs[k], [&] { return "run: " + detail::io_label("input", k, p.input_names[k]); }));
    }
    return {};
  }

  /// One run; with `step_seconds`, each step's wall time is added to its entry.
  Status run_unchecked(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       double* step_seconds = nullptr) const {
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
        case detail::ValueHome::input:
          ptrs[v] = const_cast<std::byte*>(inputs[p.slot[v]].raw_data());
          break;
        case detail::ValueHome::constant:
          ptrs[v] = const_cast<std::byte*>(p.constants[v].raw_data());
          break;
        case detail::ValueHome::arena:
          ptrs[v] = arena + p.slot[v];
          break;
        case detail::ValueHome::output:
          ptrs[v] = outputs[p.slot[v]].mutable_raw_data();
          break;
        default:
          break;
      }
    }
    for (std::size_t v = 0; v < p.types.size(); ++v)
      if (p.home[v] == detail::ValueHome::alias) ptrs[v] = ptrs[p.slot[v]];

    const detail::EvenSplitOnExit even_after;
    const float forced_share = detail::part_share_for_testing.load(std::memory_order_relaxed);
    for (std::size_t step = 0; step < p.steps.size(); ++step) {
      const detail::Step& s = p.steps[step];
      const ThreadPool* pool = s.serial ? nullptr : pool_.get();
      // The step's share of its two-part splits, and the times that move it (thread_pool.hpp).
      std::atomic<float>* share = pool && shares_ ? &shares_[step] : nullptr;
      if (share) {
        detail::part_share = forced_share > 0 ? forced_share : share->load(std::memory_order_relaxed);
        detail::part_times = {};
      }
      for (std::size_t i = 0; i < s.inputs.size(); ++i) ws->in_ptrs[i] = ptrs[s.inputs[i]];
      std::byte* out = ptrs[s.output];
      detail::Epilogue epi{s.bias >= 0 ? reinterpret_cast<const float*>(ptrs[s.bias]) : nullptr, s.chain,
                           s.residual >= 0 ? reinterpret_cast<const float*>(ptrs[s.residual]) : nullptr};
      // A fused bias or residual is the step's last input, not the kernel's.
      const detail::KernelArgs args{
          std::span<const std::byte* const>(ws->in_ptrs.data(), s.inputs.size() - (s.bias >= 0) - (s.residual >= 0)),
          std::span<std::byte* const>(&out, 1),
          pool,
          arena + s.scratch_offset,
          epi.empty() ? nullptr : &epi,
          s.packed.get(),
          s.part_count > 0 ? detail::PartScratch{arena + s.part_offset, s.part_stride} : detail::PartScratch{}};
      using clock = std::chrono::steady_clock;
      const clock::time_point start = step_seconds ? clock::now() : clock::time_point{};
      Status st = s.fn(s.kernel, args);
      if (step_seconds) step_seconds[step] += std::chrono::duration<double>(clock::now() - start).count();
      if (share && forced_share <= 0) {
        const detail::PartTimes& t = detail::part_times;
        share->store(detail::rebalanced_share(detail::part_share, t.caller_ns, t.worker_ns), std::memory_order_relaxed);
      }
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
  /// Each step's share of part 0 in its two-part splits (detail::part_share), moved after each run
  /// (detail::rebalanced_share); none at 1 thread or without ExecutorOptions::balance_threads.
  std::shared_ptr<std::atomic<float>[]> shares_;
};

}  // namespace rml

#if RML_SPLIT_DEFINED
#include "rml/exec/detail/implementation.hpp"
#endif
