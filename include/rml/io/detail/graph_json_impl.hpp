// The definitions behind rml/io/graph_json.hpp: the rml-graph parser, over simdjson. Included by
// that header wherever RML_SPLIT_DEFINED is 1 (see rml/core/linkage.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "rml/core/small_vector.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/io/detail/json_out.hpp"
#include "rml/io/graph_json.hpp"
#include "rml/io/safetensors.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

namespace sj = simdjson::ondemand;

/// A JSON path built on the stack as the parser descends (`nodes[3].inputs[1]`), turned into
/// text only when an error needs it.
struct JsonPath {
  const JsonPath* parent = nullptr;
  std::string_view key;  // a field name; unused for an index
  std::size_t index = 0;
  bool is_index = false;

  // The result points at *this: keep a named JsonPath alive while paths derived from it are.
  [[nodiscard]] JsonPath operator/(std::string_view field) const { return {this, field, 0, false}; }
  [[nodiscard]] JsonPath operator[](std::size_t i) const { return {this, {}, i, true}; }
  [[nodiscard]] std::string str() const {
    std::string s = parent ? parent->str() : std::string();
    if (is_index) return s + "[" + std::to_string(index) + "]";
    if (!s.empty()) s += '.';
    return s.append(key);
  }
};

// Parses one rml-graph document. Structural errors found while reading are kept until format
// and version have been checked, so a newer file is reported as UNSUPPORTED first.
class GraphJsonParser {
 public:
  /// A heap block's bookkeeping, as the memory budget counts it for each allocation.
  static constexpr std::size_t heap_block = 32;

  explicit GraphJsonParser(const SafetensorsReader* weights, std::size_t memory_per_byte = graph_json_memory_per_byte,
                           std::size_t memory_base = graph_json_memory_base)
      : weights_(weights), per_byte_(memory_per_byte), base_(memory_base) {}

  /// Never throws: an allocation that fails anyway (the budget is larger than what is free)
  /// becomes INVALID_ARGUMENT.
  Result<Graph> parse(simdjson::padded_string_view json) noexcept {
    const std::size_t limit = std::numeric_limits<std::size_t>::max();
    size_ = json.size();
    charged_ = 0;
    peak_ = 0;
    budget_ = per_byte_ != 0 && json.size() > (limit - base_) / per_byte_ ? limit : per_byte_ * json.size() + base_;
    try {
      return parse_document(json);
    } catch (const std::bad_alloc&) {
      return invalid_argument("the document does not fit in memory");
    } catch (const std::length_error&) {
      return invalid_argument("the document does not fit in memory");
    }
  }

  /// The bytes charged against the memory budget so far (blocks in use, as the reader counts them).
  [[nodiscard]] std::size_t memory_charged() const noexcept { return charged_; }
  /// The most charged at any one time.
  [[nodiscard]] std::size_t memory_peak() const noexcept { return peak_; }
  /// The budget of the last parse: memory_per_byte × the document's size + memory_base.
  [[nodiscard]] std::size_t memory_budget() const noexcept { return budget_; }

 private:
  Result<Graph> parse_document(simdjson::padded_string_view json) {
    Status read = read_document(json);
    if (!read.ok()) {
      // A document of another format or a newer version is reported as such even when it
      // also fails to read as this version's document.
      if (have_format_ && format_ != "rml-graph") return check_header();
      if (have_version_ && version_ > graph_format_version) return check_header();
      return read;
    }
    RML_RETURN_IF_ERROR(check_header());
    RML_RETURN_IF_ERROR(check_ids());
    RML_RETURN_IF_ERROR(bind_constants());
    // Definitions, sizes, constants and arity: the gate every graph passes, with the same paths.
    return Graph::from_def(std::move(def_));
  }

  struct RawConstant {
    std::int64_t value = -1;
    std::optional<std::string> tensor;
    std::vector<double> data;
    bool has_data = false;
  };
  // A node's ids, kept as read (range-checked once `values` is known) in one flat array.
  struct RawNodeIds {
    std::size_t begin = 0;
    std::uint32_t inputs = 0;
    std::uint32_t outputs = 0;
  };

