// Arena planning: intermediates with disjoint lifetimes share bytes of one 64-byte aligned arena.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace rml::detail {

inline constexpr std::size_t kArenaAlignment = 64;

constexpr std::size_t align_up(std::size_t n, std::size_t a = kArenaAlignment) noexcept { return (n + a - 1) / a * a; }

/// A buffer live from step `first` through step `last` (inclusive); `offset` is the plan's answer.
struct ArenaBuffer {
  std::size_t bytes = 0;
  std::int64_t first = 0, last = 0;
  std::size_t offset = 0;
};

/// Places every buffer at an aligned offset so that buffers whose lifetimes overlap do not
/// overlap in memory; returns the arena size. Greedy by size (largest first, lowest fitting
/// offset), the strategy TFLite's arena planner uses: near-optimal on chains and cheap.
inline std::size_t plan_arena(std::vector<ArenaBuffer>& buffers) {
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end) of live neighbours
  std::size_t total = 0;
  for (std::size_t i : order) {
    ArenaBuffer& b = buffers[i];
    const std::size_t size = align_up(b.bytes);
    busy.clear();
    for (std::size_t j : placed) {
      const ArenaBuffer& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(o.offset, o.offset + align_up(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    std::size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    b.offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(i);
  }
  return total;
}

}  // namespace rml::detail
