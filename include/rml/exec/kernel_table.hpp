// The kernel table: one function per (OpCode, DType) pair the op table allows, built at compile
// time. An allowed pair without a kernel is a compile error, never a runtime abort.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "rml/core/tensor.hpp"

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/conv.hpp"
#include "rml/exec/kernels/convert16.hpp"
#include "rml/exec/kernels/elementwise.hpp"
#include "rml/exec/kernels/half16.hpp"
#include "rml/exec/kernels/matmul.hpp"
#include "rml/exec/kernels/movement.hpp"
#include "rml/exec/kernels/reduce.hpp"

namespace rml::detail {

// matmul, conv2d, the pools and softmax on f16 and bf16 (but a matmul or conv2d with constant
// weights, which the 16-bit GEMM runs: kernels/half16.hpp): the operands are widened to f32 in the
// step's scratch, the f32 kernel runs on them, and each output is rounded once to the 16-bit
// type (the op's result). Constant 16-bit weights stay 16-bit in memory (mapped); the widened copy
// lives in scratch, which the steps share, only while the step runs.

/// The constant weights of a 16-bit matmul or conv2d widened to f32 once, at create
/// (ExecutorOptions::widen_16bit_weights); the step's `packed`.
struct WidenedWeights {
  std::vector<float> data;
};

inline std::shared_ptr<const WidenedWeights> widen_weights(const Tensor& w) {
  auto out = std::make_shared<WidenedWeights>();
  visit_dtype(w.dtype(), [&](auto d) {
    using T = dtype_type_t<decltype(d)::value>;
    if constexpr (is_half_v<T>) {
      out->data.resize(static_cast<std::size_t>(w.numel()));
      widen_n(w.data<T>(), out->data.data(), w.numel());
    }
  });
  return out;
}

/// Element counts of a widened op's inputs (up to 3) and its output.
struct WidenedCounts {
  std::array<std::int64_t, 3> in{};
  std::int64_t out = 0;
};

inline WidenedCounts widened_counts(const Kernel& k) noexcept {
  switch (k.op) {
    case OpCode::MatMul: {
      const auto& p = k.as<MatMulPlan>();
      std::int64_t batch = 1;
      for (std::int64_t d : p.batch_dims) batch *= d;
      return {{p.a_numel, p.b_numel, 0}, batch * p.m * p.n};
    }
    case OpCode::Conv2d: {
      const auto& p = k.as<Conv2dPlan>();
      return {{p.n * p.c * p.h * p.w, p.o * p.cg * p.kh * p.kw, p.has_bias ? p.o : 0}, p.n * p.o * p.oh * p.ow};
    }
    default: {  // softmax (the pools widen a block at a time: half_pool2d_kernel)
      const auto& p = k.as<AxisPlan>();
      return {{p.outer * p.axis * p.inner, 0, 0}, p.outer * p.axis * p.inner};
    }
  }
}

/// `n` floats rounded up to whole 64-byte lines, so every buffer carved from scratch stays aligned.
constexpr std::size_t float_lines(std::int64_t n) noexcept {
  return (static_cast<std::size_t>(n) * sizeof(float) + 63) / 64 * 64;
}

/// Planes a 16-bit pool (half_pool2d_kernel) widens at a time: as many as fill 16K floats, at least one.
inline std::int64_t half_pool_block(const Pool2dPlan& p) noexcept {
  return std::clamp<std::int64_t>(16384 / std::max<std::int64_t>(p.h * p.w, 1), 1, std::max<std::int64_t>(p.planes, 1));
}

/// Scratch of one thread of half_pool2d_kernel: a block of input planes and of output planes in f32.
inline std::size_t half_pool_part_bytes(const Pool2dPlan& p) noexcept {
  const std::int64_t block = half_pool_block(p);
  return float_lines(block * p.h * p.w) + float_lines(block * p.oh * p.ow);
}

/// Scratch of a widened op: its operands and output in f32, then what the f32 kernel needs (a
/// 16-bit pool: a block of planes per thread).
inline std::size_t widened_scratch_bytes(const Kernel& k, int threads) noexcept {
  if (k.op == OpCode::MaxPool2d || k.op == OpCode::AvgPool2d)
    return static_cast<std::size_t>(std::max(threads, 1)) * half_pool_part_bytes(k.as<Pool2dPlan>());
  const WidenedCounts c = widened_counts(k);
  std::size_t bytes = float_lines(c.in[0]) + float_lines(c.in[1]) + float_lines(c.in[2]) + float_lines(c.out);
  if (k.op == OpCode::Conv2d) bytes += conv_scratch_bytes(k.as<Conv2dPlan>(), threads);
  return bytes;
}

/// `dst = f(src)` over [0, n) in contiguous ranges split over the pool: for an activation, whole
/// planes but at most one, as the kernels that split channels take them (thread_pool.hpp).
template <typename F>
void convert_parallel(const ThreadPool* pool, std::int64_t n, const F& f) {
  parallel_ranges(pool, n, work_grain(1, 1, std::int64_t{1} << 16), f);
}

template <OpCode Op, typename T>
Status widened_kernel(const Kernel& k, const KernelArgs& a) {
  const WidenedCounts c = widened_counts(k);
  std::byte* next = a.scratch;
  auto take = [&](std::int64_t n) {
    auto* buf = reinterpret_cast<float*>(next);
    next += float_lines(n);
    return buf;
  };
  std::array<const std::byte*, 3> in{};
  for (std::size_t i = 0; i < a.in.size() && i < in.size(); ++i) {
    float* buf = take(c.in[i]);
    if (i == 1 && a.packed) {  // weights widened at create
      in[i] = reinterpret_cast<const std::byte*>(static_cast<const WidenedWeights*>(a.packed)->data.data());
      continue;
    }
    // Converted in ranges over the threads, which kernels that split planes read back locally (a
    // serial pass had ResNet-18's f16 max pool, then widened here, take 520 us at 2 threads against
    // 190 at 1).
    const T* src = in_ptr<T>(a, i);
    convert_parallel(a.pool, c.in[i], [&](std::int64_t b, std::int64_t e) { widen_n(src + b, buf + b, e - b); });
    in[i] = reinterpret_cast<const std::byte*>(buf);
  }
  float* out = take(c.out);
  std::byte* const outs[1] = {reinterpret_cast<std::byte*>(out)};
  const KernelArgs f32_args{std::span(in.data(), a.in.size()), std::span(outs, 1), a.pool, next, nullptr, nullptr, {}};
  Status s;
  if constexpr (Op == OpCode::MatMul)
    s = matmul_kernel<float>(k, f32_args);
  else if constexpr (Op == OpCode::Conv2d)
    s = conv2d_kernel<float>(k, f32_args);
  else
    s = softmax_kernel<float>(k, f32_args);
  if (!s.ok()) return s;
  T* dst = out_ptr<T>(a);
  convert_parallel(a.pool, c.out, [&](std::int64_t b, std::int64_t e) { narrow_n(out + b, dst + b, e - b); });
  return {};
}

/// A max or average pool on f16 or bf16. The threads split the planes as pool2d_kernel does, and
/// each widens a block of its planes at a time into scratch of its own, pools it with the f32
/// kernel and rounds the outputs: the bits of widening the whole input first, but the block stays in
/// cache and no f32 copy of the tensor is written and read back (bf16 ResNet-18's max pool had
/// widened its 64 x 112 x 112 input, 3.2 MB in f32).
template <OpCode Op, typename T>
Status half_pool2d_kernel(const Kernel& k, const KernelArgs& a) {
  const auto& p = k.as<Pool2dPlan>();
  const std::int64_t block = half_pool_block(p), in_plane = p.h * p.w, out_plane = p.oh * p.ow;
  const std::size_t part_bytes = half_pool_part_bytes(p);
  const T* src = in_ptr<T>(a, 0);
  T* dst = out_ptr<T>(a);
  const std::int64_t parts = part_count(a.pool, p.planes, work_grain(out_plane * p.kh * p.kw, 4));
  run_parts(a.pool, parts, [&](std::int64_t part) {
    std::byte* mine = a.scratch + static_cast<std::size_t>(part) * part_bytes;
    auto* in = reinterpret_cast<float*>(mine);
    auto* out = reinterpret_cast<float*>(mine + float_lines(block * in_plane));
    Kernel kb = k;  // the plan over one block of planes
    auto& plan = std::get<Pool2dPlan>(kb.plan);
    const std::byte* ins[1] = {reinterpret_cast<const std::byte*>(in)};
    std::byte* const outs[1] = {reinterpret_cast<std::byte*>(out)};
    const KernelArgs args{std::span(ins, 1), std::span(outs, 1), nullptr, nullptr, nullptr, nullptr, {}};
    const std::int64_t e = part_begin(p.planes, part + 1, parts);
    for (std::int64_t b = part_begin(p.planes, part, parts); b < e; b += block) {
      plan.planes = std::min(block, e - b);
      widen_n(src + b * in_plane, in, plan.planes * in_plane);
      (void)pool2d_kernel<Op, float>(kb, args);  // always OK
      narrow_n(out, dst + b * out_plane, plan.planes * out_plane);
    }
  });
  return {};
}

/// Scratch of widened_packed_matmul: the left operand and the output in f32, then the product's own.
inline std::size_t widened_matmul_scratch_bytes(const PackedWeights& w) noexcept {
  return float_lines(w.m * w.k) + float_lines(w.m * w.n) + w.scratch_bytes();
}

/// An f16 matmul whose constant right-hand side was widened and packed as f32 at create
/// (ProgramBuilder::pack_half_matmul_of): the left operand widened into scratch, the packed f32
/// product, each output rounded once to f16 (see widened_packed_conv2d).
template <typename T>
Status widened_packed_matmul(const Kernel&, const KernelArgs& a) {
  const auto& w = *static_cast<const PackedWeights*>(a.packed);
  auto* x = reinterpret_cast<float*>(a.scratch);
  auto* y = reinterpret_cast<float*>(a.scratch + float_lines(w.m * w.k));
  auto* rest = reinterpret_cast<float*>(a.scratch + float_lines(w.m * w.k) + float_lines(w.m * w.n));
  const T* src = in_ptr<T>(a, 0);
  T* out = out_ptr<T>(a);
  convert_parallel(a.pool, w.m * w.k, [&](std::int64_t b, std::int64_t e) { widen_n(src + b, x + b, e - b); });
  packed_gemm(w, x, y, rest, a.pool, nullptr);
  convert_parallel(a.pool, w.m * w.n, [&](std::int64_t b, std::int64_t e) { narrow_n(y + b, out + b, e - b); });
  return {};
}

/// Floats of one widened input plane (widen_subsampled), in whole cache lines.
inline std::int64_t widened_plane_floats(const Conv2dPlan& p) noexcept { return (p.h * p.w + 15) / 16 * 16; }

/// Whether widened_packed_conv2d runs Winograd over the 16-bit input itself, its input transform
/// widening each row as it reads it (winograd_input), rather than over a widened copy: at several
/// threads. ResNet-18 in f16 took 0.979-0.980 of its time so at 2 threads, but 1.005-1.009 at 1
/// (each input row is read by two tile rows, so widened twice, in runs of 34; the pass widens it
/// once, 16 at a time).
inline bool widens_in_winograd(const PackedConvWeights& w) noexcept { return w.winograd && w.winograd->threads > 1; }

/// Floats of the widened input: none when Winograd widens its rows (widens_in_winograd), a plane
/// per part for a strided 1x1 convolution (widen_subsampled), else all of it.
inline std::int64_t widened_input_floats(const Conv2dPlan& p, const PackedConvWeights& w) noexcept {
  if (widens_in_winograd(w)) return 0;
  return w.subsampled != 0 ? w.parts * widened_plane_floats(p) : p.n * p.c * p.h * p.w;
}

/// Floats of widened_packed_conv2d's f32 output: the convolution's, or the fused max pool's.
inline std::int64_t widened_output_floats(const Conv2dPlan& p, const PackedConvWeights& w) noexcept {
  return w.pool_band ? w.pool.planes * w.pool.oh * w.pool.ow : p.n * p.o * p.oh * p.ow;
}

/// Scratch of widened_packed_conv2d: the input, bias and output in f32, then what the packed run's
/// parts share (each part's own is in KernelArgs::parts, as for f32).
inline std::size_t widened_conv_scratch_bytes(const Conv2dPlan& p, const PackedConvWeights& w) noexcept {
  const std::int64_t in_n = widened_input_floats(p, w);
  return float_lines(in_n) + float_lines(p.has_bias ? p.o : 0) + float_lines(widened_output_floats(p, w)) +
         w.scratch_bytes();
}

/// The input a strided 1x1 convolution runs over (conv_is_strided_pointwise), widened: each plane
/// widened into `planes` (a plane per part, which stays in L1 or L2), then the rows and columns the
/// convolution reads copied out of it into `sub`, as packed_conv2d's copy lays them out. The parts
/// take whole planes. Through an f32 copy of the whole input, widened in bands of rows and then
/// subsampled by planes, half of that copy crossed between the cores at 2 threads (a 64 -> 128
/// projection from 56 x 56 alone: 159-163 -> 99-108 us at 2 threads, 80-84 -> 74 at 1).
template <typename T>
void widen_subsampled(const Conv2dPlan& p, const PackedConvWeights& w, const T* src, float* sub, float* planes,
                      const ThreadPool* pool) {
  const Conv2dPlan q = subsampled_plan(p);
  const std::int64_t total = p.n * p.c, plane = p.h * p.w, parts = std::min(w.parts, total);
  run_parts(pool, parts, [&](std::int64_t part) {
    float* buf = planes + part * widened_plane_floats(p);
    for (std::int64_t i = part_begin(total, part, parts); i < part_begin(total, part + 1, parts); ++i) {
      widen_n(src + i * plane, buf, plane);
      for (std::int64_t oy = 0; oy < q.h; ++oy)
        copy_strided(buf + oy * p.stride_h * p.w, p.stride_w, q.w, sub + (i * q.h + oy) * q.w);
    }
  });
}

/// An f16 conv2d whose constant weights were widened and packed as f32 at create
/// (ProgramBuilder::pack_widened_conv_of): the input and bias widened into scratch, the packed f32
/// convolution (Winograd where it pays, as for f32), each output rounded once to f16: the f32 path's
/// speed plus two conversion passes. ResNet-18 at 224^2 in f16, 1 thread: 25.8 ms through the
/// 16-bit GEMM (which widens a panel of weights per multiply step and has no Winograd), 14.1 ms so.
/// With a max pool fused (w.pool_band: ProgramBuilder::fuse_max_pool), the relu runs as the GEMM
/// stores, the pool over the f32 rows, and only the pool's outputs are rounded.
template <typename T>
Status widened_packed_conv2d(const Kernel& k, const KernelArgs& a) {
  const auto& p = k.as<Conv2dPlan>();
  const auto& w = *static_cast<const PackedConvWeights*>(a.packed);
  const std::int64_t out_n = widened_output_floats(p, w);
  std::byte* next = a.scratch;
  auto take = [&](std::int64_t n) {
    auto* buf = reinterpret_cast<float*>(next);
    next += float_lines(n);
    return buf;
  };
  float* x = take(widened_input_floats(p, w));
  float* bias = take(p.has_bias ? p.o : 0);
  float* y = take(out_n);
  const T* src = in_ptr<T>(a, 0);
  // The conversions split as the convolution does, so each thread widens the input rows its part
  // reads and rounds the outputs its part wrote: a band of rows of every plane when the parts take
  // position tiles (large planes), else contiguous ranges (whole planes, as the channel split).
  const std::int64_t threads = a.pool ? a.pool->threads() : 1;
  const std::int64_t bands = std::min(threads, conv_position_parts(w));
  const auto convert = [&](std::int64_t planes, std::int64_t rows, std::int64_t cols, const auto& f) {
    if (bands <= 1) return convert_parallel(a.pool, planes * rows * cols, f);
    run_parts(a.pool, bands, [&](std::int64_t q) {
      const std::int64_t r0 = part_begin(rows, q, bands), r1 = part_begin(rows, q + 1, bands);
      for (std::int64_t i = 0; i < planes; ++i) f((i * rows + r0) * cols, (i * rows + r1) * cols);
    });
  };
  Epilogue epi;
  if (p.has_bias) {
    widen_n(in_ptr<T>(a, 2), bias, p.o);
    epi.bias = bias;
  }
  auto* rest = reinterpret_cast<float*>(next);
  if (widens_in_winograd(w)) {
    winograd_conv2d(p, *w.winograd, src, y, a.parts, a.pool, epi);  // no f32 copy of the input
  } else if (w.subsampled != 0) {
    widen_subsampled(p, w, src, rest, x, a.pool);
    packed_conv2d_over(subsampled_plan(p), w, rest, y, rest + w.subsampled, a.parts, a.pool, epi);
  } else {
    convert(p.n * p.c, p.h, p.w, [&](std::int64_t b, std::int64_t e) { widen_n(src + b, x + b, e - b); });
    if (w.pool_band && a.epilogue) epi.chain = a.epilogue->chain;  // a relu (fuse_max_pool), exact in f32
    packed_conv2d(p, w, x, y, rest, a.parts, a.pool, epi);
  }
  T* out = out_ptr<T>(a);
  if (w.pool_band) {
    convert(w.pool.planes, w.pool.oh, w.pool.ow, [&](std::int64_t b, std::int64_t e) { narrow_n(y + b, out + b, e - b); });
    return {};
  }
  // A fused residual (of the output's type and layout) and chain, over each range as it is rounded.
  const T* res = a.epilogue ? reinterpret_cast<const T*>(a.epilogue->residual) : nullptr;
  const std::span<const UnaryStep> chain = a.epilogue ? a.epilogue->chain : std::span<const UnaryStep>{};
  convert(p.n * p.o, p.oh, p.ow, [&](std::int64_t b, std::int64_t e) {
    if (res || !chain.empty()) half_epilogue<T>(y + b, res ? res + b : nullptr, chain, e - b);
    narrow_n(y + b, out + b, e - b);
  });
  return {};
}

/// The ops that run on 16-bit floats through the f32 kernels: widened_kernel, and the pools'
/// half_pool2d_kernel.
constexpr bool is_widened_op(OpCode op) noexcept {
  return op == OpCode::MatMul || op == OpCode::Conv2d || op == OpCode::MaxPool2d || op == OpCode::AvgPool2d ||
         op == OpCode::Softmax;
}

/// The kernel of (Op, D). Each op family lists its ops; an op in none of them fails to compile.
template <OpCode Op, DType D>
constexpr KernelFn kernel_for() {
  using T = dtype_type_t<D>;
  if constexpr ((Op == OpCode::MaxPool2d || Op == OpCode::AvgPool2d) && is_half_v<T>)
    return &half_pool2d_kernel<Op, T>;
  else if constexpr (is_widened_op(Op) && is_half_v<T>)
    return &widened_kernel<Op, T>;
  else if constexpr (is_unary(Op) || Op == OpCode::LogicalNot)
    return &unary_kernel<Op, T>;
  else if constexpr (is_binary(Op) || Op == OpCode::LogicalAnd || Op == OpCode::LogicalOr)
    return &binary_kernel<Op, T>;
  else if constexpr (Op == OpCode::Where)
    return &where_kernel<T>;
  else if constexpr (Op == OpCode::Mod)
    return &mod_kernel<T>;
  else if constexpr (Op == OpCode::MatMul)
    return &matmul_kernel<T>;
  else if constexpr (Op == OpCode::Conv2d)
    return &conv2d_kernel<T>;
  else if constexpr (Op == OpCode::MaxPool2d || Op == OpCode::AvgPool2d)
    return &pool2d_kernel<Op, T>;
  else if constexpr (Op == OpCode::Sum || Op == OpCode::Mean || Op == OpCode::Max || Op == OpCode::Min)
    return &reduce_kernel<Op, T>;
  else if constexpr (Op == OpCode::Softmax)
    return &softmax_kernel<T>;
  else if constexpr (Op == OpCode::ArgMax)
    return &argmax_kernel<T>;
  else if constexpr (Op == OpCode::Reshape || Op == OpCode::Copy)
    return &copy_kernel<T>;
  else if constexpr (Op == OpCode::Transpose || Op == OpCode::Slice || Op == OpCode::Expand)
    return &strided_copy_kernel<T>;
  else if constexpr (Op == OpCode::Pad)
    return &pad_kernel<T>;
  else if constexpr (Op == OpCode::Concat)
    return &concat_kernel<T>;
  else if constexpr (Op == OpCode::Gather)
    return &gather_kernel<T>;
  else if constexpr (Op == OpCode::Cast)
    return &cast_kernel<T>;
  else
    static_assert(dependent_false<T>, "rml: an op the op table allows has no kernel; add it to kernel_for()");
}

inline Status no_kernel(const Kernel& k, const KernelArgs&) {
  return internal_error("no kernel for " + std::string(op_name(k.op)) + " on " + std::string(dtype_name(k.dtype)));
}

/// A pair the op table rules out gets `no_kernel` and is never instantiated.
template <OpCode Op, DType D>
constexpr KernelFn table_entry() {
  if constexpr (dtype_rule_admits(op_info(Op).dtypes, D))
    return kernel_for<Op, D>();
  else
    return &no_kernel;
}

template <std::size_t Op, std::size_t... D>
constexpr std::array<KernelFn, dtype_count> kernel_row(std::index_sequence<D...>) {
  return {table_entry<static_cast<OpCode>(Op), static_cast<DType>(D)>()...};
}

template <std::size_t... I>
constexpr auto make_kernel_table(std::index_sequence<I...>) {
  return std::array<std::array<KernelFn, dtype_count>, op_count>{
      kernel_row<I>(std::make_index_sequence<dtype_count>{})...};
}

/// kernel_table[op][dtype].
inline constexpr auto kernel_table = make_kernel_table(std::make_index_sequence<op_count>{});

/// The function that runs `k`.
inline KernelFn find_kernel(const Kernel& k) noexcept {
  return kernel_table[static_cast<std::size_t>(k.op)][static_cast<std::size_t>(k.dtype)];
}

/// Scratch bytes a kernel needs beyond its inputs and outputs when run on `threads` threads.
inline std::size_t scratch_bytes(const Kernel& k, int threads) noexcept {
  if (is_widened_op(k.op) && is_half_dtype(k.dtype)) return widened_scratch_bytes(k, threads);
  if (k.op == OpCode::Conv2d) return conv_scratch_bytes(k.as<Conv2dPlan>(), threads);
  // The 16-bit floats reduce into one f32 accumulator per output.
  const bool reduce = k.op == OpCode::Sum || k.op == OpCode::Mean || k.op == OpCode::Max || k.op == OpCode::Min;
  if (reduce && is_half_dtype(k.dtype)) return static_cast<std::size_t>(k.as<ReducePlan>().out_n) * sizeof(float);
  return 0;
}

}  // namespace rml::detail
