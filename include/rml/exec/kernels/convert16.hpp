// Runs of 16-bit floats widened to f32 and f32 rounded back, a vector at a time: the bulk forms of
// load() and store<T>() (kernels/common.hpp), giving the same bits as they do one element at a time.
//
// f16 goes through the hardware conversions where the build has them: vcvtph2ps / vcvtps2ph, 16 at a
// time with AVX-512F, 8 with AVX2 and F16C. vcvtps2ph at round-to-nearest-even agrees with
// f16::from_float on every f32 (all 2^32 patterns compared). vcvtph2ps differs on one thing: it
// quiets a signalling NaN (sets bit 22); widen_n clears that bit again, so a cast still keeps the
// NaN as NumPy does. bf16 is integer arithmetic (a shift, and bf16::from_float's rounding) in the
// same vectors, and so is a run's tail (convert_n). Builds without these flags run the scalar
// conversions: the same results, slower (the scalar f16 code is a chain of branches: about 1 ns an
// element where vcvtph2ps takes 0.03).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rml/exec/kernels/common.hpp"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__))
#include <immintrin.h>
#endif

namespace rml::detail {

/// Elements each vector step of widen_n and narrow_n converts in this build (0: the scalar code).
#if defined(__AVX512F__)
inline constexpr int kConvert16Lanes = 16;
#elif defined(__AVX2__) && defined(__F16C__)
inline constexpr int kConvert16Lanes = 8;
#else
inline constexpr int kConvert16Lanes = 0;
#endif

/// One vector of kConvert16Lanes elements widened: `dst[i] = load(src[i])`.
template <typename T>
void widen_vector(const T* src, float* dst) noexcept {
#if defined(__AVX512F__)
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  const __m512i h32 = _mm512_cvtepu16_epi32(h);
  if constexpr (std::is_same_v<T, f16>) {
    // A signalling NaN: exponent all ones, quiet bit (0x200) clear, some payload bit set.
    const __mmask16 snan =
        _mm512_cmpeq_epi32_mask(_mm512_and_si512(h32, _mm512_set1_epi32(0x7e00)), _mm512_set1_epi32(0x7c00)) &
        _mm512_test_epi32_mask(h32, _mm512_set1_epi32(0x01ff));
    const __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(h));
    _mm512_storeu_si512(dst, _mm512_mask_xor_epi32(f, snan, f, _mm512_set1_epi32(0x00400000)));
  } else {
    _mm512_storeu_si512(dst, _mm512_slli_epi32(h32, 16));
  }
#elif defined(__AVX2__) && defined(__F16C__)
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  const __m256i h32 = _mm256_cvtepu16_epi32(h);
  if constexpr (std::is_same_v<T, f16>) {
    const __m256i top = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x7e00)), _mm256_set1_epi32(0x7c00));
    const __m256i none = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x01ff)), _mm256_setzero_si256());
    const __m256i snan = _mm256_andnot_si256(none, top);
    const __m256i f = _mm256_castps_si256(_mm256_cvtph_ps(h));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_xor_si256(f, _mm256_and_si256(snan, _mm256_set1_epi32(0x00400000))));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_slli_epi32(h32, 16));
  }
#else
  (void)src, (void)dst;
#endif
}

/// One vector of kConvert16Lanes elements rounded: `dst[i] = store<T>(src[i])`.
template <typename T>
void narrow_vector(const float* src, T* dst) noexcept {
#if defined(__AVX512F__)
  __m256i h;
  if constexpr (std::is_same_v<T, f16>) {
    h = _mm512_cvtps_ph(_mm512_loadu_ps(src), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    // bf16::from_float: add 0x7fff and the kept low bit, keep the top half; NaN: the top half, quiet.
    const __m512i u = _mm512_loadu_si512(src);
    const __m512i top = _mm512_srli_epi32(u, 16);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(top, _mm512_set1_epi32(1))),
        16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    h = _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x0040)));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), h);
#elif defined(__AVX2__) && defined(__F16C__)
  __m128i h;
  if constexpr (std::is_same_v<T, f16>) {
    h = _mm256_cvtps_ph(_mm256_loadu_ps(src), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(top, _mm256_set1_epi32(1))),
        16);
    const __m256i nan =  // |u| > inf: a signed compare is enough with the sign bit cleared
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x0040)), nan);
    // Lanes 0-3 and 4-7 packed to 16 bits in each 128-bit half, then the two halves' low quarters joined.
    h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h);
#else
  (void)src, (void)dst;
#endif
}

/// `dst[i] = f(src[i])` for i in [0, n) through `vector` (widen_vector or narrow_vector): whole
/// vectors, then the last kConvert16Lanes again, overlapping, for a tail; a run shorter than a vector
/// through masked loads and stores (AVX-512BW and VL), else copies on the stack. The scalar f16
/// conversions are a chain of branches: an f16 run of 14 widened and rounded back took 51-56 ns
/// element by element, 10 ns so; one of 56 (3 vectors and 8 left) 35-40 -> 11 ns (a loop of such
/// calls, -O3 -march=native, on the AMD EPYC VM of docs/exporters.md's table).
template <typename From, typename To, typename Vector, typename Scalar>
void convert_n(const From* src, To* dst, std::int64_t n, const Vector& vector, const Scalar& scalar) noexcept {
  constexpr std::int64_t L = kConvert16Lanes;
  if constexpr (L > 0) {
    if (n >= L) {
      std::int64_t i = 0;
      for (; i + L <= n; i += L) vector(src + i, dst + i);
      if (i < n) vector(src + (n - L), dst + (n - L));
    } else if (n > 0) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      // Masked loads and stores of the run's n elements.
      const auto mask = static_cast<__mmask16>((1u << n) - 1);
      if constexpr (std::is_same_v<To, float>) {
        const __m256i h = _mm256_maskz_loadu_epi16(mask, src);
        alignas(32) From in[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(in), h);
        alignas(64) float out[16];
        vector(in, out);
        _mm512_mask_storeu_ps(dst, mask, _mm512_load_ps(out));
      } else {
        alignas(64) float in[16];
        _mm512_store_ps(in, _mm512_maskz_loadu_ps(mask, src));
        alignas(32) To out[16];
        vector(in, out);
        _mm256_mask_storeu_epi16(dst, mask, _mm256_load_si256(reinterpret_cast<const __m256i*>(out)));
      }
      return;
#endif
      From in[L > 0 ? L : 1] = {};
      To out[L > 0 ? L : 1];
      std::memcpy(in, src, static_cast<std::size_t>(n) * sizeof(From));
      vector(in, out);
      std::memcpy(dst, out, static_cast<std::size_t>(n) * sizeof(To));
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = scalar(src[i]);
  }
}

/// `dst[i] = load(src[i])` for i in [0, n).
template <typename T>
void widen_n(const T* src, float* dst, std::int64_t n) noexcept {
  static_assert(is_half_v<T>);
  convert_n(
      src, dst, n, [](const T* s, float* d) { widen_vector(s, d); }, [](T v) { return load(v); });
}

/// `dst[i] = store<T>(src[i])` for i in [0, n): to nearest, ties to even; NaN stays NaN (quiet).
template <typename T>
void narrow_n(const float* src, T* dst, std::int64_t n) noexcept {
  static_assert(is_half_v<T>);
  convert_n(
      src, dst, n, [](const float* s, T* d) { narrow_vector(s, d); }, [](float v) { return store<T>(v); });
}

}  // namespace rml::detail
