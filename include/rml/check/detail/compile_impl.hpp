// The definitions behind rml/check/compile.hpp. Included by that header wherever RML_SPLIT_DEFINED
// is 1 (see rml/core/linkage.hpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "rml/check/compile.hpp"

namespace rml {

namespace detail {

// Dims is rml::Dims (shape.hpp): dimensions and strides up to rank 6 stay inline.

inline std::string str(std::int64_t v) { return std::to_string(v); }
inline std::string str(const Dims& d) { return Shape(d).to_string(); }

// Attribute integers that size things (kernels, pads, strides) are kept far from overflow.
inline constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;

/// Contiguous row-major element strides of `dims`.
inline Dims contiguous_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

/// Drops unit dims and merges neighbours that every stride vector walks contiguously. Leaves at
/// least one dim (a scalar becomes [1] with stride 0).
inline void collapse_dims(Dims& dims, std::span<Dims*> strides) {
  Dims out_dims;
  std::vector<Dims> out(strides.size());
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !out_dims.empty();
    for (std::size_t i = 0; merge && i < strides.size(); ++i) merge = out[i].back() == (*strides[i])[d] * dims[d];
    if (merge) {
      out_dims.back() *= dims[d];
      for (std::size_t i = 0; i < strides.size(); ++i) out[i].back() = (*strides[i])[d];
    } else {
      out_dims.push_back(dims[d]);
      for (std::size_t i = 0; i < strides.size(); ++i) out[i].push_back((*strides[i])[d]);
    }
  }
  if (out_dims.empty()) {
    out_dims.push_back(1);
    for (auto& s : out) s.push_back(0);
  }
  dims = std::move(out_dims);
  for (std::size_t i = 0; i < strides.size(); ++i) *strides[i] = std::move(out[i]);
}

/// NumPy broadcasting of several shapes, or nothing when they are incompatible.
inline std::optional<Dims> broadcast_dims(std::span<const Dims* const> shapes) {
  std::size_t rank = 0;
  for (const Dims* s : shapes) rank = std::max(rank, s->size());
  Dims out(rank, 1);
  for (const Dims* s : shapes) {
    const std::size_t off = rank - s->size();
    for (std::size_t i = 0; i < s->size(); ++i) {
      const std::int64_t d = (*s)[i];
      std::int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  }
  return out;
}

/// Element strides of `in` read as `out` (right-aligned; 0 along broadcast dims).
inline Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  const Dims c = contiguous_strides(in);
  const std::size_t off = out.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : c[i];
  return s;
}

/// `axis` in [-rank, rank) made non-negative, or an error naming `what`.
inline Result<std::size_t> normalize_axis(std::int64_t axis, std::size_t rank, std::string_view what = "axis") {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    return invalid_argument(std::string(what) + " " + str(axis) + " is out of range for rank " + str(r));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

inline Status expect_count(std::string_view attr, const Dims& v, std::size_t n) {
  if (v.size() != n)
    return invalid_argument("attribute '" + std::string(attr) + "' must have " + std::to_string(n) + " entries, got " +
                            std::to_string(v.size()));
  return {};
}

inline Status expect_range(std::string_view attr, const Dims& v, std::int64_t lo) {
  for (std::int64_t x : v)
    if (x < lo || x > kMaxExtent)
      return invalid_argument("attribute '" + std::string(attr) + "' must hold values in [" + str(lo) +
                              ", 2^40], got " + str(v));
  return {};
}

/// OK when a tensor of `dims` has a byte size int64 holds (TensorType::checked_nbytes). Every
/// rule checks its output with it before deriving a plan from the output's dimensions.
inline Status output_fits(const Dims& dims, DType dtype = DType::f32) {
  if (!TensorType{dtype, Shape(dims)}.checked_nbytes())
    return invalid_argument("output shape " + str(dims) + " has more elements than int64 can count");
  return {};
}

/// `a + b` for a size derived from attributes, or an error naming `what`.
inline Result<std::int64_t> add_extent(std::int64_t a, std::int64_t b, std::string_view what) {
  const auto r = checked_add(a, b);
  if (!r) return invalid_argument(std::string(what) + " overflows int64 (" + str(a) + " + " + str(b) + ")");
  return *r;
}

/// `a * b` for a size derived from attributes, or an error naming `what`.
inline Result<std::int64_t> mul_extent(std::int64_t a, std::int64_t b, std::string_view what) {
  const auto r = checked_mul(a, b);
  if (!r) return invalid_argument(std::string(what) + " overflows int64 (" + str(a) + " * " + str(b) + ")");
  return *r;
}

inline CompiledOp single(DType dtype, Dims dims, Kernel k) {
  CompiledOp op;
  op.outputs.push_back(TensorType{dtype, Shape(std::move(dims))});
  op.kernel = std::move(k);
  return op;
}

/// Arity and dtypes from the op's table row.
inline Status check_signature(const OpInfo& info, std::span<const TensorType> in) {
  const std::size_t n = in.size();
  if (n < info.min_inputs || n > info.max_inputs) {
    std::string want;
    if (info.min_inputs == info.max_inputs)
      want = std::to_string(info.min_inputs);
    else if (info.max_inputs == kUnbounded)
      want = "at least " + std::to_string(info.min_inputs);
    else
      want = std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
    const bool one = info.min_inputs == 1 && (info.max_inputs == 1 || info.max_inputs == kUnbounded);
    return invalid_argument("takes " + want + (one ? " input" : " inputs") + ", got " + std::to_string(n));
  }
  auto need = [&](std::size_t i, DType d, std::string_view role = {}) -> Status {
    if (in[i].dtype != d)
      return invalid_argument((role.empty() ? "input " + std::to_string(i) : std::string(role)) + " must be " +
                              std::string(dtype_name(d)) + ", got " + in[i].to_string());
    return {};
  };
  // The input whose dtype picks the kernel must be one the rule admits; the others agree with it.
  auto admit = [&](std::size_t i, std::string_view role) -> Status {
    if (!dtype_rule_admits(info.dtypes, in[i].dtype))
      return invalid_argument("does not compute on " + std::string(dtype_name(in[i].dtype)) + " (" + std::string(role) +
                              " is " + in[i].to_string() + "; takes " + dtype_rule_list(info.dtypes) + ")");
    return {};
  };
  auto agree = [&](std::size_t first) -> Status {
    for (std::size_t i = first + 1; i < n; ++i)
      if (in[i].dtype != in[first].dtype)
        return invalid_argument("input " + std::to_string(i) + " is " + in[i].to_string() + " but input " +
                                std::to_string(first) + " is " + in[first].to_string() + " (dtypes must agree)");
    return {};
  };
  if (n == 0) return {};
  switch (info.dtypes) {
    case DTypeRule::f32_only:
      for (std::size_t i = 0; i < n; ++i) RML_RETURN_IF_ERROR(need(i, DType::f32));
      break;
    case DTypeRule::any_same:
    case DTypeRule::float_same:
    case DTypeRule::numeric_same:
    case DTypeRule::compare:
    case DTypeRule::logical:
      RML_RETURN_IF_ERROR(admit(0, "input 0"));
      RML_RETURN_IF_ERROR(agree(0));
      break;
    case DTypeRule::argmax:
    case DTypeRule::cast:
      RML_RETURN_IF_ERROR(admit(0, "input 0"));
      break;
    case DTypeRule::gather:
      if (in[1].dtype != DType::i32 && in[1].dtype != DType::i64)
        return invalid_argument("indices (input 1) must be i32 or i64, got " + in[1].to_string());
      break;
    case DTypeRule::where:
      if (in[0].dtype != DType::boolean && in[0].dtype != DType::f32)
        return invalid_argument("condition (input 0) must be bool or f32, got " + in[0].to_string());
      RML_RETURN_IF_ERROR(agree(1));
      break;
  }
  return {};
}

/// The dtype the node's kernel is chosen by: input 0's, or for `where` the values' (input 1).
inline DType kernel_dtype(OpCode op, std::span<const TensorType> in) {
  return op == OpCode::Where ? in[1].dtype : in[0].dtype;
}

// ---- one rule per op family ----

inline Result<CompiledOp> compile_unary(OpCode op, const AttrReader& attrs, const TensorType& x) {
  UnaryPlan p{x.shape.numel(), false};
  if (op == OpCode::Gelu) {
    const std::string_view approx = attrs.get_string("approximate");
    if (approx != "none" && approx != "tanh")
      return invalid_argument("attribute 'approximate' must be \"none\" or \"tanh\", got \"" + std::string(approx) +
                              "\"");
    p.gelu_tanh = approx == "tanh";
  }
  return single(x.dtype, x.shape.dims(), Kernel{op, x.dtype, p});
}

inline Result<CompiledOp> compile_broadcast(OpCode op, std::span<const TensorType> in) {
  std::vector<const Dims*> shapes;
  for (const auto& t : in) shapes.push_back(&t.shape.dims());
  auto out = broadcast_dims(shapes);
  if (!out) {
    std::string s = "cannot broadcast ";
    for (std::size_t i = 0; i < in.size(); ++i) s += (i ? " with " : "") + in[i].to_string();
    return invalid_argument(s);
  }
  const DType kd = kernel_dtype(op, in);
  DType out_dtype = kd;
  if (op_info(op).dtypes == DTypeRule::compare) out_dtype = compare_output_dtype(kd);
  RML_RETURN_IF_ERROR(output_fits(*out, out_dtype));
  BroadcastPlan p;
  p.bool_condition = op == OpCode::Where && in[0].dtype == DType::boolean;
  p.n = Shape(*out).numel();
  p.dims = *out;
  p.strides.resize(in.size());
  std::vector<Dims*> refs;
  for (std::size_t i = 0; i < in.size(); ++i) {
    p.strides[i] = broadcast_strides(in[i].shape.dims(), *out);
    refs.push_back(&p.strides[i]);
  }
  collapse_dims(p.dims, refs);
  return single(out_dtype, *out, Kernel{op, kd, std::move(p)});
}

inline Result<CompiledOp> compile_matmul(std::span<const TensorType> in) {
  Dims a = in[0].shape.dims(), b = in[1].shape.dims();
  if (a.empty() || b.empty())
    return invalid_argument("operands must have rank >= 1, got " + in[0].to_string() + " @ " + in[1].to_string());
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const std::int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k)
    return invalid_argument("inner dimensions differ: " + in[0].to_string() + " @ " + in[1].to_string() + " (" +
                            str(k) + " != " + str(b[b.size() - 2]) + ")");
  const Dims a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const Dims* batches[] = {&a_batch, &b_batch};
  auto batch = broadcast_dims(batches);
  if (!batch)
    return invalid_argument("batch dimensions do not broadcast: " + in[0].to_string() + " @ " + in[1].to_string());
  Dims out = *batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  RML_RETURN_IF_ERROR(output_fits(out));

  MatMulPlan p{m, k, n, *batch, {}, {}, in[0].shape.numel(), in[1].shape.numel()};
  p.a_batch_strides = broadcast_strides(a_batch, *batch);
  p.b_batch_strides = broadcast_strides(b_batch, *batch);
  for (auto& s : p.a_batch_strides) s *= m * k;
  for (auto& s : p.b_batch_strides) s *= k * n;
  Dims* refs[] = {&p.a_batch_strides, &p.b_batch_strides};
  collapse_dims(p.batch_dims, refs);
  // [B, m, k] @ [k, n] with a contiguous over the batch: one GEMM of (B*m) rows.
  if (p.batch_dims.size() == 1 && p.b_batch_strides[0] == 0 && p.a_batch_strides[0] == m * k) {
    p.m *= p.batch_dims[0];
    p.batch_dims.clear();
  }
  if (p.batch_dims == Dims{1}) p.batch_dims.clear();
  p.a_batch_strides.resize(p.batch_dims.size());
  p.b_batch_strides.resize(p.batch_dims.size());
  return single(in[0].dtype, std::move(out), Kernel{OpCode::MatMul, in[0].dtype, std::move(p)});
}

inline Result<CompiledOp> compile_conv2d(const AttrReader& attrs, std::span<const TensorType> in) {
  const Dims& x = in[0].shape.dims();
  const Dims& w = in[1].shape.dims();
  if (x.size() != 4) return invalid_argument("input 0 must be NCHW (rank 4), got " + in[0].to_string());
  if (w.size() != 4)
    return invalid_argument("weight (input 1) must be [O, C/groups, kH, kW], got " + in[1].to_string());
  const Dims strides = attrs.get_ints("strides"), pads = attrs.get_ints("pads"), dil = attrs.get_ints("dilations");
  const std::int64_t groups = attrs.get_int("groups");
  RML_RETURN_IF_ERROR(expect_count("strides", strides, 2));
  RML_RETURN_IF_ERROR(expect_count("pads", pads, 4));
  RML_RETURN_IF_ERROR(expect_count("dilations", dil, 2));
  RML_RETURN_IF_ERROR(expect_range("strides", strides, 1));
  RML_RETURN_IF_ERROR(expect_range("pads", pads, 0));
  RML_RETURN_IF_ERROR(expect_range("dilations", dil, 1));
  if (groups < 1 || groups > kMaxExtent) return invalid_argument("attribute 'groups' must be >= 1, got " + str(groups));
  Conv2dPlan p;
  p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
  p.o = w[0], p.kh = w[2], p.kw = w[3];
  p.groups = groups;
  if (p.c % groups != 0 || p.o % groups != 0)
    return invalid_argument("groups " + str(groups) + " must divide input channels " + str(p.c) +
                            " and output channels " + str(p.o));
  p.cg = p.c / groups, p.og = p.o / groups;
  if (w[1] != p.cg)
    return invalid_argument("weight " + in[1].to_string() + " must have " + str(p.cg) +
                            " input channels per group (input " + in[0].to_string() + ", groups " + str(groups) + ")");
  if (p.kh < 1 || p.kw < 1) return invalid_argument("weight " + in[1].to_string() + " has an empty kernel");
  if (in.size() == 3) {
    if (in[2].shape.dims() != Dims{p.o})
      return invalid_argument("bias (input 2) must be " + std::string(dtype_name(in[0].dtype)) + " [" + str(p.o) +
                              "], got " + in[2].to_string());
    p.has_bias = true;
  }
  p.stride_h = strides[0], p.stride_w = strides[1];
  p.dilation_h = dil[0], p.dilation_w = dil[1];
  p.pad_top = pads[0], p.pad_left = pads[1];
  // Dilation and padding come from attributes: their products and sums are checked.
  RML_ASSIGN_OR_RETURN(const std::int64_t span_h, mul_extent(p.dilation_h, p.kh - 1, "dilated kernel height"));
  RML_ASSIGN_OR_RETURN(const std::int64_t span_w, mul_extent(p.dilation_w, p.kw - 1, "dilated kernel width"));
  const std::int64_t ekh = span_h + 1, ekw = span_w + 1;  // span <= (2^63 - 1) - 1: no overflow
  RML_ASSIGN_OR_RETURN(const std::int64_t ph, add_extent(p.h, pads[0] + pads[2], "padded input height"));
  RML_ASSIGN_OR_RETURN(const std::int64_t pw, add_extent(p.w, pads[1] + pads[3], "padded input width"));
  if (ekh > ph || ekw > pw)
    return invalid_argument("dilated kernel " + str(Dims{ekh, ekw}) + " is larger than the padded input " +
                            str(Dims{ph, pw}));
  p.oh = (ph - ekh) / p.stride_h + 1;
  p.ow = (pw - ekw) / p.stride_w + 1;
  Dims out{p.n, p.o, p.oh, p.ow};
  RML_RETURN_IF_ERROR(output_fits(out));
  return single(in[0].dtype, std::move(out), Kernel{OpCode::Conv2d, in[0].dtype, p});
}

inline Result<CompiledOp> compile_pool2d(OpCode op, const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  if (x.size() != 4) return invalid_argument("input 0 must be NCHW (rank 4), got " + in.to_string());
  const Dims kernel = attrs.get_ints("kernel");
  RML_RETURN_IF_ERROR(expect_count("kernel", kernel, 2));
  RML_RETURN_IF_ERROR(expect_range("kernel", kernel, 1));
  const Dims strides = attrs.has("strides") ? attrs.get_ints("strides") : kernel;
  const Dims pads = attrs.get_ints("pads");
  RML_RETURN_IF_ERROR(expect_count("strides", strides, 2));
  RML_RETURN_IF_ERROR(expect_count("pads", pads, 4));
  RML_RETURN_IF_ERROR(expect_range("strides", strides, 1));
  RML_RETURN_IF_ERROR(expect_range("pads", pads, 0));
  for (std::size_t i = 0; i < 4; ++i)
    if (pads[i] >= kernel[i % 2])
      return invalid_argument("attribute 'pads' " + str(pads) + " must be smaller than the kernel " + str(kernel));
  Pool2dPlan p;
  p.planes = x[0] * x[1], p.h = x[2], p.w = x[3];
  p.kh = kernel[0], p.kw = kernel[1];
  p.stride_h = strides[0], p.stride_w = strides[1];
  p.pad_top = pads[0], p.pad_left = pads[1];
  RML_ASSIGN_OR_RETURN(const std::int64_t ph, add_extent(p.h, pads[0] + pads[2], "padded input height"));
  RML_ASSIGN_OR_RETURN(const std::int64_t pw, add_extent(p.w, pads[1] + pads[3], "padded input width"));
  if (p.kh > ph || p.kw > pw)
    return invalid_argument("kernel " + str(kernel) + " is larger than the padded input " + str(Dims{ph, pw}));
  p.oh = (ph - p.kh) / p.stride_h + 1;
  p.ow = (pw - p.kw) / p.stride_w + 1;
  if (op == OpCode::AvgPool2d) p.count_include_pad = attrs.get_bool("count_include_pad");
  Dims out{x[0], x[1], p.oh, p.ow};
  RML_RETURN_IF_ERROR(output_fits(out));
  return single(in.dtype, std::move(out), Kernel{op, in.dtype, p});
}

/// Normalised, sorted, duplicate-free axes; `all_if_empty` makes an empty list mean every axis.
inline Result<std::vector<std::uint8_t>> axis_mask(const Dims& axes, std::size_t rank, bool all_if_empty) {
  std::vector<std::uint8_t> mask(rank, axes.empty() && all_if_empty ? 1 : 0);
  for (std::int64_t a : axes) {
    RML_ASSIGN_OR_RETURN(std::size_t i, normalize_axis(a, rank));
    if (mask[i]) return invalid_argument("axis " + str(a) + " is listed twice in " + str(axes));
    mask[i] = 1;
  }
  return mask;
}

inline Result<CompiledOp> compile_reduce(OpCode op, const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  RML_ASSIGN_OR_RETURN(auto mask, axis_mask(attrs.get_ints("axes"), x.size(), true));
  const bool keep = attrs.get_bool("keepdims");
  ReducePlan p;
  Dims out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (mask[i]) {
      p.count *= x[i];
      if (keep) out.push_back(1);
    } else {
      out.push_back(x[i]);
    }
  }
  if (p.count == 0 && (op == OpCode::Max || op == OpCode::Min) && Shape(out).numel() != 0)
    return invalid_argument("reduces over an empty axis of " + in.to_string() + " (no identity for " +
                            std::string(op_name(op)) + ")");
  p.out_n = Shape(out).numel();
  // Collapse: drop unit dims, merge runs of the same kind.
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    if (!p.dims.empty() && p.reduced.back() == mask[i]) {
      p.dims.back() *= x[i];
    } else {
      p.dims.push_back(x[i]);
      p.reduced.push_back(mask[i]);
    }
  }
  const auto runs = std::count(p.reduced.begin(), p.reduced.end(), std::uint8_t{1});
  p.simple = runs <= 1;
  if (p.simple) {
    bool seen = false;
    for (std::size_t i = 0; i < p.dims.size(); ++i) {
      if (p.reduced[i]) {
        p.reduce = p.dims[i];
        seen = true;
      } else {
        (seen ? p.inner : p.outer) *= p.dims[i];
      }
    }
  }
  RML_RETURN_IF_ERROR(output_fits(out, in.dtype));
  return single(in.dtype, std::move(out), Kernel{op, in.dtype, std::move(p)});
}

