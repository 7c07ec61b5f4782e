// ThreadPool: worker threads for intra-op parallelism, shared by executors; parallel_for allocates nothing.
//
// By default every executor on one device shares that device's process-wide pool (as ONNX Runtime's
// global thread pool): two executors at 2 threads start one worker, not two. The pool grows to the
// largest thread count any executor asked for and never shrinks; an executor that asked for fewer
// threads still uses at most its own count at once (ThreadPool::limited). A pool of one's own is
// made with ThreadPool::create and passed in ExecutorOptions::pool.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "rml/core/status.hpp"

namespace rml {

namespace detail {

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

/// Tests set this to make the next worker start fail as std::thread would when the system has no
/// threads left (std::system_error), so the path that turns it into a Status is exercised.
inline std::atomic<bool> fail_next_thread_start_for_testing{false};

// Two-part splits follow the speed of the two threads. The share of the work that part 0 (the
// caller's) takes in the two-part jobs a thread posts is `part_share`; a job carries its poster's
// share to the worker, and kernels place the split with part_begin. An executor gives each step a
// share of its own and moves it after every run toward the one that would have had both parts end
// together (rebalanced_share), from the times parallel_for adds to `part_times`. A split moves by
// whole items (tiles, planes, channel panels) and every item is computed the same wherever it runs,
// so outputs do not depend on the share (tests/exec/test_ops.cpp checks it bit for bit on every
// NumPy case); work whose rounding depends on where its ranges end splits evenly (Split::even).
// With even halves, one thread of the 2-vCPU VM measured sat idle for 9-16 % of a ResNet-50 run
// waiting for the other, which one changing from process to process (docs/ops.md, "Two threads
// that pay").

/// The share of part 0 in the two-part jobs this thread posts, or, on a worker, in the job it runs.
inline thread_local float part_share = 0.5f;

/// Nanoseconds from posting to the end of each part, summed over the two-part jobs this thread
/// posted since it last reset them (jobs the caller ran whole are not counted).
struct PartTimes {
  std::int64_t caller_ns = 0, worker_ns = 0;
};
inline thread_local PartTimes part_times;

/// The first item of part `part` of a split of [0, total) into `parts`: even parts, except that the
/// second of two starts where this thread's part_share puts it (at total / 2 for 0.5), leaving each
/// part one item at least. Parts are contiguous, in order, and cover [0, total):
/// part_begin(total, 0, parts) is 0 and part_begin(total, parts, parts) is total.
inline std::int64_t part_begin(std::int64_t total, std::int64_t part, std::int64_t parts) noexcept {
  if (parts != 2 || part != 1 || total < 2) return total * part / parts;
  const auto shift = static_cast<std::int64_t>(std::llround(static_cast<double>(total) * (part_share - 0.5)));
  return std::clamp<std::int64_t>(total / 2 + shift, 1, total - 1);
}

/// Parts shorter than this are not timed for balancing: waking the worker and its first cache misses
/// outweigh the split there.
inline constexpr std::int64_t kBalanceMinNs = 20'000;
/// The range a share stays in: a part never shrinks below 3/7 of the other.
inline constexpr float kMinShare = 0.3f, kMaxShare = 0.7f;

/// The share for the next run of a step whose parts at share `share` ended `caller_ns` and
/// `worker_ns` after they were posted: a third of the way toward the share that would have had them
/// end together if each part's time grows with its share, within [kMinShare, kMaxShare]; `share`
/// unchanged when a part was too short to tell (kBalanceMinNs).
inline float rebalanced_share(float share, std::int64_t caller_ns, std::int64_t worker_ns) noexcept {
  if (caller_ns < kBalanceMinNs || worker_ns < kBalanceMinNs) return share;
  const double caller_rate = share / static_cast<double>(caller_ns);
  const double worker_rate = (1.0 - share) / static_cast<double>(worker_ns);
  const double even = caller_rate / (caller_rate + worker_rate);
  return std::clamp(static_cast<float>(share + (even - share) / 3.0), kMinShare, kMaxShare);
}

inline std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The worker threads and their queue. Several callers may use it at once (concurrent runs, several
/// executors): their jobs interleave in the queue. It grows and never shrinks.
class Workers {
 public:
  Workers() { queue_.reserve(64); }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers() {
    stopping_.store(true, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    std::lock_guard grow_lock(grow_mu_);
    for (auto& t : threads_) t.join();
  }

  /// Workers running now.
  [[nodiscard]] int count() const noexcept { return count_.load(std::memory_order_acquire); }

  /// Starts workers until there are `workers`. INTERNAL when the system refuses a thread; the workers
  /// started before it stay and are used.
  Status grow_to(int workers) {
    std::lock_guard grow_lock(grow_mu_);
    while (std::ssize(threads_) < workers) {
      try {
        if (fail_next_thread_start_for_testing.exchange(false))
          throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
        threads_.emplace_back([this] { work(); });
      } catch (const std::system_error& e) {
        return Status(Code::internal, "thread pool: cannot start worker " + std::to_string(threads_.size() + 1) +
                                          " of " + std::to_string(workers) + ": " + e.what());
      }
      count_.store(static_cast<int>(threads_.size()), std::memory_order_release);
    }
    return {};
  }

  /// Calls `task(i)` for every i in [0, n) on the caller and at most `helpers` workers.
  void parallel_for(std::int64_t n, TaskRef task, int helpers_at_most) const {
    if (n <= 0) return;
    const std::int64_t helpers64 = std::min<std::int64_t>({n - 1, helpers_at_most, count()});
    if (helpers64 <= 0) {
      for (std::int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    const auto helpers = static_cast<std::size_t>(helpers64);
    Job job{task, n};
    job.share = part_share;
    job.timed = n == 2;  // a two-part split: its parts' times steer the share
    const std::int64_t posted = job.timed ? steady_ns() : 0;
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < helpers; ++i) queue_.push_back(&job);
      pending_.fetch_add(static_cast<int>(helpers), std::memory_order_release);
    }
    if (helpers == 1)
      cv_.notify_one();
    else
      cv_.notify_all();
    // The caller always takes index 0 (the workers start at 1): kernels split their output so that
    // part 0 of one step reads what part 0 of the step before wrote, and that is only the same core
    // when part 0 always runs on the calling thread. A worker that took index 0 first (it spins on
    // the queue and often wins the race) would read half of every tensor from the other core.
    job.task(0);
    const std::int64_t caller_end = job.timed ? steady_ns() : 0;
    job.done.fetch_add(1, std::memory_order_acq_rel);
    job.drain(false);
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
    const std::int64_t worker_end = job.worker_end.load(std::memory_order_relaxed);
    if (job.timed && worker_end != 0) {
      part_times.caller_ns += caller_end - posted;
      part_times.worker_ns += worker_end - posted;
    }
  }

 private:
  struct Job {
    TaskRef task;
    std::int64_t n;
    std::atomic<std::int64_t> next{1};  // index 0 is the caller's
    std::atomic<std::int64_t> done{0};
    std::atomic<int> active{0};  // workers that took the job and have not left it
    float share = 0.5f;          // the poster's part_share
    bool timed = false;          // a two-part job, whose parts' end times are taken
    std::atomic<std::int64_t> worker_end{0};  // when a worker last finished an index (steady_ns), if timed
    void drain(bool worker) {
      std::int64_t i;
      while ((i = next.fetch_add(1, std::memory_order_relaxed)) < n) {
        if (worker) part_share = share;
        task(i);
        if (worker && timed) worker_end.store(steady_ns(), std::memory_order_relaxed);
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
      job->drain(true);
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
  bool stop_ = false;
  std::mutex grow_mu_;  ///< guards threads_
  std::vector<std::thread> threads_;
  std::atomic<int> count_{0};
};

}  // namespace detail

/// Threads for intra-op parallelism: a handle on shared workers and how many threads (the caller of
/// parallel_for included) one user of the handle may run at once. Copies of a handle share the
/// workers; the workers stop when the last handle is gone.
class ThreadPool {
 public:
  /// The most threads a pool runs: 4 per hardware thread, and never more than 1024.
  static int max_threads() noexcept {
    const int hardware = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 256u));
    return std::min(4 * hardware, 1024);
  }

  /// `threads` clamped to [1, max_threads()]; 0 or less means one per hardware thread.
  static int clamp_threads(int threads) noexcept {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::clamp(threads, 1, max_threads());
  }

  /// A pool of its own with `threads` threads (clamped; `threads - 1` workers, the caller is the last).
  /// INTERNAL when the system cannot start a thread.
  static Result<std::shared_ptr<const ThreadPool>> create(int threads) {
    auto workers = std::make_shared<detail::Workers>();
    const int n = clamp_threads(threads);
    RML_RETURN_IF_ERROR(workers->grow_to(n - 1));
    return std::shared_ptr<const ThreadPool>(new ThreadPool(std::move(workers), n));
  }

  /// The process-wide pool of CPU device `device_index`, grown to `threads` (clamped) when it has fewer,
  /// limited to `threads` for the caller. Executors that are given no pool use it, so every executor of
  /// a process shares one set of workers per device.
  static Result<std::shared_ptr<const ThreadPool>> shared(int threads, std::int32_t device_index = 0) {
    static std::mutex mu;
    static std::map<std::int32_t, std::shared_ptr<detail::Workers>> registry;
    const int n = clamp_threads(threads);
    std::shared_ptr<detail::Workers> workers;
    {
      std::lock_guard lock(mu);
      auto& slot = registry[device_index];
      if (!slot) slot = std::make_shared<detail::Workers>();
      workers = slot;
    }
    RML_RETURN_IF_ERROR(workers->grow_to(n - 1));
    return std::shared_ptr<const ThreadPool>(new ThreadPool(std::move(workers), n));
  }

  /// The same workers, at most `threads` of them at once (never more than this handle's).
  [[nodiscard]] std::shared_ptr<const ThreadPool> limited(int threads) const {
    return std::shared_ptr<const ThreadPool>(new ThreadPool(workers_, std::clamp(threads, 1, threads_)));
  }

  /// Threads that run a parallel_for, the caller included (fixed for the handle: its workers were
  /// started before it was made, and workers never stop while a handle is alive).
  [[nodiscard]] int threads() const noexcept { return threads_; }

  /// Workers behind the handle, shared with every other handle on them.
  [[nodiscard]] int workers() const noexcept { return workers_->count(); }

  /// Calls `task(i)` for every i in [0, n), spread over at most threads() threads; returns when all are done.
  void parallel_for(std::int64_t n, detail::TaskRef task) const { workers_->parallel_for(n, task, threads_ - 1); }

 private:
  ThreadPool(std::shared_ptr<detail::Workers> workers, int threads) : workers_(std::move(workers)), threads_(threads) {}

  std::shared_ptr<detail::Workers> workers_;
  int threads_;
};

namespace detail {

/// Items per part so that each part holds at least `min_work` units of work (multiply-adds,
/// elements touched) when one item costs `work_per_item`, and at least `min_items`: below that,
/// handing a part to another thread costs more than the part saves.
inline std::int64_t work_grain(std::int64_t work_per_item, std::int64_t min_items = 1,
                               std::int64_t min_work = std::int64_t{1} << 15) {
  const std::int64_t per = std::max<std::int64_t>(work_per_item, 1);
  return std::max(min_items, (min_work + per - 1) / per);
}

// Kernels over an [n, c, h, w] activation (elementwise ops, pools, depthwise convolutions) split
// it over threads in ranges of whole planes (channels), so each thread's share is one contiguous
// block. Bands of rows of every plane, which the convolutions' position tiles would match, put two
// boundaries between threads in every plane, and on a machine whose cores share no L3 the
// hardware prefetchers then pull the neighbouring part's lines across at every one of them: a
// 144-channel 56x56 depthwise layer took 176-202 us at 2 threads in bands, longer than its 131-148
// at 1, and 77-92 us with each thread on half the channels (docs/ops.md, "Which thread reads what").

/// Calls `f(part)` for every part in [0, parts): on the pool when there are several and a pool is
/// given, else one after another on the calling thread.
template <typename F>
void run_parts(const ThreadPool* pool, std::int64_t parts, const F& f) {
  if (parts > 1 && pool) {
    pool->parallel_for(parts, f);
    return;
  }
  for (std::int64_t part = 0; part < parts; ++part) f(part);
}

/// How many parts [0, total) splits into on `pool` (none: one) when each holds at least `grain` items:
/// at least one, at most the pool's threads.
inline std::int64_t part_count(const ThreadPool* pool, std::int64_t total, std::int64_t grain) noexcept {
  const std::int64_t threads = pool ? pool->threads() : 1;
  return std::clamp<std::int64_t>(total / std::max<std::int64_t>(grain, 1), 1, threads);
}

/// Where parallel_ranges cuts: at part_begin, or into even parts for work whose rounding depends on
/// where its ranges end (Eigen's GEMM blocks a product by the shape it is given).
enum class Split { follow_share, even };

/// Splits [0, total) into at most `parts` contiguous ranges of at least `grain` and calls
/// `f(begin, end)` for each, in parallel when a pool is given.
template <typename F>
void parallel_ranges(const ThreadPool* pool, std::int64_t total, std::int64_t grain, const F& f,
                     Split split = Split::follow_share) {
  const std::int64_t parts = part_count(pool, total, grain);
  if (parts <= 1) {
    if (total > 0) f(std::int64_t{0}, total);
    return;
  }
  const auto begin = [&](std::int64_t p) {
    return split == Split::even ? total * p / parts : part_begin(total, p, parts);
  };
  const auto body = [&](std::int64_t p) {
    const std::int64_t b = begin(p), e = begin(p + 1);
    if (b < e) f(b, e);
  };
  pool->parallel_for(parts, body);
}

}  // namespace detail
}  // namespace rml
