// Loading and saving rml-graph models: <stem>.json (the graph) + <stem>.safetensors (weights).
#pragma once

#include <cmath>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "rml/core/status.hpp"
#include "rml/io/detail/file.hpp"
#include "rml/io/detail/json_out.hpp"
#include "rml/io/graph_json.hpp"
#include "rml/io/safetensors.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

namespace detail {

inline std::filesystem::path stem_of(const std::filesystem::path& path) {
  if (path.extension() == ".json" || path.extension() == ".safetensors") {
    std::filesystem::path stem = path;
    stem.replace_extension();
    return stem;
  }
  return path;
}

inline std::filesystem::path with_suffix(const std::filesystem::path& stem, const char* suffix) {
  return std::filesystem::path(stem.string() + suffix);
}

// Writes one attribute value; INVALID_ARGUMENT for a float JSON cannot hold (NaN, infinity).
inline Status json_append_attr(std::string& out, const AttrValue& value, const std::string& where) {
  const auto finite = [&](double d) -> Status {
    if (!std::isfinite(d)) return invalid_argument(where + ": " + std::to_string(d) + " cannot be written as JSON");
    return {};
  };
  switch (value.index()) {
    case 0: json_append_int(out, std::get<0>(value)); return {};
    case 1:
      RML_RETURN_IF_ERROR(finite(std::get<1>(value)));
      json_append_double(out, std::get<1>(value));
      return {};
    case 2: out += std::get<2>(value) ? "true" : "false"; return {};
    case 3: json_append_string(out, std::get<3>(value)); return {};
    case 4: {
      out += '[';
      const auto& v = std::get<4>(value);
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        json_append_int(out, v[i]);
      }
      out += ']';
      return {};
    }
    default: {
      out += '[';
      const auto& v = std::get<5>(value);
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        RML_RETURN_IF_ERROR(finite(v[i]));
        json_append_double(out, v[i]);
      }
      out += ']';
      return {};
    }
  }
}

inline void json_append_ids(std::string& out, std::span<const ValueId> ids) {
  out += '[';
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

inline bool all_finite(const Tensor& t) {
  if (t.dtype() != DType::f32) return true;
  for (float f : t.span<float>())
    if (!std::isfinite(f)) return false;
  return true;
}

/// What save_graph decides about the constants: which are written inline, and the stored name
/// of every other one (storage shared by several constants is stored once).
struct ConstantLayout {
  std::vector<std::string> stored_name;  // per constant; empty = inline
  std::vector<std::pair<std::string, Tensor>> tensors;
};

inline Result<ConstantLayout> layout_constants(const GraphDef& def) {
  ConstantLayout layout;
  layout.stored_name.resize(def.constants.size());
  // Same bytes: same storage, offset, dtype and shape.
  using Key = std::tuple<const Storage*, std::size_t, DType, Dims>;
  std::map<Key, std::string> by_storage;
  std::map<std::string, const Tensor*, std::less<>> by_name;
  for (std::size_t i = 0; i < def.constants.size(); ++i) {
    const ConstantDef& c = def.constants[i];
    const std::string where = "constants[" + std::to_string(i) + "]";
    if (c.value >= def.values.size()) return invalid_argument(where + ": value id " + std::to_string(c.value) + " is out of range");
    if (!c.data.defined()) return invalid_argument(where + ": has no data");
    if (c.data.type() != def.values[c.value].type)
      return invalid_argument(where + ": data is " + c.data.type().to_string() + " but value " +
                              std::to_string(c.value) + " is " + def.values[c.value].type.to_string());
    if (c.inline_data && all_finite(c.data)) continue;
    Key key{c.data.storage().get(), c.data.storage_offset(), c.data.dtype(), c.data.shape().dims()};
    if (auto it = by_storage.find(key); it != by_storage.end()) {
      layout.stored_name[i] = it->second;
      continue;
    }
    std::string name = c.tensor.empty() ? "const." + std::to_string(c.value) : c.tensor;
    for (int n = 1; by_name.count(name) || name == "__metadata__"; ++n)
      name = (c.tensor.empty() ? "const." + std::to_string(c.value) : c.tensor) + "." + std::to_string(n);
    by_storage.emplace(std::move(key), name);
    layout.stored_name[i] = name;
    layout.tensors.emplace_back(name, c.data);
    by_name.emplace(name, &layout.tensors.back().second);
  }
  return layout;
}

}  // namespace detail