inline AxisPlan axis_plan(const Dims& x, std::size_t axis) {
  AxisPlan p;
  for (std::size_t i = 0; i < x.size(); ++i) (i < axis ? p.outer : i == axis ? p.axis : p.inner) *= x[i];
  return p;
}

inline Result<CompiledOp> compile_softmax(const AttrReader& attrs, const TensorType& in) {
  RML_ASSIGN_OR_RETURN(std::size_t axis, normalize_axis(attrs.get_int("axis"), in.shape.rank()));
  return single(in.dtype, in.shape.dims(), Kernel{OpCode::Softmax, in.dtype, axis_plan(in.shape.dims(), axis)});
}

inline Result<CompiledOp> compile_argmax(const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  RML_ASSIGN_OR_RETURN(std::size_t axis, normalize_axis(attrs.get_int("axis"), x.size()));
  if (x[axis] == 0)
    return invalid_argument("argmax over axis " + str(static_cast<std::int64_t>(axis)) + " of " + in.to_string() +
                            ", which is empty");
  Dims out;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (i != axis)
      out.push_back(x[i]);
    else if (attrs.get_bool("keepdims"))
      out.push_back(1);
  const std::string_view to = attrs.get_string("output_dtype");
  if (to != "i32" && to != "i64")
    return invalid_argument("attribute 'output_dtype' must be \"i32\" or \"i64\", got \"" + std::string(to) + "\"");
  AxisPlan p = axis_plan(x, axis);
  p.wide_output = to == "i64";
  if (!p.wide_output && x[axis] - 1 > std::numeric_limits<std::int32_t>::max())
    return invalid_argument("argmax over axis " + str(static_cast<std::int64_t>(axis)) + " of " + in.to_string() +
                            ": indices beyond i32; set output_dtype \"i64\"");
  return single(p.wide_output ? DType::i64 : DType::i32, std::move(out), Kernel{OpCode::ArgMax, in.dtype, p});
}

