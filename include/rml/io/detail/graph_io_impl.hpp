// The definitions behind rml/io/graph_io.hpp: writing the JSON document, loading and saving a
// model's file pair. Included by that header wherever RML_SPLIT_DEFINED is 1 (see
// rml/core/linkage.hpp).
#pragma once

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "rml/core/status.hpp"
#include "rml/io/detail/content_hash.hpp"
#include "rml/io/detail/file.hpp"
#include "rml/io/detail/json_out.hpp"
#include "rml/io/graph_io.hpp"
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
    if (!std::isfinite(d)) return invalid_argument(where + ": " + number_text(d) + " cannot be written as JSON");
    return {};
  };
  switch (value.index()) {
    case 0:
      json_append_int(out, std::get<0>(value));
      return {};
    case 1:
      RML_RETURN_IF_ERROR(finite(std::get<1>(value)));
      json_append_double(out, std::get<1>(value));
      return {};
    case 2:
      out += std::get<2>(value) ? "true" : "false";
      return {};
    case 3:
      json_append_string(out, std::get<3>(value));
      return {};
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

/// Whether every element survives a trip through a JSON number (read back as a double): floats
/// must be finite, i64 values within ±2^53. Other constants are stored in the weights file.
inline bool json_exact(const Tensor& t) {
  return visit_dtype(t.dtype(), [&](auto d) {
    using T = dtype_type_t<decltype(d)::value>;
    for (const T v : t.span<T>()) {
      if constexpr (std::is_same_v<T, std::int64_t>) {
        if (v > kJsonExactInteger || v < -kJsonExactInteger) return false;
      } else if constexpr (!std::is_integral_v<T>) {
        if (!std::isfinite(static_cast<float>(v))) return false;
      }
    }
    return true;
  });
}

RML_SPLIT_API Result<ConstantLayout> layout_constants(const GraphDef& def) {
  ConstantLayout layout;
  layout.stored_name.resize(def.constants.size());
  // Same bytes: same storage, offset, dtype and shape.
  using Key = std::tuple<const Storage*, std::size_t, DType, Dims>;
  std::map<Key, std::string> by_storage;
  std::map<std::string, const Tensor*, std::less<>> by_name;
  for (std::size_t i = 0; i < def.constants.size(); ++i) {
    const ConstantDef& c = def.constants[i];
    const std::string where = "constants[" + std::to_string(i) + "]";
    if (c.value >= def.values.size())
      return invalid_argument(where + ": value id " + std::to_string(c.value) + " is out of range");
    if (!c.data.defined()) return invalid_argument(where + ": has no data");
    if (c.data.type() != def.values[c.value].type)
      return invalid_argument(where + ": data is " + c.data.type().to_string() + " but value " +
                              std::to_string(c.value) + " is " + def.values[c.value].type.to_string());
    if (c.inline_data && json_exact(c.data)) continue;
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

RML_SPLIT_API Result<std::string> graph_to_json(const GraphDef& def, const detail::ConstantLayout& layout,
                                                const detail::WeightsBinding* binding) {
  using detail::json_append_string;
  std::string out;
  out.reserve(256 + def.values.size() * 48 + def.nodes.size() * 64);
  out += "{\n  \"format\": \"rml-graph\",\n  \"version\": " + std::to_string(graph_format_version) + ",\n";
  if (binding) {
    out += "  \"weights\": {\"pair\": ";
    json_append_string(out, binding->pair);
    out += ", \"bytes\": ";
    detail::json_append_integer(out, binding->bytes);
    out += "},\n";
  }
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
          if constexpr (std::is_same_v<T, bool>)
            out += values[k] ? '1' : '0';
          else if constexpr (std::is_integral_v<T>)
            detail::json_append_integer(out, values[k]);
          else
            detail::json_append_float(out, static_cast<float>(values[k]));
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
      if (id >= def.values.size())
        return invalid_argument(where + ": input id " + std::to_string(id) + " is out of range");
    for (ValueId id : n.outputs)
      if (id >= def.values.size())
        return invalid_argument(where + ": output id " + std::to_string(id) + " is out of range");
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

namespace detail {

/// The largest `<stem>.json` load_graph reads.
inline constexpr std::size_t max_graph_json_bytes = std::size_t{1} << 31;

inline bool is_pair_id(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// Where save_graph's weights wait, between its commit of the JSON and their final rename, and
/// where a loader finds them then: `<stem>.safetensors.<pair>`.
inline std::filesystem::path staged_weights_path(const std::filesystem::path& stem, std::string_view pair) {
  return std::filesystem::path(stem.string() + ".safetensors." + std::string(pair));
}

/// The binding of a document (a scan of its top-level keys); nullopt for a document without one
/// (written before bindings existed, or by another writer). A document the scan cannot read is
/// left to parse_graph, which names the error.
inline Result<std::optional<WeightsBinding>> read_weights_binding(const simdjson::padded_string& json) {
  namespace sj = simdjson::ondemand;
  const auto none = [] { return Result<std::optional<WeightsBinding>>(std::optional<WeightsBinding>()); };
  sj::parser parser;
  sj::document doc;
  sj::object root;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root)) return none();
  for (auto field_result : root) {
    sj::field field;
    std::string_view key;
    if (std::move(field_result).get(field) || field.unescaped_key().get(key)) return none();
    if (key != "weights") continue;
    sj::object obj;
    if (field.value().get_object().get(obj))
      return invalid_argument("weights: must be an object {\"pair\": \"<32 hex digits>\", \"bytes\": <size>}");
    WeightsBinding b;
    bool have_pair = false;
    bool have_bytes = false;
    for (auto f : obj) {
      sj::field inner;
      std::string_view name;
      if (std::move(f).get(inner) || inner.unescaped_key().get(name)) return none();
      if (name == "pair") {
        std::string_view text;
        if (inner.value().get_string().get(text) || !is_pair_id(text))
          return invalid_argument("weights.pair: must be 32 lowercase hex digits");
        b.pair = std::string(text);
        have_pair = true;
      } else if (name == "bytes") {
        if (inner.value().get_uint64().get(b.bytes))
          return invalid_argument("weights.bytes: must be a non-negative integer");
        have_bytes = true;
      }
    }
    if (!have_pair || !have_bytes)
      return invalid_argument(std::string("weights: lacks ") + (have_pair ? "bytes" : "pair"));
    return std::optional<WeightsBinding>(std::move(b));
  }
  return none();
}

inline std::string_view pair_of(const SafetensorsReader& weights) {
  const auto it = weights.metadata().find(weights_pair_key);
  return it == weights.metadata().end() ? std::string_view() : std::string_view(it->second);
}

/// Opens into `out` the weights file bound to a document: `<stem>.safetensors` when it carries the
/// pair id and size the document records, else the staged `<stem>.safetensors.<pair>` (a save
/// between its two renames, or killed there). DATA_LOSS naming both files when neither matches.
/// (A Status and an out-parameter, not a Result: GCC 12 at -O2 warned -Wfree-nonheap-object,
/// wrongly, on the moved-from Result's destructor in every program that calls load_graph.)
inline Status open_bound_weights(const std::filesystem::path& stem, const WeightsBinding& binding, bool map,
                                 std::optional<SafetensorsReader>& out) {
  const std::filesystem::path path = with_suffix(stem, ".safetensors");
  const auto matches = [&](const SafetensorsReader& r) {
    return r.file_size() == binding.bytes && pair_of(r) == binding.pair;
  };
  auto weights = SafetensorsReader::open(path, map);
  if (weights.ok() && matches(*weights)) {
    out.emplace(std::move(*weights));
    return {};
  }
  if (auto staged = SafetensorsReader::open(staged_weights_path(stem, binding.pair), map);
      staged.ok() && matches(*staged)) {
    out.emplace(std::move(*staged));
    return {};
  }
  const std::string recorded =
      "the JSON records weights pair " + binding.pair + " of " + std::to_string(binding.bytes) + " bytes";
  if (!weights.ok()) {
    if (weights.error().code() == Code::not_found) return data_loss(path.string() + ": missing, but " + recorded);
    return weights.error();
  }
  const std::string_view held = pair_of(*weights);
  return data_loss(path.string() + ": does not belong with this JSON: " + recorded + ", but the file holds " +
                   (held.empty() ? std::string("no pair id") : "pair " + std::string(held)) + " in " +
                   std::to_string(weights->file_size()) + " bytes; the two files come from different saves");
}

}  // namespace detail

RML_SPLIT_API Result<Graph> load_graph(const std::filesystem::path& stem_or_file, const LoadOptions& options) {
  const std::filesystem::path stem = detail::stem_of(stem_or_file);
  const std::filesystem::path json_path = detail::with_suffix(stem, ".json");
  const std::filesystem::path weights_path = detail::with_suffix(stem, ".safetensors");
  const std::string prefix = json_path.string() + ": ";

  // A save that runs meanwhile may replace the pair between the two reads; reading the pair again
  // then finds the new one whole.
  constexpr int attempts = 8;
  for (int attempt = 1;; ++attempt) {
    auto text = detail::read_file(json_path, detail::max_graph_json_bytes);
    if (!text.ok()) return text.error();  // the message starts with the path
    simdjson::padded_string padded(*text);
    std::string().swap(*text);  // the padded copy is what the parser reads: one copy in memory, not two
    auto binding = detail::read_weights_binding(padded);
    if (!binding.ok()) return binding.error().with_prefix(prefix);
    std::optional<SafetensorsReader> weights;
    if (*binding) {
      if (Status bound = detail::open_bound_weights(stem, **binding, options.mmap, weights); !bound.ok()) {
        if (attempt < attempts && bound.code() == Code::data_loss) continue;
        return bound.with_prefix(prefix);
      }
    } else {
      // A document without a binding (older writers, the exporters): the weights file, if any.
      auto reader = SafetensorsReader::open(weights_path, options.mmap);
      if (reader.ok())
        weights.emplace(std::move(*reader));
      else if (reader.error().code() != Code::not_found)
        return reader.error().with_prefix(prefix);
    }
    auto graph = parse_padded_graph(padded, weights ? &*weights : nullptr);
    if (!graph.ok()) return graph.error().with_prefix(prefix);
    return graph;
  }
}

namespace detail {

/// The pair id of a save: the content hash (detail::ContentHash) of the JSON written without its
/// binding and of every stored tensor's name and bytes, so that saving one graph twice writes the
/// same two files, and saves of different graphs get different ids. DATA_LOSS when mapped weights
/// it reads have shrunk.
inline Result<std::string> content_pair_id(const std::string& unbound_json, const ConstantLayout& layout) {
  ContentHash hash;
  static constexpr std::string_view domain = "rml-graph pair 1";
  hash.update(domain.data(), domain.size());
  hash.update_u64(unbound_json.size());
  hash.update(unbound_json.data(), unbound_json.size());
  for (const auto& [name, tensor] : layout.tensors) {
    RML_RETURN_IF_ERROR(tensor.storage()->verify());  // a mapping cut short would raise SIGBUS here
    hash.update_u64(name.size());
    hash.update(name.data(), name.size());
    hash.update_u64(tensor.nbytes());
    hash.update(tensor.raw_data(), tensor.nbytes());
  }
  return hash.hex();
}

/// True for `<stem>.safetensors.<32 lowercase hex digits>`: a staged weights file of `stem`.
inline bool is_staged_weights_name(const std::string& name, const std::string& stem_name) {
  const std::string prefix = stem_name + ".safetensors.";
  return name.size() == prefix.size() + 32 && name.compare(0, prefix.size(), prefix) == 0 &&
         is_pair_id(std::string_view(name).substr(prefix.size()));
}

/// Removes the staged weights files of `stem` except `keep` (a pair id, or empty): regular files
/// whose name is exactly `<stem>.safetensors.<pair>`; symlinks and anything else are left alone.
/// Called under the directory lock, once the committed JSON no longer names them. Best effort.
inline void remove_staged_weights(const std::filesystem::path& stem, std::string_view keep) {
  const std::string stem_name = stem.filename().string();
  std::error_code ec;
  std::filesystem::directory_iterator it(parent_directory(stem), ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_staged_weights_name(name, stem_name)) continue;
    if (!keep.empty() && std::string_view(name).substr(name.size() - 32) == keep) continue;
    std::error_code kind;
    if (!it->is_regular_file(kind) || it->is_symlink(kind)) continue;  // never a link, nor what it points to
    std::error_code removed;
    std::filesystem::remove(it->path(), removed);
  }
}

}  // namespace detail

RML_SPLIT_API Status save_graph(const Graph& graph, const std::filesystem::path& stem_or_file) {
  RML_RETURN_IF_ERROR(detail::check_output_path(stem_or_file, "save_graph"));
  const std::filesystem::path stem = detail::stem_of(stem_or_file);
  RML_RETURN_IF_ERROR(detail::check_output_path(stem, "save_graph"));
  const std::filesystem::path json_path = detail::with_suffix(stem, ".json");
  const std::filesystem::path weights_path = detail::with_suffix(stem, ".safetensors");
  if (Status valid = graph.validate(); !valid.ok()) return valid.with_prefix("save_graph: ");
  const GraphDef& def = graph.def();

  auto layout = detail::layout_constants(def);
  if (!layout.ok()) return layout.error().with_prefix("save_graph: ");
  auto unbound = graph_to_json(def, *layout);
  if (!unbound.ok()) return unbound.error().with_prefix("save_graph: ");
  auto pair = detail::content_pair_id(*unbound, *layout);
  if (!pair.ok()) return pair.error().with_prefix("save_graph: ");
  detail::WeightsBinding binding{std::move(*pair), 0};
  auto header = detail::safetensors_header(layout->tensors, {{std::string(detail::weights_pair_key), binding.pair}});
  if (!header.ok()) return header.error().with_prefix("save_graph: ");
  binding.bytes = header->size();
  for (const auto& [name, tensor] : layout->tensors) binding.bytes += tensor.nbytes();
  auto json = graph_to_json(def, *layout, &binding);
  if (!json.ok()) return json.error().with_prefix("save_graph: ");

  const std::filesystem::path staged_path = detail::staged_weights_path(stem, binding.pair);
  auto weights = detail::write_staged_file(
      detail::temporary_name(weights_path), staged_path,
      [&](detail::FileSink& sink) { return detail::write_safetensors_to(sink, *header, layout->tensors); });
  if (!weights.ok()) return weights.error().with_prefix("save_graph: ");
  auto doc = detail::write_staged_file(detail::temporary_name(json_path), json_path, [&](detail::FileSink& sink) {
    sink.write(*json);
    return Status();
  });
  if (!doc.ok()) return doc.error().with_prefix("save_graph: ");

#if RML_HAVE_POSIX_FILES
  const detail::DirectoryLock lock(detail::parent_directory(json_path));
#endif
  // The pair id the current JSON records, if any: its staged weights may be what it loads through
  // (a save killed between steps 3 and 4), so a failed commit must not remove them.
  std::optional<std::string> old_pair;
  if (auto old = detail::read_file(json_path, detail::max_graph_json_bytes); old.ok()) {
    const simdjson::padded_string padded(*old);
    if (auto b = detail::read_weights_binding(padded); b.ok() && *b) old_pair = (*b)->pair;
  }
  // The weights take their staged name; rename() replaces a file left there by an identical save
  // (same contents, same id) and never follows a symlink planted at that predictable name.
  if (Status staged = weights->commit(); !staged.ok()) return staged.with_prefix("save_graph: ");
  if (Status committed = doc->commit(); !committed.ok()) {  // the old pair stands
    if (old_pair != binding.pair) {
      std::error_code ec;
      std::filesystem::remove(staged_path, ec);
    }
    return committed.with_prefix("save_graph: ");
  }
  std::error_code moved;
  std::filesystem::rename(staged_path, weights_path, moved);
  // The committed JSON names only this save's pair: every other staged weights file is an orphan.
  detail::remove_staged_weights(stem, moved ? std::string_view(binding.pair) : std::string_view());
  detail::sync_parent_directory(json_path);
  if (moved)
    return invalid_argument("save_graph: " + weights_path.string() + ": cannot replace: " + moved.message() +
                            "; the new model loads through " + staged_path.string());
  return {};
}

}  // namespace rml
