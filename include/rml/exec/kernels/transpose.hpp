// Square-block SIMD transposes of float matrices, shared by the convolutions' turned-around products
// and Winograd's.
#pragma once

#include <cstdint>

#include <Eigen/Core>

#include "rml/exec/kernels/common.hpp"
#include "rml/exec/kernels/sgemm.hpp"

namespace rml::detail {

// Eigen's packet types carry alignment attributes that GCC drops (and warns of) when one is a class
// template's argument, as PacketBlock's; the attributes do not matter there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
/// One square block through a SIMD transpose (Eigen's ptranspose) of P's lane count S:
/// dst[c * dst_row + r] = src[r * src_row + c] for r, c < S. With `fin`, each row of the block is
/// finished as element (at_row + c, at_col) of the destination fin is relative to.
template <typename P>
void transpose_block(const float* src, std::int64_t src_row, float* dst, std::int64_t dst_row,
                     const sgemm::Finish* fin = nullptr, std::int64_t at_row = 0, std::int64_t at_col = 0) {
  constexpr int S = Eigen::internal::unpacket_traits<P>::size;
  Eigen::internal::PacketBlock<P, S> block;
  for (int r = 0; r < S; ++r) block.packet[r] = Eigen::internal::ploadu<P>(src + r * src_row);
  Eigen::internal::ptranspose(block);
  if (fin)
    for (int r = 0; r < S; ++r) block.packet[r] = fin->apply(block.packet[r], at_row + r, at_col, dst_row);
  for (int r = 0; r < S; ++r) Eigen::internal::pstoreu(dst + r * dst_row, block.packet[r]);
}

/// dst[c * dst_row + r] = src[r * src_row + c] for r < rows, c < cols: square blocks of the widest
/// packet both sides hold (the last ones overlapping), element by element when a side is under 4.
/// With `fin` (relative to dst, row stride dst_row), every element is finished as it is stored.
inline void transpose_matrix(const float* src, std::int64_t src_row, std::int64_t rows, std::int64_t cols, float* dst,
                             std::int64_t dst_row, const sgemm::Finish* fin = nullptr) {
  const auto blocks = [&]<typename P>() {
    constexpr int S = Eigen::internal::unpacket_traits<P>::size;
    if (rows < S || cols < S) return false;
    overlapping_blocks<S>(rows, [&](std::int64_t r) {
      overlapping_blocks<S>(cols, [&](std::int64_t c) {
        transpose_block<P>(src + r * src_row + c, src_row, dst + c * dst_row + r, dst_row, fin, c, r);
      });
    });
    return true;
  };
  using P = sgemm::Packet;
  using Half = typename Eigen::internal::unpacket_traits<P>::half;
  using Quarter = typename Eigen::internal::unpacket_traits<Half>::half;
  if (blocks.template operator()<P>() || blocks.template operator()<Half>() || blocks.template operator()<Quarter>())
    return;
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t r = 0; r < rows; ++r)
      dst[c * dst_row + r] = fin ? fin->apply(src[r * src_row + c], c, r, dst_row) : src[r * src_row + c];
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace rml::detail