/// The rml-graph JSON text of `def`, with stored constants named by `layout`.
inline Result<std::string> graph_to_json(const GraphDef& def, const detail::ConstantLayout& layout) {
  using detail::json_append_string;
  std::string out;
  out.reserve(256 + def.values.size() * 48 + def.nodes.size() * 64);
  out += "{\n  \"format\": \"rml-graph\",\n  \"version\": " + std::to_string(graph_format_version) + ",\n";
  if (!def.producer.empty()) {
    out += "  \"producer\": ";
    json_append_string(out, def.producer);
    out += ",\n";
  }
  if (!def.name.empty()) {
    out += "  \"name\": ";
    json_append_string(out, def.name);
    out += ",\n";
  }
  out += "  \"values\": [";
  for (std::size_t i = 0; i < def.values.size(); ++i) {
    const ValueDef& v = def.values[i];
    out += i ? ",\n    {" : "\n    {";
    if (!v.name.empty()) {
      out += "\"name\": ";
      json_append_string(out, v.name);
      out += ", ";
    }
    out += "\"dtype\": \"";
    out += dtype_name(v.type.dtype);
    out += "\", \"shape\": [";
    for (std::size_t d = 0; d < v.type.shape.rank(); ++d) {
      if (d) out += ", ";
      out += std::to_string(v.type.shape[d]);
    }
    out += "]}";
  }
  out += def.values.empty() ? "],\n" : "\n  ],\n";
  out += "  \"inputs\": ";
  detail::json_append_ids(out, def.inputs);
  out += ",\n  \"outputs\": ";
  detail::json_append_ids(out, def.outputs);
  out += ",\n  \"constants\": [";
  for (std::size_t i = 0; i < def.constants.size(); ++i) {
    const ConstantDef& c = def.constants[i];
    out += i ? ",\n    {\"value\": " : "\n    {\"value\": ";
    out += std::to_string(c.value);
    if (!layout.stored_name[i].empty()) {
      out += ", \"tensor\": ";
      json_append_string(out, layout.stored_name[i]);
    } else {
      out += ", \"data\": [";
      visit_dtype(c.data.dtype(), [&](auto d) {
        using T = dtype_type_t<decltype(d)::value>;
        const auto values = c.data.span<T>();
        for (std::size_t k = 0; k < values.size(); ++k) {
          if (k) out += ", ";
          if constexpr (std::is_same_v<T, float>) detail::json_append_float(out, values[k]);
          else out += std::to_string(values[k]);
        }
      });
      out += ']';
    }
    out += '}';
  }
  out += def.constants.empty() ? "],\n" : "\n  ],\n";
  out += "  \"nodes\": [";
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    const NodeDef& n = def.nodes[i];
    const std::string where = "nodes[" + std::to_string(i) + "]";
    for (ValueId id : n.inputs)
      if (id >= def.values.size()) return invalid_argument(where + ": input id " + std::to_string(id) + " is out of range");
    for (ValueId id : n.outputs)
      if (id >= def.values.size()) return invalid_argument(where + ": output id " + std::to_string(id) + " is out of range");
    out += i ? ",\n    {\"op\": " : "\n    {\"op\": ";
    json_append_string(out, n.op);
    out += ", \"inputs\": ";
    detail::json_append_ids(out, n.inputs);
    out += ", \"outputs\": ";
    detail::json_append_ids(out, n.outputs);
    if (!n.name.empty()) {
      out += ", \"name\": ";
      json_append_string(out, n.name);
    }
    if (!n.attrs.empty()) {
      out += ", \"attrs\": {";
      bool first = true;
      for (const auto& [key, value] : n.attrs) {
        if (!first) out += ", ";
        first = false;
        json_append_string(out, key);
        out += ": ";
        RML_RETURN_IF_ERROR(detail::json_append_attr(out, value, where + ".attrs." + key));
      }
      out += '}';
    }
    if (n.origin) {
      out += ", \"origin\": {\"module\": ";
      json_append_string(out, n.origin->module);
      out += ", \"file\": ";
      json_append_string(out, n.origin->file);
      out += ", \"line\": " + std::to_string(n.origin->line) + "}";
    }
    if (n.device != Device{}) {
      out += ", \"device\": ";
      json_append_string(out, n.device.to_string());
    }
    out += '}';
  }
  out += def.nodes.empty() ? "]" : "\n  ]";
  if (!def.metadata.empty()) {
    out += ",\n  \"metadata\": {";
    bool first = true;
    for (const auto& [k, v] : def.metadata) {
      if (!first) out += ", ";
      first = false;
      json_append_string(out, k);
      out += ": ";
      json_append_string(out, v);
    }
    out += '}';
  }
  for (ValueId id : def.inputs)
    if (id >= def.values.size()) return invalid_argument("inputs: id " + std::to_string(id) + " is out of range");
  for (ValueId id : def.outputs)
    if (id >= def.values.size()) return invalid_argument("outputs: id " + std::to_string(id) + " is out of range");
  out += "\n}\n";
  return out;
}

