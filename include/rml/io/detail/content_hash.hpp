// A 128-bit hash of a byte stream, from which save_graph derives the pair id of a model's two files.
//
// Two 64-bit lanes read the stream as little-endian 8-byte words (the tail zero-padded). Each lane
// has its own seed and odd multipliers and folds a word in as state = rotl((state ^ word) * m1, r) * m2
// (lane b adds the word instead of xoring it), a bijection of the state for each word, so no two
// different words take a lane from one state to the same state. The length is folded into both
// lanes at the end, then each is avalanched (the xor-shift-multiply finaliser of splitmix64), so
// every input bit reaches every output bit. The result does not depend on how the stream is cut
// into update() calls. It is not cryptographic: it tells apart the contents of different saves; a
// party able to craft collisions can write both files of a pair anyway.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace rml::detail {

class ContentHash {
 public:
  /// Appends `size` bytes to the stream.
  void update(const void* data, std::size_t size) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    length_ += size;
    std::uint64_t a = a_, b = b_;  // in registers: the loop is bound by the multiplies, not by memory
    while (size > 0) {
      if (used_ == 0 && size >= 8) {  // whole words straight from the input
        for (; size >= 8; size -= 8, p += 8) mix(a, b, load(p));
        continue;
      }
      const std::size_t take = std::min(size, sizeof pending_ - used_);
      std::memcpy(pending_ + used_, p, take);
      used_ += take;
      p += take;
      size -= take;
      if (used_ == sizeof pending_) {
        mix(a, b, load(pending_));
        used_ = 0;
      }
    }
    a_ = a;
    b_ = b;
  }
  /// Appends `value` as 8 little-endian bytes (a length that frames what follows it).
  void update_u64(std::uint64_t value) noexcept {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
    update(bytes, sizeof bytes);
  }

  /// The 128 bits as two 64-bit lanes (a, then b); the hash is spent afterwards.
  [[nodiscard]] std::array<std::uint64_t, 2> digest() {
    if (used_ != 0) {
      for (std::size_t i = used_; i < 8; ++i) pending_[i] = 0;
      mix(a_, b_, load(pending_));
      used_ = 0;
    }
    return {finish(a_ ^ length_), finish(b_ ^ (length_ * 0xC2B2AE3D27D4EB4FULL))};
  }
  /// The 128 bits as 32 lowercase hex digits (lane a, then lane b); the hash is spent afterwards.
  [[nodiscard]] std::string hex() {
    const std::array<std::uint64_t, 2> lanes = digest();
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(32);
    for (std::uint64_t lane : lanes)
      for (int shift = 60; shift >= 0; shift -= 4) out += digits[(lane >> shift) & 0xF];
    return out;
  }

 private:
  static std::uint64_t load(const unsigned char* p) noexcept {  // little-endian on every host
    if constexpr (std::endian::native == std::endian::little) {
      std::uint64_t w;
      std::memcpy(&w, p, sizeof w);
      return w;
    } else {
      std::uint64_t w = 0;
      for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];
      return w;
    }
  }
  static constexpr std::uint64_t rotl(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }
  static constexpr std::uint64_t finish(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  static void mix(std::uint64_t& a, std::uint64_t& b, std::uint64_t w) noexcept {
    a = rotl((a ^ w) * 0x9E3779B97F4A7C15ULL, 31) * 0xD6E8FEB86659FD93ULL;
    b = rotl((b + w) * 0xFF51AFD7ED558CCDULL, 27) * 0xA0761D6478BD642FULL;
  }

  std::uint64_t a_ = 0x243F6A8885A308D3ULL;  // the fractional digits of pi, two different words
  std::uint64_t b_ = 0x13198A2E03707344ULL;
  std::uint64_t length_ = 0;
  unsigned char pending_[8] = {};
  std::size_t used_ = 0;
};

}  // namespace rml::detail
