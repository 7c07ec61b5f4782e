// Tensor: a dtype, a shape and shared ownership of the bytes (an owned buffer or a file mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rml/core/checked.hpp"
#include "rml/core/device.hpp"
#include "rml/core/dtype.hpp"
#include "rml/core/shape.hpp"
#include "rml/core/status.hpp"

namespace rml {

namespace detail {
struct SymbolicValue;  // defined by rml/edit: a value of a graph being traced
}  // namespace detail

/// Bytes that tensors share. Subclasses own them: an aligned heap buffer, or a file mapping.
class Storage {
 public:
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  virtual ~Storage() = default;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// False for read-only mappings.
  [[nodiscard]] bool writable() const noexcept { return writable_; }
  /// OK when every byte is still there to read. Memory always is; a file mapping is not once the
  /// file shrinks beneath it (reading the lost pages would raise SIGBUS), and says so as DATA_LOSS.
  [[nodiscard]] virtual Status verify() const { return {}; }

 protected:
  Storage(std::byte* data, std::size_t size, bool writable) noexcept : data_(data), size_(size), writable_(writable) {}

 private:
  std::byte* data_;
  std::size_t size_;
  bool writable_;
};

/// Heap storage aligned to 64 bytes (a cache line; enough for AVX-512 loads).
class BufferStorage final : public Storage {
 public:
  static constexpr std::size_t alignment = 64;

  /// Zero-filled bytes; throws std::bad_alloc like any allocation.
  static std::shared_ptr<BufferStorage> allocate(std::size_t size) {
    const std::size_t rounded = (size + alignment - 1) / alignment * alignment;
    void* p = ::operator new(rounded == 0 ? alignment : rounded, std::align_val_t{alignment});
    std::memset(p, 0, rounded == 0 ? alignment : rounded);
    return std::shared_ptr<BufferStorage>(new BufferStorage(static_cast<std::byte*>(p), size));
  }
  ~BufferStorage() override { ::operator delete(data(), std::align_val_t{alignment}); }

 private:
  BufferStorage(std::byte* p, std::size_t size) noexcept : Storage(p, size, true) {}
};

/// A dense row-major tensor. Copies share the storage; `clone()` copies the bytes.
///
/// Factories and accessors that are handed impossible arguments (a negative dimension, the
/// wrong element type) throw `Error`, like the eager ops do; everything that reads files or
/// graphs returns a Status instead.
class Tensor {
 public:
  /// An empty f32 scalar with no storage (`defined()` is false).
  Tensor() = default;

  /// A zero-filled tensor.
  static Tensor zeros(DType dtype, Shape shape) {
    TensorType type{dtype, std::move(shape)};
    const auto nbytes = bytes_or_throw(type);
    Tensor t;
    t.type_ = std::move(type);
    t.storage_ = BufferStorage::allocate(static_cast<std::size_t>(nbytes));
    return t;
  }
  static Tensor zeros(const TensorType& type) { return zeros(type.dtype, type.shape); }

  /// A tensor holding a copy of `count` elements at `data`; `count` must be the shape's product.
  static Tensor from_data(const void* data, Shape shape, DType dtype) {
    Tensor t = zeros(dtype, std::move(shape));
    if (t.nbytes() != 0) std::memcpy(t.storage_->data(), data, t.nbytes());
    return t;
  }
  /// A copy of `values` shaped `shape`.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    const auto n = shape.checked_numel();
    if (!n || static_cast<std::size_t>(*n) != values.size())
      throw Error(Code::invalid_argument, "Tensor::from_vector: " + std::to_string(values.size()) +
                                              " values do not fill shape " + shape.to_string());
    return from_data(values.data(), std::move(shape), dtype_of_v<T>);
  }
  /// A scalar.
  template <typename T>
  static Tensor scalar(T value) {
    return from_data(&value, Shape{}, dtype_of_v<T>);
  }
  /// A view of `type` onto `storage` at `offset`. The view must fit inside the storage and start
  /// on a multiple of the element size: INVALID_ARGUMENT (naming what is wrong) otherwise, so no
  /// tensor can claim bytes its storage does not hold.
  static Result<Tensor> try_view(TensorType type, std::shared_ptr<const Storage> storage, std::size_t offset) {
    Tensor t;
    t.type_ = std::move(type);
    t.storage_ = std::move(storage);
    t.offset_ = offset;
    RML_RETURN_IF_ERROR(t.check_storage());
    return t;
  }
  /// try_view for callers that have checked the bounds themselves; throws Error when they are wrong.
  static Tensor view(TensorType type, std::shared_ptr<const Storage> storage, std::size_t offset) {
    auto t = try_view(std::move(type), std::move(storage), offset);
    if (!t.ok()) throw Error(t.error());
    return std::move(*t);
  }

