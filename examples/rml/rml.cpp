// rml: the command-line tool over the library — info, check, run, bench, convert, cut, merge,
// extract and dot on rml-graph models (<stem>.json + <stem>.safetensors) and .msgpack files.
//
// The command line is parsed by CLI11. Errors go to stderr as `rml: <CODE_NAME>: message`; a
// usage error adds a line pointing at --help. Exit codes (docs/cli.md): 0 ok, 1 usage, 2 a model
// or data error, 3 unsupported, 4 `run --compare` found outputs outside the tolerance.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_WIN32)
#include <io.h>
#define RML_CLI_ISATTY(f) _isatty(_fileno(f))
#else
#include <unistd.h>
#define RML_CLI_ISATTY(f) isatty(fileno(f))
#endif

#include <CLI/CLI.hpp>
#include <rml/rml.hpp>
#ifdef RML_HAVE_MPI
#include <rml/dist/mpi.hpp>
#endif

#include "json.hpp"
#include "npy.hpp"
#include "sha256.hpp"
#include "tensors.hpp"

namespace rml_cli {

namespace fs = std::filesystem;
using rml::Graph;
using rml::GraphDef;
using rml::Tensor;
using rml::TensorType;

/// The tool's exit codes.
enum Exit : int { exit_ok = 0, exit_usage = 1, exit_model = 2, exit_unsupported = 3, exit_mismatch = 4 };

// ---------------------------------------------------------------------------------------------
// Failures. Inside the tool a failure is an exception caught in main: UsageError for the command
// line (exit 1), rml::Error for what the library refused (exit 2, or 3 for UNSUPPORTED).

struct UsageError {
  std::string message;
};

[[noreturn]] void usage_error(std::string message) { throw UsageError{std::move(message)}; }

// The value of a Result, or the library's status thrown as rml::Error.
template <typename T>
T get(rml::Result<T> result) {
  return std::move(result).value();
}
void get(const rml::Status& status) {
  if (!status.ok()) throw rml::Error(status);
}

// A note for the person at the terminal (what was generated, what was not compared); stderr, so
// that stdout stays the result (and valid JSON with --json).
template <typename... Args>
void note(const char* format, Args... args) {
  std::fputs("note: ", stderr);
  std::fprintf(stderr, format, args...);
  std::fputc('\n', stderr);
}

// ---------------------------------------------------------------------------------------------
// Models: an rml-graph stem (or its .json) or a .msgpack file, chosen by extension.

bool is_msgpack(const fs::path& path) { return path.extension() == ".msgpack"; }

Graph load_model(const std::string& path) {
  if (is_msgpack(path)) return get(rml::deserialize_from_file<Graph>(path));
  return get(rml::load_graph(path));
}

// The stem an output path names (`out`, `out.json` and `out.safetensors` all name `out`); a
// usage error when it names nothing.
fs::path output_stem(const std::string& option, const std::string& path) {
  fs::path stem = path;
  if (stem.extension() == ".json" || stem.extension() == ".safetensors") stem.replace_extension();
  if (stem.empty() || !stem.has_filename())
    usage_error(option + ": '" + path + "' names no file (give a stem such as out, or out.msgpack)");
  return stem;
}

// Writes `graph` and returns the files written.
std::vector<std::string> save_model(const Graph& graph, const std::string& option, const std::string& path) {
  if (is_msgpack(path)) {
    if (!fs::path(path).has_stem() || fs::path(path).stem().empty())
      usage_error(option + ": '" + path + "' names no file");
    get(rml::serialize_to_file(graph, path));
    return {path};
  }
  const std::string stem = output_stem(option, path).string();
  get(rml::save_graph(graph, stem));
  return {stem + ".json", stem + ".safetensors"};
}

// ---------------------------------------------------------------------------------------------
// Printing.

std::string bytes_text(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// `2184`, or `4089446400 (4.09 G)` when large.
std::string flops_text(double flops) {
  char buf[64];
  if (flops < 1e6) {
    std::snprintf(buf, sizeof buf, "%.0f", flops);
  } else {
    const char* unit = flops >= 1e12 ? "T" : flops >= 1e9 ? "G" : "M";
    const double scale = flops >= 1e12 ? 1e12 : flops >= 1e9 ? 1e9 : 1e6;
    std::snprintf(buf, sizeof buf, "%.0f (%.3g %s)", flops, flops / scale, unit);
  }
  return buf;
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// A number as printed in text: four significant digits; `nan`, `inf`, `-inf` spelled the same on
// every platform.
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// `[1, 2]`
std::string index_text(const std::vector<std::int64_t>& index) {
  std::string out = "[";
  for (std::size_t i = 0; i < index.size(); ++i) out += (i ? ", " : "") + std::to_string(index[i]);
  return out + "]";
}

std::uint64_t type_bytes(const TensorType& type) {
  return static_cast<std::uint64_t>(type.checked_nbytes().value_or(0));
}

void json_type(JsonWriter& j, const TensorType& type) {
  j.member("dtype", rml::dtype_name(type.dtype));
  j.key("shape").begin_array(true);
  for (std::size_t i = 0; i < type.shape.rank(); ++i) j.value(type.shape[i]);
  j.end_array();
}

void json_strings(JsonWriter& j, std::string_view key, const std::vector<std::string>& items) {
  j.key(key).begin_array(true);
  for (const std::string& s : items) j.value(s);
  j.end_array();
}

void emit(const JsonWriter& j) { std::fputs(j.str().c_str(), stdout); }

// Each distinct stored tensor once (tied weights share storage).
std::vector<const Tensor*> distinct_constants(const GraphDef& def) {
  std::set<std::tuple<const void*, std::size_t, std::size_t>> seen;
  std::vector<const Tensor*> out;
  for (const rml::ConstantDef& c : def.constants)
    if (c.data.defined() && seen.emplace(c.data.storage().get(), c.data.storage_offset(), c.data.nbytes()).second)
      out.push_back(&c.data);
  return out;
}

double total_flops(const GraphDef& def) {
  double flops = 0;
  for (const rml::NodeDef& n : def.nodes) flops += rml::estimate_flops(def, n);
  return flops;
}

// ---------------------------------------------------------------------------------------------
// The command line. Each command is a struct holding its options; `add` declares them on its
// CLI11 subcommand and `run` does the work once they are parsed.

// A check that an option's value is a number in [lo, hi] (an integer when `integer`), with a
// message that says so in a few words.
CLI::Validator number_in(double lo, double hi, bool integer) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) ||
            (integer && v != std::floor(v)))
          return "'" + text + "' is not " + (integer ? "an integer" : "a number");
        if (v < lo) return text + " is below " + number_text(lo);
        if (v > hi) return text + " is above " + number_text(hi);
        return {};
      },
      "");
}
constexpr double unbounded = std::numeric_limits<double>::max();

// A check that a path option is not empty (`--save ""` would otherwise mean "do not save").
CLI::Validator a_path() {
  return CLI::Validator(
      [](std::string& text) { return text.empty() ? std::string("needs a path, not ''") : std::string(); }, "");
}