inline Result<CompiledOp> compile_reshape(const AttrReader& attrs, const TensorType& in) {
  Dims shape = attrs.get_ints("shape");
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && !infer)
      infer = i;
    else if (shape[i] < 0 || shape[i] > kMaxExtent)
      return invalid_argument("attribute 'shape' " + str(shape) + " may hold one -1 and otherwise sizes in [0, 2^40]");
  }
  // The known sizes' product, in checked arithmetic: a product that overflows cannot match.
  Dims known_dims = shape;
  if (infer) known_dims[*infer] = 1;
  const auto known = Shape(known_dims).checked_numel();
  if (!known)
    return invalid_argument("cannot reshape " + in.to_string() + " to " + str(shape) +
                            ": its sizes' product overflows int64");
  const std::int64_t n = in.shape.numel();
  if (infer) {
    if (*known == 0 || n % *known != 0)
      return invalid_argument("cannot reshape " + in.to_string() + " to " + str(shape));
    shape[*infer] = n / *known;
  } else if (*known != n) {
    return invalid_argument("cannot reshape " + in.to_string() + " (" + str(n) + " elements) to " + str(shape));
  }
  RML_RETURN_IF_ERROR(output_fits(shape, in.dtype));
  const auto bytes = static_cast<std::int64_t>(element_size(in.dtype)) * n;
  return single(in.dtype, std::move(shape), Kernel{OpCode::Reshape, in.dtype, CopyPlan{bytes}});
}