  /// OK when the tensor's bytes (dtype x shape from its offset) lie inside its storage and start
  /// aligned for its element type; INVALID_ARGUMENT otherwise. Always OK for a tensor without storage.
  [[nodiscard]] Status check_storage() const {
    const auto nbytes = type_.checked_nbytes();
    if (!nbytes) return invalid_argument("Tensor: invalid shape " + type_.shape.to_string());
    if (!storage_) return {};
    const std::size_t size = storage_->size();
    const auto need = static_cast<std::uint64_t>(*nbytes);
    if (offset_ > size || need > size - offset_)
      return invalid_argument("Tensor: a " + type_.to_string() + " view needs " + std::to_string(need) +
                              " bytes at offset " + std::to_string(offset_) + ", but its storage holds " +
                              std::to_string(size));
    if (need != 0 && (storage_->data() == nullptr ||
                      reinterpret_cast<std::uintptr_t>(storage_->data() + offset_) % element_size(type_.dtype) != 0))
      return invalid_argument("Tensor: a " + type_.to_string() + " view at offset " + std::to_string(offset_) +
                              " is not aligned to its " + std::to_string(element_size(type_.dtype)) + "-byte elements");
    return {};
  }

  [[nodiscard]] DType dtype() const noexcept { return type_.dtype; }
  [[nodiscard]] const Shape& shape() const noexcept { return type_.shape; }
  [[nodiscard]] const TensorType& type() const noexcept { return type_; }
  [[nodiscard]] std::size_t rank() const noexcept { return type_.shape.rank(); }
  [[nodiscard]] std::int64_t numel() const noexcept { return type_.shape.numel(); }
  [[nodiscard]] std::size_t nbytes() const noexcept {
    return static_cast<std::size_t>(type_.checked_nbytes().value_or(0));
  }
  /// Where the bytes live: every storage rml makes is host memory, so the CPU.
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }
  /// The tensor on `device`: itself (sharing the storage) for the CPU. Throws Error (UNSUPPORTED)
  /// for an accelerator, which this build has none of.
  [[nodiscard]] Tensor to(const Device& device) const {
    if (!device.is_cpu())
      throw Error(Code::unsupported, "Tensor::to: " + device.to_string() + " is not available in this build");
    return *this;
  }
  /// False for a default-constructed tensor and for a symbolic one.
  [[nodiscard]] bool defined() const noexcept { return storage_ != nullptr; }
  /// True while tracing: the tensor names a value of the graph being built and holds no data.
  [[nodiscard]] bool is_symbolic() const noexcept { return symbolic_ != nullptr; }

  [[nodiscard]] const std::shared_ptr<const Storage>& storage() const noexcept { return storage_; }
  [[nodiscard]] std::size_t storage_offset() const noexcept { return offset_; }
  [[nodiscard]] const std::byte* raw_data() const noexcept { return storage_ ? storage_->data() + offset_ : nullptr; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {raw_data(), defined() ? nbytes() : 0}; }
  /// Writable bytes; throws Error for a read-only (mapped) tensor.
  [[nodiscard]] std::byte* mutable_raw_data() const {
    if (!storage_ || !storage_->writable())
      throw Error(Code::failed_precondition, "Tensor: storage is read-only (a mapped weight); clone() it first");
    return storage_->data() + offset_;
  }

  /// The elements, checked against the dtype (throws Error when T does not match).
  template <typename T>
  [[nodiscard]] const T* data() const {
    check_dtype<T>();
    return reinterpret_cast<const T*>(raw_data());
  }
  template <typename T>
  [[nodiscard]] T* mutable_data() const {
    check_dtype<T>();
    return reinterpret_cast<T*>(mutable_raw_data());
  }
  template <typename T>
  [[nodiscard]] std::span<const T> span() const {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }
  /// A copy of the elements.
  template <typename T>
  [[nodiscard]] std::vector<T> to_vector() const {
    auto s = span<T>();
    return {s.begin(), s.end()};
  }

  /// The same storage under another shape; one dimension may be -1. Throws Error when the
  /// element counts differ.
  [[nodiscard]] Tensor reshape(const std::vector<std::int64_t>& dims) const {
    Shape shape(dims);
    std::size_t inferred = dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && inferred == dims.size())
        inferred = i;
      else if (dims[i] < 0)
        throw Error(Code::invalid_argument, "Tensor::reshape: bad dimension " + std::to_string(dims[i]));
    }
    if (inferred != dims.size()) {
      shape[inferred] = 1;
      const auto known = shape.checked_numel();
      shape[inferred] = known && *known != 0 ? numel() / *known : 0;
    }
    if (shape.checked_numel() != std::optional<std::int64_t>(numel()))
      throw Error(Code::invalid_argument, "Tensor::reshape: " + type_.shape.to_string() + " cannot become " +
                                              Shape(dims).to_string());
    Tensor t = *this;
    t.type_.shape = std::move(shape);
    return t;
  }
  [[nodiscard]] Tensor reshape(std::initializer_list<std::int64_t> dims) const {
    return reshape(std::vector<std::int64_t>(dims));
  }

  /// A tensor with its own copy of the bytes.
  [[nodiscard]] Tensor clone() const {
    if (!defined()) return *this;
    return from_data(raw_data(), type_.shape, type_.dtype);
  }

  /// Same dtype, shape and bytes (not the same storage).
  [[nodiscard]] bool equal(const Tensor& other) const noexcept {
    if (type_ != other.type_ || defined() != other.defined()) return false;
    return !defined() || nbytes() == 0 || std::memcmp(raw_data(), other.raw_data(), nbytes()) == 0;
  }

  // Tracing support (rml/edit): a symbolic tensor carries its type and the traced value.
  static Tensor symbolic(TensorType type, std::shared_ptr<detail::SymbolicValue> value) noexcept {
    Tensor t;
    t.type_ = std::move(type);
    t.symbolic_ = std::move(value);
    return t;
  }
  [[nodiscard]] const std::shared_ptr<detail::SymbolicValue>& symbolic_value() const noexcept { return symbolic_; }

 private:
  static std::int64_t bytes_or_throw(const TensorType& type) {
    const auto n = type.checked_nbytes();
    if (!n) throw Error(Code::invalid_argument, "Tensor: invalid shape " + type.shape.to_string());
    if (static_cast<std::uint64_t>(*n) > std::numeric_limits<std::size_t>::max() - BufferStorage::alignment)
      throw Error(Code::out_of_range, "Tensor: " + type.to_string() + " is larger than memory can address");
    return *n;
  }
  template <typename T>
  void check_dtype() const {
    if (dtype_of_v<std::remove_cv_t<T>> != type_.dtype)
      throw Error(Code::invalid_argument, std::string("Tensor: element type ") +
                                              std::string(dtype_name(dtype_of_v<std::remove_cv_t<T>>)) +
                                              " requested from a tensor of " + type_.to_string());
  }

  TensorType type_;
  std::shared_ptr<const Storage> storage_;
  std::size_t offset_ = 0;
  std::shared_ptr<detail::SymbolicValue> symbolic_;
};

}  // namespace rml