  // ---- error text ----
  static Status bad(const JsonPath& where, const std::string& what) {
    return invalid_argument(where.str() + ": " + what);
  }
  static Status bad(const std::string& where, const std::string& what) { return invalid_argument(where + ": " + what); }
  Status syntax_error(simdjson::error_code e) {
    std::string where;
    const char* loc = nullptr;
    if (doc_ && !doc_->current_location().get(loc) && loc && loc >= begin_) {
      const auto offset = static_cast<std::size_t>(loc - begin_);
      std::size_t line = 1;
      std::size_t column = 1;
      for (std::size_t i = 0; i < offset; ++i) {
        if (begin_[i] == '\n') {
          ++line;
          column = 1;
        } else {
          ++column;
        }
      }
      where = " at line " + std::to_string(line) + ", column " + std::to_string(column);
    }
    return invalid_argument("not valid JSON" + where + ": " + simdjson::error_message(e));
  }
  // A simdjson failure while reading `where`: either the type is wrong or the JSON is broken.
  Status read_error(simdjson::error_code e, const JsonPath& where, const char* expected) {
    if (e == simdjson::INCORRECT_TYPE || e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE)
      return bad(where, std::string("must be ") + expected);
    return syntax_error(e);
  }

  // ---- the memory budget ----
  // Charges `bytes` the document makes the reader allocate, before it is allocated.
  Status charge(std::size_t bytes, const JsonPath& where) {
    if (bytes <= budget_ - charged_) [[likely]] {
      charged_ += bytes;
      peak_ = std::max(peak_, charged_);
      return {};
    }
    return bad(where, "the document would take more than " + std::to_string(budget_) + " bytes in memory (" +
                          std::to_string(charged_) + " so far, " + std::to_string(bytes) + " more); the limit is " +
                          std::to_string(per_byte_) + " x its " + std::to_string(size_) + " bytes + " +
                          std::to_string(base_));
  }
  void release(std::size_t bytes) noexcept { charged_ -= std::min(bytes, charged_); }

  // Elements a container holds without a heap block: SmallVector's inline ones, none for others.
  template <typename Vec>
  static constexpr std::size_t inline_elements() {
    if constexpr (requires { Vec::inline_capacity(); })
      return Vec::inline_capacity();
    else
      return 0;
  }
  // The heap block of a container's elements, as charged.
  template <typename Vec>
  static std::size_t block_bytes(std::size_t capacity) {
    return capacity > inline_elements<Vec>() ? capacity * sizeof(typename Vec::value_type) + heap_block : 0;
  }
  // Room for `extra` more elements of `v`: a block of twice the capacity (or what is needed) is
  // charged before it is allocated, and the one it replaces is credited once it is gone, so a list
  // of n elements has at most 3n elements' worth charged while it grows, and 2n after.
  template <typename Vec>
  Status room_for(Vec& v, std::size_t extra, const JsonPath& where) {
    if (extra <= v.capacity() - v.size()) return {};
    const std::size_t old = v.capacity();
    const std::size_t capacity = std::max({2 * old, v.size() + extra, std::size_t{8}});
    RML_RETURN_IF_ERROR(charge(block_bytes<Vec>(capacity), where));
    v.reserve(capacity);
    release(block_bytes<Vec>(old));
    return {};
  }
  // A string of `n` characters: a heap block unless it fits inline (15 characters in libstdc++;
  // libc++ holds 22 inline, where this counts a few strings that take no block).
  Status charge_string(std::size_t n, const JsonPath& where) {
    return n > 15 ? charge(n + 1 + heap_block, where) : Status();
  }
  // One entry of a std::map: its node (the pair, three links and a colour) in a heap block.
  template <typename Map>
  Status charge_map_entry(const JsonPath& where) {
    return charge(sizeof(typename Map::value_type) + 4 * sizeof(void*) + heap_block, where);
  }

