// Tensors as `rml run` handles them: summary statistics, seeded random inputs, tensor files
// (one .safetensors file or a directory of .npy files) and element-wise comparison against a
// reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <rml/core/status.hpp>
#include <rml/core/tensor.hpp>
#include <rml/io/safetensors.hpp>

#include "npy.hpp"

namespace rml_cli {

// Every element of `t` as a double, in order (exact, except i64 beyond ±2^53, which rounds).
template <typename F>
void for_each_element(const rml::Tensor& t, F&& f) {
  rml::visit_dtype(t.dtype(), [&](auto d) {
    using T = rml::dtype_type_t<decltype(d)::value>;
    for (T v : t.span<T>()) f(static_cast<double>(static_cast<rml::compute_type_t<T>>(v)));
  });
}

// ---------------------------------------------------------------------------------------------
// Statistics: min, max, mean and (population) standard deviation over the finite elements; NaN
// and infinities are counted, not included.

struct Stats {
  std::size_t count = 0;
  std::size_t finite = 0;
  std::size_t nan = 0;
  std::size_t inf = 0;
  double min = 0, max = 0, mean = 0, std = 0;  // meaningful when finite > 0
};

inline Stats summarize(const rml::Tensor& t) {
  Stats s;
  double sum = 0;
  for_each_element(t, [&](double v) {
    ++s.count;
    if (std::isnan(v)) return void(++s.nan);
    if (std::isinf(v)) return void(++s.inf);
    s.min = s.finite ? std::min(s.min, v) : v;
    s.max = s.finite ? std::max(s.max, v) : v;
    sum += v;
    ++s.finite;
  });
  if (s.finite == 0) return s;
  s.mean = sum / static_cast<double>(s.finite);
  double squares = 0;  // second pass: no cancellation from sum-of-squares minus mean squared
  for_each_element(t, [&](double v) {
    if (std::isfinite(v)) squares += (v - s.mean) * (v - s.mean);
  });
  s.std = std::sqrt(squares / static_cast<double>(s.finite));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Seeded random inputs. SplitMix64 (Steele, Lea and Flood 2014) and the conversions below are
// spelled out rather than taken from <random>, whose distributions differ between standard
// libraries: the same seed gives the same inputs on every platform.

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// How a random input is drawn: floats uniform in [-1, 1) (rounded to f16 or bf16 for those),
/// integers uniform in [0, int_bound), bools 0 or 1 with equal odds.
struct RandomInput {
  std::uint64_t seed = 0;
  std::int32_t int_bound = 10;
};

/// Input `index` of a graph, drawn from its own stream of `seed` (so giving one input from a
/// file leaves the others unchanged).
inline rml::Tensor random_tensor(const rml::TensorType& type, std::size_t index, const RandomInput& how) {
  rml::Tensor t = rml::Tensor::zeros(type);
  SplitMix64 rng(how.seed ^ (0xd1b54a32d192ed03ULL * (static_cast<std::uint64_t>(index) + 1)));
  rml::visit_dtype(type.dtype, [&](auto d) {
    using T = rml::dtype_type_t<decltype(d)::value>;
    for (T& v : std::span(t.mutable_data<T>(), static_cast<std::size_t>(t.numel()))) {
      if constexpr (std::is_same_v<T, bool>) {
        v = (rng.next() >> 63) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        const auto bound = static_cast<std::uint64_t>(std::max(how.int_bound, 1));
        v = static_cast<T>(((rng.next() >> 32) * bound) >> 32);
      } else {
        // 24 random bits make a float in [0, 1) exactly; 2u - 1 is exact too.
        v = T(2.0F * static_cast<float>(rng.next() >> 40) * 0x1p-24F - 1.0F);
      }
    }
  });
  return t;
}

// ---------------------------------------------------------------------------------------------
// Tensor files: a .safetensors file (tensors by name) or a directory of `<name>.npy` files.

inline bool is_safetensors(const std::filesystem::path& path) { return path.extension() == ".safetensors"; }

/// The file name a tensor gets in a directory: its name with every character outside
/// [A-Za-z0-9._-] replaced by '_' (`b/Add_8` becomes `b_Add_8.npy`).
inline std::string npy_file_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out += plain ? c : '_';
  }
  return out + ".npy";
}

/// Writes named tensors to `path`: one .safetensors file, or a directory of .npy files (created
/// when missing).
inline rml::Status save_tensors(const std::filesystem::path& path,
                                const std::vector<std::pair<std::string, rml::Tensor>>& tensors) {
  if (is_safetensors(path)) return rml::write_safetensors(path, tensors);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return rml::invalid_argument(path.string() + ": cannot create the directory: " + ec.message());
  for (const auto& [name, tensor] : tensors)
    if (auto status = write_npy(path / npy_file_name(name), tensor); !status.ok()) return status;
  return {};
}