void add_model(CLI::App* app, std::string& model) {
  app->add_option("MODEL", model, "rml-graph stem (<stem>.json + <stem>.safetensors) or a .msgpack file")->required();
}
void add_json(CLI::App* app, bool& json) { app->add_flag("--json", json, "print the result as JSON on stdout"); }
void add_threads(CLI::App* app, int& threads) {
  app->add_option("--threads", threads, "intra-op threads (default: all cores)")->check(number_in(1, 1 << 16, true));
}
void add_winograd(CLI::App* app, std::string& winograd) {
  app->add_option("--winograd", winograd, "3x3 convolution transform: off, f2 (default) or f4")
      ->transform(CLI::IsMember({"off", "f2", "f4"}, CLI::ignore_case));
}
/// The transform --winograd named (add_winograd admits only these three names, lower-cased).
rml::Winograd winograd_named(const std::string& name) {
  return name == "off" ? rml::Winograd::off : name == "f4" ? rml::Winograd::f4 : rml::Winograd::f2;
}

// ---------------------------------------------------------------------------------------------
// rml info MODEL

// A command on one model that can answer in JSON.
struct ModelQuery {
  std::string model;
  bool json = false;

  void add(CLI::App* app) {
    add_model(app, model);
    add_json(app, json);
  }
};