inline CompiledOp strided_copy(OpCode op, const TensorType& in, Dims out, Dims in_strides, std::int64_t offset) {
  StridedCopyPlan p{Shape(out).numel(), out, std::move(in_strides), offset};
  Dims* refs[] = {&p.in_strides};
  collapse_dims(p.dims, refs);
  return single(in.dtype, std::move(out), Kernel{op, in.dtype, std::move(p)});
}

inline Result<CompiledOp> compile_transpose(const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  Dims perm = attrs.get_ints("perm");
  if (!attrs.has("perm"))
    for (std::size_t i = x.size(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
  std::vector<std::uint8_t> seen(x.size(), 0);
  bool ok = perm.size() == x.size();
  for (std::size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(x.size()) && !seen[static_cast<std::size_t>(perm[i])];
    if (ok) seen[static_cast<std::size_t>(perm[i])] = 1;
  }
  if (!ok)
    return invalid_argument("attribute 'perm' " + str(perm) + " is not a permutation of the axes of " + in.to_string());
  const Dims cs = contiguous_strides(x);
  Dims out, strides;
  for (std::int64_t a : perm) {
    out.push_back(x[static_cast<std::size_t>(a)]);
    strides.push_back(cs[static_cast<std::size_t>(a)]);
  }
  return strided_copy(OpCode::Transpose, in, std::move(out), std::move(strides), 0);
}

inline Result<CompiledOp> compile_concat(const AttrReader& attrs, std::span<const TensorType> in) {
  const Dims& x0 = in[0].shape.dims();
  RML_ASSIGN_OR_RETURN(std::size_t axis, normalize_axis(attrs.get_int("axis"), x0.size()));
  Dims out = x0;
  out[axis] = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Dims& xi = in[i].shape.dims();
    bool same = xi.size() == x0.size();
    for (std::size_t d = 0; same && d < xi.size(); ++d) same = d == axis || xi[d] == x0[d];
    if (!same)
      return invalid_argument("input " + std::to_string(i) + " " + in[i].to_string() + " does not match input 0 " +
                              in[0].to_string() + " outside axis " + str(static_cast<std::int64_t>(axis)));
    RML_ASSIGN_OR_RETURN(out[axis], add_extent(out[axis], xi[axis], "the concatenated axis"));
  }
  RML_RETURN_IF_ERROR(output_fits(out, in[0].dtype));
  // The output fits, so its rows and every chunk do.
  ConcatPlan p;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const AxisPlan a = axis_plan(in[i].shape.dims(), axis);
    p.chunks.push_back(a.axis * a.inner);
    p.row += a.axis * a.inner;
    p.outer = a.outer;
  }
  return single(in[0].dtype, std::move(out), Kernel{OpCode::Concat, in[0].dtype, std::move(p)});
}

