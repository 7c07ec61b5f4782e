// The rml-graph JSON document: parse_graph (text + weights -> Graph) and graph_to_json.
//
//   {"format": "rml-graph", "version": 1, "producer": "...", "name": "...",
//    "values":    [{"name": "x", "dtype": "f32", "shape": [2, 12]}, ...],   // id = index
//    "inputs":    [ids], "outputs": [ids],
//    "constants": [{"value": id, "tensor": "<safetensors name>"} | {"value": id, "data": [numbers]}],
//    "nodes":     [{"op": "matmul", "inputs": [ids], "outputs": [ids], "name": "fc1",
//                   "attrs": {"axis": 1, "perm": [1, 0], ...},
//                   "origin": {"module": "layers.2", "file": "model.py", "line": 41},
//                   "device": "cpu:1"}],
//    "metadata":  {"key": "string"}}
//
// `name`, `producer`, `metadata`, and a node's `name`, `attrs`, `origin` and `device` are
// optional. Unknown keys are ignored, so a reader of version 1 reads later additions that do not
// change the meaning of what it knows.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/io/detail/json_out.hpp"
#include "rml/io/safetensors.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

/// The format version this build reads and writes.
inline constexpr std::int64_t graph_format_version = 1;

namespace detail {

namespace sj = simdjson::ondemand;

// Parses one rml-graph document. Structural errors found while reading are kept until format
// and version have been checked, so a newer file is reported as UNSUPPORTED first.
class GraphJsonParser {
 public:
  explicit GraphJsonParser(const SafetensorsReader* weights) : weights_(weights) {}

  Result<Graph> parse(simdjson::padded_string_view json) {
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
    RML_RETURN_IF_ERROR(check_definitions());
    RML_RETURN_IF_ERROR(bind_constants());
    return Graph(std::move(def_));
  }

 private:
  struct RawConstant {
    std::int64_t value = -1;
    std::optional<std::string> tensor;
    std::vector<double> data;
    bool has_data = false;
    bool all_integral = true;
  };

  // ---- error text ----
  static std::string at(std::string_view array, std::size_t i) { return std::string(array) + "[" + std::to_string(i) + "]"; }
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
  // A simdjson failure while reading `where`: either the JSON is broken or the type is wrong.
  Status read_error(simdjson::error_code e, const std::string& where, const char* expected) {
    if (e == simdjson::INCORRECT_TYPE || e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE)
      return bad(where, std::string("must be ") + expected);
    return syntax_error(e);
  }

  // ---- primitive readers ----
  template <typename V>
  Status read_string(V&& v, std::string& out, const std::string& where) {
    std::string_view s;
    if (auto e = std::forward<V>(v).get_string().get(s); e) return read_error(e, where, "a string");
    out.assign(s);
    return {};
  }
  template <typename V>
  Status read_int(V&& v, std::int64_t& out, const std::string& where) {
    if (auto e = std::forward<V>(v).get_int64().get(out); e) return read_error(e, where, "an integer");
    return {};
  }
  template <typename V>
  Status read_array(V&& v, sj::array& out, const std::string& where, const char* what) {
    if (auto e = std::forward<V>(v).get_array().get(out); e) return read_error(e, where, what);
    return {};
  }
  template <typename V>
  Status read_object(V&& v, sj::object& out, const std::string& where) {
    if (auto e = std::forward<V>(v).get_object().get(out); e) return read_error(e, where, "an object");
    return {};
  }
  // Calls f(key, value) for each field; rejects a key given twice.
  template <typename F>
  Status each_field(sj::object& obj, const std::string& where, F&& f) {
    std::vector<std::string> seen;
    for (auto fr : obj) {
      sj::field field;
      std::string_view key;
      if (auto e = std::move(fr).get(field); e) return syntax_error(e);
      if (auto e = field.unescaped_key().get(key); e) return syntax_error(e);
      for (const auto& k : seen)
        if (k == key) return bad(where, "key '" + std::string(key) + "' appears twice");
      seen.emplace_back(key);
      RML_RETURN_IF_ERROR(f(key, field.value()));
    }
    return {};
  }
  // A list of ids (checked for range later, once `values` is known).
  Status read_ids(sj::value v, std::vector<std::int64_t>& out, const std::string& where) {
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, where, "a list of value ids"));
    std::size_t i = 0;
    for (auto item : arr) {
      std::int64_t id = 0;
      RML_RETURN_IF_ERROR(read_int(item, id, at(where, i)));
      out.push_back(id);
      ++i;
    }
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
    Status s = each_field(root, "document", [&](std::string_view key, sj::value v) -> Status {
      if (key == "format") {
        RML_RETURN_IF_ERROR(read_string(v, format_, "format"));
        have_format_ = true;
        return {};
      }
      if (key == "version") {
        RML_RETURN_IF_ERROR(read_int(v, version_, "version"));
        have_version_ = true;
        return {};
      }
      if (key == "producer") return read_string(v, def_.producer, "producer");
      if (key == "name") return read_string(v, def_.name, "name");
      if (key == "values") return read_values(v);
      if (key == "inputs") {
        have_inputs_ = true;
        return read_ids(v, inputs_, "inputs");
      }
      if (key == "outputs") {
        have_outputs_ = true;
        return read_ids(v, outputs_, "outputs");
      }
      if (key == "constants") return read_constants(v);
      if (key == "nodes") return read_nodes(v);
      if (key == "metadata") return read_metadata(v);
      return {};  // unknown keys are ignored
    });
    if (const char* rest = nullptr; s.ok() && !doc.current_location().get(rest))
      s = invalid_argument("not valid JSON: content after the top-level object");
    doc_ = nullptr;
    if (!s.ok()) return s;
    for (const char* required : {"values", "inputs", "outputs", "nodes"}) {
      const std::string_view r(required);
      const bool have = r == "values" ? have_values_ : r == "inputs" ? have_inputs_ : r == "outputs" ? have_outputs_ : have_nodes_;
      if (!have) return invalid_argument(std::string(required) + ": missing (an rml-graph lists values, inputs, outputs and nodes)");
    }
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

