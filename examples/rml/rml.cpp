// rml: the command-line tool over the library — info, check, run, bench, convert, cut, merge,
// extract and dot on rml-graph models (<stem>.json + <stem>.safetensors) and .msgpack files.
//
// Errors go to stderr as `rml: <CODE_NAME>: message`. Exit codes: 0 ok, 1 usage (a bad command
// line), 2 a model or data error, 3 unavailable (UNSUPPORTED: a newer format, an unknown op, an
// input file rml does not read). docs/cli.md describes every command.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <rml/rml.hpp>

#include "npy.hpp"

namespace rml_cli {

namespace fs = std::filesystem;
using rml::Graph;
using rml::GraphDef;
using rml::Tensor;
using rml::TensorType;

// ---------------------------------------------------------------------------------------------
// Failures. Inside the tool a failure is an exception: UsageError for the command line (exit 1),
// rml::Error for what the library refused (exit 2, or 3 for UNSUPPORTED).

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

// ---------------------------------------------------------------------------------------------
// The command line: positional arguments and `--name value` / `--name=value` options.

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>, std::less<>> options;

  [[nodiscard]] const std::vector<std::string>& all(std::string_view name) const {
    static const std::vector<std::string> none;
    auto it = options.find(name);
    return it == options.end() ? none : it->second;
  }
  [[nodiscard]] std::optional<std::string> last(std::string_view name) const {
    const auto& v = all(name);
    if (v.empty()) return std::nullopt;
    return v.back();
  }
  // An integer option that must be at least `min`, or `fallback` when absent.
  [[nodiscard]] int count(std::string_view name, int fallback, int min) const {
    const auto text = last(name);
    if (!text) return fallback;
    int value = 0;
    std::size_t used = 0;
    try {
      value = std::stoi(*text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text->size() || value < min)
      usage_error("--" + std::string(name) + " takes an integer >= " + std::to_string(min) + ", not '" + *text + "'");
    return value;
  }
};

struct Command {
  std::string_view name;
  std::string_view synopsis;  // after `rml <name> `
  std::string_view summary;
  std::size_t positional;  // exactly this many
  std::vector<std::string_view> options;
  int (*run)(const Args&);
};

Args parse_args(const Command& cmd, std::span<char* const> argv) {
  Args args;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    if (a.size() > 2 && a.substr(0, 2) == "--") {
      std::string name(a.substr(2));
      std::optional<std::string> value;
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      if (std::find(cmd.options.begin(), cmd.options.end(), name) == cmd.options.end())
        usage_error("rml " + std::string(cmd.name) + ": unknown option --" + name);
      if (!value) {
        if (i + 1 == argv.size()) usage_error("rml " + std::string(cmd.name) + ": --" + name + " needs a value");
        value = argv[++i];
      }
      args.options[name].push_back(std::move(*value));
    } else {
      args.positional.emplace_back(a);
    }
  }
  if (args.positional.size() != cmd.positional)
    usage_error("rml " + std::string(cmd.name) + " takes " + std::to_string(cmd.positional) + " argument" +
                (cmd.positional == 1 ? "" : "s") + ", got " + std::to_string(args.positional.size()) +
                "\nusage: rml " + std::string(cmd.name) + " " + std::string(cmd.synopsis));
  return args;
}

