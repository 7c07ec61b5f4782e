// rml's GEMM (kernels/sgemm.hpp) against a product summed in double: every B accessor, row counts
// that leave each micro-tile height (kMr and the smaller tiles), column counts that leave partial
// panels, depths past one depth block, row ranges that start inside the matrix, and accumulation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rml/exec/kernels/sgemm.hpp"

namespace {

namespace sg = rml::detail::sgemm;

struct Lcg {
  std::uint32_t s = 2463534242u;
  float next() {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  }
};

std::vector<float> random_floats(std::int64_t n, Lcg& g) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = g.next();
  return v;
}

/// max |C - A B| over rows [r0, r1) and columns [0, cols), against sums in double, divided by the
/// sum of |a||b| (the scale of the rounding error of a float sum).
double worst_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                   std::int64_t depth, std::int64_t cols, std::int64_t ldc, std::int64_t r0, std::int64_t r1) {
  double worst = 0;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      double sum = 0, scale = 1e-30;
      for (std::int64_t k = 0; k < depth; ++k) {
        const double p = static_cast<double>(a[static_cast<std::size_t>(r * depth + k)]) *
                         static_cast<double>(b[static_cast<std::size_t>(k * cols + j)]);
        sum += p;
        scale += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(c[static_cast<std::size_t>(r * ldc + j)] - sum) / scale);
    }
  return worst;
}

/// Float rounding over `depth` terms stays far below this relative to the sum of magnitudes.
constexpr double kTolerance = 1e-5;

}  // namespace

TEST_CASE("sgemm: strided, offset and packed B give the product, over every tile height and partial panel") {
  Lcg g;
  const std::int64_t depths[] = {1, 7, sg::kDepth, sg::kDepth + 5, 2 * sg::kDepth + 3};
  const std::int64_t row_counts[] = {1, 2, 3, 5, 8, sg::kMr, sg::kMr + 1, 2 * sg::kMr + 7};
  const std::int64_t col_counts[] = {1, sg::kNr - 1, sg::kNr, sg::kNr + 3, 3 * sg::kNr + 1};
  for (std::int64_t depth : depths)
    for (std::int64_t rows : row_counts)
      for (std::int64_t cols : col_counts) {
        CAPTURE(depth);
        CAPTURE(rows);
        CAPTURE(cols);
        const auto a = random_floats(rows * depth, g);
        const auto b = random_floats(depth * cols, g);
        std::vector<float> packed(static_cast<std::size_t>(sg::packed_floats(rows, depth)));
        sg::pack_a(a.data(), depth, rows, depth, packed.data());
        std::vector<float> panel(static_cast<std::size_t>(sg::kPanelFloats));
        const std::int64_t ldc = cols + 2;  // a row stride wider than the columns: the gap must stay untouched
        const float sentinel = 1234.5f;

        // B strided (its rows `cols` apart, so a partial panel is copied).
        std::vector<float> c(static_cast<std::size_t>(rows * ldc), sentinel);
        sg::multiply(packed.data(), depth, sg::StridedRows{b.data(), cols}, cols, c.data(), ldc, 0, rows, false,
                     panel.data());
        CHECK(worst_error(a, b, c, depth, cols, ldc, 0, rows) < kTolerance);
        for (std::int64_t r = 0; r < rows; ++r) CHECK(c[static_cast<std::size_t>(r * ldc + cols)] == sentinel);

        // B at per-row offsets: the same rows, listed in a table.
        std::vector<std::int64_t> offset(static_cast<std::size_t>(depth));
        for (std::int64_t k = 0; k < depth; ++k) offset[static_cast<std::size_t>(k)] = k * cols;
        std::fill(c.begin(), c.end(), sentinel);
        sg::multiply(packed.data(), depth, sg::OffsetRows{b.data(), offset.data()}, cols, c.data(), ldc, 0, rows, false,
                     panel.data());
        CHECK(worst_error(a, b, c, depth, cols, ldc, 0, rows) < kTolerance);

        // B packed into panels, read in whole panels; C still stored only over its columns.
        std::vector<float> bp(static_cast<std::size_t>(sg::packed_b_floats(depth, cols)));
        sg::pack_b(b.data(), cols, 1, depth, cols, bp.data());
        std::fill(c.begin(), c.end(), sentinel);
        sg::multiply(packed.data(), depth, sg::PanelRows{bp.data(), depth}, cols, c.data(), ldc, 0, rows, false,
                     nullptr, true);
        CHECK(worst_error(a, b, c, depth, cols, ldc, 0, rows) < kTolerance);
        for (std::int64_t r = 0; r < rows; ++r) CHECK(c[static_cast<std::size_t>(r * ldc + cols)] == sentinel);
      }
}