inline Result<CompiledOp> compile_slice(const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  const Dims starts = attrs.get_ints("starts"), ends = attrs.get_ints("ends");
  Dims axes = attrs.get_ints("axes"), steps = attrs.get_ints("steps");
  if (!attrs.has("axes"))
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (!attrs.has("steps")) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_argument("attributes 'starts' " + str(starts) + ", 'ends' " + str(ends) + ", 'axes' " + str(axes) +
                            " and 'steps' " + str(steps) + " must have the same length");
  RML_ASSIGN_OR_RETURN(auto mask, axis_mask(axes, x.size(), false));
  (void)mask;  // checks range and duplicates
  Dims out = x, strides = contiguous_strides(x);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t a = *normalize_axis(axes[i], x.size());
    if (steps[i] < 1) return invalid_argument("attribute 'steps' " + str(steps) + " must hold values >= 1");
    const std::int64_t d = x[a];
    auto clamp = [d](std::int64_t v) { return std::clamp(v < 0 ? v + d : v, std::int64_t{0}, d); };
    const std::int64_t b = clamp(starts[i]), e = clamp(ends[i]);
    // A step beyond the axis takes at most one element, like a step of the axis' size; clamping
    // it keeps the stride a product of the input's own dimensions (steps may be INT64_MAX).
    const std::int64_t step = std::min(steps[i], std::max<std::int64_t>(d, 1));
    out[a] = e > b ? (e - b - 1) / step + 1 : 0;
    offset += b * strides[a];
    strides[a] *= step;
  }
  return strided_copy(OpCode::Slice, in, std::move(out), std::move(strides), offset);
}

