// The op set (SPEC §4): OpCode and three constexpr tables (unary, binary, other) with each op's
// snake_case name, arity bounds, dtype rule and attribute schema, checked at compile time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rml/core/dtype.hpp"

namespace rml {

/// Every op. The numbers are stored in files: append only, before `count_`. Rows of the tables
/// below follow this order (unary ops, then binary ops, then the others).
enum class OpCode : std::uint16_t {
  // unary
  Neg,
  Abs,
  Relu,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Erf,
  Gelu,
  Silu,
  Sin,
  Cos,
  // binary
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Equal,
  Less,
  Greater,
  // other
  MatMul,
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  Sum,
  Mean,
  Max,
  Min,
  Softmax,
  ArgMax,
  Reshape,
  Transpose,
  Concat,
  Slice,
  Expand,
  Pad,
  Copy,
  Gather,
  Cast,
  Where,
  LogicalAnd,
  LogicalOr,
  LogicalNot,
  Mod,
  count_,
};

inline constexpr std::size_t op_count = static_cast<std::size_t>(OpCode::count_);

/// What an attribute holds. Integers are accepted where a float is expected, and an empty
/// list for either list kind.
enum class AttrKind : std::uint8_t { integer, number, boolean, string, integers, numbers };

/// `int`, `float`, `bool`, `string`, `ints`, `floats`.
constexpr std::string_view attr_kind_name(AttrKind kind) noexcept {
  switch (kind) {
    case AttrKind::integer:
      return "int";
    case AttrKind::number:
      return "float";
    case AttrKind::boolean:
      return "bool";
    case AttrKind::string:
      return "string";
    case AttrKind::integers:
      return "ints";
    case AttrKind::numbers:
      return "floats";
  }
  return "?";
}

/// One attribute of an op. `fallback` is the default written as the docs print it (`1`,
/// `[1, 1]`, `none`, `false`); the attribute reader parses it, so the table is the only place a
/// default lives. A default that depends on other inputs (`strides` of a pool = its kernel,
/// `axes` = all) has `computed` set and a description in `fallback`.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required = false;
  std::string_view fallback = {};
  bool computed = false;
};

/// Which dtypes an op accepts and which it produces. The kernel's dtype (the column of the kernel
/// table) is input 0's, except for `where` (input 1's: the values, not the condition).
enum class DTypeRule : std::uint8_t {
  f32_only,      ///< every input f32, outputs f32
  any_same,      ///< every input of one dtype (any); outputs have that dtype
  gather,        ///< data of any dtype, indices i32 or i64; output has data's dtype
  cast,          ///< input of any dtype; output dtype is attribute `to` (any)
  argmax,        ///< input f32, f16, bf16, i32 or i64; output i32, or i64 by attribute `output_dtype`
  float_same,    ///< every input f32, f16 or bf16, all the same; outputs have that dtype
  numeric_same,  ///< every input f32, f16, bf16, i32 or i64, all the same; outputs have that dtype
  compare,       ///< inputs as numeric_same; output bool, except f32 inputs give an f32 0/1 mask
  where,         ///< condition bool or f32 (nonzero is true); the two values of one dtype (any)
  logical,       ///< every input bool; output bool
};

/// f32, f16, bf16, i32 and i64: the dtypes arithmetic is defined on.
constexpr bool is_numeric_dtype(DType d) noexcept { return is_float_dtype(d) || is_integer_dtype(d); }

/// Whether rule `rule` admits `d` as the dtype its kernel is chosen by (see DTypeRule). The
/// checker and the kernel table both ask this, so a pair that checks always has a kernel.
constexpr bool dtype_rule_admits(DTypeRule rule, DType d) noexcept {
  if (d >= DType::count_) return false;
  switch (rule) {
    case DTypeRule::f32_only:
      return d == DType::f32;
    case DTypeRule::float_same:
      return is_float_dtype(d);
    case DTypeRule::numeric_same:
    case DTypeRule::compare:
    case DTypeRule::argmax:
      return is_numeric_dtype(d);
    case DTypeRule::any_same:
    case DTypeRule::gather:
    case DTypeRule::cast:
    case DTypeRule::where:
      return true;
    case DTypeRule::logical:
      return d == DType::boolean;
  }
  return false;
}

/// The dtypes `rule` admits, for messages: `f32, f16 or bf16`.
inline std::string dtype_rule_list(DTypeRule rule) {
  std::string s;
  std::size_t count = 0, seen = 0;
  for (std::size_t i = 0; i < dtype_count; ++i) count += dtype_rule_admits(rule, static_cast<DType>(i));
  for (std::size_t i = 0; i < dtype_count; ++i) {
    if (!dtype_rule_admits(rule, static_cast<DType>(i))) continue;
    if (seen) s += seen + 1 == count ? " or " : ", ";
    s += dtype_name(static_cast<DType>(i));
    ++seen;
  }
  return s;
}

