// SmallVector<T, N>: a vector of trivially copyable elements that keeps up to N of them inline
// and moves to the heap only past that. Shapes and a node's inputs and outputs are short
// (rank ≤ 6, a few operands), so holding them inline saves an allocation per shape and two per
// node: what dominated loading and deserializing a graph.
//
// The interface is std::vector's, minus allocators. Iterators are pointers and, as with
// std::vector, any growth invalidates them. Layout: the inline elements share their bytes with
// the heap pointer, so SmallVector<ValueId, 4> is as small as a std::vector (24 bytes); the
// elements are inline exactly while capacity() == N.
#pragma once

#include "rml/core/config.hpp"

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

namespace rml {

template <typename T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "SmallVector holds trivially copyable elements only");
  static_assert(N > 0 && N <= std::numeric_limits<std::uint32_t>::max());

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() noexcept {}  // NOLINT: the inline elements stay uninitialised until written
  explicit SmallVector(size_type n) { resize(n); }
  SmallVector(size_type n, const T& value) { assign(n, value); }
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  /// From a std::vector (attribute lists, user code): copies.
  SmallVector(const std::vector<T>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit by design

  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { steal(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  // ---- access ----
  [[nodiscard]] T* data() noexcept { return is_inline() ? inline_ : heap_; }
  [[nodiscard]] const T* data() const noexcept { return is_inline() ? inline_ : heap_; }
  [[nodiscard]] size_type size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] size_type capacity() const noexcept { return capacity_; }
  [[nodiscard]] static constexpr size_type inline_capacity() noexcept { return N; }
  [[nodiscard]] static constexpr size_type max_size() noexcept { return std::numeric_limits<std::uint32_t>::max(); }
  /// True while the elements live in the inline buffer.
  [[nodiscard]] bool is_inline() const noexcept { return capacity_ == N; }

  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return data(); }
  const_iterator cend() const noexcept { return data() + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  /// A std::vector copy, for interfaces that take one.
  [[nodiscard]] std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  // ---- modifiers ----
  void reserve(size_type n) {
    if (n > capacity_) grow_to(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_type n) { resize(n, T{}); }
  /// resize() without initialising the new elements: for a caller that writes every one of them
  /// next (a decoder that knows the count).
  void resize_for_overwrite(size_type n) {
    reserve(n);
    size_ = static_cast<std::uint32_t>(n);
  }
  void resize(size_type n, const T& value) {
    if (n > size_) {
      const T v = value;  // value may alias an element that growth moves
      reserve(n);
      std::fill(data() + size_, data() + n, v);
    }
    size_ = static_cast<std::uint32_t>(n);
  }
  void assign(size_type n, const T& value) {
    const T v = value;
    size_ = 0;
    resize(n, v);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) {
      const auto n = static_cast<size_type>(std::distance(first, last));
      reserve(n);
      std::copy(first, last, data());
      size_ = static_cast<std::uint32_t>(n);
    } else {
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(std::initializer_list<T> values) { assign(values.begin(), values.end()); }

  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T v = value;
      grow_to(next_capacity(size_ + 1));
      heap_[size_++] = v;
    } else {
      data()[size_++] = value;
    }
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() noexcept { --size_; }

  iterator insert(const_iterator pos, const T& value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type n, const T& value) {
    const T v = value;
    const auto at = static_cast<size_type>(pos - data());
    make_gap(at, n);
    std::fill(data() + at, data() + at + n, v);
    return data() + at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const auto at = static_cast<size_type>(pos - data());
    const auto n = static_cast<size_type>(std::distance(first, last));
    if (n == 0) return data() + at;
    // The range may point into this vector: copy it out before the gap moves it.
    SmallVector tmp(first, last);
    make_gap(at, n);
    std::copy(tmp.begin(), tmp.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) noexcept { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) noexcept {
    T* d = data();
    T* f = d + (first - d);
    T* l = d + (last - d);
    std::copy(l, end(), f);
    size_ -= static_cast<std::uint32_t>(l - f);
    return f;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  size_type next_capacity(size_type need) const {
    if (need > max_size()) throw std::bad_alloc();
    return std::max<size_type>(need, std::min<size_type>(max_size(), size_type{2} * capacity_));
  }
  void grow_to(size_type n) {
    if (n > max_size()) throw std::bad_alloc();
    T* heap = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_ != 0) std::memcpy(heap, data(), size_ * sizeof(T));
    release();
    heap_ = heap;
    capacity_ = static_cast<std::uint32_t>(n);
  }
  void make_gap(size_type at, size_type n) {
    const size_type old = size_;
    if (old + n > capacity_) grow_to(next_capacity(old + n));
    T* d = data();
    std::copy_backward(d + at, d + old, d + old + n);
    size_ = static_cast<std::uint32_t>(old + n);
  }
  void release() noexcept {
    if (!is_inline()) ::operator delete(heap_);
    capacity_ = N;
  }
  // Takes other's elements and leaves it empty; *this must own no heap block.
  void steal(SmallVector& other) noexcept {
    if (other.is_inline()) {
      std::memcpy(inline_, other.inline_, other.size_ * sizeof(T));
      capacity_ = N;
    } else {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      other.capacity_ = N;
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  union {
    T inline_[N];  // while capacity_ == N
    T* heap_;      // while capacity_ > N
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = N;
};

}  // namespace rml