// `a,b` and repeated options alike: every comma-separated item of every occurrence.
std::vector<std::string> list_option(const Args& args, std::string_view name) {
  std::vector<std::string> items;
  for (const std::string& value : args.all(name)) {
    std::size_t begin = 0;
    while (begin <= value.size()) {
      const auto end = std::min(value.find(',', begin), value.size());
      if (end > begin) items.push_back(value.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// Models: an rml-graph stem (or its .json) or a .msgpack file, chosen by extension.

bool is_msgpack(const fs::path& path) { return path.extension() == ".msgpack"; }

Graph load_model(const std::string& path) {
  if (is_msgpack(path)) return get(rml::deserialize_from_file<Graph>(path));
  return get(rml::load_graph(path));
}

// Writes `graph` and returns what was written, for the report line.
std::string save_model(const Graph& graph, const std::string& path) {
  if (is_msgpack(path)) {
    get(rml::serialize_to_file(graph, path));
    return path;
  }
  get(rml::save_graph(graph, path));
  fs::path stem = path;
  if (stem.extension() == ".json" || stem.extension() == ".safetensors") stem.replace_extension();
  return stem.string() + ".json + " + stem.string() + ".safetensors";
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

// `name: f32 [2, 12]` for each of a graph's inputs (or outputs).
void print_io(const char* title, const std::vector<std::string>& names, const GraphDef& def,
              const std::vector<rml::ValueId>& ids) {
  std::printf("%s: %zu\n", title, ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::printf("  %s: %s\n", names[i].c_str(), def.values[ids[i]].type.to_string().c_str());
}

std::uint64_t type_bytes(const TensorType& type) {
  return static_cast<std::uint64_t>(type.checked_nbytes().value_or(0));
}

// Each distinct stored tensor once (tied weights share storage).
std::vector<const Tensor*> distinct_constants(const GraphDef& def) {
  std::set<std::tuple<const void*, std::size_t, std::size_t>> seen;
  std::vector<const Tensor*> out;
  for (const rml::ConstantDef& c : def.constants)
    if (c.data.defined() && seen.emplace(c.data.storage().get(), c.data.storage_offset(), c.data.nbytes()).second)
      out.push_back(&c.data);
  return out;
}

// ---------------------------------------------------------------------------------------------
// rml info MODEL

int cmd_info(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
  const GraphDef& def = graph.def();
  if (!def.name.empty()) std::printf("name: %s\n", def.name.c_str());
  if (!def.producer.empty()) std::printf("producer: %s\n", def.producer.c_str());
  print_io("inputs", graph.input_names(), def, def.inputs);
  print_io("outputs", graph.output_names(), def, def.outputs);

  std::map<std::string, std::size_t> histogram;
  for (const rml::NodeDef& n : def.nodes) ++histogram[n.op];
  std::vector<std::pair<std::string, std::size_t>> ops(histogram.begin(), histogram.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::printf("operators: %zu\n", def.nodes.size());
  for (const auto& [op, n] : ops) std::printf("  %s: %zu\n", op.c_str(), n);

  std::printf("values: %zu (inputs %zu, constants %zu, computed %zu)\n", def.values.size(), def.inputs.size(),
              def.constants.size(), def.values.size() - def.inputs.size() - def.constants.size());

  std::uint64_t parameters = 0;
  std::uint64_t weight_bytes = 0;
  const auto constants = distinct_constants(def);
  for (const Tensor* t : constants) {
    parameters += static_cast<std::uint64_t>(t->numel());
    weight_bytes += t->nbytes();
  }
  std::printf("parameters: %llu in %zu tensors\n", static_cast<unsigned long long>(parameters), constants.size());

  std::uint64_t input_bytes = 0;
  for (rml::ValueId id : def.inputs) input_bytes += type_bytes(def.values[id].type);
  std::uint64_t computed_bytes = 0;
  for (const rml::NodeDef& n : def.nodes)
    for (rml::ValueId id : n.outputs)
      if (id < def.values.size()) computed_bytes += type_bytes(def.values[id].type);
  std::printf("memory: weights %s, inputs %s, computed values %s (before the executor shares buffers)\n",
              bytes_text(weight_bytes).c_str(), bytes_text(input_bytes).c_str(), bytes_text(computed_bytes).c_str());

  // The estimate min_value_cut balances FLOPs with (rml/edit/cut.hpp); not yet public API.
  double flops = 0;
  for (const rml::NodeDef& n : def.nodes) flops += rml::estimate_flops(def, n);
  std::printf("flops: %s (estimated from the recorded shapes)\n", flops_text(flops).c_str());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// rml check MODEL

int cmd_check(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
  const GraphDef& def = graph.def();
  get(rml::infer_types(graph));
  std::printf("ok: %zu operators and %zu values check\n", def.nodes.size(), def.values.size());
  return 0;
}

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

int cmd_dot(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
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
    std::printf("  n%zu [label=%s];\n", n, dot_quote(nodes[def.inputs.size() + n].name() + "\n" + def.nodes[n].op).c_str());
  for (std::size_t n = 0; n < def.nodes.size(); ++n)
    for (rml::ValueId id : def.nodes[n].inputs)
      if (id < source.size() && !source[id].empty())
        std::printf("  %s -> n%zu [label=%s];\n", source[id].c_str(), n, dot_quote(def.values[id].type.to_string()).c_str());
  const std::vector<std::string> outputs = graph.output_names();
  for (std::size_t k = 0; k < def.outputs.size(); ++k) {
    std::printf("  o%zu [shape=ellipse, label=%s];\n", k, dot_quote(outputs[k]).c_str());
    if (!source[def.outputs[k]].empty()) std::printf("  %s -> o%zu;\n", source[def.outputs[k]].c_str(), k);
  }
  std::printf("}\n");
  return 0;
}

// ---------------------------------------------------------------------------------------------
// rml run / rml bench: inputs from files (or zeros), the executor, summaries.

struct InputSpec {
  std::string name;
  std::string file;
};

// The tensor `name` from a .npy file, or from a .safetensors file (the tensor called `name`, or
// its only tensor).
Tensor read_input(const InputSpec& spec) {
  const fs::path path = spec.file;
  if (path.extension() == ".npy") return get(read_npy(path));
  if (path.extension() != ".safetensors")
    usage_error("--input " + spec.name + "=" + spec.file + ": the file must be .npy or .safetensors");
  const auto reader = get(rml::SafetensorsReader::open(path));
  if (reader.contains(spec.name)) return get(reader.get(spec.name)).clone();
  if (reader.entries().size() == 1) return get(reader.get(reader.entries()[0].name)).clone();
  throw rml::Error(rml::not_found(spec.file + ": no tensor named '" + spec.name + "' (and more than one tensor)"));
}

// The graph's inputs, in order: each from its --input file, the rest zeros. `origin[i]` says where
// input i came from.
std::vector<Tensor> gather_inputs(const Graph& graph, const Args& args, std::vector<std::string>& origin) {
  const GraphDef& def = graph.def();
  const std::vector<std::string> names = graph.input_names();
  std::vector<Tensor> inputs(def.inputs.size());
  origin.assign(def.inputs.size(), "zeros");
  for (const std::string& item : args.all("input")) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      usage_error("--input takes name=file.npy or name=file.safetensors, not '" + item + "'");
    const InputSpec spec{item.substr(0, eq), item.substr(eq + 1)};
    const auto it = std::find(names.begin(), names.end(), spec.name);
    if (it == names.end()) usage_error("--input " + spec.name + ": the model has no such input (inputs: " + join(names) + ")");
    const auto k = static_cast<std::size_t>(it - names.begin());
    inputs[k] = read_input(spec);
    origin[k] = spec.file;
  }
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (!inputs[k].defined()) inputs[k] = Tensor::zeros(def.values[def.inputs[k]].type);
  return inputs;
}

rml::ExecutorOptions executor_options(const Args& args) {
  rml::ExecutorOptions options;
  options.threads = args.count("threads", 0, 1);
  return options;
}

// One element as printed: an integer exactly, a float to four significant digits.
template <typename T>
std::string element_text(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    if (std::isnan(v)) return "nan";  // printf may say -nan, depending on the sign bit
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(v));
    return buf;
  }
}

// min / max / mean (over the elements that are not NaN) and the first few elements of a tensor.
void print_summary(const Tensor& t) {
  rml::visit_dtype(t.dtype(), [&](auto d) {
    using T = rml::dtype_type_t<decltype(d)::value>;
    const auto values = t.span<T>();
    double sum = 0;
    std::size_t counted = 0;
    T lo{};
    T hi{};
    for (T v : values) {
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(v)) continue;
      lo = counted ? std::min(lo, v) : v;
      hi = counted ? std::max(hi, v) : v;
      sum += static_cast<double>(v);
      ++counted;
    }
    if (counted) {
      std::printf("  min %s  max %s  mean %.4g", element_text(lo).c_str(), element_text(hi).c_str(),
                  sum / static_cast<double>(counted));
    }
    if (counted < values.size()) std::printf("  NaN %zu", values.size() - counted);
    std::fputs(values.empty() ? "  (no elements)\n" : "\n", stdout);
    const std::size_t shown = std::min<std::size_t>(values.size(), 8);
    if (shown == 0) return;
    std::printf("  first %zu:", shown);
    for (std::size_t i = 0; i < shown; ++i) std::printf(" %s", element_text(values[i]).c_str());
    std::printf("\n");
  });
}

double millis(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// `12.5 us` below a millisecond, `3.142 ms` above.
std::string time_text(double ms) {
  char buf[32];
  if (ms < 1) std::snprintf(buf, sizeof buf, "%.2f us", ms * 1000);
  else std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

int cmd_run(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
  std::vector<std::string> origin;
  const std::vector<Tensor> inputs = gather_inputs(graph, args, origin);
  const rml::Executor executor = get(rml::Executor::create(graph, executor_options(args)));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Tensor> outputs = get(executor.run(inputs));
  const auto elapsed = std::chrono::steady_clock::now() - start;

  const std::vector<std::string> in_names = graph.input_names();
  for (std::size_t k = 0; k < inputs.size(); ++k)
    std::printf("input %s: %s from %s\n", in_names[k].c_str(), inputs[k].type().to_string().c_str(), origin[k].c_str());
  const std::vector<std::string> out_names = graph.output_names();
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    std::printf("output %s: %s\n", out_names[k].c_str(), outputs[k].type().to_string().c_str());
    print_summary(outputs[k]);
  }
  std::printf("latency: %s (one run; threads: %d)\n", time_text(millis(elapsed)).c_str(), executor.threads());
  return 0;
}

// rml bench MODEL [--threads N] [--iterations K]
int cmd_bench(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
  const int iterations = args.count("iterations", 100, 1);
  std::vector<std::string> origin;
  const std::vector<Tensor> inputs = gather_inputs(graph, args, origin);
  const rml::Executor executor = get(rml::Executor::create(graph, executor_options(args)));
  std::vector<Tensor> outputs;
  for (std::size_t k = 0; k < graph.def().outputs.size(); ++k) outputs.push_back(Tensor::zeros(executor.output_type(k)));
  get(executor.run_into(inputs, outputs));  // warm-up: workspaces, caches

  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    get(executor.run_into(inputs, outputs));
    times.push_back(millis(std::chrono::steady_clock::now() - start));
  }
  std::sort(times.begin(), times.end());
  double total = 0;
  for (double t : times) total += t;
  const double mean = total / static_cast<double>(times.size());
  std::printf("model: %zu operators, %zu kernel steps, arena %s\n", graph.def().nodes.size(), executor.step_count(),
              bytes_text(executor.arena_bytes()).c_str());
  std::printf("runs: %d after one warm-up; threads: %d\n", iterations, executor.threads());
  std::printf("latency: min %s, median %s, mean %s, max %s\n", time_text(times.front()).c_str(),
              time_text(times[times.size() / 2]).c_str(), time_text(mean).c_str(), time_text(times.back()).c_str());
  std::printf("throughput: %.1f runs/s\n", mean > 0 ? 1000.0 / mean : 0.0);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// rml convert MODEL OUT

int cmd_convert(const Args& args) {
  const Graph graph = load_model(args.positional[0]);
  std::printf("wrote %s\n", save_model(graph, args.positional[1]).c_str());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// rml cut MODEL OUT_STEM / rml merge A B OUT / rml extract MODEL OUT

void print_part(const char* label, const Graph& part, const std::string& written) {
  std::printf("%s: %zu operators, inputs %s, outputs %s -> %s\n", label, part.def().nodes.size(),
              join(part.input_names()).c_str(), join(part.output_names()).c_str(), written.c_str());
}

int cmd_cut(const Args& args) {
  Graph graph = load_model(args.positional[0]);
  const std::string stem = args.positional[1];
  const rml::ValueCut cut = get(rml::min_value_cut(graph));
  std::vector<std::string> crossing;
  for (const rml::Value& v : cut.values) crossing.push_back(v.name() + " (" + v.type().to_string() + ")");
  std::printf("cut: %s in %zu values: %s\n", bytes_text(cut.bytes).c_str(), cut.values.size(), join(crossing).c_str());
  std::printf("flops before the cut: %.1f%%\n", 100.0 * cut.flops_before);
  rml::SplitGraph split = get(rml::split(graph, cut));
  for (rml::GraphPart& part : split.parts) {
    const std::string written = save_model(part.graph, stem + "." + part.name);
    print_part(part.name.c_str(), part.graph, written);
  }
  for (const rml::Connection& c : split.connections) std::printf("connection: %s\n", c.to_string().c_str());
  return 0;
}

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

int cmd_merge(const Args& args) {
  std::vector<rml::GraphPart> parts;
  parts.push_back({"a", load_model(args.positional[0])});
  parts.push_back({"b", load_model(args.positional[1])});
  std::vector<rml::Connection> connections;
  for (const std::string& c : args.all("connect")) connections.push_back(parse_connection(c));
  const rml::MergedGraph merged = get(rml::merge(parts, connections));
  const char* kinds[] = {"node", "input", "output"};
  for (const rml::Rename& r : merged.renames)
    std::printf("renamed %s %s.%s -> %s\n", kinds[static_cast<int>(r.kind)], r.part.c_str(), r.from.c_str(), r.to.c_str());
  print_part("merged", merged.graph, save_model(merged.graph, args.positional[2]));
  return 0;
}

int cmd_extract(const Args& args) {
  Graph graph = load_model(args.positional[0]);
  const auto values_named = [&](std::string_view option) {
    std::vector<rml::Value> values;
    for (const std::string& name : list_option(args, option)) {
      auto value = graph.value(name);
      if (!value.ok()) usage_error("--" + std::string(option) + " " + name + ": " + value.error().message());
      values.push_back(*value);
    }
    return values;
  };
  const std::vector<rml::Value> inputs = values_named("inputs");
  const std::vector<rml::Value> outputs = values_named("outputs");
  if (outputs.empty()) usage_error("rml extract needs --outputs");
  const Graph part = get(rml::extract(graph, inputs, outputs));
  print_part("extracted", part, save_model(part, args.positional[1]));
  return 0;
}

// ---------------------------------------------------------------------------------------------

int cmd_help(const Args&);

int cmd_version(const Args&) {
  std::printf("rml %d.%d.%d\n", rml::version.major, rml::version.minor, rml::version.patch);
  return 0;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"info", "MODEL", "inputs, outputs, op histogram, parameters, memory, FLOPs", 1, {}, cmd_info},
      {"check", "MODEL", "load and type-check every node", 1, {}, cmd_check},
      {"run", "MODEL [--input name=file.npy|file.safetensors]... [--threads N]",
       "run once; print each output's shape, min/max/mean, first values, and the latency", 1, {"input", "threads"},
       cmd_run},
      {"bench", "MODEL [--input name=file]... [--threads N] [--iterations K]",
       "time K runs (default 100) after a warm-up", 1, {"input", "threads", "iterations"}, cmd_bench},
      {"convert", "MODEL OUT", "rewrite as rml-graph (a stem) or MessagePack (OUT ends in .msgpack)", 2, {}, cmd_convert},
      {"cut", "MODEL OUT_STEM", "split at the cheapest value cut; write OUT_STEM.before and OUT_STEM.after", 2, {},
       cmd_cut},
      {"merge", "A B OUT [--connect a.output=b.input]...", "merge two models (parts a and b), feeding outputs into inputs",
       3, {"connect"}, cmd_merge},
      {"extract", "MODEL OUT --inputs v,... --outputs v,...", "the operators computing the outputs from the inputs", 2,
       {"inputs", "outputs"}, cmd_extract},
      {"dot", "MODEL", "the graph in Graphviz DOT", 1, {}, cmd_dot},
      {"version", "", "the version of rml the tool was built with", 0, {}, cmd_version},
      {"help", "", "this text", 0, {}, cmd_help},
  };
  return table;
}

int cmd_help(const Args&) {
  std::printf(
      "usage: rml <command> [arguments]\n\n"
      "MODEL is an rml-graph stem (<stem>.json + <stem>.safetensors) or a .msgpack file.\n\ncommands:\n");
  for (const Command& c : commands()) {
    std::printf("  %-8s %s\n", std::string(c.name).c_str(), std::string(c.synopsis).c_str());
    std::printf("           %s\n", std::string(c.summary).c_str());
  }
  std::printf("\nexit codes: 0 ok, 1 usage, 2 model or data error, 3 unavailable (UNSUPPORTED)\n");
  return 0;
}

int main(int argc, char** argv) {
  try {
    if (argc < 2) usage_error("no command given; run 'rml help'");
    std::string_view name = argv[1];
    if (name == "--help" || name == "-h") name = "help";
    if (name == "--version") name = "version";
    const auto& table = commands();
    const auto it = std::find_if(table.begin(), table.end(), [&](const Command& c) { return c.name == name; });
    if (it == table.end()) usage_error("unknown command '" + std::string(name) + "'; run 'rml help'");
    const Args args = parse_args(*it, std::span<char* const>(argv + 2, static_cast<std::size_t>(argc - 2)));
    return it->run(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "rml: INVALID_ARGUMENT: %s\n", e.message.c_str());
    return 1;
  } catch (const rml::Error& e) {
    std::fprintf(stderr, "rml: %s: %s\n", e.code_name().c_str(), e.what());
    return e.code() == rml::Code::unsupported ? 3 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rml: INTERNAL: %s\n", e.what());
    return 2;
  }
}

}  // namespace rml_cli

int main(int argc, char** argv) { return rml_cli::main(argc, argv); }
