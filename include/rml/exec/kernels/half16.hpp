// matmul and conv2d on f16/bf16 with constant weights, through the 16-bit GEMM (gemm16.hpp): the
// weights stay 16-bit, a matmul's packed once at create into panels, a convolution's read in place.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/conv.hpp"
#include "rml/exec/kernels/gemm16.hpp"

namespace rml::detail {

/// The step's `packed` for a 16-bit matmul or conv2d run by the 16-bit GEMM. For matmul, the
/// constant right-hand side as panels; for conv2d nothing (the weights are the row operand, read
/// from the constant), only the blocking.
struct Half16Packed {
  std::vector<std::uint16_t> panels;
  std::int64_t nb = 1;     ///< panels per column block
  std::int64_t parts = 1;  ///< threads the scratch was sized for
  std::size_t scratch = 0;
  /// A convolution whose kernel reads every stride phase reads its panels from a zero-padded copy
  /// of each group's input split by phase (PhaseLayout, then slack): im2col row k at `k_offset[k]`,
  /// over positions oy * wp + ox.
  bool implicit = false;
  std::int64_t hp = 0, wp = 0, sh = 1, sw = 1;
  std::vector<std::int64_t> k_offset;
  std::size_t padded_bytes = 0;  ///< the copy's bytes, at the start of scratch
};

/// Packs a constant 16-bit B (row-major [k, n], or with `transposed` B^T [n, k]) of T for a matmul.
template <typename T>
std::shared_ptr<const Half16Packed> pack_half_matmul(const T* b, std::int64_t k, std::int64_t n, int threads,
                                                     bool transposed) {
  auto w = std::make_shared<Half16Packed>();
  const std::int64_t steps = g16::steps_of<T>(k);
  w->panels = g16::pack_panels<T>(reinterpret_cast<const std::uint16_t*>(b), k, n, transposed);
  w->nb = g16::column_block<T>(steps, (n + g16::kLanes - 1) / g16::kLanes);
  w->parts = std::max(threads, 1);
  w->scratch = static_cast<std::size_t>(w->parts) * g16::thread_scratch<T>(steps, w->nb, false);
  return w;
}

/// The blocking of a 16-bit conv2d (not depthwise) with constant weights.
template <typename T>
std::shared_ptr<const Half16Packed> plan_half_conv(const Conv2dPlan& p, int threads) {
  auto w = std::make_shared<Half16Packed>();
  const std::int64_t kdim = p.cg * p.kh * p.kw, steps = g16::steps_of<T>(kdim);
  std::int64_t columns = p.oh * p.ow;
  // As f32's implicit runs (pack_conv_weights): every phase read, and at stride 2 a phase width that
  // wastes at most a quarter of the work. ResNet's 7x7 stride-2 stem and its 3x3 stride-2
  // convolutions had gathered their im2col panels element by element.
  const PhaseLayout layout(p);
  if (layout.every_phase && (layout.sw == 1 || 4 * layout.wp <= 5 * p.ow)) {
    w->implicit = true;
    w->hp = layout.hp, w->wp = layout.wp, w->sh = layout.sh, w->sw = layout.sw;
    columns = p.oh * layout.wp;
    for (std::int64_t k = 0; k < kdim; ++k) w->k_offset.push_back(layout.offset(p, k));
    // The last phase's last row reads (wp - ow) + 15 elements past its plane (see the kernel).
    const std::int64_t elems =
        p.cg * layout.sh * layout.sw * layout.hp * layout.wp + (layout.wp - p.ow) + 2 * g16::kLanes;
    w->padded_bytes = static_cast<std::size_t>((elems * 2 + 63) / 64 * 64);
  }
  w->nb = g16::column_block<T>(steps, (columns + g16::kLanes - 1) / g16::kLanes);
  w->parts = std::max(threads, 1);
  w->scratch = w->padded_bytes + static_cast<std::size_t>(w->parts) * g16::thread_scratch<T>(steps, w->nb, true);
  return w;
}

template <typename T>
Status half_matmul_kernel(const Kernel& kernel, const KernelArgs& args) {
  const auto& mm = kernel.as<MatMulPlan>();
  const auto& w = *static_cast<const Half16Packed*>(args.packed);
  g16::Product<T> prod;
  prod.rows = {reinterpret_cast<const std::uint16_t*>(in_ptr<T>(args, 0)), mm.k};
  prod.m = mm.m, prod.k = mm.k, prod.n = mm.n, prod.nb = w.nb;
  prod.out = out_ptr<T>(args), prod.ldo = mm.n;
  if (args.epilogue) prod.chain = args.epilogue->chain;
  const std::int64_t pstride = g16::panel_u16<T>(g16::steps_of<T>(mm.k));
  const auto panels = [&](std::int64_t j0, std::int64_t, std::uint16_t*) { return w.panels.data() + j0 * pstride; };
  g16::run(prod, panels, false, args.scratch, w.parts, args.pool);
  return {};
}

/// Row `k` (= (ci * kh + ky) * kw + kx) of one group's im2col matrix over output positions [q0, q1),
/// into `line` (zero in the padding and past the plane).
template <typename T>
void im2col_line(const Conv2dPlan& p, const std::uint16_t* x, std::int64_t k, std::int64_t q0, std::int64_t q1,
                 std::uint16_t* line) {
  const std::int64_t plane = p.oh * p.ow;
  const std::int64_t kx = k % p.kw, ky = (k / p.kw) % p.kh, ci = k / (p.kw * p.kh);
  const std::int64_t shift_x = kx * p.dilation_w - p.pad_left;
  const ValidRange vx = valid_outputs(p.ow, p.stride_w, shift_x, p.w);
  const std::int64_t end = std::min(q1, plane);
  std::fill(line + std::max<std::int64_t>(end - q0, 0), line + (q1 - q0), std::uint16_t{0});
  for (std::int64_t oy = q0 / p.ow; oy * p.ow < end; ++oy) {
    const std::int64_t base = oy * p.ow;
    const std::int64_t a = std::max(q0 - base, std::int64_t{0}), b = std::min(end - base, p.ow);
    std::uint16_t* d = line + (base + a - q0);
    const std::int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
    if (iy < 0 || iy >= p.h) {
      std::fill(d, d + (b - a), std::uint16_t{0});
      continue;
    }
    const std::uint16_t* row = x + (ci * p.h + iy) * p.w;
    const std::int64_t va = std::clamp(vx.begin, a, b), vb = std::clamp(vx.end, va, b);
    for (std::int64_t ox = a; ox < va; ++ox) d[ox - a] = 0;
    for (std::int64_t ox = va; ox < vb; ++ox) d[ox - a] = row[ox * p.stride_w + shift_x];
    for (std::int64_t ox = vb; ox < b; ++ox) d[ox - a] = 0;
  }
}

/// Lane l of the 16 pairs at `dst` is (a[l], b[l]): one step of a bf16 panel from two im2col rows.
inline void interleave16(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* dst) {
#if defined(__AVX512F__)
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  _mm512_storeu_si512(dst, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
#else
  for (int l = 0; l < 16; ++l) dst[2 * l] = a[l], dst[2 * l + 1] = b[l];
#endif
}

/// The zero-padded copy of one group's input `xg` for an implicit convolution (w.padded_bytes), split
/// by stride phase as PhaseLayout lays it out (pad_input's, in 16 bits, the whole copy at once).
inline void pad_half_input(const Conv2dPlan& p, const Half16Packed& w, const std::uint16_t* xg, std::uint16_t* padded) {
  std::fill_n(padded, w.padded_bytes / 2, std::uint16_t{0});
  for (std::int64_t c = 0; c < p.cg; ++c)
    for (std::int64_t py = 0; py < w.sh; ++py)
      for (std::int64_t px = 0; px < w.sw; ++px) {
        std::uint16_t* plane = padded + ((c * w.sh + py) * w.sw + px) * w.hp * w.wp;
        const std::int64_t shift = px - p.pad_left;
        const ValidRange vx = valid_outputs(w.wp, w.sw, shift, p.w);  // the columns inside the input
        for (std::int64_t r = 0; r < w.hp; ++r) {
          const std::int64_t iy = r * w.sh + py - p.pad_top;
          if (iy < 0 || iy >= p.h || vx.begin >= vx.end) continue;
          const std::uint16_t* src = xg + (c * p.h + iy) * p.w + vx.begin * w.sw + shift;
          std::uint16_t* dst = plane + r * w.wp + vx.begin;
          if (w.sw == 1) {
            std::copy_n(src, vx.end - vx.begin, dst);
          } else {
            for (std::int64_t i = 0; i < vx.end - vx.begin; ++i) dst[i] = src[i * w.sw];
          }
        }
      }
}

/// bf16 conv2d with constant weights through the 16-bit GEMM. (f16 convolutions run through the f32
/// kernels instead, widened_packed_conv2d: ProgramBuilder::plan_half_conv_of.)
template <typename T>
Status half_conv2d_kernel(const Kernel& kernel, const KernelArgs& args) {
  static_assert(std::is_same_v<T, bf16>, "f16 convolutions run through widened_packed_conv2d");
  const auto& p = kernel.as<Conv2dPlan>();
  const auto& w = *static_cast<const Half16Packed*>(args.packed);
  constexpr std::int64_t E = g16::kElems<T>;
  const auto* x = reinterpret_cast<const std::uint16_t*>(in_ptr<T>(args, 0));
  const auto* wt = reinterpret_cast<const std::uint16_t*>(in_ptr<T>(args, 1));
  const T* bias = p.has_bias ? in_ptr<T>(args, 2) : nullptr;
  const std::int64_t plane_in = p.h * p.w, plane = p.oh * p.ow, kdim = p.cg * p.kh * p.kw;
  const std::int64_t steps = g16::steps_of<T>(kdim), pstride = g16::panel_u16<T>(steps);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const std::uint16_t* xg = x + (n * p.c + g * p.cg) * plane_in;
      g16::Product<T> prod;
      prod.rows = {wt + g * p.og * kdim, kdim};
      prod.m = p.og, prod.k = kdim, prod.n = plane, prod.nb = w.nb;
      prod.out = out_ptr<T>(args) + (n * p.o + g * p.og) * plane, prod.ldo = plane;
      prod.bias = bias ? bias + g * p.og : nullptr, prod.bias_along_rows = true;
      if (args.epilogue) {
        prod.chain = args.epilogue->chain;
        // A fused residual is laid out as the output, and of its type (ProgramBuilder::fuse_residual).
        if (const auto* res = reinterpret_cast<const T*>(args.epilogue->residual))
          prod.residual = res + (n * p.o + g * p.og) * plane;
      }
      // Column block [j0, j0 + count) of im2col(xg) as panels: each step's E rows gathered into
      // lines, then interleaved lane by lane.
      const auto panels = [&](std::int64_t j0, std::int64_t count, std::uint16_t* buf) {
        std::uint16_t lines[E][16 * g16::kLanes];
        const std::int64_t q0 = j0 * g16::kLanes, q1 = q0 + count * g16::kLanes;
        for (std::int64_t s = 0; s < steps; ++s) {
          for (std::int64_t e = 0; e < E; ++e) {
            if (s * E + e < kdim)
              im2col_line<T>(p, xg, s * E + e, q0, q1, lines[e]);
            else
              std::fill_n(lines[e], q1 - q0, std::uint16_t{0});
          }
          for (std::int64_t j = 0; j < count; ++j) {
            std::uint16_t* dst = buf + j * pstride + s * g16::kLanes * E;
            for (std::int64_t l = 0; l < g16::kLanes; ++l)
              for (std::int64_t e = 0; e < E; ++e) dst[l * E + e] = lines[e][j * g16::kLanes + l];
          }
        }
        return static_cast<const std::uint16_t*>(buf);
      };
      if (!w.implicit) {
        g16::run(prod, panels, true, args.scratch, w.parts, args.pool);
        continue;
      }
      // The panels straight from the padded copy, over rows wp wide (the last wp - ow positions of
      // each read the next row and are dropped). Panel j, step s reads 16 consecutive elements
      // at k_offset[k] + 16 j for each of the step's rows k.
      auto* padded = reinterpret_cast<std::uint16_t*>(args.scratch);
      pad_half_input(p, w, xg, padded);
      prod.n = p.oh * w.wp, prod.wrap = w.wp, prod.keep = p.ow;
      static constexpr std::uint16_t kZeros[g16::kLanes] = {};
      const auto implicit_panels = [&](std::int64_t j0, std::int64_t count, std::uint16_t* buf) {
        for (std::int64_t j = 0; j < count; ++j) {
          const std::int64_t q = (j0 + j) * g16::kLanes;
          for (std::int64_t s = 0; s < steps; ++s) {
            std::uint16_t* dst = buf + j * pstride + s * g16::kLanes * E;
            const std::uint16_t* a = padded + w.k_offset[static_cast<std::size_t>(s * E)] + q;
            const std::int64_t k1 = s * E + 1;  // a bf16 step's second row
            interleave16(a, k1 < kdim ? padded + w.k_offset[static_cast<std::size_t>(k1)] + q : kZeros, dst);
          }
        }
        return static_cast<const std::uint16_t*>(buf);
      };
      g16::run(prod, implicit_panels, true, args.scratch + w.padded_bytes, w.parts, args.pool);
    }
  }
  return {};
}

}  // namespace rml::detail