/// Reads `<stem>.json` and, when it exists, maps `<stem>.safetensors`; see parse_graph for the
/// checks. NOT_FOUND when the JSON file is missing; DATA_LOSS when the weights file is damaged;
/// UNSUPPORTED for a newer format version; INVALID_ARGUMENT otherwise. Every message starts with
/// the JSON file's path. `stem` may also name the `.json` file itself.
inline Result<Graph> load_graph(const std::filesystem::path& stem_or_file) {
  const std::filesystem::path stem = detail::stem_of(stem_or_file);
  const std::filesystem::path json_path = detail::with_suffix(stem, ".json");
  const std::filesystem::path weights_path = detail::with_suffix(stem, ".safetensors");
  const std::string prefix = json_path.string() + ": ";

  auto text = detail::read_file(json_path);
  if (!text.ok()) {
    if (text.error().code() == Code::not_found) return not_found(json_path.string() + ": no such file");
    return text.error();
  }
  std::optional<SafetensorsReader> weights;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(weights_path, ec)) ||
      std::filesystem::exists(weights_path, ec)) {
    auto reader = SafetensorsReader::open(weights_path);
    if (!reader.ok()) return reader.error().with_prefix(prefix);
    weights.emplace(std::move(*reader));
  }
  simdjson::padded_string padded(*text);
  auto graph = parse_padded_graph(padded, weights ? &*weights : nullptr);
  if (!graph.ok()) return graph.error().with_prefix(prefix);
  return graph;
}

/// Writes `<stem>.json` and `<stem>.safetensors` (always both; the weights file may hold no
/// tensor). Constants marked inline are written into the JSON when finite; every other constant
/// is stored, and storage shared by several constants is stored once. Each file is replaced only
/// once its new version is complete. INVALID_ARGUMENT for a graph that cannot be written (an id
/// out of range, a constant without data or of the wrong type, a non-finite float attribute).
inline Status save_graph(const Graph& graph, const std::filesystem::path& stem_or_file) {
  const std::filesystem::path stem = detail::stem_of(stem_or_file);
  const GraphDef& def = graph.def();
  auto layout = detail::layout_constants(def);
  if (!layout.ok()) return layout.error().with_prefix("save_graph: ");
  auto json = graph_to_json(def, *layout);
  if (!json.ok()) return json.error().with_prefix("save_graph: ");
  RML_RETURN_IF_ERROR(write_safetensors(detail::with_suffix(stem, ".safetensors"), layout->tensors));
  const std::filesystem::path json_path = detail::with_suffix(stem, ".json");
  return detail::write_file_atomically(
      json_path, [&](std::FILE* f) { return std::fwrite(json->data(), 1, json->size(), f) == json->size(); });
}

}  // namespace rml
