// MessagePack serialization throughput (nodes/s) on chain graphs of 10 to 100 000 operators:
// rml's layer on msgpack-cxx beside the hand-written layer it replaced (benchmarks/baseline_serial/,
// kept only for this measurement; baseline_write, baseline_read), measured in the same run;
// beside rml's own rml-graph JSON writer and reader measured in the same run, and beside the
// figures the reference serialization guide quotes (≈2 M nodes/s serialize, ≈1.25 M deserialize);
// beside msgpack-cxx on the same bytes; and beside two floors of the IR itself (a GraphDef copy, a
// read-only walk over it) that bound what any reader or writer of it can reach.
//
//   bench_serial [--benchmark_filter=...] [--benchmark_repetitions=N]
//
// prints Google Benchmark's table, then a summary (of the medians, when repeated).
#include <benchmark/benchmark.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include <rml/io/graph_io.hpp>
#include <rml/serial/serialize.hpp>

#include "../tests/serial/test_serial_types.hpp"  // chain_graph: the graphs the tests use
#include "baseline_serial/serialize.hpp"          // the hand-written layer before msgpack-cxx

namespace {

constexpr double reference_serialize = 2.0e6;     // nodes/s, the reference guide's figure
constexpr double reference_deserialize = 1.25e6;  // nodes/s

const rml::Graph& graph_of(int nodes) {
  static std::map<int, rml::Graph> graphs;
  auto it = graphs.find(nodes);
  if (it == graphs.end()) it = graphs.emplace(nodes, rml::Graph(serial_test::chain_graph(nodes))).first;
  return it->second;
}

void set_rate(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

void msgpack_write(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto out = rml::serialize(g);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  set_rate(state);
}

void msgpack_read(benchmark::State& state) {
  const auto bytes = rml::serialize(graph_of(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto g = rml::deserialize<rml::Graph>(bytes);
    if (!g.ok()) state.SkipWithError(g.error().message().c_str());
    benchmark::DoNotOptimize(g);
  }
  set_rate(state);
}

// The same with the hand-written layer rml had before it wrote and read through msgpack-cxx.
void baseline_write(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto out = rml::baseline_serial::serialize(g);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  set_rate(state);
}

void baseline_read(benchmark::State& state) {
  const auto bytes = rml::serialize(graph_of(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto g = rml::baseline_serial::deserialize<rml::Graph>(bytes);
    if (!g.ok()) state.SkipWithError(g.error().message().c_str());
    benchmark::DoNotOptimize(g);
  }
  set_rate(state);
}

// serialize_into one buffer, reused: what a program writing document after document pays, without
// a fresh buffer's page faults and zero-filling.
void msgpack_write_reused(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    rml::serialize_into(g, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(out.size());
  set_rate(state);
}

// msgpack_read with glibc told to keep freed memory: by default it hands the heap's top back to
// the kernel when the previous graph is destroyed, so every iteration faults its pages in again.
// A long-running process (or another allocator) mostly does not; both figures are printed.
void msgpack_read_kept_heap(benchmark::State& state) {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts on 64-bit (it ignores more)
#endif
  msgpack_read(state);
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);  // glibc's defaults (its dynamic threshold is then off)
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  malloc_trim(0);
#endif
}

// The floor under any reader: copy-constructing (and then destroying) the same GraphDef. A reader
// builds exactly these objects, so it cannot beat this; the ratio says what decoding adds.
void graphdef_copy(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    rml::GraphDef copy = g.def();
    benchmark::DoNotOptimize(copy);
  }
  set_rate(state);
}

// The floor under any writer: one pass reading every string, list and scalar of the GraphDef once
// (summing bytes), which a writer must do before it can write them. At 100 000 nodes the IR's heap
// no longer fits in cache and this pass alone waits on memory.
std::uint64_t touch(const std::string& s) { return s.size() + (s.empty() ? 0u : static_cast<unsigned char>(s.back())); }
template <typename List>
std::uint64_t touch_list(const List& list) {
  std::uint64_t sum = list.size();
  for (const auto& x : list) sum += static_cast<std::uint64_t>(x);
  return sum;
}

void graphdef_walk(benchmark::State& state) {
  const rml::GraphDef& g = graph_of(static_cast<int>(state.range(0))).def();
  for (auto _ : state) {
    std::uint64_t sum = touch(g.name) + touch(g.producer) + touch_list(g.inputs) + touch_list(g.outputs);
    for (const auto& v : g.values)
      sum += touch(v.name) + static_cast<unsigned>(v.type.dtype) + touch_list(v.type.shape.dims());
    for (const auto& c : g.constants)
      sum += c.value + touch(c.tensor) + touch_list(c.data.shape().dims()) + c.data.nbytes() +
             reinterpret_cast<std::uintptr_t>(c.data.storage().get());
    for (const auto& n : g.nodes) {
      sum += touch(n.op) + touch_list(n.inputs) + touch_list(n.outputs) + touch(n.name) +
             static_cast<unsigned>(n.device.kind) + static_cast<std::uint64_t>(n.device.index);
      for (const auto& [key, value] : n.attrs) sum += touch(key) + value.index();
      if (n.origin) sum += touch(n.origin->module) + touch(n.origin->file) + static_cast<std::uint64_t>(n.origin->line);
    }
    benchmark::DoNotOptimize(sum);
  }
  set_rate(state);
}

// The peer: msgpack-cxx decoding the same document into its own object tree (one zone, no IR, no
// validation beyond well-formedness), and packing that tree back into a buffer.
void msgpack_cxx_unpack(benchmark::State& state) {
  const auto bytes = rml::serialize(graph_of(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    benchmark::DoNotOptimize(handle.get());
  }
  set_rate(state);
}

void msgpack_cxx_pack(benchmark::State& state) {
  const auto bytes = rml::serialize(graph_of(static_cast<int>(state.range(0))));
  const auto handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (auto _ : state) {
    msgpack::sbuffer out;
    msgpack::pack(out, handle.get());
    benchmark::DoNotOptimize(out.data());
  }
  set_rate(state);
}

// rml-graph JSON text in memory (save_graph without the file writes).
void json_write(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto layout = rml::detail::layout_constants(g.def());
    auto json = rml::graph_to_json(g.def(), *layout);
    bytes = json->size();
    benchmark::DoNotOptimize(json->data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  set_rate(state);
}

// parse_graph over the JSON text, binding constants to the saved weights file.
void json_read(benchmark::State& state) {
  const rml::Graph& g = graph_of(static_cast<int>(state.range(0)));
  const auto stem = std::filesystem::temp_directory_path() / ("rml_bench_serial_" + std::to_string(state.range(0)));
  if (auto s = rml::save_graph(g, stem); !s.ok()) return state.SkipWithError(s.message().c_str());
  auto weights = rml::SafetensorsReader::open(stem.string() + ".safetensors");
  auto json = rml::graph_to_json(g.def(), *rml::detail::layout_constants(g.def()));
  if (!weights.ok() || !json.ok()) return state.SkipWithError("cannot prepare the JSON document");
  const simdjson::padded_string padded(*json);
  for (auto _ : state) {
    auto back = rml::parse_padded_graph(padded, &*weights);
    if (!back.ok()) state.SkipWithError(back.error().message().c_str());
    benchmark::DoNotOptimize(back);
  }
  set_rate(state);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int n : {10, 100, 1000, 100000}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(msgpack_write)->Apply(sizes);
BENCHMARK(baseline_write)->Apply(sizes);
BENCHMARK(msgpack_write_reused)->Apply(sizes);
BENCHMARK(msgpack_read)->Apply(sizes);
BENCHMARK(baseline_read)->Apply(sizes);
BENCHMARK(msgpack_read_kept_heap)->Apply(sizes);
BENCHMARK(graphdef_copy)->Apply(sizes);
BENCHMARK(graphdef_walk)->Apply(sizes);
BENCHMARK(msgpack_cxx_pack)->Apply(sizes);
BENCHMARK(msgpack_cxx_unpack)->Apply(sizes);
BENCHMARK(json_write)->Apply(sizes);
BENCHMARK(json_read)->Apply(sizes);

// Collects nodes/s and document bytes per (benchmark, size) for the summary.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      // One run per benchmark, or with --benchmark_repetitions the median (reported after the runs).
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.error_occurred || (run.run_type != Run::RT_Iteration && !median)) continue;
      const std::string name = run.benchmark_name();
      const auto slash = name.find('/');
      const auto it = run.counters.find("items_per_second");
      if (slash == std::string::npos || it == run.counters.end()) continue;
      const std::string bench = name.substr(0, slash);
      const int nodes = std::stoi(name.substr(slash + 1));
      rates[bench][nodes] = it->second.value;
      if (const auto b = run.counters.find("bytes"); b != run.counters.end()) bytes[bench][nodes] = b->second.value;
    }
  }
  std::map<std::string, std::map<int, double>> rates;
  std::map<std::string, std::map<int, double>> bytes;  // the document's size, for the writers
};

// The value for (bench, n) in `table`, or 0 when it was not measured.
double lookup(const std::map<std::string, std::map<int, double>>& table, const char* bench, int n) {
  const auto it = table.find(bench);
  if (it == table.end()) return 0.0;
  const auto jt = it->second.find(n);
  return jt == it->second.end() ? 0.0 : jt->second;
}

void print_summary(const Collector& c) {
  const auto rate = [&](const char* bench, int n) { return lookup(c.rates, bench, n); };
  std::printf("\nMessagePack (rml-msgpack) vs rml-graph JSON (same run) and the reference guide's figures\n");
  std::printf("%8s | %14s %8s %9s | %14s %8s %9s | %9s %9s\n", "nodes", "write nodes/s", "x JSON", "x guide",
              "read nodes/s", "x JSON", "x guide", "B/node", "JSON B/n");
  for (int n : {10, 100, 1000, 100000}) {
    const double w = rate("msgpack_write", n), r = rate("msgpack_read", n);
    const double jw = rate("json_write", n), jr = rate("json_read", n);
    if (w == 0 && r == 0) continue;
    std::printf("%8d | %12.2f M %7.1fx %8.1fx | %12.2f M %7.1fx %8.1fx | %9.1f %9.1f\n", n, w / 1e6,
                jw > 0 ? w / jw : 0.0, w / reference_serialize, r / 1e6, jr > 0 ? r / jr : 0.0,
                r / reference_deserialize, lookup(c.bytes, "msgpack_write", n) / n,
                lookup(c.bytes, "json_write", n) / n);
  }
  std::printf("\nOn msgpack-cxx vs the hand-written layer it replaced (same run; >= 0.90x is the bar)\n");
  std::printf("%8s | %14s %14s %8s | %14s %14s %8s | %14s\n", "nodes", "write nodes/s", "baseline", "ratio",
              "read nodes/s", "baseline", "ratio", "cxx unpack");
  for (int n : {10, 100, 1000, 100000}) {
    const double w = rate("msgpack_write", n), bw = rate("baseline_write", n);
    const double r = rate("msgpack_read", n), br = rate("baseline_read", n), u = rate("msgpack_cxx_unpack", n);
    if (bw == 0 && br == 0) continue;
    std::printf("%8d | %12.2f M %12.2f M %7.2fx | %12.2f M %12.2f M %7.2fx | %12.2f M\n", n, w / 1e6, bw / 1e6,
                bw > 0 ? w / bw : 0.0, r / 1e6, br / 1e6, br > 0 ? r / br : 0.0, u / 1e6);
  }
  std::printf("\nThe same, without per-iteration memory effects (see msgpack_write_reused, msgpack_read_kept_heap)\n");
  std::printf("%8s | %22s %9s | %22s %9s\n", "nodes", "write, reused buffer", "x guide", "read, heap kept", "x guide");
  for (int n : {10, 100, 1000, 100000}) {
    const double w = rate("msgpack_write_reused", n), r = rate("msgpack_read_kept_heap", n);
    if (w == 0 && r == 0) continue;
    std::printf("%8d | %20.2f M %8.1fx | %20.2f M %8.1fx\n", n, w / 1e6, w / reference_serialize, r / 1e6,
                r / reference_deserialize);
  }
  std::printf("\nBeside msgpack-cxx (the same document, into and out of its own object tree) and the floor\n");
  std::printf("(floors: a writer reads all of the IR, GraphDef walk; a reader builds all of it, GraphDef copy)\n");
  std::printf("%8s | %14s %13s %13s | %14s %13s %13s\n", "nodes", "write nodes/s", "x msgpack-cxx", "x IR walk",
              "read nodes/s", "x msgpack-cxx", "x IR copy");
  for (int n : {10, 100, 1000, 100000}) {
    const double w = rate("msgpack_write", n), r = rate("msgpack_read", n);
    const double pw = rate("msgpack_cxx_pack", n), pr = rate("msgpack_cxx_unpack", n);
    const double walk = rate("graphdef_walk", n), copy = rate("graphdef_copy", n);
    if (pw == 0 && pr == 0 && walk == 0 && copy == 0) continue;
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::printf("%8d | %12.2f M %12.2fx %12.2fx | %12.2f M %12.2fx %12.2fx\n", n, w / 1e6, ratio(w, pw), ratio(w, walk),
                r / 1e6, ratio(r, pr), ratio(r, copy));
  }
  std::printf("%8s | %14s %13s %13s | %14s %13s %13s\n", "", "", "", "walk nodes/s", "", "", "copy nodes/s");
  for (int n : {10, 100, 1000, 100000})
    if (const double walk = rate("graphdef_walk", n), copy = rate("graphdef_copy", n); walk > 0 || copy > 0)
      std::printf("%8d | %14s %13s %11.2f M | %14s %13s %11.2f M\n", n, "", "", walk / 1e6, "", "", copy / 1e6);
  std::printf("targets: >= 20 M nodes/s write, >= 10 M nodes/s read at 1000 nodes and up\n");
  std::printf("B/node: document bytes per node, weights included (MessagePack) or apart (JSON)\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_summary(collector);
  benchmark::Shutdown();
  return 0;
}