  // ---- primitive readers ----
  template <typename V>
  Status read_string(V&& v, std::string& out, const JsonPath& where) {
    std::string_view s;
    if (auto e = std::forward<V>(v).get_string().get(s); e) return read_error(e, where, "a string");
    RML_RETURN_IF_ERROR(charge_string(s.size(), where));
    out.assign(s);
    return {};
  }
  template <typename V>
  Status read_int(V&& v, std::int64_t& out, const JsonPath& where) {
    if (auto e = std::forward<V>(v).get_int64().get(out); e) return read_error(e, where, "an integer");
    return {};
  }
  template <typename V>
  Status read_array(V&& v, sj::array& out, const JsonPath& where, const char* what) {
    if (auto e = std::forward<V>(v).get_array().get(out); e) return read_error(e, where, what);
    return {};
  }
  template <typename V>
  Status read_object(V&& v, sj::object& out, const JsonPath& where) {
    if (auto e = std::forward<V>(v).get_object().get(out); e) return read_error(e, where, "an object");
    return {};
  }
  // Calls f(key, value) for every field of `obj`, in order.
  template <typename F>
  Status each_key(sj::object& obj, F&& f) {
    for (auto fr : obj) {
      sj::field field;
      std::string_view key;
      if (auto e = std::move(fr).get(field); e) return syntax_error(e);
      if (auto e = field.unescaped_key().get(key); e) return syntax_error(e);
      RML_RETURN_IF_ERROR(f(key, field.value()));
    }
    return {};
  }
  // Calls f(k, value) for each field of `obj` whose key is known[k]. `known` lists the keys the caller reads; one of
  // them given twice is an error (other keys are ignored, so their repetition does not matter).
  template <std::size_t N, typename F>
  Status each_field(sj::object& obj, const JsonPath& where, const std::string_view (&known)[N], F&& f) {
    std::uint64_t seen = 0;
    static_assert(N <= 64);
    return each_key(obj, [&](std::string_view key, sj::value value) -> Status {
      for (std::size_t k = 0; k < N; ++k) {
        if (known[k] != key) continue;
        if (seen & (std::uint64_t{1} << k)) return bad(where, "key '" + std::string(key) + "' appears twice");
        seen |= std::uint64_t{1} << k;
        return f(k, value);
      }
      return {};
    });
  }
  // Calls f(where, object) for each element of the list `v`, each of which must be an object.
  template <typename F>
  Status each_object(sj::value v, const JsonPath& path, F&& f) {
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, path, "a list"));
    std::size_t i = 0;
    for (auto item : arr) {
      const JsonPath where = path[i++];
      sj::object obj;
      RML_RETURN_IF_ERROR(read_object(item, obj, where));
      RML_RETURN_IF_ERROR(f(where, obj));
    }
    return {};
  }
  // A list of ids (checked for range later, once `values` is known), appended to `out`.
  Status read_ids(sj::value v, std::vector<std::int64_t>& out, std::uint32_t& count, const JsonPath& where) {
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, where, "a list of value ids"));
    std::size_t i = 0;
    for (auto item : arr) {
      std::int64_t id = 0;
      if (auto e = item.get_int64().get(id); e) return read_error(e, where[i], "an integer");
      RML_RETURN_IF_ERROR(room_for(out, 1, where[i]));
      out.push_back(id);
      ++i;
    }
    count = static_cast<std::uint32_t>(i);
    return {};
  }

  // ---- the document ----
  Status read_document(simdjson::padded_string_view json) {
    begin_ = json.data();
    sj::document doc;
    if (auto e = parser_.iterate(json).get(doc); e) return syntax_error(e);
    doc_ = &doc;
    sj::object root;
    if (auto e = doc.get_object().get(root); e) {
      if (e == simdjson::INCORRECT_TYPE) return invalid_argument("the document must be a JSON object");
      return syntax_error(e);
    }
    static constexpr std::string_view keys[] = {"format", "version", "producer",  "name",  "values",
                                                "inputs", "outputs", "constants", "nodes", "metadata"};
    const JsonPath top;
    Status s = each_field(root, JsonPath{nullptr, "document"}, keys, [&](std::size_t k, sj::value v) -> Status {
      const JsonPath here = top / keys[k];
      switch (k) {
        case 0:
          RML_RETURN_IF_ERROR(read_string(v, format_, here));
          have_format_ = true;
          return {};
        case 1:
          RML_RETURN_IF_ERROR(read_int(v, version_, here));
          have_version_ = true;
          return {};
        case 2:
          return read_string(v, def_.producer, here);
        case 3:
          return read_string(v, def_.name, here);
        case 4:
          return read_values(v, here);
        case 5: {
          std::uint32_t n = 0;
          have_inputs_ = true;
          return read_ids(v, inputs_, n, here);
        }
        case 6: {
          std::uint32_t n = 0;
          have_outputs_ = true;
          return read_ids(v, outputs_, n, here);
        }
        case 7:
          return read_constants(v, here);
        case 8:
          return read_nodes(v, here);
        default:
          return read_metadata(v, here);
      }
    });
    if (const char* rest = nullptr; s.ok() && !doc.current_location().get(rest))
      s = invalid_argument("not valid JSON: content after the top-level object");
    doc_ = nullptr;
    if (!s.ok()) return s;
    if (!have_values_)
      return invalid_argument("values: missing (an rml-graph lists values, inputs, outputs and nodes)");
    if (!have_inputs_)
      return invalid_argument("inputs: missing (an rml-graph lists values, inputs, outputs and nodes)");
    if (!have_outputs_)
      return invalid_argument("outputs: missing (an rml-graph lists values, inputs, outputs and nodes)");
    if (!have_nodes_) return invalid_argument("nodes: missing (an rml-graph lists values, inputs, outputs and nodes)");
    return {};
  }

  Status check_header() const {
    if (!have_format_) return invalid_argument("format: missing; this is not an rml-graph document");
    if (format_ != "rml-graph") return invalid_argument("format: '" + format_ + "' is not 'rml-graph'");
    if (!have_version_) return invalid_argument("version: missing");
    if (version_ > graph_format_version)
      return unsupported("version: " + std::to_string(version_) + " is newer than this reader, which reads version " +
                         std::to_string(graph_format_version));
    if (version_ < 1) return invalid_argument("version: " + std::to_string(version_) + " is not a valid version");
    return {};
  }

  Status read_values(sj::value v, const JsonPath& path) {
    have_values_ = true;
    static constexpr std::string_view keys[] = {"name", "dtype", "shape"};
    return each_object(v, path, [&](const JsonPath& where, sj::object& obj) -> Status {
      ValueDef value;
      bool have_dtype = false;
      bool have_shape = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, keys, [&](std::size_t k, sj::value f) -> Status {
        if (k == 0) return read_string(f, value.name, where / "name");
        if (k == 1) {
          std::string_view text;
          if (auto e = f.get_string().get(text); e) return read_error(e, where / "dtype", "a string");
          const auto dtype = parse_dtype(text);
          if (!dtype)
            return bad(where / "dtype", "'" + std::string(text) + "' is not a dtype (f32, f16, bf16, i32, i64, bool)");
          value.type.dtype = *dtype;
          have_dtype = true;
          return {};
        }
        have_shape = true;
        const JsonPath shape = where / "shape";
        sj::array dims;
        RML_RETURN_IF_ERROR(read_array(f, dims, shape, "a list of non-negative integers"));
        std::size_t d = 0;
        for (auto dim_v : dims) {
          std::int64_t dim = 0;
          if (auto e = dim_v.get_int64().get(dim); e) return read_error(e, shape[d], "an integer");
          if (dim < 0) return bad(shape[d], "dimension " + std::to_string(dim) + " is negative");
          RML_RETURN_IF_ERROR(room_for(value.type.shape.dims(), 1, shape[d]));
          value.type.shape.push_back(dim);
          ++d;
        }
        if (!value.type.checked_nbytes())
          return bad(shape, value.type.shape.to_string() + " overflows the size of a tensor");
        return {};
      }));
      if (!have_dtype) return bad(where, "dtype is missing");
      if (!have_shape) return bad(where, "shape is missing");
      RML_RETURN_IF_ERROR(room_for(def_.values, 1, where));
      def_.values.push_back(std::move(value));
      return {};
    });
  }

  Status read_constants(sj::value v, const JsonPath& path) {
    static constexpr std::string_view keys[] = {"value", "tensor", "data"};
    return each_object(v, path, [&](const JsonPath& where, sj::object& obj) -> Status {
      RawConstant c;
      bool have_value = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, keys, [&](std::size_t k, sj::value f) -> Status {
        if (k == 0) {
          have_value = true;
          return read_int(f, c.value, where / "value");
        }
        if (k == 1) {
          c.tensor.emplace();
          return read_string(f, *c.tensor, where / "tensor");
        }
        c.has_data = true;
        const JsonPath data_path = where / "data";
        sj::array data;
        RML_RETURN_IF_ERROR(read_array(f, data, data_path, "a flat list of numbers"));
        std::size_t n = 0;
        for (auto x : data) {
          double d = 0;
          RML_RETURN_IF_ERROR(read_number(x, d, data_path[n]));
          RML_RETURN_IF_ERROR(room_for(c.data, 1, data_path[n]));
          c.data.push_back(d);
          ++n;
        }
        return {};
      }));
      if (!have_value) return bad(where, "value is missing");
      if (c.tensor.has_value() == c.has_data) return bad(where, "needs exactly one of \"tensor\" and \"data\"");
      RML_RETURN_IF_ERROR(room_for(constants_, 1, where));
      constants_.push_back(std::move(c));
      return {};
    });
  }

  template <typename V>
  Status read_number(V&& v, double& out, const JsonPath& where) {
    sj::number_type type{};
    if (auto e = v.get_number_type().get(type); e) return read_error(e, where, "a number");
    if (type == sj::number_type::signed_integer) {
      std::int64_t i = 0;
      if (auto e = v.get_int64().get(i); e) return read_error(e, where, "a number");
      out = static_cast<double>(i);
      return {};
    }
    if (auto e = v.get_double().get(out); e) return read_error(e, where, "a number");
    return {};
  }

  Status read_nodes(sj::value v, const JsonPath& path) {
    have_nodes_ = true;
    static constexpr std::string_view keys[] = {"op", "inputs", "outputs", "name", "attrs", "origin", "device"};
    return each_object(v, path, [&](const JsonPath& where, sj::object& obj) -> Status {
      NodeDef node;
      // Inputs and outputs may come in either order; keep each list apart until both are read.
      std::vector<std::int64_t>& ins = scratch_inputs_;
      std::vector<std::int64_t>& outs = scratch_outputs_;
      ins.clear();
      outs.clear();
      RawNodeIds ids;
      bool have_op = false;
      bool have_inputs = false;
      bool have_outputs = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, keys, [&](std::size_t k, sj::value f) -> Status {
        switch (k) {
          case 0:
            have_op = true;
            RML_RETURN_IF_ERROR(read_string(f, node.op, where / "op"));
            if (node.op.empty()) return bad(where / "op", "is empty");
            return {};
          case 1:
            have_inputs = true;
            return read_ids(f, ins, ids.inputs, where / "inputs");
          case 2:
            have_outputs = true;
            return read_ids(f, outs, ids.outputs, where / "outputs");
          case 3:
            return read_string(f, node.name, where / "name");
          case 4:
            return read_attrs(f, node.attrs, where / "attrs");
          case 5:
            return read_origin(f, node.origin, where / "origin");
          default: {
            std::string_view text;
            if (auto e = f.get_string().get(text); e) return read_error(e, where / "device", "a string");
            const auto device = Device::parse(text);
            if (!device)
              return bad(where / "device", "'" + std::string(text) + "' is not a device (cpu, cpu:N, gpu, gpu:N)");
            node.device = *device;
            return {};
          }
        }
      }));
      if (!have_op) return bad(where, "op is missing");
      if (!have_inputs) return bad(where, "inputs is missing");
      if (!have_outputs) return bad(where, "outputs is missing");
      RML_RETURN_IF_ERROR(room_for(node_ids_, ins.size() + outs.size(), where));
      RML_RETURN_IF_ERROR(room_for(raw_nodes_, 1, where));
      RML_RETURN_IF_ERROR(room_for(def_.nodes, 1, where));
      ids.begin = node_ids_.size();
      node_ids_.insert(node_ids_.end(), ins.begin(), ins.end());
      node_ids_.insert(node_ids_.end(), outs.begin(), outs.end());
      raw_nodes_.push_back(ids);
      def_.nodes.push_back(std::move(node));
      return {};
    });
  }

  Status read_attrs(sj::value v, Attrs& attrs, const JsonPath& where) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, where));
    return each_key(obj, [&](std::string_view key, sj::value value) -> Status {
      RML_RETURN_IF_ERROR(charge_map_entry<Attrs>(where / key));
      RML_RETURN_IF_ERROR(charge_string(key.size(), where / key));
      auto [it, inserted] = attrs.try_emplace(std::string(key));
      if (!inserted) return bad(where, "key '" + std::string(key) + "' appears twice");
      return read_attr_value(value, it->second, where / key);
    });
  }

  Status read_attr_value(sj::value f, AttrValue& value, const JsonPath& here) {
    sj::json_type type{};
    if (auto e = f.type().get(type); e) return syntax_error(e);
    switch (type) {
      case sj::json_type::boolean: {
        bool b = false;
        if (auto e = f.get_bool().get(b); e) return read_error(e, here, "a boolean");
        value = b;
        return {};
      }
      case sj::json_type::string: {
        std::string s;
        RML_RETURN_IF_ERROR(read_string(f, s, here));
        value = std::move(s);
        return {};
      }
      case sj::json_type::number: {
        sj::number_type nt{};
        if (auto e = f.get_number_type().get(nt); e) return read_error(e, here, "a number");
        if (nt == sj::number_type::signed_integer) {
          std::int64_t x = 0;
          RML_RETURN_IF_ERROR(read_int(f, x, here));
          value = x;
        } else {
          double x = 0;
          if (auto e = f.get_double().get(x); e) return read_error(e, here, "a number");
          value = x;
        }
        return {};
      }
      case sj::json_type::array: {
        sj::array arr;
        RML_RETURN_IF_ERROR(read_array(f, arr, here, "a list of numbers"));
        std::vector<std::int64_t> ints;
        std::vector<double> floats;
        bool is_float = false;
        std::size_t k = 0;
        for (auto x : arr) {
          const JsonPath item = here[k++];
          sj::number_type nt{};
          if (auto e = x.get_number_type().get(nt); e)
            return read_error(e, item, "a number (attribute lists hold integers or floats)");
          if (nt == sj::number_type::signed_integer && !is_float) {
            std::int64_t n = 0;
            RML_RETURN_IF_ERROR(read_int(x, n, item));
            RML_RETURN_IF_ERROR(room_for(ints, 1, item));
            ints.push_back(n);
          } else {
            double d = 0;
            if (auto e = x.get_double().get(d); e) return read_error(e, item, "a number");
            if (!is_float) {
              is_float = true;
              RML_RETURN_IF_ERROR(room_for(floats, ints.size() + 1, item));
              floats.assign(ints.begin(), ints.end());
              release(block_bytes<std::vector<std::int64_t>>(ints.capacity()));
              std::vector<std::int64_t>().swap(ints);
            }
            RML_RETURN_IF_ERROR(room_for(floats, 1, item));
            floats.push_back(d);
          }
        }
        if (is_float)
          value = std::move(floats);
        else
          value = std::move(ints);
        return {};
      }
      default:
        return bad(here, "must be an integer, a float, a boolean, a string, or a list of numbers");
    }
  }

  Status read_origin(sj::value v, std::optional<Origin>& origin, const JsonPath& where) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, where));
    static constexpr std::string_view keys[] = {"module", "file", "line"};
    Origin o;
    RML_RETURN_IF_ERROR(each_field(obj, where, keys, [&](std::size_t k, sj::value f) -> Status {
      if (k == 0) return read_string(f, o.module, where / "module");
      if (k == 1) return read_string(f, o.file, where / "file");
      return read_int(f, o.line, where / "line");
    }));
    origin = std::move(o);
    return {};
  }

  Status read_metadata(sj::value v, const JsonPath& where) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, where));
    return each_key(obj, [&](std::string_view key, sj::value value) -> Status {
      RML_RETURN_IF_ERROR(charge_map_entry<decltype(def_.metadata)>(where / key));
      RML_RETURN_IF_ERROR(charge_string(key.size(), where / key));
      std::string text;
      RML_RETURN_IF_ERROR(read_string(value, text, where / key));
      def_.metadata.insert_or_assign(std::string(key), std::move(text));
      return {};
    });
  }

  // ---- checks after reading ----
  std::string value_label(std::size_t id) const {
    const std::string& name = def_.values[id].name;
    return "value " + std::to_string(id) + (name.empty() ? "" : " (" + name + ")");
  }

  Status id_out_of_range(std::int64_t id, const JsonPath& where) const {
    return bad(where, "value id " + std::to_string(id) + " is out of range (the graph has " +
                          std::to_string(def_.values.size()) + " values)");
  }

  bool in_range(std::int64_t id) const noexcept {
    return id >= 0 && static_cast<std::uint64_t>(id) < def_.values.size();
  }

  template <typename Ids>
  Status convert_ids(const std::int64_t* ids, std::size_t n, Ids& out, const JsonPath& where) {
    RML_RETURN_IF_ERROR(room_for(out, n, where));
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!in_range(ids[i])) return id_out_of_range(ids[i], where[i]);
      out[i] = static_cast<ValueId>(ids[i]);
    }
    return {};
  }

  Status check_ids() {
    if (def_.values.size() > std::numeric_limits<ValueId>::max())
      return invalid_argument("values: more values than ids can number");
    const JsonPath top;
    RML_RETURN_IF_ERROR(convert_ids(inputs_.data(), inputs_.size(), def_.inputs, top / "inputs"));
    RML_RETURN_IF_ERROR(convert_ids(outputs_.data(), outputs_.size(), def_.outputs, top / "outputs"));
    for (std::size_t i = 0; i < constants_.size(); ++i)
      if (!in_range(constants_[i].value)) return id_out_of_range(constants_[i].value, (top / "constants")[i] / "value");
    const JsonPath nodes = top / "nodes";
    for (std::size_t i = 0; i < def_.nodes.size(); ++i) {
      const RawNodeIds& raw = raw_nodes_[i];
      const JsonPath node = nodes[i];
      RML_RETURN_IF_ERROR(convert_ids(node_ids_.data() + raw.begin, raw.inputs, def_.nodes[i].inputs, node / "inputs"));
      RML_RETURN_IF_ERROR(
          convert_ids(node_ids_.data() + raw.begin + raw.inputs, raw.outputs, def_.nodes[i].outputs, node / "outputs"));
    }
    return {};
  }

  Status bind_constants() {
    const JsonPath top;
    const JsonPath constants = top / "constants";
    RML_RETURN_IF_ERROR(room_for(def_.constants, constants_.size(), constants));
    for (std::size_t i = 0; i < constants_.size(); ++i) {
      const RawConstant& raw = constants_[i];
      const JsonPath where = constants[i];
      const auto id = static_cast<ValueId>(raw.value);
      const TensorType& type = def_.values[id].type;
      ConstantDef c;
      c.value = id;
      if (raw.tensor) {
        RML_RETURN_IF_ERROR(charge_string(raw.tensor->size(), where));
        c.tensor = *raw.tensor;
        if (!weights_) return bad(where, "tensor '" + c.tensor + "' needs a weights file, and there is none");
        const SafetensorsEntry* entry = weights_->find(c.tensor);
        if (!entry) return bad(where, "tensor '" + c.tensor + "' is not in " + weights_->path());
        auto known = bound_.find(c.tensor);
        if (known == bound_.end()) {
          auto tensor = weights_->get(c.tensor);
          if (!tensor.ok()) {
            if (tensor.error().code() == Code::invalid_argument) return bad(where, tensor.error().message());
            return tensor.error();
          }
          RML_RETURN_IF_ERROR(charge_map_entry<decltype(bound_)>(where));
          RML_RETURN_IF_ERROR(charge_string(c.tensor.size(), where));
          known = bound_.emplace(c.tensor, std::move(*tensor)).first;
        }
        if (known->second.type() != type)
          return bad(where, "tensor '" + c.tensor + "' is stored as " + known->second.type().to_string() + " but " +
                                value_label(id) + " is recorded as " + type.to_string());
        c.data = known->second;
      } else {
        c.inline_data = true;
        const auto n = type.shape.numel();
        if (static_cast<std::int64_t>(raw.data.size()) != n)
          return bad(where / "data", std::to_string(raw.data.size()) + " numbers, but " + value_label(id) +
                                         " is recorded as " + type.to_string() + " (" + std::to_string(n) +
                                         " elements)");
        if (!is_float_dtype(type.dtype)) {
          // Integers must be exact: i64 beyond ±2^53 cannot be a JSON number read as a double.
          const auto [lo, hi] = type.dtype == DType::i32       ? std::pair{-2147483648.0, 2147483647.0}
                                : type.dtype == DType::boolean ? std::pair{0.0, 1.0}
                                                               : std::pair{-static_cast<double>(kJsonExactInteger), static_cast<double>(kJsonExactInteger)};
          for (std::size_t k = 0; k < raw.data.size(); ++k) {
            const double d = raw.data[k];
            if (!(d == std::floor(d) && d >= lo && d <= hi))
              return bad((where / "data")[k], std::string(type.dtype == DType::boolean ? "is not a " : "is not an ") +
                                                  std::string(dtype_name(type.dtype)) + ", but " + value_label(id) +
                                                  " is " + std::string(dtype_name(type.dtype)));
          }
        } else {
          // A number the dtype cannot hold would become inf: refused, not rounded away.
          for (std::size_t k = 0; k < raw.data.size(); ++k) {
            const double d = raw.data[k];
            const bool fits = visit_dtype(type.dtype, [&](auto dd) {
              using T = dtype_type_t<decltype(dd)::value>;
              if constexpr (std::is_integral_v<T>)
                return true;
              else
                return std::abs(d) < 0x1.ffffffp127 &&  // rounds to a finite f32
                       std::isfinite(static_cast<float>(T(static_cast<float>(d))));
            });
            if (!fits)
              return bad((where / "data")[k], "is out of range for " + std::string(dtype_name(type.dtype)) +
                                                  ", the dtype of " + value_label(id));
          }
        }
        // The tensor and its storage: as many elements as the document has numbers.
        RML_RETURN_IF_ERROR(charge(raw.data.size() * element_size(type.dtype) + 4 * heap_block, where / "data"));
        c.data = Tensor::zeros(type);
        visit_dtype(type.dtype, [&](auto d) {
          using T = dtype_type_t<decltype(d)::value>;
          T* out = c.data.mutable_data<T>();
          for (std::size_t k = 0; k < raw.data.size(); ++k) {
            if constexpr (std::is_integral_v<T>)
              out[k] = static_cast<T>(raw.data[k]);
            else
              out[k] = T(static_cast<float>(raw.data[k]));
          }
        });
      }
      def_.constants.push_back(std::move(c));
    }
    return {};
  }

  const SafetensorsReader* weights_;
  std::size_t per_byte_;
  std::size_t base_;
  std::size_t size_ = 0;
  std::size_t budget_ = 0;
  std::size_t charged_ = 0;
  std::size_t peak_ = 0;
  // Stored tensors already bound, by name: constants that name one tensor share it, so a tensor
  // the reader must copy (misaligned in its file) is copied once, whatever the document repeats.
  std::map<std::string, Tensor, std::less<>> bound_;
  sj::parser parser_;
  sj::document* doc_ = nullptr;
  const char* begin_ = nullptr;
  GraphDef def_;
  std::string format_;
  std::int64_t version_ = 0;
  bool have_format_ = false;
  bool have_version_ = false;
  bool have_values_ = false;
  bool have_inputs_ = false;
  bool have_outputs_ = false;
  bool have_nodes_ = false;
  std::vector<std::int64_t> inputs_;
  std::vector<std::int64_t> outputs_;
  std::vector<RawConstant> constants_;
  std::vector<std::int64_t> node_ids_;
  std::vector<RawNodeIds> raw_nodes_;
  std::vector<std::int64_t> scratch_inputs_;
  std::vector<std::int64_t> scratch_outputs_;
};

}  // namespace detail

RML_SPLIT_API Result<Graph> parse_graph(std::string_view json, const SafetensorsReader* weights) {
  simdjson::padded_string padded(json);
  return detail::GraphJsonParser(weights).parse(padded);
}

/// parse_graph over text already padded for simdjson (no copy).
inline Result<Graph> parse_padded_graph(const simdjson::padded_string& json, const SafetensorsReader* weights) {
  return detail::GraphJsonParser(weights).parse(json);
}

}  // namespace rml