  Status read_values(sj::value v) {
    have_values_ = true;
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, "values", "a list"));
    std::size_t i = 0;
    for (auto item : arr) {
      const std::string where = at("values", i);
      sj::object obj;
      RML_RETURN_IF_ERROR(read_object(item, obj, where));
      ValueDef value;
      bool have_dtype = false;
      bool have_shape = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, [&](std::string_view key, sj::value f) -> Status {
        if (key == "name") return read_string(f, value.name, where + ".name");
        if (key == "dtype") {
          std::string text;
          RML_RETURN_IF_ERROR(read_string(f, text, where + ".dtype"));
          const auto dtype = parse_dtype(text);
          if (!dtype) return bad(where + ".dtype", "'" + text + "' is not f32 or i32");
          value.type.dtype = *dtype;
          have_dtype = true;
          return {};
        }
        if (key == "shape") {
          have_shape = true;
          sj::array dims;
          RML_RETURN_IF_ERROR(read_array(f, dims, where + ".shape", "a list of non-negative integers"));
          std::size_t d = 0;
          for (auto dim_v : dims) {
            std::int64_t dim = 0;
            RML_RETURN_IF_ERROR(read_int(dim_v, dim, at(where + ".shape", d)));
            if (dim < 0) return bad(at(where + ".shape", d), "dimension " + std::to_string(dim) + " is negative");
            value.type.shape.push_back(dim);
            ++d;
          }
          if (!value.type.checked_nbytes())
            return bad(where + ".shape", value.type.shape.to_string() + " overflows the size of a tensor");
          return {};
        }
        return {};
      }));
      if (!have_dtype) return bad(where, "dtype is missing");
      if (!have_shape) return bad(where, "shape is missing");
      def_.values.push_back(std::move(value));
      ++i;
    }
    return {};
  }

  Status read_constants(sj::value v) {
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, "constants", "a list"));
    std::size_t i = 0;
    for (auto item : arr) {
      const std::string where = at("constants", i);
      sj::object obj;
      RML_RETURN_IF_ERROR(read_object(item, obj, where));
      RawConstant c;
      bool have_value = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, [&](std::string_view key, sj::value f) -> Status {
        if (key == "value") {
          have_value = true;
          return read_int(f, c.value, where + ".value");
        }
        if (key == "tensor") {
          c.tensor.emplace();
          return read_string(f, *c.tensor, where + ".tensor");
        }
        if (key == "data") {
          c.has_data = true;
          sj::array data;
          RML_RETURN_IF_ERROR(read_array(f, data, where + ".data", "a flat list of numbers"));
          std::size_t k = 0;
          for (auto x : data) {
            double d = 0;
            RML_RETURN_IF_ERROR(read_number(x, d, c.all_integral, at(where + ".data", k)));
            c.data.push_back(d);
            ++k;
          }
          return {};
        }
        return {};
      }));
      if (!have_value) return bad(where, "value is missing");
      if (c.tensor.has_value() == c.has_data) return bad(where, "needs exactly one of \"tensor\" and \"data\"");
      constants_.push_back(std::move(c));
      ++i;
    }
    return {};
  }

  template <typename V>
  Status read_number(V&& v, double& out, bool& integral, const std::string& where) {
    sj::number_type type{};
    if (auto e = v.get_number_type().get(type); e) return read_error(e, where, "a number");
    if (type == sj::number_type::signed_integer) {
      std::int64_t i = 0;
      if (auto e = v.get_int64().get(i); e) return read_error(e, where, "a number");
      out = static_cast<double>(i);
      if (i < std::numeric_limits<std::int32_t>::min() || i > std::numeric_limits<std::int32_t>::max())
        integral = false;  // not an i32, whatever else it is
      return {};
    }
    if (auto e = v.get_double().get(out); e) return read_error(e, where, "a number");
    integral = false;
    return {};
  }

  Status read_nodes(sj::value v) {
    have_nodes_ = true;
    sj::array arr;
    RML_RETURN_IF_ERROR(read_array(v, arr, "nodes", "a list"));
    std::size_t i = 0;
    for (auto item : arr) {
      const std::string where = at("nodes", i);
      sj::object obj;
      RML_RETURN_IF_ERROR(read_object(item, obj, where));
      NodeDef node;
      std::vector<std::int64_t> ins;
      std::vector<std::int64_t> outs;
      bool have_op = false;
      bool have_inputs = false;
      bool have_outputs = false;
      RML_RETURN_IF_ERROR(each_field(obj, where, [&](std::string_view key, sj::value f) -> Status {
        if (key == "op") {
          have_op = true;
          RML_RETURN_IF_ERROR(read_string(f, node.op, where + ".op"));
          if (node.op.empty()) return bad(where + ".op", "is empty");
          return {};
        }
        if (key == "inputs") {
          have_inputs = true;
          return read_ids(f, ins, where + ".inputs");
        }
        if (key == "outputs") {
          have_outputs = true;
          return read_ids(f, outs, where + ".outputs");
        }
        if (key == "name") return read_string(f, node.name, where + ".name");
        if (key == "attrs") return read_attrs(f, node.attrs, where + ".attrs");
        if (key == "origin") return read_origin(f, node.origin, where + ".origin");
        if (key == "device") {
          std::string text;
          RML_RETURN_IF_ERROR(read_string(f, text, where + ".device"));
          const auto device = Device::parse(text);
          if (!device) return bad(where + ".device", "'" + text + "' is not a device (cpu, cpu:N, gpu, gpu:N)");
          node.device = *device;
          return {};
        }
        return {};
      }));
      if (!have_op) return bad(where, "op is missing");
      if (!have_inputs) return bad(where, "inputs is missing");
      if (!have_outputs) return bad(where, "outputs is missing");
      node_inputs_.push_back(std::move(ins));
      node_outputs_.push_back(std::move(outs));
      def_.nodes.push_back(std::move(node));
      ++i;
    }
    return {};
  }

  Status read_attrs(sj::value v, Attrs& attrs, const std::string& where) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, where));
    return each_field(obj, where, [&](std::string_view key, sj::value f) -> Status {
      const std::string here = where + "." + std::string(key);
      sj::json_type type{};
      if (auto e = f.type().get(type); e) return syntax_error(e);
      AttrValue value;
      switch (type) {
        case sj::json_type::boolean: {
          bool b = false;
          if (auto e = f.get_bool().get(b); e) return read_error(e, here, "a boolean");
          value = b;
          break;
        }
        case sj::json_type::string: {
          std::string s;
          RML_RETURN_IF_ERROR(read_string(f, s, here));
          value = std::move(s);
          break;
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
          break;
        }
        case sj::json_type::array: {
          sj::array arr;
          RML_RETURN_IF_ERROR(read_array(f, arr, here, "a list of numbers"));
          std::vector<std::int64_t> ints;
          std::vector<double> floats;
          bool is_float = false;
          std::size_t k = 0;
          for (auto x : arr) {
            const std::string item = at(here, k++);
            sj::number_type nt{};
            if (auto e = x.get_number_type().get(nt); e)
              return read_error(e, item, "a number (attribute lists hold integers or floats)");
            if (nt == sj::number_type::signed_integer && !is_float) {
              std::int64_t n = 0;
              RML_RETURN_IF_ERROR(read_int(x, n, item));
              ints.push_back(n);
            } else {
              double d = 0;
              if (auto e = x.get_double().get(d); e) return read_error(e, item, "a number");
              if (!is_float) {
                is_float = true;
                floats.assign(ints.begin(), ints.end());
              }
              floats.push_back(d);
            }
          }
          if (is_float) value = std::move(floats);
          else value = std::move(ints);
          break;
        }
        default:
          return bad(here, "must be an integer, a float, a boolean, a string, or a list of numbers");
      }
      attrs.insert_or_assign(std::string(key), std::move(value));
      return {};
    });
  }

  Status read_origin(sj::value v, std::optional<Origin>& origin, const std::string& where) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, where));
    Origin o;
    RML_RETURN_IF_ERROR(each_field(obj, where, [&](std::string_view key, sj::value f) -> Status {
      if (key == "module") return read_string(f, o.module, where + ".module");
      if (key == "file") return read_string(f, o.file, where + ".file");
      if (key == "line") return read_int(f, o.line, where + ".line");
      return {};
    }));
    origin = std::move(o);
    return {};
  }

  Status read_metadata(sj::value v) {
    sj::object obj;
    RML_RETURN_IF_ERROR(read_object(v, obj, "metadata"));
    return each_field(obj, "metadata", [&](std::string_view key, sj::value f) -> Status {
      std::string text;
      RML_RETURN_IF_ERROR(read_string(f, text, "metadata." + std::string(key)));
      def_.metadata.insert_or_assign(std::string(key), std::move(text));
      return {};
    });
  }

  // ---- checks after reading ----
  std::string value_label(std::size_t id) const {
    const std::string& name = def_.values[id].name;
    return "value " + std::to_string(id) + (name.empty() ? "" : " (" + name + ")");
  }

  Status check_id(std::int64_t id, const std::string& where) const {
    if (id < 0 || static_cast<std::uint64_t>(id) >= def_.values.size())
      return bad(where, "value id " + std::to_string(id) + " is out of range (the graph has " +
                            std::to_string(def_.values.size()) + " values)");
    return {};
  }

  Status check_ids() {
    if (def_.values.size() > std::numeric_limits<ValueId>::max())
      return invalid_argument("values: more values than ids can number");
    const auto convert = [&](const std::vector<std::int64_t>& ids, std::vector<ValueId>& out,
                             const std::string& where) -> Status {
      out.reserve(ids.size());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        RML_RETURN_IF_ERROR(check_id(ids[i], at(where, i)));
        out.push_back(static_cast<ValueId>(ids[i]));
      }
      return {};
    };
    RML_RETURN_IF_ERROR(convert(inputs_, def_.inputs, "inputs"));
    RML_RETURN_IF_ERROR(convert(outputs_, def_.outputs, "outputs"));
    for (std::size_t i = 0; i < constants_.size(); ++i)
      RML_RETURN_IF_ERROR(check_id(constants_[i].value, at("constants", i) + ".value"));
    for (std::size_t i = 0; i < def_.nodes.size(); ++i) {
      RML_RETURN_IF_ERROR(convert(node_inputs_[i], def_.nodes[i].inputs, at("nodes", i) + ".inputs"));
      RML_RETURN_IF_ERROR(convert(node_outputs_[i], def_.nodes[i].outputs, at("nodes", i) + ".outputs"));
    }
    return {};
  }

  Status check_definitions() const {
    // Where each value is defined, as the JSON path of its definition; empty = not yet.
    std::vector<std::string> defined(def_.values.size());
    const auto define = [&](ValueId id, std::string where) -> Status {
      if (!defined[id].empty())
        return bad(where, value_label(id) + " is already defined by " + defined[id]);
      defined[id] = std::move(where);
      return {};
    };
    for (std::size_t i = 0; i < def_.inputs.size(); ++i) RML_RETURN_IF_ERROR(define(def_.inputs[i], at("inputs", i)));
    for (std::size_t i = 0; i < constants_.size(); ++i)
      RML_RETURN_IF_ERROR(define(static_cast<ValueId>(constants_[i].value), at("constants", i)));
    for (std::size_t n = 0; n < def_.nodes.size(); ++n) {
      const NodeDef& node = def_.nodes[n];
      for (std::size_t k = 0; k < node.inputs.size(); ++k)
        if (defined[node.inputs[k]].empty())
          return bad(at(at("nodes", n) + ".inputs", k), value_label(node.inputs[k]) +
                                                           " is read before it is defined (nodes must be in "
                                                           "topological order)");
      for (std::size_t k = 0; k < node.outputs.size(); ++k)
        RML_RETURN_IF_ERROR(define(node.outputs[k], at(at("nodes", n) + ".outputs", k)));
    }
    for (std::size_t id = 0; id < defined.size(); ++id)
      if (defined[id].empty())
        return bad(at("values", id), value_label(id) + " is never defined (not an input, a constant or a node output)");
    return {};
  }

  Status bind_constants() {
    def_.constants.reserve(constants_.size());
    for (std::size_t i = 0; i < constants_.size(); ++i) {
      const RawConstant& raw = constants_[i];
      const std::string where = at("constants", i);
      const auto id = static_cast<ValueId>(raw.value);
      const TensorType& type = def_.values[id].type;
      ConstantDef c;
      c.value = id;
      if (raw.tensor) {
        c.tensor = *raw.tensor;
        if (!weights_)
          return bad(where, "tensor '" + c.tensor + "' needs a weights file, and there is none");
        const SafetensorsEntry* entry = weights_->find(c.tensor);
        if (!entry) return bad(where, "tensor '" + c.tensor + "' is not in " + weights_->path());
        auto tensor = weights_->get(c.tensor);
        if (!tensor.ok()) {
          if (tensor.error().code() == Code::invalid_argument)
            return bad(where, "tensor '" + c.tensor + "' is stored as " + entry->dtype + ", which rml does not read (F32 and I32 only)");
          return tensor.error();
        }
        if (tensor->type() != type)
          return bad(where, "tensor '" + c.tensor + "' is stored as " + tensor->type().to_string() + " but " +
                                value_label(id) + " is recorded as " + type.to_string());
        c.data = std::move(*tensor);
      } else {
        c.inline_data = true;
        const auto n = type.shape.numel();
        if (static_cast<std::int64_t>(raw.data.size()) != n)
          return bad(where + ".data", std::to_string(raw.data.size()) + " numbers, but " + value_label(id) +
                                          " is recorded as " + type.to_string() + " (" + std::to_string(n) +
                                          " elements)");
        if (type.dtype == DType::i32) {
          for (std::size_t k = 0; k < raw.data.size(); ++k) {
            const double d = raw.data[k];
            if (!(d == std::floor(d) && d >= std::numeric_limits<std::int32_t>::min() &&
                  d <= std::numeric_limits<std::int32_t>::max()))
              return bad(at(where + ".data", k), "is not an i32, but " + value_label(id) + " is i32");
          }
        }
        c.data = Tensor::zeros(type);
        visit_dtype(type.dtype, [&](auto d) {
          using T = dtype_type_t<decltype(d)::value>;
          T* out = c.data.mutable_data<T>();
          for (std::size_t k = 0; k < raw.data.size(); ++k) out[k] = static_cast<T>(raw.data[k]);
        });
      }
      def_.constants.push_back(std::move(c));
    }
    return {};
  }

  const SafetensorsReader* weights_;
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
  std::vector<std::vector<std::int64_t>> node_inputs_;
  std::vector<std::vector<std::int64_t>> node_outputs_;
};

}  // namespace detail

/// Parses an rml-graph document and binds its constants to `weights` (may be null when the
/// graph stores no tensor). Checks, in order: format and version (a newer version is
/// UNSUPPORTED), the types of every field, every id in range, each value defined exactly once and
/// before it is read, and each constant against its stored or inline data. Any other failure is
/// INVALID_ARGUMENT naming the JSON path (`values[3].shape[1]`); nothing throws.
inline Result<Graph> parse_graph(std::string_view json, const SafetensorsReader* weights) {
  simdjson::padded_string padded(json);
  return detail::GraphJsonParser(weights).parse(padded);
}

/// parse_graph over text already padded for simdjson (no copy).
inline Result<Graph> parse_padded_graph(const simdjson::padded_string& json, const SafetensorsReader* weights) {
  return detail::GraphJsonParser(weights).parse(json);
}

}  // namespace rml
