// rml::ops: one function per op of the op set. On symbolic tensors (inside trace) they record a
// node; on concrete tensors they compute at once. Every one checks its inputs with compile_op's
// rules and throws rml::Error (INVALID_ARGUMENT, UNSUPPORTED, ...) when they do not fit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rml/core/tensor.hpp"
#include "rml/edit/trace.hpp"

namespace rml::ops {

using Ints = std::vector<std::int64_t>;

namespace detail {
inline Tensor unary(const char* op, const Tensor& x, Attrs attrs = {}) {
  const Tensor in[] = {x};
  return rml::detail::apply_op1(op, in, std::move(attrs));
}
inline Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  const Tensor in[] = {a, b};
  return rml::detail::apply_op1(op, in);
}
inline Tensor reduce(const char* op, const Tensor& x, const Ints& axes, bool keepdims) {
  Attrs attrs{{"keepdims", keepdims}};
  if (!axes.empty()) attrs.emplace("axes", axes);
  return unary(op, x, std::move(attrs));
}
}  // namespace detail

// ---- unary (f32, same shape) ----
inline Tensor neg(const Tensor& x) { return detail::unary("neg", x); }
inline Tensor abs(const Tensor& x) { return detail::unary("abs", x); }
inline Tensor relu(const Tensor& x) { return detail::unary("relu", x); }
inline Tensor sigmoid(const Tensor& x) { return detail::unary("sigmoid", x); }
inline Tensor tanh(const Tensor& x) { return detail::unary("tanh", x); }
inline Tensor exp(const Tensor& x) { return detail::unary("exp", x); }
inline Tensor log(const Tensor& x) { return detail::unary("log", x); }
inline Tensor sqrt(const Tensor& x) { return detail::unary("sqrt", x); }
inline Tensor rsqrt(const Tensor& x) { return detail::unary("rsqrt", x); }
inline Tensor reciprocal(const Tensor& x) { return detail::unary("reciprocal", x); }
inline Tensor erf(const Tensor& x) { return detail::unary("erf", x); }
/// `approximate` is "none" (erf form) or "tanh".
inline Tensor gelu(const Tensor& x, const std::string& approximate = "none") {
  return detail::unary("gelu", x, {{"approximate", approximate}});
}
inline Tensor silu(const Tensor& x) { return detail::unary("silu", x); }
inline Tensor sin(const Tensor& x) { return detail::unary("sin", x); }
inline Tensor cos(const Tensor& x) { return detail::unary("cos", x); }

