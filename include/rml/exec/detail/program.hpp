// The compiled form of a graph that every run shares (steps, value homes, the arena plan) and the
// per-run workspace; build_program() makes one (its definition needs the kernels: see linkage.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "rml/core/linkage.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/conv_algorithm.hpp"
#include "rml/exec/detail/kernel_args.hpp"
#include "rml/exec/memory_plan.hpp"
#include "rml/ir/graph.hpp"

namespace rml::detail {

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
  std::int64_t residual = -1;    ///< value id of a fused residual add (conv2d), or -1
  std::size_t scratch_offset = 0;
  std::size_t scratch_bytes = 0;
  /// Scratch each of `part_count` parts has to itself (PartScratch): part q's at arena offset
  /// part_offset + q * part_stride, in the program's part regions (at several threads) or after the
  /// step's own scratch (at 1).
  std::size_t part_bytes = 0;
  std::int64_t part_count = 0;
  std::size_t part_offset = 0, part_stride = 0;
  /// Constant weights packed at create (PackedWeights for matmul, PackedConvWeights for conv2d;
  /// for a 16-bit matmul or conv2d, Half16Packed for the 16-bit GEMM, or its weights widened to
  /// f32 when asked: WidenedWeights).
  std::shared_ptr<const void> packed;
  bool serial = false;         ///< too little work to split: runs on the calling thread
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
  /// The part regions (PartScratch): region q at part_offset + q * part_stride in the arena, the same
  /// bytes for part q of every step that takes them, shared with nothing else.
  std::size_t part_offset = 0, part_stride = 0;
  std::size_t intermediate_bytes = 0;  ///< sum of the planned buffers, before sharing
  std::size_t max_arity = 1;
};

/// One run's memory: the arena and the value pointer table.
struct Workspace {
  struct AlignedDelete {
    void operator()(std::byte* p) const noexcept { ::operator delete (p, std::align_val_t{kArenaAlignment}); }
  };
  std::unique_ptr<std::byte, AlignedDelete> arena;
  std::vector<std::byte*> ptrs;
  std::vector<const std::byte*> in_ptrs;

  explicit Workspace(const Program& p)
      : arena(static_cast<std::byte*>(
            ::operator new (std::max<std::size_t>(p.arena_bytes, kArenaAlignment), std::align_val_t{kArenaAlignment}))),
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

/// The default ExecutorOptions::parallel_min_work: 2^18 multiply-adds, about 5 us of one Zen 4 core
/// (58 G multiply-adds/s at its FMA peak; a hand-off to a spinning worker took about 1 us on the
/// machine of earlier sessions). It was 2^20 until the thirty-seventh session, which kept 42 of the
/// 53 steps of the zoo's 64x64 MobileNetV2 (1x1 convolutions of 0.3-0.9 M multiply-adds on 4x4 and
/// 2x2 planes) on one thread: at 2 threads it took 587 us against 485 at 2^18 (ONNX Runtime: 483),
/// and a step that split after a run of serial ones found the worker asleep. The real-size models
/// did not move. Before that it was 2^23, which kept MobileNetV2's 7x7 and 14x14 layers on one
/// thread at 224x224 (docs/ops.md, "Threads").
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 18;

/// What build_program compiles for: the executor's options as the program builder reads them.
struct BuildOptions {
  int threads = 1;                   ///< threads the runs split over (ExecutorOptions::threads, resolved)
  std::size_t budget = 0;            ///< bytes one run may hold (ExecutorOptions::memory, resolved)
  Winograd winograd = Winograd::f2;  ///< the transform 3x3 stride-1 convolutions take where it pays
  bool widen_16bit_weights = false;  ///< 16-bit constant weights of matmul and conv2d widened to f32 once
  std::int64_t parallel_min_work = kParallelMinWork;  ///< steps with less estimated work are marked serial
};

/// Checks `graph` with infer_types' rules (its errors, unchanged), compiles every node, fuses,
/// aliases, packs constant weights and plans the arena, as `options` ask.
RML_SPLIT_API Result<std::shared_ptr<Program>> build_program(const GraphDef& graph, const BuildOptions& options);

}  // namespace rml::detail