inline Result<CompiledOp> compile_expand(const AttrReader& attrs, const TensorType& in) {
  const Dims target = attrs.get_ints("shape");
  const Dims& x = in.shape.dims();
  RML_RETURN_IF_ERROR(expect_range("shape", target, 0));
  bool ok = target.size() >= x.size();
  for (std::size_t i = 0; ok && i < x.size(); ++i) {
    const std::int64_t t = target[target.size() - x.size() + i];
    ok = x[i] == t || x[i] == 1;
  }
  if (!ok) return invalid_argument("cannot broadcast " + in.to_string() + " to " + str(target));
  RML_RETURN_IF_ERROR(output_fits(target, in.dtype));
  return strided_copy(OpCode::Expand, in, target, broadcast_strides(x, target), 0);
}

inline Result<CompiledOp> compile_pad(const AttrReader& attrs, const TensorType& in) {
  const Dims& x = in.shape.dims();
  const Dims pads = attrs.get_ints("pads");
  RML_RETURN_IF_ERROR(expect_count("pads", pads, 2 * x.size()));
  RML_RETURN_IF_ERROR(expect_range("pads", pads, 0));
  Dims out = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    RML_ASSIGN_OR_RETURN(out[i], add_extent(x[i], pads[i] + pads[i + x.size()], "the padded size"));
  }
  RML_RETURN_IF_ERROR(output_fits(out, in.dtype));
  PadPlan p;
  p.out_n = Shape(out).numel();
  p.value = attrs.get_float("value");
  p.dims = x;
  p.out_strides = contiguous_strides(out);
  for (std::size_t i = 0; i < x.size(); ++i) p.out_offset += pads[i] * p.out_strides[i];
  Dims* refs[] = {&p.out_strides};
  collapse_dims(p.dims, refs);
  if (in.shape.numel() == 0) p.dims = p.out_strides = {0};  // nothing to copy
  return single(in.dtype, std::move(out), Kernel{OpCode::Pad, in.dtype, std::move(p)});
}