/// The output dtype of a comparison on inputs of dtype `d`: bool, or the f32 mask that files of
/// format version 1 and the exporters before the 16-bit/integer dtypes rely on.
constexpr DType compare_output_dtype(DType d) noexcept { return d == DType::f32 ? DType::f32 : DType::boolean; }

/// A row of an op table.
struct OpInfo {
  OpCode code;
  std::string_view name;       ///< snake_case, as in JSON
  std::string_view code_name;  ///< CamelCase, as the enumerator
  std::uint8_t min_inputs;
  std::uint8_t max_inputs;  ///< kUnbounded for concat
  DTypeRule dtypes;
  std::span<const AttrSpec> attrs;
  std::uint8_t outputs = 1;
};

inline constexpr std::uint8_t kUnbounded = 255;

namespace detail::op_attrs {
inline constexpr AttrSpec gelu[] = {{"approximate", AttrKind::string, false, "none"}};
inline constexpr AttrSpec conv2d[] = {
    {"strides", AttrKind::integers, false, "[1, 1]"},
    {"pads", AttrKind::integers, false, "[0, 0, 0, 0]"},
    {"dilations", AttrKind::integers, false, "[1, 1]"},
    {"groups", AttrKind::integer, false, "1"},
};
inline constexpr AttrSpec max_pool2d[] = {
    {"kernel", AttrKind::integers, true},
    {"strides", AttrKind::integers, false, "kernel", true},
    {"pads", AttrKind::integers, false, "[0, 0, 0, 0]"},
};
inline constexpr AttrSpec avg_pool2d[] = {
    {"kernel", AttrKind::integers, true},
    {"strides", AttrKind::integers, false, "kernel", true},
    {"pads", AttrKind::integers, false, "[0, 0, 0, 0]"},
    {"count_include_pad", AttrKind::boolean, false, "true"},
};
inline constexpr AttrSpec reduce[] = {
    {"axes", AttrKind::integers, false, "all axes", true},
    {"keepdims", AttrKind::boolean, false, "false"},
};
inline constexpr AttrSpec softmax[] = {{"axis", AttrKind::integer, false, "-1"}};
inline constexpr AttrSpec argmax[] = {
    {"axis", AttrKind::integer, true},
    {"keepdims", AttrKind::boolean, false, "false"},
    {"output_dtype", AttrKind::string, false, "i32"},
};
inline constexpr AttrSpec shape[] = {{"shape", AttrKind::integers, true}};
inline constexpr AttrSpec transpose[] = {{"perm", AttrKind::integers, false, "reversed axes", true}};
inline constexpr AttrSpec concat[] = {{"axis", AttrKind::integer, true}};
inline constexpr AttrSpec slice[] = {
    {"starts", AttrKind::integers, true},
    {"ends", AttrKind::integers, true},
    {"axes", AttrKind::integers, false, "[0, 1, ..., len(starts) - 1]", true},
    {"steps", AttrKind::integers, false, "[1, ...]", true},
};
inline constexpr AttrSpec pad[] = {
    {"pads", AttrKind::integers, true},
    {"value", AttrKind::number, false, "0"},
};
inline constexpr AttrSpec gather[] = {{"axis", AttrKind::integer, false, "0"}};
inline constexpr AttrSpec cast[] = {{"to", AttrKind::string, true}};
inline constexpr AttrSpec mod[] = {{"fmod", AttrKind::boolean, false, "false"}};

template <std::size_t N>
constexpr std::span<const AttrSpec> of(const AttrSpec (&a)[N]) noexcept {
  return {a, N};
}
inline constexpr std::span<const AttrSpec> no_attrs{};
}  // namespace detail::op_attrs

namespace detail {
constexpr OpInfo unary(OpCode c, std::string_view name, std::string_view code_name,
                       DTypeRule rule = DTypeRule::float_same, std::span<const AttrSpec> attrs = op_attrs::no_attrs) {
  return {c, name, code_name, 1, 1, rule, attrs};
}
constexpr OpInfo binary(OpCode c, std::string_view name, std::string_view code_name,
                        DTypeRule rule = DTypeRule::numeric_same) {
  return {c, name, code_name, 2, 2, rule, op_attrs::no_attrs};
}
}  // namespace detail

