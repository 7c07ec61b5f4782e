// Status, Result<T> and Error: how every fallible rml call reports failure.
#pragma once

#include "rml/core/config.hpp"

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace rml {

/// The error codes of rml. Numbers are stable (they are written to files); add at the end.
enum class Code : std::uint8_t {
  ok = 0,
  invalid_argument,
  failed_precondition,
  not_found,
  out_of_range,
  unsupported,
  data_loss,
  internal,
};

/// `INVALID_ARGUMENT`, `DATA_LOSS`, ... (`OK` for `Code::ok`).
constexpr std::string_view code_name(Code code) noexcept {
  switch (code) {
    case Code::ok: return "OK";
    case Code::invalid_argument: return "INVALID_ARGUMENT";
    case Code::failed_precondition: return "FAILED_PRECONDITION";
    case Code::not_found: return "NOT_FOUND";
    case Code::out_of_range: return "OUT_OF_RANGE";
    case Code::unsupported: return "UNSUPPORTED";
    case Code::data_loss: return "DATA_LOSS";
    case Code::internal: return "INTERNAL";
  }
  return "UNKNOWN";
}

/// A code and a message. An OK status holds no allocation.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(Code code, std::string message) {
    if (code != Code::ok) rep_ = std::make_unique<Rep>(Rep{code, std::move(message)});
  }
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status(Status&&) noexcept = default;
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  [[nodiscard]] bool ok() const noexcept { return rep_ == nullptr; }
  [[nodiscard]] Code code() const noexcept { return rep_ ? rep_->code : Code::ok; }
  [[nodiscard]] std::string_view code_name() const noexcept { return rml::code_name(code()); }
  [[nodiscard]] const std::string& message() const noexcept {
    static const std::string empty;
    return rep_ ? rep_->message : empty;
  }
  /// `INVALID_ARGUMENT: message`, or `OK`.
  [[nodiscard]] std::string to_string() const {
    if (ok()) return "OK";
    return std::string(code_name()) + ": " + rep_->message;
  }
  /// The same code with `prefix` put before the message (`"model.json: " + message`).
  [[nodiscard]] Status with_prefix(std::string_view prefix) const {
    if (ok()) return {};
    return {rep_->code, std::string(prefix) + rep_->message};
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline Status ok_status() noexcept { return {}; }
inline Status invalid_argument(std::string m) { return {Code::invalid_argument, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {Code::failed_precondition, std::move(m)}; }
inline Status not_found(std::string m) { return {Code::not_found, std::move(m)}; }
inline Status out_of_range(std::string m) { return {Code::out_of_range, std::move(m)}; }
inline Status unsupported(std::string m) { return {Code::unsupported, std::move(m)}; }
inline Status data_loss(std::string m) { return {Code::data_loss, std::move(m)}; }
inline Status internal_error(std::string m) { return {Code::internal, std::move(m)}; }

/// The exception `Result::value()` and the tracing ops throw: it carries a Status.
class Error : public std::exception {
 public:
  explicit Error(Status status) : status_(std::move(status)), what_(status_.message()) {}
  Error(Code code, std::string message) : Error(Status(code, std::move(message))) {}
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }
  [[nodiscard]] const Status& status() const noexcept { return status_; }
  [[nodiscard]] Code code() const noexcept { return status_.code(); }
  [[nodiscard]] std::string code_name() const { return std::string(status_.code_name()); }

 private:
  Status status_;
  std::string what_;
};

/// A value or a failed Status, in the spirit of `std::expected<T, Status>`.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "rml: Result<Status> makes no sense; return Status");
  static_assert(!std::is_reference_v<T>, "rml: Result<T&> is not supported; return a pointer or a view");

 public:
  using value_type = T;

  Result(const T& value) : v_(std::in_place_index<0>, value) {}  // NOLINT: implicit by design
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, Result>>>
  Result(U&& value) : v_(std::in_place_index<0>, T(std::forward<U>(value))) {}  // NOLINT
  /// A failed result. An OK status here is a bug of the caller and becomes INTERNAL.
  Result(Status status)  // NOLINT: implicit by design
      : v_(std::in_place_index<1>,
           status.ok() ? Status(Code::internal, "rml: Result constructed from an OK status") : std::move(status)) {}

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  /// OK when this holds a value.
  [[nodiscard]] Status status() const { return ok() ? Status() : std::get<1>(v_); }

  /// The value; throws `Error` holding the status when there is none.
  T& value() & {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  const T& value() const& {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::move(std::get<0>(v_));
  }

  // Unchecked access: the caller has tested ok().
  T& operator*() & noexcept { return *std::get_if<0>(&v_); }
  const T& operator*() const& noexcept { return *std::get_if<0>(&v_); }
  T&& operator*() && noexcept { return std::move(*std::get_if<0>(&v_)); }
  T* operator->() noexcept { return std::get_if<0>(&v_); }
  const T* operator->() const noexcept { return std::get_if<0>(&v_); }

  /// The failure (an empty OK status when there is a value).
  [[nodiscard]] const Status& error() const noexcept {
    static const Status none;
    const Status* s = std::get_if<1>(&v_);
    return s ? *s : none;
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rml

#define RML_DETAIL_CONCAT_INNER(a, b) a##b
#define RML_DETAIL_CONCAT(a, b) RML_DETAIL_CONCAT_INNER(a, b)

/// Returns the status from the enclosing function when `expr` (a Status) is not OK.
#define RML_DETAIL_RETURN_IF_ERROR(tmp, expr) \
  do {                                         \
    ::rml::Status tmp = (expr);                \
    if (!tmp.ok()) return tmp;                 \
  } while (false)
#define RML_RETURN_IF_ERROR(expr) RML_DETAIL_RETURN_IF_ERROR(RML_DETAIL_CONCAT(rml_status_, __COUNTER__), expr)

#define RML_DETAIL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.error();                \
  lhs = std::move(*tmp)

/// `RML_ASSIGN_OR_RETURN(auto x, f());` unwraps a Result or returns its status.
#define RML_ASSIGN_OR_RETURN(lhs, expr) \
  RML_DETAIL_ASSIGN_OR_RETURN(RML_DETAIL_CONCAT(rml_result_, __COUNTER__), lhs, expr)