inline Result<CompiledOp> compile_gather(const AttrReader& attrs, std::span<const TensorType> in) {
  const Dims& x = in[0].shape.dims();
  if (x.empty()) return invalid_argument("data (input 0) must have rank >= 1, got " + in[0].to_string());
  RML_ASSIGN_OR_RETURN(std::size_t axis, normalize_axis(attrs.get_int("axis"), x.size()));
  GatherPlan p;
  const AxisPlan a = axis_plan(x, axis);
  p.outer = a.outer, p.axis = a.axis, p.inner = a.inner, p.count = in[1].shape.numel();
  p.wide_indices = in[1].dtype == DType::i64;
  Dims out(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
  RML_RETURN_IF_ERROR(output_fits(out, in[0].dtype));
  return single(in[0].dtype, std::move(out), Kernel{OpCode::Gather, in[0].dtype, p});
}

inline Result<CompiledOp> compile_cast(const AttrReader& attrs, const TensorType& in) {
  const std::string_view to = attrs.get_string("to");
  const auto d = parse_dtype(to);
  if (!d || !dtype_rule_admits(DTypeRule::cast, *d))
    return invalid_argument("attribute 'to' must name a dtype (" + dtype_rule_list(DTypeRule::cast) + "), got \"" +
                            std::string(to) + "\"");
  return single(*d, in.shape.dims(), Kernel{OpCode::Cast, in.dtype, CastPlan{in.shape.numel(), *d}});
}

inline Result<CompiledOp> compile_rule(const NodeDef& node, std::span<const TensorType> in);

RML_SPLIT_API Result<CompiledOp> compile_node(const NodeDef& node, std::span<const TensorType> in) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!in[i].checked_nbytes())
      return invalid_argument("input " + std::to_string(i) + " " + in[i].to_string() + " has no valid byte size");
  auto r = compile_rule(node, in);
  if (r.ok())
    for (const TensorType& t : r->outputs) RML_RETURN_IF_ERROR(output_fits(t.shape.dims(), t.dtype));
  return r;
}

