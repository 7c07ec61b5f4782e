// What the executor checks at its edges: the memory a program needs against a budget, the tensors
// a run is handed against their storage and against each other, and the exceptions that must
// not leave a public call (an allocation failure becomes a Status).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "rml/core/checked.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/memory_plan.hpp"

namespace rml {

/// What one executor may use. The budget covers what a run allocates: the arena (intermediates
/// and kernel scratch, shared by liveness) and the output tensors run() returns. Constants are
/// already in memory and not counted; each concurrent run has its own arena.
struct MemoryLimits {
  /// Most bytes one run may need; 0 means the machine's physical memory (physical_memory_bytes()).
  std::size_t max_bytes = 0;
};

/// The machine's physical memory (sysconf pages x page size), or the largest size_t when unknown.
inline std::size_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return static_cast<std::size_t>(-1);
  std::size_t total = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(pages), static_cast<std::size_t>(page), &total))
    return static_cast<std::size_t>(-1);
  return total;
}

namespace detail {

/// The budget `limits` stands for, in bytes.
inline std::size_t memory_budget(const MemoryLimits& limits) noexcept {
  return limits.max_bytes != 0 ? limits.max_bytes : physical_memory_bytes();
}

inline std::string gib(std::size_t bytes) {
  const double g = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", g);
  return std::string(buf) + " (" + std::to_string(bytes) + " bytes)";
}

/// Sums the buffers' aligned sizes into `total` with overflow checks, and refuses (OUT_OF_RANGE)
/// when the sum exceeds `budget`. Run before plan_arena: an arena is never larger than this sum,
/// so the plan's offsets cannot overflow either.
inline Status sum_buffers_within(std::span<const ArenaBuffer> buffers, std::size_t budget, std::size_t& total) {
  total = 0;
  for (const ArenaBuffer& b : buffers) {
    const auto aligned = checked_add_size(b.bytes, kArenaAlignment - 1);
    const auto sum = aligned ? checked_add_size(total, *aligned / kArenaAlignment * kArenaAlignment) : std::nullopt;
    if (!sum || *sum > budget)
      return out_of_range("Executor::create: the intermediates need more than the memory budget of " + gib(budget) +
                          " (ExecutorOptions::memory.max_bytes)");
    total = *sum;
  }
  return {};
}

/// OUT_OF_RANGE when a run's arena plus its outputs (`output_types`) exceed `budget`.
inline Status check_run_budget(std::size_t arena_bytes, std::span<const TensorType> output_types, std::size_t budget) {
  std::size_t total = arena_bytes;
  bool overflow = false;
  for (const TensorType& t : output_types) {
    const auto n = t.checked_nbytes();
    const auto sum = n ? checked_add_size(total, static_cast<std::size_t>(*n)) : std::nullopt;
    if (!sum) {
      overflow = true;
      break;
    }
    total = *sum;
  }
  if (overflow || total > budget)
    return out_of_range("Executor::create: a run needs " +
                        (overflow ? std::string("more than int64 can count") : gib(total)) + " (arena " +
                        gib(arena_bytes) + " and the outputs), more than the memory budget of " + gib(budget) +
                        " (ExecutorOptions::memory.max_bytes)");
  return {};
}

/// `input 0 ("x")`: how the executor's messages name an input or output.
/// A bool tensor whose bytes are all 0 or 1 (kernels read them as `bool`); `what()` names it and is
/// called only on failure, so a good tensor costs no allocation.
template <typename What>
Status check_bool_bytes(const Tensor& t, What&& what) {
  if (t.dtype() != DType::boolean) return {};
  const auto bytes = t.bytes();
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (std::to_integer<unsigned>(bytes[i]) > 1)
      return invalid_argument(what() + " is bool but its byte " + std::to_string(i) + " is " +
                              std::to_string(std::to_integer<unsigned>(bytes[i])) + ", not 0 or 1");
  return {};
}

inline std::string io_label(std::string_view kind, std::size_t index, const std::string& name) {
  return std::string(kind) + " " + std::to_string(index) + (name.empty() ? "" : " (\"" + name + "\")");
}

/// Names inputs and outputs by position from the graph's names (for check_run_views).
struct IoLabels {
  const std::vector<std::string>* inputs;
  const std::vector<std::string>* outputs;
  std::string operator()(std::string_view kind, std::size_t k) const {
    const auto& names = kind == "input" ? *inputs : *outputs;
    return io_label(kind, k, k < names.size() ? names[k] : std::string());
  }
};

/// The bytes a tensor's view spans, as an address range.
struct ByteRange {
  std::uintptr_t begin = 0, end = 0;
  [[nodiscard]] bool overlaps(const ByteRange& o) const noexcept { return begin < o.end && o.begin < end; }
};

inline ByteRange byte_range(const Tensor& t) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(t.raw_data());
  return {begin, begin + t.nbytes()};
}

/// Checks the tensors handed to a run: every one is concrete and its view lies inside its storage,
/// aligned (Tensor::check_storage); every output is writable and shares no byte with an input,
/// another output, or one of the graph's `constants`. INVALID_ARGUMENT naming the tensor
/// (`label(kind, index)` builds the name). Aliasing is refused, not handled: a kernel may read an
/// input after it has started writing its output.
template <typename Label>
Status check_run_views(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                       std::span<const Tensor> constants, Label&& label) {
  const auto check = [&](const Tensor& t, std::string_view kind, std::size_t k) -> Status {
    if (t.is_symbolic()) return invalid_argument("run: " + label(kind, k) + " is symbolic (a traced value), not data");
    if (!t.defined()) return {};  // the type checks name it
    const Status s = t.check_storage();
    if (!s.ok()) return invalid_argument("run: " + label(kind, k) + ": " + s.message());
    return {};
  };
  for (std::size_t k = 0; k < inputs.size(); ++k) RML_RETURN_IF_ERROR(check(inputs[k], "input", k));
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    RML_RETURN_IF_ERROR(check(outputs[k], "output", k));
    if (!outputs[k].defined() || outputs[k].nbytes() == 0) continue;
    const ByteRange r = byte_range(outputs[k]);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].nbytes() != 0 && r.overlaps(byte_range(inputs[i])))
        return invalid_argument("run_into: " + label("output", k) + " shares memory with " + label("input", i) +
                                "; outputs must not alias inputs (pass a separate tensor)");
    for (std::size_t j = 0; j < k; ++j)
      if (outputs[j].defined() && outputs[j].nbytes() != 0 && r.overlaps(byte_range(outputs[j])))
        return invalid_argument("run_into: " + label("output", k) + " shares memory with " + label("output", j));
    for (const Tensor& c : constants)
      if (c.defined() && c.nbytes() != 0 && r.overlaps(byte_range(c)))
        return invalid_argument("run_into: " + label("output", k) + " shares memory with a constant of the graph");
  }
  return {};
}

/// Runs `f` (returning a Status or a Result) and turns what must not escape a public call into a
/// Status: an allocation failure (std::bad_alloc, std::length_error) or a thread that cannot start
/// (std::system_error) is OUT_OF_RANGE, an rml::Error its own status. Nothing else is caught: any
/// other exception is a bug to see, not to hide.
template <typename F>
auto guarded(std::string_view call, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    return e.status().with_prefix(std::string(call) + ": ");
  } catch (const std::bad_alloc&) {
    return out_of_range(std::string(call) + ": out of memory");
  } catch (const std::length_error& e) {
    return out_of_range(std::string(call) + ": a size is too large (" + e.what() + ")");
  } catch (const std::system_error& e) {
    return out_of_range(std::string(call) + ": " + e.what());
  }
}

}  // namespace detail

}  // namespace rml
