// Dinic's maximum flow, iterative (graphs 100 k vertices deep must not overflow the stack).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace rml::detail {

/// A flow network over vertices 0..n-1 with 64-bit capacities. Edges are added in pairs
/// (forward, residual); capacities can be reset and re-run for another source/sink attachment.
class FlowNetwork {
 public:
  using Cap = std::int64_t;

  explicit FlowNetwork(std::uint32_t vertices) : head_(vertices, kNone), level_(vertices), arc_(vertices) {}

  /// Adds u -> v with capacity `cap`; returns the edge's index (its residual is index ^ 1).
  std::uint32_t add_edge(std::uint32_t u, std::uint32_t v, Cap cap) {
    const auto e = static_cast<std::uint32_t>(to_.size());
    to_.push_back(v), cap_.push_back(cap), next_.push_back(head_[u]), head_[u] = e;
    to_.push_back(u), cap_.push_back(0), next_.push_back(head_[v]), head_[v] = e + 1;
    return e;
  }
  void set_capacity(std::uint32_t edge, Cap cap) { cap_[edge] = cap, cap_[edge ^ 1] = 0; }
  /// Remembers the current capacities, so reset() can restore them after a run.
  void save() { saved_ = cap_; }
  void reset() { cap_ = saved_; }

  /// The maximum flow from s to t; stops early once it reaches `limit`.
  Cap max_flow(std::uint32_t s, std::uint32_t t, Cap limit = std::numeric_limits<Cap>::max()) {
    Cap flow = 0;
    while (flow < limit && bfs(s, t)) {
      std::copy(head_.begin(), head_.end(), arc_.begin());
      flow += augment(s, t, limit - flow);
    }
    return flow;
  }

  /// After max_flow: true for the vertices the source still reaches in the residual network
  /// (the smallest minimum cut's source side).
  [[nodiscard]] std::vector<bool> source_side(std::uint32_t s) const {
    std::vector<bool> seen(head_.size(), false);
    std::vector<std::uint32_t> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      const std::uint32_t u = stack.back();
      stack.pop_back();
      for (std::uint32_t e = head_[u]; e != kNone; e = next_[e])
        if (cap_[e] > 0 && !seen[to_[e]]) seen[to_[e]] = true, stack.push_back(to_[e]);
    }
    return seen;
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  bool bfs(std::uint32_t s, std::uint32_t t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::vector<std::uint32_t> queue{s};
    level_[s] = 0;
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const std::uint32_t u = queue[q];
      for (std::uint32_t e = head_[u]; e != kNone; e = next_[e])
        if (cap_[e] > 0 && level_[to_[e]] < 0) level_[to_[e]] = level_[u] + 1, queue.push_back(to_[e]);
    }
    return level_[t] >= 0;
  }

  // Blocking flow along the level graph, one path at a time with an explicit stack of edges.
  Cap augment(std::uint32_t s, std::uint32_t t, Cap limit) {
    Cap total = 0;
    std::vector<std::uint32_t> path;
    std::uint32_t u = s;
    while (total < limit) {
      if (u == t) {
        Cap push = limit - total;
        for (std::uint32_t e : path) push = std::min(push, cap_[e]);
        std::size_t cut_at = path.size();
        for (std::size_t i = 0; i < path.size(); ++i) {
          cap_[path[i]] -= push, cap_[path[i] ^ 1] += push;
          if (cap_[path[i]] == 0 && cut_at == path.size()) cut_at = i;
        }
        total += push;
        path.resize(cut_at);
        u = path.empty() ? s : to_[path.back()];
        continue;
      }
      std::uint32_t& e = arc_[u];
      while (e != kNone && !(cap_[e] > 0 && level_[to_[e]] == level_[u] + 1)) e = next_[e];
      if (e != kNone) {
        path.push_back(e);
        u = to_[e];
        continue;
      }
      if (u == s) break;
      level_[u] = -1;  // dead end: never enter again in this phase
      path.pop_back();
      u = path.empty() ? s : to_[path.back()];
    }
    return total;
  }

  std::vector<std::uint32_t> head_;
  std::vector<std::uint32_t> to_, next_;
  std::vector<Cap> cap_, saved_;
  std::vector<int> level_;
  std::vector<std::uint32_t> arc_;
};

}  // namespace rml::detail