/// The rule of the node's op.
inline Result<CompiledOp> compile_rule(const NodeDef& node, std::span<const TensorType> in) {
  const auto code = find_op(node.op);
  if (!code) return unsupported("unknown op '" + node.op + "'");
  const OpCode op = *code;
  RML_RETURN_IF_ERROR(check_signature(op_info(op), in));
  RML_ASSIGN_OR_RETURN(AttrReader attrs, AttrReader::bind(op, node.attrs));
  if (is_unary(op)) return compile_unary(op, attrs, in[0]);
  if (is_binary(op)) return compile_broadcast(op, in);
  switch (op) {
    case OpCode::MatMul:
      return compile_matmul(in);
    case OpCode::Conv2d:
      return compile_conv2d(attrs, in);
    case OpCode::MaxPool2d:
    case OpCode::AvgPool2d:
      return compile_pool2d(op, attrs, in[0]);
    case OpCode::Sum:
    case OpCode::Mean:
    case OpCode::Max:
    case OpCode::Min:
      return compile_reduce(op, attrs, in[0]);
    case OpCode::Softmax:
      return compile_softmax(attrs, in[0]);
    case OpCode::ArgMax:
      return compile_argmax(attrs, in[0]);
    case OpCode::Reshape:
      return compile_reshape(attrs, in[0]);
    case OpCode::Transpose:
      return compile_transpose(attrs, in[0]);
    case OpCode::Concat:
      return compile_concat(attrs, in);
    case OpCode::Slice:
      return compile_slice(attrs, in[0]);
    case OpCode::Expand:
      return compile_expand(attrs, in[0]);
    case OpCode::Pad:
      return compile_pad(attrs, in[0]);
    case OpCode::Copy: {
      const auto bytes = static_cast<std::int64_t>(element_size(in[0].dtype)) * in[0].shape.numel();
      return single(in[0].dtype, in[0].shape.dims(), Kernel{OpCode::Copy, in[0].dtype, CopyPlan{bytes}});
    }
    case OpCode::Gather:
      return compile_gather(attrs, in);
    case OpCode::Cast:
      return compile_cast(attrs, in[0]);
    case OpCode::Where:
    case OpCode::LogicalAnd:
    case OpCode::LogicalOr:
      return compile_broadcast(op, in);
    case OpCode::LogicalNot:
      return single(DType::boolean, in[0].shape.dims(),
                    Kernel{op, DType::boolean, UnaryPlan{in[0].shape.numel(), false}});
    case OpCode::Mod: {
      const bool fmod = attrs.get_bool("fmod");
      if (is_float_dtype(in[0].dtype) && !fmod)
        return invalid_argument("mod on " + std::string(dtype_name(in[0].dtype)) +
                                " needs fmod = true (the remainder of C's fmod, as ONNX Mod requires for floats)");
      auto r = compile_broadcast(op, in);
      if (r.ok()) std::get<BroadcastPlan>(r->kernel.plan).fmod = fmod;
      return r;
    }
    default:
      break;
  }
  return internal_error("no shape rule for op '" + node.op + "'");
}

/// `matmul` or `node "fc1" (matmul)`: how compile_op's messages name a node.
inline std::string node_label(const NodeDef& node) {
  return node.name.empty() ? node.op : "node \"" + node.name + "\" (" + node.op + ")";
}
}  // namespace detail
RML_SPLIT_API Result<CompiledOp> compile_op(const NodeDef& node, std::span<const TensorType> inputs) {
  auto r = detail::compile_node(node, inputs);
  if (!r.ok()) return r.error().with_prefix(detail::node_label(node) + ": ");
  if (node.outputs.size() != r->outputs.size())
    return invalid_argument(detail::node_label(node) + ": lists " + std::to_string(node.outputs.size()) +
                            " outputs but produces " + std::to_string(r->outputs.size()));
  return r;
}
}  // namespace rml