TEST_CASE("sgemm: B given transposed packs to the same panels; A given transposed packs to the same blocks") {
  Lcg g;
  const std::int64_t depth = 37, cols = sg::kNr + 5, rows = sg::kMr + 3;
  const auto b = random_floats(depth * cols, g);
  std::vector<float> bt(b.size());
  for (std::int64_t k = 0; k < depth; ++k)
    for (std::int64_t j = 0; j < cols; ++j)
      bt[static_cast<std::size_t>(j * depth + k)] = b[static_cast<std::size_t>(k * cols + j)];
  std::vector<float> p1(static_cast<std::size_t>(sg::packed_b_floats(depth, cols))), p2(p1.size());
  sg::pack_b(b.data(), cols, 1, depth, cols, p1.data());
  sg::pack_b(bt.data(), 1, depth, depth, cols, p2.data());
  CHECK(p1 == p2);
  // The padding columns of the last panel are zero.
  CHECK(p1[static_cast<std::size_t>(sg::kNr * depth + cols - sg::kNr)] == 0.0f);

  const auto a = random_floats(rows * depth, g);
  std::vector<float> at(a.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < depth; ++k)
      at[static_cast<std::size_t>(k * rows + r)] = a[static_cast<std::size_t>(r * depth + k)];
  std::vector<float> q1(static_cast<std::size_t>(sg::packed_floats(rows, depth))), q2(q1.size());
  sg::pack_a(a.data(), depth, rows, depth, q1.data());
  for (std::int64_t k = 0; k < depth; ++k) sg::pack_a_row(at.data() + k * rows, rows, depth, k, q2.data());
  CHECK(q1 == q2);
}

TEST_CASE("sgemm: a row range inside the matrix, whole padded panels, and an empty depth") {
  Lcg g;
  const std::int64_t depth = sg::kDepth + 9, rows = 3 * sg::kMr + 2, cols = 2 * sg::kNr + 3;
  const std::int64_t padded_cols = 3 * sg::kNr;  // B and C rows readable and writable in whole panels
  const auto a = random_floats(rows * depth, g);
  const auto b = random_floats(depth * cols, g);
  std::vector<float> bwide(static_cast<std::size_t>(depth * padded_cols), 0.0f);
  for (std::int64_t k = 0; k < depth; ++k) std::copy_n(b.begin() + k * cols, cols, bwide.begin() + k * padded_cols);
  std::vector<float> packed(static_cast<std::size_t>(sg::packed_floats(rows, depth)));
  sg::pack_a(a.data(), depth, rows, depth, packed.data());
  const float sentinel = -7.25f;
  std::vector<float> c(static_cast<std::size_t>(rows * padded_cols), sentinel);
  // Rows [kMr, rows): the first block of rows stays untouched.
  sg::multiply(packed.data(), depth, sg::StridedRows{bwide.data(), padded_cols}, cols, c.data(), padded_cols, sg::kMr,
               rows, true, nullptr);
  CHECK(worst_error(a, b, c, depth, cols, padded_cols, sg::kMr, rows) < kTolerance);
  for (std::int64_t r = 0; r < sg::kMr; ++r) CHECK(c[static_cast<std::size_t>(r * padded_cols)] == sentinel);

  std::vector<float> z(static_cast<std::size_t>(2 * cols), sentinel);
  sg::multiply(packed.data(), 0, sg::StridedRows{b.data(), cols}, cols, z.data(), cols, 0, 2, false, nullptr);
  for (float v : z) CHECK(v == 0.0f);
}