/// Unary elementwise ops: one input, same shape and dtype out. neg, abs and relu take every
/// numeric dtype; the others f32, f16 and bf16.
inline constexpr std::array unary_ops = {
    detail::unary(OpCode::Neg, "neg", "Neg", DTypeRule::numeric_same),
    detail::unary(OpCode::Abs, "abs", "Abs", DTypeRule::numeric_same),
    detail::unary(OpCode::Relu, "relu", "Relu", DTypeRule::numeric_same),
    detail::unary(OpCode::Sigmoid, "sigmoid", "Sigmoid"),
    detail::unary(OpCode::Tanh, "tanh", "Tanh"),
    detail::unary(OpCode::Exp, "exp", "Exp"),
    detail::unary(OpCode::Log, "log", "Log"),
    detail::unary(OpCode::Sqrt, "sqrt", "Sqrt"),
    detail::unary(OpCode::Rsqrt, "rsqrt", "Rsqrt"),
    detail::unary(OpCode::Reciprocal, "reciprocal", "Reciprocal"),
    detail::unary(OpCode::Erf, "erf", "Erf"),
    detail::unary(OpCode::Gelu, "gelu", "Gelu", DTypeRule::float_same, detail::op_attrs::of(detail::op_attrs::gelu)),
    detail::unary(OpCode::Silu, "silu", "Silu"),
    detail::unary(OpCode::Sin, "sin", "Sin"),
    detail::unary(OpCode::Cos, "cos", "Cos"),
};

/// Binary elementwise ops: two inputs of one dtype under NumPy broadcasting.
inline constexpr std::array binary_ops = {
    detail::binary(OpCode::Add, "add", "Add"),
    detail::binary(OpCode::Sub, "sub", "Sub"),
    detail::binary(OpCode::Mul, "mul", "Mul"),
    detail::binary(OpCode::Div, "div", "Div"),
    detail::binary(OpCode::Pow, "pow", "Pow"),
    detail::binary(OpCode::Maximum, "maximum", "Maximum"),
    detail::binary(OpCode::Minimum, "minimum", "Minimum"),
    detail::binary(OpCode::Equal, "equal", "Equal", DTypeRule::compare),
    detail::binary(OpCode::Less, "less", "Less", DTypeRule::compare),
    detail::binary(OpCode::Greater, "greater", "Greater", DTypeRule::compare),
};

/// Every other op, each with its own shape rule in rml/check/compile.hpp.
inline constexpr std::array other_ops = [] {
  namespace a = detail::op_attrs;
  using R = DTypeRule;
  return std::array{
      OpInfo{OpCode::MatMul, "matmul", "MatMul", 2, 2, R::float_same, a::no_attrs},
      OpInfo{OpCode::Conv2d, "conv2d", "Conv2d", 2, 3, R::float_same, a::of(a::conv2d)},
      OpInfo{OpCode::MaxPool2d, "max_pool2d", "MaxPool2d", 1, 1, R::float_same, a::of(a::max_pool2d)},
      OpInfo{OpCode::AvgPool2d, "avg_pool2d", "AvgPool2d", 1, 1, R::float_same, a::of(a::avg_pool2d)},
      OpInfo{OpCode::Sum, "sum", "Sum", 1, 1, R::numeric_same, a::of(a::reduce)},
      OpInfo{OpCode::Mean, "mean", "Mean", 1, 1, R::float_same, a::of(a::reduce)},
      OpInfo{OpCode::Max, "max", "Max", 1, 1, R::numeric_same, a::of(a::reduce)},
      OpInfo{OpCode::Min, "min", "Min", 1, 1, R::numeric_same, a::of(a::reduce)},
      OpInfo{OpCode::Softmax, "softmax", "Softmax", 1, 1, R::float_same, a::of(a::softmax)},
      OpInfo{OpCode::ArgMax, "argmax", "ArgMax", 1, 1, R::argmax, a::of(a::argmax)},
      OpInfo{OpCode::Reshape, "reshape", "Reshape", 1, 1, R::any_same, a::of(a::shape)},
      OpInfo{OpCode::Transpose, "transpose", "Transpose", 1, 1, R::any_same, a::of(a::transpose)},
      OpInfo{OpCode::Concat, "concat", "Concat", 1, kUnbounded, R::any_same, a::of(a::concat)},
      OpInfo{OpCode::Slice, "slice", "Slice", 1, 1, R::any_same, a::of(a::slice)},
      OpInfo{OpCode::Expand, "expand", "Expand", 1, 1, R::any_same, a::of(a::shape)},
      OpInfo{OpCode::Pad, "pad", "Pad", 1, 1, R::any_same, a::of(a::pad)},
      OpInfo{OpCode::Copy, "copy", "Copy", 1, 1, R::any_same, a::no_attrs},
      OpInfo{OpCode::Gather, "gather", "Gather", 2, 2, R::gather, a::of(a::gather)},
      OpInfo{OpCode::Cast, "cast", "Cast", 1, 1, R::cast, a::of(a::cast)},
      OpInfo{OpCode::Where, "where", "Where", 3, 3, R::where, a::no_attrs},
      OpInfo{OpCode::LogicalAnd, "logical_and", "LogicalAnd", 2, 2, R::logical, a::no_attrs},
      OpInfo{OpCode::LogicalOr, "logical_or", "LogicalOr", 2, 2, R::logical, a::no_attrs},
      OpInfo{OpCode::LogicalNot, "logical_not", "LogicalNot", 1, 1, R::logical, a::no_attrs},
      // Broadcast like the binary ops; appended here, after the binary table's block, to keep the numbers.
      OpInfo{OpCode::Mod, "mod", "Mod", 2, 2, R::numeric_same, a::of(a::mod)},
  };
}();

