// Device: where a tensor's bytes live, and where a graph, or a part of a merged graph, runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "rml/core/reflect.hpp"

namespace rml {

/// Kinds of device. Stored in files: append only.
enum class DeviceKind : std::uint8_t { cpu = 0, gpu = 1 };

/// A CPU (several distinct CPU devices have their own workspaces and thread pools) or an accelerator.
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  std::int32_t index = 0;

  static constexpr Device cpu(std::int32_t index = 0) noexcept { return {DeviceKind::cpu, index}; }
  /// An accelerator when this build has one; rml's builds have none yet, so this is `cpu(0)`.
  static constexpr Device gpu() noexcept { return cpu(0); }
  /// True when this build can run on an accelerator.
  static constexpr bool has_accelerator() noexcept { return false; }

  [[nodiscard]] bool is_cpu() const noexcept { return kind == DeviceKind::cpu; }
  /// `cpu:0`, `cpu:1`, `gpu:0`.
  [[nodiscard]] std::string to_string() const {
    return std::string(kind == DeviceKind::cpu ? "cpu:" : "gpu:") + std::to_string(index);
  }
  /// Parses `cpu`, `cpu:N`, `gpu`, `gpu:N`.
  static std::optional<Device> parse(std::string_view text) {
    Device d;
    if (text.substr(0, 3) == "cpu") d.kind = DeviceKind::cpu;
    else if (text.substr(0, 3) == "gpu") d.kind = DeviceKind::gpu;
    else return std::nullopt;
    text.remove_prefix(3);
    if (text.empty()) return d;
    if (text[0] != ':' || text.size() < 2 || text.size() > 6) return std::nullopt;
    std::int32_t n = 0;
    for (char c : text.substr(1)) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    d.index = n;
    return d;
  }

  friend bool operator==(const Device&, const Device&) = default;

  static constexpr auto fields() { return std::tuple{field("kind", &Device::kind), field("index", &Device::index)}; }
};

}  // namespace rml