struct Info : ModelQuery {
  int run() const {
    const Graph graph = load_model(model);
    const GraphDef& def = graph.def();
    std::map<std::string, std::size_t> histogram;
    for (const rml::NodeDef& n : def.nodes) ++histogram[n.op];
    std::vector<std::pair<std::string, std::size_t>> ops(histogram.begin(), histogram.end());
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::uint64_t parameters = 0;
    std::uint64_t weight_bytes = 0;
    const auto constants = distinct_constants(def);
    for (const Tensor* t : constants) {
      parameters += static_cast<std::uint64_t>(t->numel());
      weight_bytes += t->nbytes();
    }
    std::uint64_t input_bytes = 0;
    for (rml::ValueId id : def.inputs) input_bytes += type_bytes(def.values[id].type);
    std::uint64_t computed_bytes = 0;
    for (const rml::NodeDef& n : def.nodes)
      for (rml::ValueId id : n.outputs)
        if (id < def.values.size()) computed_bytes += type_bytes(def.values[id].type);
    const std::size_t computed = def.values.size() - def.inputs.size() - def.constants.size();
    const double flops = total_flops(def);

    if (json) {
      JsonWriter j;
      j.begin_object().member("name", def.name).member("producer", def.producer);
      const auto io = [&](std::string_view key, const std::vector<std::string>& names,
                          const std::vector<rml::ValueId>& ids) {
        j.key(key).begin_array();
        for (std::size_t i = 0; i < ids.size(); ++i) {
          j.begin_object().member("name", names[i]);
          json_type(j, def.values[ids[i]].type);
          j.end_object();
        }
        j.end_array();
      };
      io("inputs", graph.input_names(), def.inputs);
      io("outputs", graph.output_names(), def.outputs);
      j.key("operators").begin_object().member("count", def.nodes.size()).key("histogram").begin_object();
      for (const auto& [op, n] : ops) j.member(op, n);
      j.end_object().end_object();
      j.key("values").begin_object().member("count", def.values.size()).member("inputs", def.inputs.size());
      j.member("constants", def.constants.size()).member("computed", computed).end_object();
      j.key("parameters").begin_object().member("count", parameters).member("tensors", constants.size()).end_object();
      j.key("memory_bytes").begin_object().member("weights", weight_bytes).member("inputs", input_bytes);
      j.member("computed", computed_bytes).end_object();
      j.member("flops", flops).end_object();
      emit(j);
      return exit_ok;
    }
    if (!def.name.empty()) std::printf("name: %s\n", def.name.c_str());
    if (!def.producer.empty()) std::printf("producer: %s\n", def.producer.c_str());
    const auto io = [&](const char* title, const std::vector<std::string>& names,
                        const std::vector<rml::ValueId>& ids) {
      std::printf("%s: %zu\n", title, ids.size());
      for (std::size_t i = 0; i < ids.size(); ++i)
        std::printf("  %s: %s\n", names[i].c_str(), def.values[ids[i]].type.to_string().c_str());
    };
    io("inputs", graph.input_names(), def.inputs);
    io("outputs", graph.output_names(), def.outputs);
    std::printf("operators: %zu\n", def.nodes.size());
    for (const auto& [op, n] : ops) std::printf("  %s: %zu\n", op.c_str(), n);
    std::printf("values: %zu (inputs %zu, constants %zu, computed %zu)\n", def.values.size(), def.inputs.size(),
                def.constants.size(), computed);
    std::printf("parameters: %llu in %zu tensors\n", static_cast<unsigned long long>(parameters), constants.size());
    std::printf("memory: weights %s, inputs %s, computed values %s (before the executor shares buffers)\n",
                bytes_text(weight_bytes).c_str(), bytes_text(input_bytes).c_str(), bytes_text(computed_bytes).c_str());
    std::printf("flops: %s (estimated from the recorded shapes)\n", flops_text(flops).c_str());
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------
// rml check MODEL

struct Check : ModelQuery {
  int run() const {
    const Graph graph = load_model(model);
    const GraphDef& def = graph.def();
    get(rml::infer_types(graph));
    if (json) {
      JsonWriter j;
      j.begin_object().member("ok", true).member("operators", def.nodes.size()).member("values", def.values.size());
      emit(j.end_object());
    } else {
      std::printf("ok: %zu operators and %zu values check\n", def.nodes.size(), def.values.size());
    }
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------
// rml dot MODEL

std::string dot_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Dot {
  std::string model;

  void add(CLI::App* app) { add_model(app, model); }

  int run() const {
    const Graph graph = load_model(model);
    const GraphDef& def = graph.def();
    const std::vector<rml::Node> nodes = graph.nodes();  // inputs first, then operators
    const std::vector<rml::Value> values = graph.values();

    // Which DOT node each value comes from.
    std::vector<std::string> source(def.values.size());
    for (std::size_t i = 0; i < def.inputs.size(); ++i) source[def.inputs[i]] = "i" + std::to_string(i);
    for (std::size_t i = 0; i < def.constants.size(); ++i) source[def.constants[i].value] = "c" + std::to_string(i);
    for (std::size_t n = 0; n < def.nodes.size(); ++n)
      for (rml::ValueId id : def.nodes[n].outputs)
        if (id < source.size()) source[id] = "n" + std::to_string(n);

    std::printf("digraph %s {\n", dot_quote(def.name.empty() ? "rml" : def.name).c_str());
    std::printf("  node [shape=box, fontname=\"Helvetica\"];\n");
    for (std::size_t i = 0; i < def.inputs.size(); ++i)
      std::printf("  i%zu [shape=ellipse, label=%s];\n", i,
                  dot_quote(nodes[i].name() + "\n" + def.values[def.inputs[i]].type.to_string()).c_str());
    for (std::size_t i = 0; i < def.constants.size(); ++i) {
      const rml::ValueId id = def.constants[i].value;
      std::printf("  c%zu [shape=note, style=dashed, label=%s];\n", i,
                  dot_quote(values[id].name() + "\n" + def.values[id].type.to_string()).c_str());
    }
    for (std::size_t n = 0; n < def.nodes.size(); ++n)
      std::printf("  n%zu [label=%s];\n", n,
                  dot_quote(nodes[def.inputs.size() + n].name() + "\n" + def.nodes[n].op).c_str());
    for (std::size_t n = 0; n < def.nodes.size(); ++n)
      for (rml::ValueId id : def.nodes[n].inputs)
        if (id < source.size() && !source[id].empty())
          std::printf("  %s -> n%zu [label=%s];\n", source[id].c_str(), n,
                      dot_quote(def.values[id].type.to_string()).c_str());
    const std::vector<std::string> outputs = graph.output_names();
    for (std::size_t k = 0; k < def.outputs.size(); ++k) {
      std::printf("  o%zu [shape=ellipse, label=%s];\n", k, dot_quote(outputs[k]).c_str());
      if (!source[def.outputs[k]].empty()) std::printf("  %s -> o%zu;\n", source[def.outputs[k]].c_str(), k);
    }
    std::printf("}\n");
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------
// Inputs for run and bench: from files, the rest seeded random.

struct InputOptions {
  std::vector<std::string> input;  // name=file
  std::string inputs_file;
  std::uint64_t seed = 0;

  void add(CLI::App* app) {
    app->add_option("--input", input, "one input from a file: NAME=FILE.npy or NAME=FILE.safetensors (repeatable)")
        ->type_name("NAME=FILE")
        ->allow_extra_args(false);
    app->add_option("--inputs", inputs_file,
                    "inputs by name from a .safetensors file (or a directory of <name>.npy files)")
        ->type_name("FILE")
        ->check(a_path());
    app->add_option("--seed", seed, "seed of the random inputs (default 0)")->check(number_in(0, 0x1p64, true));
  }
};

struct Input {
  std::string name;
  Tensor tensor;
  std::string origin;  // the file, or "random"
};

// The tensor `name` from a .npy file, or from a .safetensors file (the tensor called `name`, or
// its only tensor).
Tensor read_input(const std::string& name, const std::string& file) {
  const fs::path path = file;
  if (path.extension() == ".npy") return get(read_npy(path));
  if (!is_safetensors(path)) usage_error("--input " + name + "=" + file + ": the file must be .npy or .safetensors");
  const auto reader = get(rml::SafetensorsReader::open(path));
  if (reader.contains(name)) return get(reader.get(name)).clone();
  if (reader.entries().size() == 1) return get(reader.get(reader.entries()[0].name)).clone();
  throw rml::Error(rml::not_found(file + ": no tensor named '" + name + "' (and more than one tensor)"));
}

// The bound of random integers for graph input `k`: the extent a gather indexes when the input is
// its indices (a token id must be below the vocabulary), else 10.
std::int32_t int_bound(const GraphDef& def, std::size_t k) {
  std::int64_t bound = 10;
  bool indexes = false;
  for (const rml::NodeDef& n : def.nodes) {
    if (n.op != "gather" || n.inputs.size() != 2 || n.inputs[1] != def.inputs[k]) continue;
    const auto attrs = rml::AttrReader::bind(rml::OpCode::Gather, n.attrs);
    const rml::Shape& data = def.values[n.inputs[0]].type.shape;
    if (!attrs.ok() || data.rank() == 0) continue;
    std::int64_t axis = attrs->get_int("axis");
    if (axis < 0) axis += static_cast<std::int64_t>(data.rank());
    if (axis < 0 || axis >= static_cast<std::int64_t>(data.rank())) continue;
    bound = indexes ? std::min(bound, data[static_cast<std::size_t>(axis)]) : data[static_cast<std::size_t>(axis)];
    indexes = true;
  }
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(bound, 1, std::numeric_limits<std::int32_t>::max()));
}

// A tensor read from a file for an input of type `want`, converted where NumPy's defaults and
// rml's dtypes differ: widened when that is exact (f16 or bf16 for an f32 input, i32 for an i64
// one); an i64 array (NumPy's default integer) for an i32 input narrowed, each value checked; an
// f32 array for an f16 or bf16 input rounded to nearest even (NumPy has no bf16). Any other
// dtype is passed on as it is (and a mismatch refused by the executor, named).
Tensor adapt_input(Tensor t, const rml::TensorType& want, const std::string& name) {
  const bool widen_float = want.dtype == rml::DType::f32 && rml::is_half_dtype(t.dtype());
  const bool widen_int = want.dtype == rml::DType::i64 && t.dtype() == rml::DType::i32;
  if (widen_float || widen_int) {
    Tensor out = Tensor::zeros(want.dtype, t.shape());
    rml::visit_dtype(t.dtype(), [&](auto d) {
      using T = rml::dtype_type_t<decltype(d)::value>;
      if constexpr (std::is_same_v<T, rml::f16> || std::is_same_v<T, rml::bf16>) {
        for (std::int64_t i = 0; i < t.numel(); ++i) out.mutable_data<float>()[i] = static_cast<float>(t.data<T>()[i]);
      } else if constexpr (std::is_same_v<T, std::int32_t>) {
        for (std::int64_t i = 0; i < t.numel(); ++i) out.mutable_data<std::int64_t>()[i] = t.data<T>()[i];
      }
    });
    return out;
  }
  if (want.dtype == rml::DType::i32 && t.dtype() == rml::DType::i64) {
    Tensor out = Tensor::zeros(rml::DType::i32, t.shape());
    const std::int64_t* in = t.data<std::int64_t>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      if (in[i] < std::numeric_limits<std::int32_t>::min() || in[i] > std::numeric_limits<std::int32_t>::max())
        throw rml::Error(rml::out_of_range("input " + name + ": element " + std::to_string(i) + " (" +
                                           std::to_string(in[i]) + ") does not fit in i32, the input's dtype"));
      out.mutable_data<std::int32_t>()[i] = static_cast<std::int32_t>(in[i]);
    }
    return out;
  }
  if (rml::is_half_dtype(want.dtype) && t.dtype() == rml::DType::f32) {
    Tensor out = Tensor::zeros(want.dtype, t.shape());
    rml::visit_dtype(want.dtype, [&](auto d) {
      using T = rml::dtype_type_t<decltype(d)::value>;
      if constexpr (std::is_same_v<T, rml::f16> || std::is_same_v<T, rml::bf16>)
        for (std::int64_t i = 0; i < t.numel(); ++i) out.mutable_data<T>()[i] = T(t.data<float>()[i]);
    });
    return out;
  }
  return t;
}

// The graph's inputs, in order: --inputs, then each --input, the rest random (said on stderr).
std::vector<Input> gather_inputs(const Graph& graph, const InputOptions& options) {
  const GraphDef& def = graph.def();
  const std::vector<std::string> names = graph.input_names();
  std::vector<Input> inputs(names.size());
  for (std::size_t k = 0; k < names.size(); ++k) inputs[k].name = names[k];
  if (!options.inputs_file.empty()) {
    const TensorFile file = get(TensorFile::open(options.inputs_file));
    bool any = false;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      Input& in = inputs[k];
      if (auto t = get(file.find(in.name, "input", k))) {
        in.tensor = t->clone();
        in.origin = options.inputs_file;
        any = true;
      }
    }
    if (!any)
      throw rml::Error(rml::not_found(
          options.inputs_file +
          ": no tensor is named after an input of the model or input.<k> (inputs: " + join(names) + ")"));
  }
  for (const std::string& item : options.input) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      usage_error("--input takes NAME=FILE.npy or NAME=FILE.safetensors, not '" + item + "'");
    const std::string name = item.substr(0, eq);
    const std::string file = item.substr(eq + 1);
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      usage_error("--input " + name + ": the model has no such input (inputs: " + join(names) + ")");
    Input& in = inputs[static_cast<std::size_t>(it - names.begin())];
    in.tensor = read_input(name, file);
    in.origin = file;
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Input& in = inputs[k];
    const TensorType& type = def.values[def.inputs[k]].type;
    if (in.tensor.defined()) {
      in.tensor = adapt_input(std::move(in.tensor), type, in.name);
      continue;
    }
    const RandomInput how{options.seed, int_bound(def, k)};
    in.tensor = random_tensor(type, k, how);
    in.origin = "random";
    const std::string range = rml::is_integer_dtype(type.dtype)
                                  ? "integers in [0, " + std::to_string(how.int_bound) + ")"
                              : type.dtype == rml::DType::boolean ? "0 or 1"
                                                                  : "uniform in [-1, 1)";
    note("input %s: %s random, %s, seed %llu", in.name.c_str(), type.to_string().c_str(), range.c_str(),
         static_cast<unsigned long long>(options.seed));
  }
  return inputs;
}

std::vector<Tensor> tensors_of(const std::vector<Input>& inputs) {
  std::vector<Tensor> out;
  for (const Input& in : inputs) out.push_back(in.tensor);
  return out;
}

std::string sha256_of(const Tensor& t) { return sha256_hex(t.raw_data(), t.nbytes()); }

double millis(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// `12.5 us` below a millisecond, `3.142 ms` above.
std::string time_text(double ms) {
  char buf[32];
  if (ms < 1)
    std::snprintf(buf, sizeof buf, "%.2f us", ms * 1000);
  else
    std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// rml run MODEL

// A tensor's statistics and digest, in text (two indented lines) or as JSON members.
void print_tensor(const Tensor& t) {
  const Stats s = summarize(t);
  std::printf(" ");
  if (s.finite)
    std::printf(" min %s  max %s  mean %s  std %s", number_text(s.min).c_str(), number_text(s.max).c_str(),
                number_text(s.mean).c_str(), number_text(s.std).c_str());
  if (s.nan) std::printf("  NaN %zu", s.nan);
  if (s.inf) std::printf("  Inf %zu", s.inf);
  if (s.count == 0) std::printf(" (no elements)");
  std::printf("\n");
  const std::size_t shown = std::min<std::size_t>(s.count, 8);
  if (shown) {
    std::printf("  first %zu:", shown);
    std::size_t i = 0;
    for_each_element(t, [&](double v) {
      if (i++ < shown) std::printf(" %s", number_text(v).c_str());
    });
    std::printf("\n");
  }
  std::printf("  sha256 %s\n", sha256_of(t).c_str());
}

void json_tensor(JsonWriter& j, const std::string& name, const Tensor& t) {
  const Stats s = summarize(t);
  j.member("name", name);
  json_type(j, t.type());
  const auto stat = [&](std::string_view key, double v) { s.finite ? j.member(key, v) : j.key(key).null(); };
  stat("min", s.min);
  stat("max", s.max);
  stat("mean", s.mean);
  stat("std", s.std);
  j.member("nan", s.nan).member("inf", s.inf).member("sha256", sha256_of(t));
}

struct Run {
  std::string model;
  InputOptions inputs;
  std::string save, save_inputs, compare;
  double rtol = 1e-5, atol = 1e-5;
  int threads = 0;
  std::string winograd = "f2";
  int pipeline = 0;
  bool json = false;

  void add(CLI::App* app) {
    add_model(app, model);
    inputs.add(app);
#ifdef RML_HAVE_MPI
    app->add_option("--pipeline", pipeline,
                    "run as K pipeline stages, one per MPI rank (mpirun -np K rml run --pipeline K ...); the "
                    "outputs print on rank 0")
        ->type_name("K")
        ->check(number_in(1, 1 << 20, true));
#endif
    app->add_option("--save", save, "write the outputs: OUT.safetensors, or a directory of <name>.npy files")
        ->type_name("OUT")
        ->check(a_path());
    app->add_option("--save-inputs", save_inputs, "write the inputs used, the same way")
        ->type_name("OUT")
        ->check(a_path());
    app->add_option("--compare", compare,
                    "compare the outputs by name with a .safetensors file (or a directory of .npy files)")
        ->type_name("REF")
        ->check(a_path());
    app->add_option("--rtol", rtol, "relative tolerance of --compare (default 1e-5)")
        ->check(number_in(0, unbounded, false));
    app->add_option("--atol", atol, "absolute tolerance of --compare (default 1e-5)")
        ->check(number_in(0, unbounded, false));
    add_threads(app, threads);
    add_winograd(app, winograd);
    add_json(app, json);
  }

  // One output's comparison with the reference, if the reference has it.
  struct Compared {
    std::size_t output;
    Comparison result;
  };

  // One run of the model. Another way to run it (such as `--pipeline K` across MPI ranks) is an
  // option in add() and a branch here; inputs, saving, comparing and printing stay as they are.
  struct Ran {
    std::vector<Tensor> outputs;
    double ms = 0;
    int threads = 1;
    bool elsewhere = false;  ///< the outputs went to another MPI rank: print nothing here
  };
  Ran execute(const Graph& graph, const std::vector<Tensor>& in) const {
#ifdef RML_HAVE_MPI
    if (pipeline > 0) return execute_pipeline(in);
#endif
    const rml::Executor executor =
        get(rml::Executor::create(graph, {.threads = threads, .winograd = winograd_named(winograd)}));
    const auto start = std::chrono::steady_clock::now();
    Ran ran{get(executor.run(in)), 0, executor.threads()};
    ran.ms = millis(std::chrono::steady_clock::now() - start);
    return ran;
  }

#ifdef RML_HAVE_MPI
  // Every rank loads the model and computes the same stages; rank 0 feeds the inputs and receives
  // the outputs. A failure on any rank is reported by every rank (rml/dist/mpi.hpp).
  Ran execute_pipeline(const std::vector<Tensor>& in) const {
    static rml::dist::MpiSession mpi(nullptr, nullptr);  // finalized at exit
    get(mpi.status());
    rml::dist::PipelineOptions options;
    options.stages = pipeline;
    options.threads = std::max(1, threads);
    const int rank = rml::dist::MpiSession::world_rank();
    std::vector<std::vector<Tensor>> batches;
    if (rank == 0) batches.push_back(in);
    const auto start = std::chrono::steady_clock::now();
    rml::Result<rml::dist::PipelineReport> result = rml::dist::run_pipeline(MPI_COMM_WORLD, model, batches, options);
    // A lost rank leaves MPI_Finalize waiting on it forever: exit with the Status instead.
    if (result.status().code() == rml::Code::data_loss) mpi.abandon();
    rml::dist::PipelineReport report = get(std::move(result));
    Ran ran{{}, millis(std::chrono::steady_clock::now() - start), options.threads, rank != options.output_rank};
    if (!ran.elsewhere && !report.outputs.empty()) ran.outputs = std::move(report.outputs.front());
    return ran;
  }
#endif

  int run() const {
    const Graph graph = load_model(model);
    const std::vector<Input> in = gather_inputs(graph, inputs);
    const auto [outputs, ms, used_threads, elsewhere] = execute(graph, tensors_of(in));
    if (elsewhere) return exit_ok;
    const std::vector<std::string> names = graph.output_names();

    const auto named = [](const std::vector<std::string>& n, const std::vector<Tensor>& t) {
      std::vector<std::pair<std::string, Tensor>> out;
      for (std::size_t k = 0; k < t.size(); ++k) out.emplace_back(n[k], t[k]);
      return out;
    };
    if (!save.empty()) get(save_tensors(save, named(names, outputs)));
    if (!save_inputs.empty()) get(save_tensors(save_inputs, named(graph.input_names(), tensors_of(in))));

    std::vector<Compared> compared;
    if (!compare.empty()) {
      const TensorFile reference = get(TensorFile::open(compare));
      for (std::size_t k = 0; k < outputs.size(); ++k) {
        const auto expected = get(reference.find(names[k], "output", k));
        if (!expected) {
          note("output %s: not in %s, not compared", names[k].c_str(), compare.c_str());
          continue;
        }
        compared.push_back({k, rml_cli::compare(outputs[k], *expected, rtol, atol)});
      }
      if (compared.empty())
        throw rml::Error(rml::not_found(
            compare + ": no tensor is named after an output of the model or output.<k> (outputs: " + join(names) +
            ")"));
    }
    const auto failed =
        std::find_if(compared.begin(), compared.end(), [](const Compared& c) { return !c.result.passed(); });

    if (json) {
      JsonWriter j;
      j.begin_object().member("model", model).member("threads", used_threads).member("latency_ms", ms);
      j.key("inputs").begin_array();
      for (const Input& i : in) {
        j.begin_object();
        json_tensor(j, i.name, i.tensor);
        j.member("source", i.origin == "random" ? "random" : "file");
        if (i.origin == "random")
          j.member("seed", inputs.seed);
        else
          j.member("file", i.origin);
        j.end_object();
      }
      j.end_array().key("outputs").begin_array();
      for (std::size_t k = 0; k < outputs.size(); ++k) {
        j.begin_object();
        json_tensor(j, names[k], outputs[k]);
        j.end_object();
      }
      j.end_array();
      if (!compare.empty()) {
        j.key("compare").begin_object().member("reference", compare).member("rtol", rtol).member("atol", atol);
        j.member("passed", failed == compared.end()).key("outputs").begin_array();
        for (const Compared& c : compared) json_comparison(j, names[c.output], outputs[c.output], c.result);
        j.end_array().end_object();
      }
      emit(j.end_object());
    } else {
      for (const Input& i : in)
        std::printf(
            "input %s: %s from %s\n", i.name.c_str(), i.tensor.type().to_string().c_str(),
            i.origin == "random" ? ("random (seed " + std::to_string(inputs.seed) + ")").c_str() : i.origin.c_str());
      for (std::size_t k = 0; k < outputs.size(); ++k) {
        std::printf("output %s: %s\n", names[k].c_str(), outputs[k].type().to_string().c_str());
        print_tensor(outputs[k]);
      }
      for (const Compared& c : compared) print_comparison(names[c.output], outputs[c.output], c.result);
      std::printf("latency: %s (one run; threads: %d)\n", time_text(ms).c_str(), used_threads);
    }
    if (failed == compared.end()) return exit_ok;
    std::fprintf(stderr, "rml: MISMATCH: %s\n",
                 mismatch_text(names[failed->output], outputs[failed->output], failed->result).c_str());
    return exit_mismatch;
  }

  // `y[1, 2]: got 0.2636, expected 0.3636 (abs error 0.1, rel error 0.275)`, or the dtype or
  // shape difference.
  std::string mismatch_text(const std::string& name, const Tensor& got, const Comparison& c) const {
    if (!c.problem.empty()) return name + ": " + c.problem;
    return name + index_text(unravel(c.worst, got.shape())) + ": got " + number_text(c.got) + ", expected " +
           number_text(c.expected) + " (abs error " + number_text(c.abs_error) + ", rel error " +
           number_text(c.rel_error) + "); " + std::to_string(c.mismatched) + " of " + std::to_string(c.count) +
           " elements outside rtol " + number_text(rtol) + ", atol " + number_text(atol);
  }

  void print_comparison(const std::string& name, const Tensor& got, const Comparison& c) const {
    if (c.passed())
      std::printf("compare %s: ok (max abs error %s, max rel error %s)\n", name.c_str(),
                  number_text(c.max_abs_error).c_str(), number_text(c.max_rel_error).c_str());
    else
      std::printf("compare %s: MISMATCH %s\n", name.c_str(), mismatch_text(name, got, c).c_str());
  }

  static void json_comparison(JsonWriter& j, const std::string& name, const Tensor& got, const Comparison& c) {
    j.begin_object().member("name", name).member("passed", c.passed());
    if (!c.problem.empty()) {
      j.member("problem", c.problem).end_object();
      return;
    }
    j.member("mismatched", c.mismatched).member("count", c.count);
    j.member("max_abs_error", c.max_abs_error).member("max_rel_error", c.max_rel_error);
    if (c.count) {
      j.key("worst").begin_object().key("index").begin_array(true);
      for (std::int64_t i : unravel(c.worst, got.shape())) j.value(i);
      j.end_array().member("got", c.got).member("expected", c.expected);
      j.member("abs_error", c.abs_error).member("rel_error", c.rel_error).end_object();
    }
    j.end_object();
  }
};

// ---------------------------------------------------------------------------------------------
// rml bench MODEL

// The q-quantile of sorted samples, interpolating linearly between neighbours (NumPy's default).
double quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

// The `limit` slowest steps of a profile, slowest first: time per run, share of all steps, the op
// (with how many nodes it fused), the node it starts at, and its output.
void print_profile(std::vector<rml::StepTime> steps, std::size_t limit, double per_run) {
  double total = 0;
  for (const rml::StepTime& s : steps) total += s.seconds;
  std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  limit = std::min(limit, steps.size());
  std::printf("profile: %zu kernel steps, %s per run in all; the %zu slowest:\n", steps.size(),
              time_text(total * per_run).c_str(), limit);
  for (std::size_t i = 0; i < limit; ++i) {
    const rml::StepTime& s = steps[i];
    std::string op(rml::op_name(s.op));
    if (s.node_count > 1) op += " +" + std::to_string(s.node_count - 1);
    std::printf("  %10s %5.1f%%  %-16s node %-5zu -> %s\n", time_text(s.seconds * per_run).c_str(),
                total > 0 ? 100.0 * s.seconds / total : 0.0, op.c_str(), s.first_node, s.output.to_string().c_str());
  }
}

struct Bench {
  std::string model;
  InputOptions inputs;
  int warmup = 1;
  int runs = 100;
  double duration = 0;
  int threads = 0;
  std::string winograd = "f2";
  bool json = false;
  int profile = 0;
  std::int64_t parallel_min_work = rml::ExecutorOptions{}.parallel_min_work;
  CLI::Option* runs_option = nullptr;  // given or not: --duration alone runs for its time

  void add(CLI::App* app) {
    add_model(app, model);
    inputs.add(app);
    app->add_option("--warmup", warmup, "untimed runs first (default 1)")->check(number_in(0, 1e9, true));
    runs_option =
        app->add_option("--runs,--iterations", runs, "timed runs (default 100)")->check(number_in(1, 1e9, true));
    app->add_option("--duration", duration, "time runs for this many seconds (with --runs: whichever ends first)")
        ->check(number_in(1e-3, 1e6, false));
    add_threads(app, threads);
    add_winograd(app, winograd);
    app->add_option("--parallel-min-work", parallel_min_work,
                    "steps with less estimated work run on one thread (default 2^20 multiply-adds; 0: every step "
                    "may split)")
        ->check(number_in(0, 9.0e18, true));
    app->add_option("--profile", profile,
                    "then time each kernel step over as many runs, and list the N slowest (with --json: all)")
        ->check(number_in(1, 1e9, true));
    add_json(app, json);
  }

  int run() const {
    const Graph graph = load_model(model);
    const std::vector<Tensor> in = tensors_of(gather_inputs(graph, inputs));
    const rml::Executor executor =
        get(rml::Executor::create(graph, {.threads = threads,
                                          .winograd = winograd_named(winograd),
                                          .parallel_min_work = parallel_min_work}));
    std::vector<Tensor> outputs;
    for (std::size_t k = 0; k < graph.def().outputs.size(); ++k)
      outputs.push_back(Tensor::zeros(executor.output_type(k)));

    // A progress line, rewritten in place, only for a person watching a terminal.
    const bool progress = RML_CLI_ISATTY(stderr) != 0;
    using clock = std::chrono::steady_clock;
    auto last_shown = clock::now();
    const auto show = [&](const char* phase, std::size_t done, std::size_t total, double seconds) {
      if (!progress || clock::now() - last_shown < std::chrono::milliseconds(200)) return;
      last_shown = clock::now();
      if (total)
        std::fprintf(stderr, "\r%s: %zu/%zu runs, %.1f s ", phase, done, total, seconds);
      else
        std::fprintf(stderr, "\r%s: %zu runs, %.1f s ", phase, done, seconds);
      std::fflush(stderr);
    };

    const auto warm_start = clock::now();
    for (int i = 0; i < warmup; ++i) {
      get(executor.run_into(in, outputs));  // workspaces, caches
      show("warm-up", static_cast<std::size_t>(i + 1), static_cast<std::size_t>(warmup),
           millis(clock::now() - warm_start) / 1000);
    }
    // Runs until --runs are done or --duration has passed; --duration alone runs for its time.
    const bool bounded_by_runs = duration <= 0 || runs_option->count() > 0;
    const auto limit = static_cast<std::size_t>(runs);
    std::vector<double> times;
    if (bounded_by_runs) times.reserve(std::min<std::size_t>(limit, std::size_t{1} << 20));
    const auto start = clock::now();
    while (times.empty() || ((!bounded_by_runs || times.size() < limit) &&
                             (duration <= 0 || millis(clock::now() - start) < duration * 1000))) {
      const auto t0 = clock::now();
      get(executor.run_into(in, outputs));
      times.push_back(millis(clock::now() - t0));
      show("bench", times.size(), bounded_by_runs ? limit : 0, millis(clock::now() - start) / 1000);
    }
    const double wall = millis(clock::now() - start) / 1000;
    if (progress) std::fputs("\r\033[K", stderr);

    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    double total = 0;
    for (double t : times) total += t;
    const double mean = total / static_cast<double>(times.size());
    const double p50 = quantile(sorted, 0.5), p90 = quantile(sorted, 0.9), p99 = quantile(sorted, 0.99);
    // The profile repeats as many runs as were timed; its sums become milliseconds per run.
    std::vector<rml::StepTime> steps;
    if (profile > 0) steps = get(executor.profile(in, static_cast<int>(std::min<std::size_t>(times.size(), 1u << 30))));
    const double per_run = 1000.0 / static_cast<double>(times.size());
    if (json) {
      JsonWriter j;
      j.begin_object().member("model", model).member("operators", graph.def().nodes.size());
      j.member("steps", executor.step_count()).member("serial_steps", executor.serial_step_count());
      j.member("arena_bytes", executor.arena_bytes());
      j.member("threads", executor.threads()).member("warmup", warmup).member("runs", times.size());
      j.member("seconds", wall);
      j.key("latency_ms").begin_object().member("min", sorted.front()).member("p50", p50).member("p90", p90);
      j.member("p99", p99).member("mean", mean).member("max", sorted.back()).end_object();
      j.member("runs_per_second", mean > 0 ? 1000.0 / mean : 0.0);
      j.key("samples_ms").begin_array(true);
      for (double t : times) j.value(t);
      j.end_array();
      if (profile > 0) {
        j.key("profile").begin_array();
        for (const rml::StepTime& s : steps) {
          j.begin_object().member("op", std::string(rml::op_name(s.op))).member("first_node", s.first_node);
          j.member("nodes", s.node_count).member("output", s.output.to_string());
          j.member("ms_per_run", s.seconds * per_run).end_object();
        }
        j.end_array();
      }
      emit(j.end_object());
      return exit_ok;
    }
    std::printf("model: %zu operators, %zu kernel steps, arena %s\n", graph.def().nodes.size(), executor.step_count(),
                bytes_text(executor.arena_bytes()).c_str());
    std::printf("runs: %zu after %d warm-up; threads: %d; %.2f s\n", times.size(), warmup, executor.threads(), wall);
    std::printf("latency: p50 %s, p90 %s, p99 %s; min %s, mean %s, max %s\n", time_text(p50).c_str(),
                time_text(p90).c_str(), time_text(p99).c_str(), time_text(sorted.front()).c_str(),
                time_text(mean).c_str(), time_text(sorted.back()).c_str());
    std::printf("throughput: %.1f runs/s\n", mean > 0 ? 1000.0 / mean : 0.0);
    if (profile > 0) print_profile(steps, static_cast<std::size_t>(profile), per_run);
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------
// rml convert MODEL OUT

struct Convert {
  std::string model, out;

  void add(CLI::App* app) {
    add_model(app, model);
    app->add_option("OUT", out, "an rml-graph stem, or a path ending in .msgpack")->required();
  }

  int run() const {
    if (!is_msgpack(out)) output_stem("OUT", out);  // a bad OUT is a usage error before any work
    const Graph graph = load_model(model);
    const auto written = save_model(graph, "OUT", out);
    std::printf("wrote %s\n", join(written, " + ").c_str());
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------
// rml cut MODEL OUT_STEM / rml merge A B OUT / rml extract MODEL OUT

void print_part(const char* label, const Graph& part, const std::vector<std::string>& written) {
  std::printf("%s: %zu operators, inputs %s, outputs %s -> %s\n", label, part.def().nodes.size(),
              join(part.input_names()).c_str(), join(part.output_names()).c_str(), join(written, " + ").c_str());
}

void json_part(JsonWriter& j, const std::string& name, const Graph& part, const std::vector<std::string>& written) {
  j.begin_object().member("name", name).member("operators", part.def().nodes.size());
  json_strings(j, "inputs", part.input_names());
  json_strings(j, "outputs", part.output_names());
  json_strings(j, "files", written);
  j.end_object();
}

struct Cut {
  std::string model, stem;
  rml::CutOptions bounds;
  double balance = -1;
  bool json = false;

  void add(CLI::App* app) {
    add_model(app, model);
    app->add_option("OUT_STEM", stem, "the parts are written as OUT_STEM.before and OUT_STEM.after")->required();
    auto* lo = app->add_option("--min-flops-before", bounds.min_flops_before,
                               "least share of the estimated FLOPs before the cut, 0 to 1 (default 0)")
                   ->check(number_in(0, 1, false));
    auto* hi = app->add_option("--max-flops-before", bounds.max_flops_before,
                               "largest share of the estimated FLOPs before the cut, 0 to 1 (default 1)")
                   ->check(number_in(0, 1, false));
    app->add_option("--balance", balance,
                    "T: the share before the cut within 0.5 +- T, for a balanced two-stage pipeline (0 to 0.5)")
        ->check(number_in(0, 0.5, false))
        ->excludes(lo)
        ->excludes(hi);
    add_json(app, json);
  }

  int run() const {
    const std::string out = output_stem("OUT_STEM", stem).string();
    Graph graph = load_model(model);
    rml::CutOptions options = bounds;
    if (balance >= 0) options = {0.5 - balance, 0.5 + balance};
    if (options.min_flops_before > options.max_flops_before)
      usage_error("--min-flops-before " + number_text(options.min_flops_before) + " is above --max-flops-before " +
                  number_text(options.max_flops_before));
    const rml::ValueCut cut = get(rml::min_value_cut(graph, options));
    const double flops = total_flops(graph.def());
    double before = 0;  // summed, not share x total: the parts' FLOPs add up exactly
    for (const rml::Node& n : cut.before)
      if (const std::size_t k = n.index() - graph.def().inputs.size(); k < graph.def().nodes.size())
        before += rml::estimate_flops(graph.def(), graph.def().nodes[k]);
    rml::SplitGraph split = get(rml::split(graph, cut));
    std::vector<std::vector<std::string>> written;
    for (rml::GraphPart& part : split.parts)
      written.push_back(save_model(part.graph, "OUT_STEM", out + "." + part.name));

    if (json) {
      JsonWriter j;
      j.begin_object().member("bytes", cut.bytes).key("values").begin_array();
      for (const rml::Value& v : cut.values) {
        j.begin_object().member("name", v.name());
        json_type(j, v.type());
        j.end_object();
      }
      j.end_array().member("exact", cut.exact);
      j.key("bounds").begin_object().member("min_flops_before", options.min_flops_before);
      j.member("max_flops_before", options.max_flops_before).end_object();
      j.key("flops").begin_object().member("total", flops).member("before", before).member("after", flops - before);
      j.member("share_before", cut.flops_before).member("share_after", 1 - cut.flops_before).end_object();
      j.key("parts").begin_array();
      for (std::size_t p = 0; p < split.parts.size(); ++p)
        json_part(j, split.parts[p].name, split.parts[p].graph, written[p]);
      j.end_array().key("connections").begin_array(true);
      for (const rml::Connection& c : split.connections) j.value(c.to_string());
      emit(j.end_array().end_object());
      return exit_ok;
    }
    std::vector<std::string> crossing;
    for (const rml::Value& v : cut.values) crossing.push_back(v.name() + " (" + v.type().to_string() + ")");
    std::printf("cut: %s in %zu values: %s\n", bytes_text(cut.bytes).c_str(), cut.values.size(),
                join(crossing).c_str());
    std::printf("flops: before %.1f%% (%s), after %.1f%% (%s)\n", 100.0 * cut.flops_before, flops_text(before).c_str(),
                100.0 * (1 - cut.flops_before), flops_text(flops - before).c_str());
    if (!cut.exact)
      std::printf(
          "bounded: the cheapest cut is outside [%s, %s] of the FLOPs before it; this is the cheapest "
          "prefix of the operator order within them\n",
          number_text(options.min_flops_before).c_str(), number_text(options.max_flops_before).c_str());
    for (std::size_t p = 0; p < split.parts.size(); ++p)
      print_part(split.parts[p].name.c_str(), split.parts[p].graph, written[p]);
    for (const rml::Connection& c : split.connections) std::printf("connection: %s\n", c.to_string().c_str());
    return exit_ok;
  }
};

// `a.out=b.in`: output `out` of the first model feeds input `in` of the second.
rml::Connection parse_connection(const std::string& text) {
  const auto eq = text.find('=');
  const auto bad = [&]() { usage_error("--connect takes a.<output>=b.<input>, not '" + text + "'"); };
  if (eq == std::string::npos) bad();
  const std::string from = text.substr(0, eq);
  const std::string to = text.substr(eq + 1);
  if (from.size() < 3 || to.size() < 3 || from[1] != '.' || to[1] != '.' || (from[0] != 'a' && from[0] != 'b') ||
      (to[0] != 'a' && to[0] != 'b'))
    bad();
  return rml::Connection{{from.substr(0, 1), from.substr(2)}, {to.substr(0, 1), to.substr(2)}};
}

struct Merge {
  std::string a, b, out;
  std::vector<std::string> connect;

  void add(CLI::App* app) {
    app->add_option("A", a, "the first model (part a)")->required();
    app->add_option("B", b, "the second model (part b)")->required();
    app->add_option("OUT", out, "an rml-graph stem, or a path ending in .msgpack")->required();
    app->add_option("--connect", connect, "feed an output of one part into an input of the other (repeatable)")
        ->type_name("a.OUTPUT=b.INPUT")
        ->allow_extra_args(false);
  }

  int run() const {
    std::vector<rml::Connection> connections;
    for (const std::string& c : connect) connections.push_back(parse_connection(c));
    if (!is_msgpack(out)) output_stem("OUT", out);  // a bad OUT is a usage error before any work
    std::vector<rml::GraphPart> parts;
    parts.push_back({"a", load_model(a)});
    parts.push_back({"b", load_model(b)});
    const rml::MergedGraph merged = get(rml::merge(parts, connections));
    const char* kinds[] = {"node", "input", "output"};
    for (const rml::Rename& r : merged.renames)
      std::printf("renamed %s %s.%s -> %s\n", kinds[static_cast<int>(r.kind)], r.part.c_str(), r.from.c_str(),
                  r.to.c_str());
    print_part("merged", merged.graph, save_model(merged.graph, "OUT", out));
    return exit_ok;
  }
};

struct Extract {
  std::string model, out;
  std::vector<std::string> inputs, outputs;

  void add(CLI::App* app) {
    add_model(app, model);
    app->add_option("OUT", out, "an rml-graph stem, or a path ending in .msgpack")->required();
    app->add_option("--inputs", inputs, "values the part starts from (comma-separated, repeatable)")
        ->delimiter(',')
        ->allow_extra_args(false);
    app->add_option("--outputs", outputs, "values the part computes (comma-separated, repeatable)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->required();
  }

  int run() const {
    Graph graph = load_model(model);
    const auto values_named = [&](std::string_view option, const std::vector<std::string>& names) {
      std::vector<rml::Value> values;
      for (const std::string& name : names) {
        if (name.empty()) continue;
        auto value = graph.value(name);
        if (!value.ok()) usage_error("--" + std::string(option) + " " + name + ": " + value.error().message());
        values.push_back(*value);
      }
      return values;
    };
    const Graph part = get(rml::extract(graph, values_named("inputs", inputs), values_named("outputs", outputs)));
    print_part("extracted", part, save_model(part, "OUT", out));
    return exit_ok;
  }
};

// ---------------------------------------------------------------------------------------------

std::string version_text() {
  return "rml " + std::to_string(rml::version.major) + "." + std::to_string(rml::version.minor) + "." +
         std::to_string(rml::version.patch);
}

constexpr const char* footer =
    "MODEL is an rml-graph stem (<stem>.json + <stem>.safetensors) or a .msgpack file.\n"
    "Exit codes: 0 ok, 1 usage, 2 model or data error, 3 unsupported, 4 run --compare mismatch.\n"
    "Each command takes --help. docs/cli.md describes them.";

// A usage error: the message, then where help is.
int report_usage(const std::string& message, const std::string& command) {
  std::fprintf(stderr, "rml: INVALID_ARGUMENT: %s\n", message.c_str());
  std::fprintf(stderr, "Run 'rml%s%s --help' for more information.\n", command.empty() ? "" : " ", command.c_str());
  return exit_usage;
}

int main(int argc, char** argv) {
  CLI::App app{"rml: inspect, check, run, time, convert and edit rml models", "rml"};
  app.footer(footer);
  app.set_version_flag("--version", version_text(), "print the version of rml the tool was built with");
  app.require_subcommand(1);

  Info info;
  Check check;
  Run run;
  Bench bench;
  Convert convert;
  Cut cut;
  Merge merge;
  Extract extract;
  Dot dot;
  std::string help_topic;
  // name, summary, the command's options, what to run
  struct Entry {
    const char* name;
    const char* summary;
    std::function<void(CLI::App*)> add;
    std::function<int()> run;
    CLI::App* app = nullptr;
  };
  std::vector<Entry> entries = {
      {"info", "inputs, outputs, op histogram, parameters, memory, FLOPs", [&](CLI::App* a) { info.add(a); },
       [&] { return info.run(); }},
      {"check", "load and type-check every node", [&](CLI::App* a) { check.add(a); }, [&] { return check.run(); }},
      {"run", "run once on given or seeded random inputs; statistics and SHA-256 per output; save, compare",
       [&](CLI::App* a) { run.add(a); }, [&] { return run.run(); }},
      {"bench", "time runs after a warm-up: p50/p90/p99, min, mean, max", [&](CLI::App* a) { bench.add(a); },
       [&] { return bench.run(); }},
      {"convert", "rewrite as rml-graph (a stem) or MessagePack (OUT ends in .msgpack)",
       [&](CLI::App* a) { convert.add(a); }, [&] { return convert.run(); }},
      {"cut", "split at the cheapest value cut (optionally FLOP-balanced) into OUT_STEM.before and .after",
       [&](CLI::App* a) { cut.add(a); }, [&] { return cut.run(); }},
      {"merge", "merge two models (parts a and b), feeding outputs into inputs", [&](CLI::App* a) { merge.add(a); },
       [&] { return merge.run(); }},
      {"extract", "the operators computing --outputs from --inputs, as a model", [&](CLI::App* a) { extract.add(a); },
       [&] { return extract.run(); }},
      {"dot", "the graph in Graphviz DOT", [&](CLI::App* a) { dot.add(a); }, [&] { return dot.run(); }},
      {"help", "this text, or a command's (rml help run)",
       [&](CLI::App* a) { a->add_option("COMMAND", help_topic, "the command to describe"); }, [] { return 0; }},
      {"version", "the version of rml the tool was built with", [](CLI::App*) {},
       [] {
         std::printf("%s\n", version_text().c_str());
         return 0;
       }},
  };
  for (Entry& e : entries) {
    e.app = app.add_subcommand(e.name, e.summary);
    e.add(e.app);
  }

  std::string command;  // for the pointer to --help
  try {
    if (argc < 2) return report_usage("no command given", "");
    const std::string_view first = argv[1];
    if (!first.starts_with('-') &&
        std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return first == e.name; }))
      return report_usage("unknown command '" + std::string(first) + "'", "");
    if (!first.starts_with('-')) command = first;
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help, --version
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      return report_usage(e.what(), command);
    }
    for (const Entry& e : entries) {
      if (!e.app->parsed()) continue;
      if (command == "help") {
        if (help_topic.empty()) {
          std::fputs(app.get_formatter()->make_help(&app, "rml", CLI::AppFormatMode::Normal).c_str(), stdout);
          return exit_ok;
        }
        for (const Entry& topic : entries)
          if (topic.name == help_topic) {
            std::fputs(topic.app->help("rml").c_str(), stdout);
            return exit_ok;
          }
        return report_usage("help: unknown command '" + help_topic + "'", "");
      }
      return e.run();
    }
    return report_usage("no command given", "");
  } catch (const UsageError& e) {
    return report_usage(e.message, command);
  } catch (const rml::Error& e) {
    std::fprintf(stderr, "rml: %s: %s\n", e.code_name().c_str(), e.what());
    return e.code() == rml::Code::unsupported ? exit_unsupported : exit_model;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rml: INTERNAL: %s\n", e.what());
    return exit_model;
  } catch (...) {
    std::fprintf(stderr, "rml: INTERNAL: an unknown exception\n");
    return exit_model;
  }
}

}  // namespace rml_cli

int main(int argc, char** argv) { return rml_cli::main(argc, argv); }