// ---- binary (f32, NumPy broadcasting; comparisons give 0/1 masks) ----
inline Tensor add(const Tensor& a, const Tensor& b) { return detail::binary("add", a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return detail::binary("sub", a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return detail::binary("mul", a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return detail::binary("div", a, b); }
inline Tensor pow(const Tensor& a, const Tensor& b) { return detail::binary("pow", a, b); }
inline Tensor maximum(const Tensor& a, const Tensor& b) { return detail::binary("maximum", a, b); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return detail::binary("minimum", a, b); }
inline Tensor equal(const Tensor& a, const Tensor& b) { return detail::binary("equal", a, b); }
inline Tensor less(const Tensor& a, const Tensor& b) { return detail::binary("less", a, b); }
inline Tensor greater(const Tensor& a, const Tensor& b) { return detail::binary("greater", a, b); }

/// The remainder of `a / b` (broadcast together): with `fmod` the dividend's sign (C's fmod, every
/// numeric dtype), else the divisor's (Python's `%`, integers only). Integer `x mod 0` throws.
inline Tensor mod(const Tensor& a, const Tensor& b, bool fmod = false) {
  const Tensor in[] = {a, b};
  return rml::detail::apply_op1("mod", in, {{"fmod", fmod}});
}

/// `a` where `cond != 0`, else `b` (broadcast together).
inline Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor in[] = {cond, a, b};
  return rml::detail::apply_op1("where", in);
}

// ---- linear algebra, convolution, pooling ----
inline Tensor matmul(const Tensor& a, const Tensor& b) { return detail::binary("matmul", a, b); }

struct Conv2dOptions {
  Ints strides = {1, 1};
  Ints pads = {0, 0, 0, 0};  ///< top, left, bottom, right
  Ints dilations = {1, 1};
  std::int64_t groups = 1;
};
/// NCHW convolution; `w` is [O, C/groups, kH, kW]; `bias` [O] is optional.
inline Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt,
                     const Conv2dOptions& options = {}) {
  Attrs attrs{{"strides", options.strides},
              {"pads", options.pads},
              {"dilations", options.dilations},
              {"groups", options.groups}};
  if (bias) {
    const Tensor in[] = {x, w, *bias};
    return rml::detail::apply_op1("conv2d", in, std::move(attrs));
  }
  const Tensor in[] = {x, w};
  return rml::detail::apply_op1("conv2d", in, std::move(attrs));
}
/// `strides` empty = the kernel.
inline Tensor max_pool2d(const Tensor& x, const Ints& kernel, const Ints& strides = {},
                         const Ints& pads = {0, 0, 0, 0}) {
  Attrs attrs{{"kernel", kernel}, {"pads", pads}};
  if (!strides.empty()) attrs.emplace("strides", strides);
  return detail::unary("max_pool2d", x, std::move(attrs));
}
inline Tensor avg_pool2d(const Tensor& x, const Ints& kernel, const Ints& strides = {}, const Ints& pads = {0, 0, 0, 0},
                         bool count_include_pad = true) {
  Attrs attrs{{"kernel", kernel}, {"pads", pads}, {"count_include_pad", count_include_pad}};
  if (!strides.empty()) attrs.emplace("strides", strides);
  return detail::unary("avg_pool2d", x, std::move(attrs));
}

// ---- reductions (empty axes = all) ----
inline Tensor sum(const Tensor& x, const Ints& axes = {}, bool keepdims = false) {
  return detail::reduce("sum", x, axes, keepdims);
}
inline Tensor mean(const Tensor& x, const Ints& axes = {}, bool keepdims = false) {
  return detail::reduce("mean", x, axes, keepdims);
}
inline Tensor max(const Tensor& x, const Ints& axes = {}, bool keepdims = false) {
  return detail::reduce("max", x, axes, keepdims);
}
inline Tensor min(const Tensor& x, const Ints& axes = {}, bool keepdims = false) {
  return detail::reduce("min", x, axes, keepdims);
}
inline Tensor softmax(const Tensor& x, std::int64_t axis = -1) { return detail::unary("softmax", x, {{"axis", axis}}); }
/// i32 indices of the largest element along `axis`.
inline Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdims = false) {
  return detail::unary("argmax", x, {{"axis", axis}, {"keepdims", keepdims}});
}

// ---- data movement (f32 or i32) ----
inline Tensor reshape(const Tensor& x, const Ints& shape) { return detail::unary("reshape", x, {{"shape", shape}}); }
/// `perm` empty = reversed axes.
inline Tensor transpose(const Tensor& x, const Ints& perm = {}) {
  return perm.empty() ? detail::unary("transpose", x) : detail::unary("transpose", x, {{"perm", perm}});
}
inline Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis) {
  return rml::detail::apply_op1("concat", xs, {{"axis", axis}});
}
/// NumPy-style slicing with clamping; `axes` empty = the first len(starts) axes, `steps` empty = 1.
inline Tensor slice(const Tensor& x, const Ints& starts, const Ints& ends, const Ints& axes = {},
                    const Ints& steps = {}) {
  Attrs attrs{{"starts", starts}, {"ends", ends}};
  if (!axes.empty()) attrs.emplace("axes", axes);
  if (!steps.empty()) attrs.emplace("steps", steps);
  return detail::unary("slice", x, std::move(attrs));
}
inline Tensor expand(const Tensor& x, const Ints& shape) { return detail::unary("expand", x, {{"shape", shape}}); }
/// `pads` holds the begin of every axis, then the end of every axis.
inline Tensor pad(const Tensor& x, const Ints& pads, double value = 0.0) {
  return detail::unary("pad", x, {{"pads", pads}, {"value", value}});
}
/// The identity; also what moves a value between devices.
inline Tensor copy(const Tensor& x) { return detail::unary("copy", x); }

// ---- indexing, conversion ----
/// `indices` is i32; negative indices wrap.
inline Tensor gather(const Tensor& data, const Tensor& indices, std::int64_t axis = 0) {
  const Tensor in[] = {data, indices};
  return rml::detail::apply_op1("gather", in, {{"axis", axis}});
}
inline Tensor cast(const Tensor& x, DType to) {
  return detail::unary("cast", x, {{"to", std::string(dtype_name(to))}});
}

}  // namespace rml::ops
