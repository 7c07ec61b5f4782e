// SmallVector against std::vector: the same operations, from a seeded random sequence, must leave
// both holding the same elements, across the inline/heap boundary in both directions.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <rml/core/shape.hpp>
#include <rml/core/small_vector.hpp>
#include <rml/ir/graph.hpp>

using rml::SmallVector;

namespace {

template <typename T, std::size_t N>
bool same(const SmallVector<T, N>& a, const std::vector<T>& b) {
  if (a.size() != b.size() || a.empty() != b.empty()) return false;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i] != b[i]) return false;
  return std::vector<T>(a.begin(), a.end()) == b && a.to_vector() == b;
}

}  // namespace

TEST_CASE("SmallVector keeps N elements inline and is as small as a std::vector for ids") {
  static_assert(sizeof(rml::ValueIds) == sizeof(std::vector<rml::ValueId>));
  static_assert(sizeof(rml::Dims) == 6 * sizeof(std::int64_t) + 8);
  SmallVector<std::int64_t, 3> v{1, 2, 3};
  CHECK(v.is_inline());
  CHECK(v.capacity() == 3);
  v.push_back(4);
  CHECK_FALSE(v.is_inline());
  CHECK(v.capacity() >= 4);
  CHECK(same(v, {1, 2, 3, 4}));
  SmallVector<std::int64_t, 3> moved(std::move(v));
  CHECK(same(moved, {1, 2, 3, 4}));
  CHECK(v.empty());  // NOLINT(bugprone-use-after-move): a moved-from SmallVector is empty
  CHECK(v.is_inline());
  v = {7};
  CHECK(same(v, {7}));
}

TEST_CASE("SmallVector matches std::vector over a random sequence of operations") {
  std::mt19937 rng(20261130);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  SmallVector<std::uint32_t, 4> a;
  std::vector<std::uint32_t> b;
  for (int step = 0; step < 20000; ++step) {
    const auto x = static_cast<std::uint32_t>(rng());
    const int op = pick(12);
    if (op <= 2) {
      a.push_back(x);
      b.push_back(x);
    } else if (op == 3 && !b.empty()) {
      a.pop_back();
      b.pop_back();
    } else if (op == 4) {
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(b.size()) + 1));
      a.insert(a.begin() + at, x);
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), x);
    } else if (op == 5 && !b.empty()) {
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(b.size())));
      const auto len = static_cast<std::size_t>(pick(static_cast<int>(b.size() - at) + 1));
      a.erase(a.begin() + at, a.begin() + at + len);
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
    } else if (op == 6) {
      const auto n = static_cast<std::size_t>(pick(12));
      a.resize(n, x);
      b.resize(n, x);
    } else if (op == 7 && !b.empty()) {
      // Insert a copy of part of itself (the source moves while the gap opens).
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(b.size()) + 1));
      const auto from = static_cast<std::size_t>(pick(static_cast<int>(b.size())));
      const std::vector<std::uint32_t> part(b.begin() + static_cast<std::ptrdiff_t>(from), b.end());
      a.insert(a.begin() + at, a.begin() + from, a.end());
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), part.begin(), part.end());
    } else if (op == 8) {
      SmallVector<std::uint32_t, 4> copy = a;  // copy, then move back: both layouts
      a = std::move(copy);
    } else if (op == 9 && pick(20) == 0) {
      a.clear();
      b.clear();
    } else if (op == 10) {
      a.push_back(a.empty() ? x : a.front());  // an element of itself, when growth reallocates
      b.push_back(b.empty() ? x : b.front());
    } else if (op == 11 && pick(2) == 0) {
      const auto n = static_cast<std::size_t>(pick(9));
      a.resize_for_overwrite(n);  // then every element written, as a decoder does
      b.resize(n);
      for (std::size_t i = 0; i < n; ++i) a[i] = b[i] = x + static_cast<std::uint32_t>(i);
    } else if (op == 11) {
      const auto n = static_cast<std::size_t>(pick(9));
      a.assign(n, x);
      b.assign(n, x);
    }
    REQUIRE(same(a, b));
    REQUIRE(a.is_inline() == (a.capacity() == 4));
  }
}

TEST_CASE("SmallVector compares like std::vector") {
  using V = SmallVector<std::int64_t, 2>;
  CHECK(V{1, 2} == V{1, 2});
  CHECK(V{1, 2} != V{1, 2, 3});
  CHECK(V{1, 2} < V{1, 2, 3});
  CHECK(V{1, 3} > V{1, 2, 3});
  CHECK(V{} < V{0});
  CHECK(V{5, 6, 7} == std::vector<std::int64_t>{5, 6, 7});
  const V from_vector = std::vector<std::int64_t>{4, 5, 6, 7};
  CHECK(from_vector.size() == 4);
  CHECK(from_vector.back() == 7);
}

TEST_CASE("A rank-7 shape spills to the heap and keeps every dimension") {
  const rml::Shape s{2, 3, 4, 5, 6, 7, 8};
  CHECK(s.rank() == 7);
  CHECK_FALSE(s.dims().is_inline());
  CHECK(s.numel() == 2 * 3 * 4 * 5 * 6 * 7 * 8);
  CHECK(s.to_string() == "[2, 3, 4, 5, 6, 7, 8]");
  rml::Shape t = s;
  CHECK(t == s);
  t[6] = 9;
  CHECK(t != s);
}