namespace detail {

constexpr bool names_unique_and_snake() {
  std::array<std::string_view, op_count> names{};
  std::size_t n = 0;
  for (const auto& r : unary_ops) names[n++] = r.name;
  for (const auto& r : binary_ops) names[n++] = r.name;
  for (const auto& r : other_ops) names[n++] = r.name;
  for (std::size_t i = 0; i < n; ++i) {
    for (char ch : names[i])
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
    for (std::size_t j = i + 1; j < n; ++j)
      if (names[i] == names[j]) return false;
  }
  return n == op_count;
}

template <std::size_t N>
constexpr bool rows_in_order(const std::array<OpInfo, N>& table, std::size_t first) {
  for (std::size_t i = 0; i < N; ++i) {
    const OpInfo& r = table[i];
    if (static_cast<std::size_t>(r.code) != first + i) return false;
    if (r.min_inputs < 1 || r.min_inputs > r.max_inputs || r.outputs != 1 || r.code_name.empty()) return false;
    for (std::size_t a = 0; a < r.attrs.size(); ++a) {
      const AttrSpec& s = r.attrs[a];
      // An optional attribute says what its default is; a required one has none.
      if (s.name.empty() || (s.required == !s.fallback.empty())) return false;
      for (std::size_t b = a + 1; b < r.attrs.size(); ++b)
        if (s.name == r.attrs[b].name) return false;
    }
  }
  return true;
}

}  // namespace detail

static_assert(unary_ops.size() + binary_ops.size() + other_ops.size() == op_count,
              "rml: every OpCode needs exactly one row in the op tables");
static_assert(detail::rows_in_order(unary_ops, 0), "rml: unary_ops rows must follow OpCode order");
static_assert(detail::rows_in_order(binary_ops, unary_ops.size()), "rml: binary_ops rows must follow OpCode order");
static_assert(detail::rows_in_order(other_ops, unary_ops.size() + binary_ops.size()),
              "rml: other_ops rows must follow OpCode order");
static_assert(detail::names_unique_and_snake(), "rml: op names must be unique snake_case");

/// True for unary elementwise ops.
constexpr bool is_unary(OpCode c) noexcept { return static_cast<std::size_t>(c) < unary_ops.size(); }
/// True for binary elementwise ops.
constexpr bool is_binary(OpCode c) noexcept {
  const auto i = static_cast<std::size_t>(c);
  return i >= unary_ops.size() && i < unary_ops.size() + binary_ops.size();
}

/// The table row of an op (`c` must be below `count_`).
constexpr const OpInfo& op_info(OpCode c) noexcept {
  auto i = static_cast<std::size_t>(c);
  if (i < unary_ops.size()) return unary_ops[i];
  i -= unary_ops.size();
  if (i < binary_ops.size()) return binary_ops[i];
  i -= binary_ops.size();
  return other_ops[i < other_ops.size() ? i : 0];
}

/// The snake_case name (`matmul`).
constexpr std::string_view op_name(OpCode c) noexcept { return c < OpCode::count_ ? op_info(c).name : "?"; }
/// The CamelCase name (`MatMul`).
constexpr std::string_view op_code_name(OpCode c) noexcept { return c < OpCode::count_ ? op_info(c).code_name : "?"; }

/// The op named `name` (snake_case), or nothing.
constexpr std::optional<OpCode> find_op(std::string_view name) noexcept {
  for (std::size_t i = 0; i < op_count; ++i) {
    const auto c = static_cast<OpCode>(i);
    if (op_info(c).name == name) return c;
  }
  return std::nullopt;
}

/// Membership in any of the three tables.
constexpr bool is_known_op(std::string_view name) noexcept { return find_op(name).has_value(); }

/// The schema of attribute `name` of op `c`, or null.
constexpr const AttrSpec* find_attr(OpCode c, std::string_view name) noexcept {
  for (const AttrSpec& s : op_info(c).attrs)
    if (s.name == name) return &s;
  return nullptr;
}

static_assert(find_op("matmul") == OpCode::MatMul && op_code_name(OpCode::MaxPool2d) == "MaxPool2d");

}  // namespace rml
