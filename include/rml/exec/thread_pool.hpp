// ThreadPool: a small pool for intra-op parallelism; parallel_for allocates nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rml::detail {

/// A non-owning reference to a callable `void(std::int64_t)`; no allocation, unlike std::function.
class TaskRef {
 public:
  template <typename F>
  TaskRef(const F& f) noexcept  // NOLINT: implicit by design
      : object_(&f), call_([](const void* o, std::int64_t i) { (*static_cast<const F*>(o))(i); }) {}
  void operator()(std::int64_t i) const { call_(object_, i); }

 private:
  const void* object_;
  void (*call_)(const void*, std::int64_t);
};

/// `threads - 1` workers; the caller of parallel_for is the last thread. Several callers may
/// use one pool at once (concurrent Executor::run calls): their tasks interleave in the queue.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    const int workers = std::max(0, threads - 1);
    queue_.reserve(64);
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    stopping_.store(true, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  /// Threads that run a parallel_for, the caller included.
  [[nodiscard]] int threads() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  /// Calls `task(i)` for every i in [0, n), spread over the pool; returns when all are done.
  void parallel_for(std::int64_t n, TaskRef task) const {
    if (n <= 0) return;
    if (n == 1 || workers_.empty()) {
      for (std::int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    Job job{task, n};
    const auto helpers = static_cast<std::size_t>(std::min<std::int64_t>(n - 1, std::ssize(workers_)));
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < helpers; ++i) queue_.push_back(&job);
      pending_.fetch_add(static_cast<int>(helpers), std::memory_order_release);
    }
    if (helpers == 1) cv_.notify_one(); else cv_.notify_all();
    job.drain();
    {
      // Entries no worker picked up must not outlive `job`; after this no worker can take one.
      std::lock_guard lock(mu_);
      const auto end = std::remove(queue_.begin(), queue_.end(), &job);
      pending_.fetch_sub(static_cast<int>(queue_.end() - end), std::memory_order_relaxed);
      queue_.erase(end, queue_.end());
    }
    // Workers inside the job finish the indices they claimed; then none touches it again.
    while (job.active.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    job.wait_done();
  }

 private:
  struct Job {
    TaskRef task;
    std::int64_t n;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> done{0};
    std::atomic<int> active{0};  // workers that took the job and have not left it
    void drain() {
      std::int64_t i;
      while ((i = next.fetch_add(1, std::memory_order_relaxed)) < n) {
        task(i);
        done.fetch_add(1, std::memory_order_acq_rel);
      }
    }
    void wait_done() const {
      // Every index was claimed; workers that claimed one finished it before leaving drain().
      while (done.load(std::memory_order_acquire) < n) std::this_thread::yield();
    }
  };

  // A worker spins this long for the next job before sleeping: kernels of one run follow each
  // other within microseconds, and waking a sleeping thread costs tens of them.
  static constexpr auto kSpin = std::chrono::microseconds(200);

  void work() {
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      for (int i = 0; pending_.load(std::memory_order_acquire) == 0 && !stopping_.load(std::memory_order_relaxed);
           ++i) {
        if ((i & 63) == 0 && std::chrono::steady_clock::now() > until) break;
        spin_pause();
      }
      Job* job = nullptr;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = queue_.back();
        queue_.pop_back();
        pending_.fetch_sub(1, std::memory_order_relaxed);
        job->active.fetch_add(1, std::memory_order_relaxed);
      }
      job->drain();
      job->active.fetch_sub(1, std::memory_order_release);  // the last touch of `job`
    }
  }

  static void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::vector<Job*> queue_;
  mutable std::atomic<int> pending_{0};  ///< queue_.size(), readable without the lock
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

/// Items per part so that each part holds at least `min_work` units of work (multiply-adds,
/// elements touched) when one item costs `work_per_item`, and at least `min_items`: below that,
/// handing a part to another thread costs more than the part saves.
inline std::int64_t work_grain(std::int64_t work_per_item, std::int64_t min_items = 1,
                               std::int64_t min_work = std::int64_t{1} << 15) {
  const std::int64_t per = std::max<std::int64_t>(work_per_item, 1);
  return std::max(min_items, (min_work + per - 1) / per);
}

/// Splits [0, total) into at most `parts` contiguous ranges of at least `grain` and calls
/// `f(begin, end)` for each, in parallel when a pool is given.
template <typename F>
void parallel_ranges(const ThreadPool* pool, std::int64_t total, std::int64_t grain, const F& f) {
  const std::int64_t threads = pool ? pool->threads() : 1;
  const std::int64_t parts = std::clamp<std::int64_t>(total / std::max<std::int64_t>(grain, 1), 1, threads);
  if (parts <= 1) {
    if (total > 0) f(std::int64_t{0}, total);
    return;
  }
  const auto body = [&](std::int64_t p) {
    const std::int64_t b = total * p / parts, e = total * (p + 1) / parts;
    if (b < e) f(b, e);
  };
  pool->parallel_for(parts, body);
}

}  // namespace rml::detail