/// Tensors to read by name from a .safetensors file or a directory of .npy files.
class TensorFile {
 public:
  static rml::Result<TensorFile> open(const std::filesystem::path& path) {
    TensorFile file;
    file.path_ = path;
    if (is_safetensors(path)) {
      auto reader = rml::SafetensorsReader::open(path);
      if (!reader.ok()) return reader.error();
      file.reader_.emplace(std::move(*reader));
      return file;
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec))
      return rml::not_found(path.string() + ": neither a .safetensors file nor a directory of .npy files");
    return file;
  }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

  /// Input or output number `position` of a model: the tensor named like it, else the one named
  /// `<kind>.<position>` (`input.0`, `output.1`: how rml's expected-output files name them).
  [[nodiscard]] rml::Result<std::optional<rml::Tensor>> find(const std::string& name, std::string_view kind,
                                                             std::size_t position) const {
    auto by_name = find(name);
    if (!by_name.ok() || *by_name) return by_name;
    return find(std::string(kind) + "." + std::to_string(position));
  }

  /// The tensor `name`; nothing when the file has none by that name.
  [[nodiscard]] rml::Result<std::optional<rml::Tensor>> find(const std::string& name) const {
    if (reader_) {
      if (!reader_->contains(name)) return std::optional<rml::Tensor>{};
      auto t = reader_->get(name);
      if (!t.ok()) return t.error();
      return std::optional<rml::Tensor>(std::move(*t));
    }
    const auto file = path_ / npy_file_name(name);
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::optional<rml::Tensor>{};
    auto t = read_npy(file);
    if (!t.ok()) return t.error();
    return std::optional<rml::Tensor>(std::move(*t));
  }

 private:
  std::filesystem::path path_;
  std::optional<rml::SafetensorsReader> reader_;
};

// ---------------------------------------------------------------------------------------------
// Comparison, element by element as numpy.isclose(got, expected, rtol, atol, equal_nan=True):
// |got - expected| <= atol + rtol * |expected|; NaN matches NaN, an infinity only itself.

struct Comparison {
  std::string problem;  // a dtype or shape difference; then nothing else is filled
  std::size_t count = 0;
  std::size_t mismatched = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  // The element furthest outside the tolerance (or closest to it when all pass).
  std::size_t worst = 0;
  double got = 0, expected = 0, abs_error = 0, rel_error = 0;

  [[nodiscard]] bool passed() const { return problem.empty() && mismatched == 0; }
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline Comparison compare(const rml::Tensor& got, const rml::Tensor& expected, double rtol, double atol) {
  Comparison c;
  // A 16-bit float output may be compared with an f32 reference (PyTorch's in f32, or a bf16
  // output saved to .npy, which widens it).
  const bool widened = rml::is_half_dtype(got.dtype()) && expected.dtype() == rml::DType::f32;
  if ((got.dtype() != expected.dtype() && !widened) || got.shape() != expected.shape()) {
    c.problem = "got " + got.type().to_string() + ", the reference is " + expected.type().to_string();
    return c;
  }
  std::vector<double> want;
  want.reserve(static_cast<std::size_t>(expected.numel()));
  for_each_element(expected, [&](double v) { want.push_back(v); });
  double worst_score = -1;
  for_each_element(got, [&](double g) {
    const std::size_t i = c.count++;
    const double e = want[i];
    const double diff = std::fabs(g - e);
    double score = 0;  // |error| over what the tolerance allows; above 1 is a mismatch
    if (std::isnan(g) || std::isnan(e)) {
      score = std::isnan(g) && std::isnan(e) ? 0 : kInf;
    } else if (std::isinf(g) || std::isinf(e)) {
      score = g == e ? 0 : kInf;
    } else {
      const double allowed = atol + rtol * std::fabs(e);
      score = allowed > 0 ? diff / allowed : (diff > 0 ? kInf : 0);
      c.max_abs_error = std::max(c.max_abs_error, diff);
      c.max_rel_error = std::max(c.max_rel_error, e != 0 ? diff / std::fabs(e) : (diff > 0 ? kInf : 0));
    }
    if (score > 1) ++c.mismatched;
    if (score > worst_score) {
      worst_score = score;
      c.worst = i;
      c.got = g;
      c.expected = e;
    }
  });
  c.abs_error = std::fabs(c.got - c.expected);
  c.rel_error = c.expected != 0 ? c.abs_error / std::fabs(c.expected) : (c.abs_error > 0 ? kInf : 0);
  if (std::isnan(c.got) && std::isnan(c.expected)) c.abs_error = c.rel_error = 0;
  return c;
}

/// The multi-index of flat element `flat` in a row-major tensor of `shape`.
inline std::vector<std::int64_t> unravel(std::size_t flat, const rml::Shape& shape) {
  std::vector<std::int64_t> index(shape.rank());
  auto rest = static_cast<std::int64_t>(flat);
  for (std::size_t d = shape.rank(); d-- > 0;) {
    const std::int64_t extent = std::max<std::int64_t>(shape[d], 1);
    index[d] = rest % extent;
    rest /= extent;
  }
  return index;
}

}  // namespace rml_cli
