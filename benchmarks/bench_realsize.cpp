// Real-size latency, share of the FMA peak and peak memory: rml next to ONNX Runtime (onnxruntime-node) and
// PyTorch eager, batch 1 (Linear 1024->1024 at batch 64), 1 and 2 threads.
//
// Models: ResNet-18, ResNet-50, MobileNetV2 and EfficientNet-B0 at 224x224, a 3x32x32 CNN, Transformer encoder
// layers at d256/4 heads/ff 1024 and at BERT-base size (d768/12 heads/ff 3072), both on 128 tokens, and
// Linear 1024->1024 (tests/zoo/models.py REAL), then the small zoo models at batch 1 as extra rows.
//
// Every engine runs every model in a process of its own: rml in this program re-executed as
// `bench_realsize --child <dir> <stem> <threads> <runs>`, ORT through benchmarks/peers/zoo_ort.js, PyTorch
// through benchmarks/peers/zoo_torch.py, one model per process. Each child reports the median of `runs`
// single-run latencies after warm-up, and its peak resident set, VmHWM from /proc/self/status read when
// the runs are over (runtime, weights and workspaces included), next to its VmRSS before the model was
// loaded (the runtime alone).
//
// Rounds: each (model, threads) cell runs in RML_BENCH_ROUNDS rounds (default 3, 1 with --quick), each
// round one child per engine in turn with its share of the runs. An engine's time is the median of its
// rounds' medians, and rml/ORT (rml/PyTorch) the median of the rounds' ratios, so each ratio compares
// runs seconds apart: on a shared VM whose speed moves by a third from one minute to the next, cells
// timed minutes apart had compared one engine's fast phase with the other's slow one.
//
// The FMA peak is measured in this run, before and after the models: 16 independent FMA chains on the widest
// vector the build targets (AVX-512 with -march=native where the CPU has it), on 1 and on 2 threads. A
// model's share of the peak is its FLOPs (2 x multiply-adds of its convolutions and matrix products, from
// rml's estimate_flops on the exported graph; from PyTorch hooks when rml refused the model) over median
// latency, over the peak at the same thread count.
//
// Fixtures: $RML_REALSIZE_DIR (default ./bench_realsize) is filled by `gen_zoo.py --real` on first use,
// $RML_ZOO_DIR (default ./bench_zoo, shared with bench_zoo) by `gen_zoo.py --keep-onnx`. ORT needs
// $RML_ORT_DIR (see docs/exporters.md). `--quick` (or RML_BENCH_QUICK=1) runs 3 timed runs per cell instead of
// 20; RML_BENCH_RUNS=<n> sets the count (over all rounds, below). Not a Google Benchmark program: every figure comes
// from a process of its own, and all three engines are timed the same way (median of single runs).
// RML_WINOGRAD=off|f2|f4 sets rml's ExecutorOptions::winograd (default f2), to compare its convolution paths against
// the same peers.
//
// 16-bit rows: ResNet-18 and the BERT-size layer exported in f16 and bf16 (stems ending _f16 / _bf16, filled
// by `gen_zoo.py --real16` into $RML_REALSIZE16_DIR, default ./bench_realsize16, on first use when a 16-bit
// row is run): rml runs the 16-bit model, ORT and PyTorch the f32 one, so each row reads against the f32 row
// above it.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rml/edit/cut.hpp"
#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

#include "bench_common.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

using rml_bench::fma_peak;
using rml_bench::kChains;
using rml_bench::kVectorName;
using rml_bench::median;

struct Model {
  std::string stem;  // <name>_b<batch>
  std::string dir;   // "real", "real16" or "zoo": which fixture directory
  bool conv;         // a convolutional model: its share of the FMA peak is printed
};

const std::vector<Model> kModels = {
    {"resnet18_224_b1", "real", true},
    {"resnet50_224_b1", "real", true},
    {"mobilenet_v2_224_b1", "real", true},
    {"efficientnet_b0_224_b1", "real", true},
    {"cnn32_b1", "real", true},
    {"encoder_d256_b1", "real", false},
    {"encoder_bert_b1", "real", false},
    {"linear1024_b64", "real", false},
    {"resnet18_224_b1_bf16", "real16", true},
    {"resnet18_224_b1_f16", "real16", true},
    {"encoder_bert_b1_bf16", "real16", false},
    {"encoder_bert_b1_f16", "real16", false},
    {"mlp_b1", "zoo", false},
    {"cnn_b1", "zoo", true},
    {"transformer_b1", "zoo", false},
    {"gpt_b1", "zoo", false},
    {"resnet18_b1", "zoo", true},
    {"mobilenet_v2_b1", "zoo", true},
};

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The f32 model a 16-bit row's peers run: its stem without the _f16 / _bf16 suffix.
std::string f32_stem(const Model& m) {
  if (m.dir != "real16") return m.stem;
  return m.stem.substr(0, m.stem.rfind('_'));
}

/// A float tensor's values as f32 (f16 and bf16 widened exactly); empty for other dtypes.
std::vector<float> as_floats(const rml::Tensor& t) {
  std::vector<float> out;
  if (t.dtype() == rml::DType::f32) out.assign(t.span<float>().begin(), t.span<float>().end());
  for (rml::f16 v : t.dtype() == rml::DType::f16 ? t.span<rml::f16>() : std::span<const rml::f16>{})
    out.push_back(static_cast<float>(v));
  for (rml::bf16 v : t.dtype() == rml::DType::bf16 ? t.span<rml::bf16>() : std::span<const rml::bf16>{})
    out.push_back(static_cast<float>(v));
  return out;
}

/// A `Vm...:` line of /proc/self/status, in kB (0 when absent).
long proc_status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  return 0;
}

// ---- the rml child ----------------------------------------------------------------------------------------

/// `--child <dir> <stem> <threads> <runs>`: prints `<stem> <threads> <median ms> <VmHWM kB> <base kB> <flops>
/// <error>`, the error being output 0's max abs difference from PyTorch's over max(1, max |PyTorch's|) (-1 when
/// not comparable), or `error: <message>` (exit 1) when rml refuses the model.
int run_child(const fs::path& dir, const std::string& stem, int threads, int runs) {
  const long base = proc_status_kb("VmRSS");
  if (fs::exists(dir / (stem + ".rml_error"))) {
    std::ifstream in(dir / (stem + ".rml_error"));
    std::string why;
    std::getline(in, why);
    std::cout << "error: export refused: " << why << "\n";
    return 1;
  }
  auto graph = rml::load_graph(dir / stem);
  if (!graph.ok()) {
    std::cout << "error: load: " << graph.status().to_string() << "\n";
    return 1;
  }
  rml::ExecutorOptions options{threads};
  // RML_WINOGRAD=off|f2|f4 picks rml's 3x3 convolution path (ExecutorOptions::winograd; default f2).
  const std::string winograd = env_or("RML_WINOGRAD", "f2");
  options.winograd = winograd == "off" ? rml::Winograd::off : winograd == "f4" ? rml::Winograd::f4 : rml::Winograd::f2;
  auto exec = rml::Executor::create(*graph, options);
  if (!exec.ok()) {
    std::cout << "error: Executor::create: " << exec.status().to_string() << "\n";
    return 1;
  }
  auto reader = rml::SafetensorsReader::open(dir / (stem + ".expected.safetensors"));
  if (!reader.ok()) {
    std::cout << "error: " << reader.status().to_string() << "\n";
    return 1;
  }
  std::vector<rml::Tensor> inputs, outputs;
  for (std::size_t i = 0;; ++i) {
    auto t = reader->get("input." + std::to_string(i));
    if (!t.ok()) break;
    inputs.push_back(t->clone());
  }
  for (std::size_t i = 0; i < graph->def().outputs.size(); ++i)
    outputs.push_back(rml::Tensor::zeros(exec->output_type(i)));

  double flops = 0;  // 2 x multiply-adds of the convolutions and matrix products
  for (const auto& node : graph->def().nodes)
    if (node.op == "conv2d" || node.op == "matmul") flops += rml::estimate_flops(graph->def(), node);

  for (int i = 0; i < 3; ++i) {  // warm-up, as the peers do
    auto status = exec->run_into(inputs, outputs);
    if (!status.ok()) {
      std::cout << "error: run: " << status.to_string() << "\n";
      return 1;
    }
  }
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    (void)exec->run_into(inputs, outputs);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  // The outputs against PyTorch's, so a fast wrong answer does not pass unnoticed.
  double error = 0;
  auto expected = reader->get("output.0");
  const auto want = expected.ok() ? as_floats(*expected) : std::vector<float>{};
  const auto got = as_floats(outputs[0]);
  if (!got.empty() && want.size() == got.size()) {
    double scale = 1;
    for (std::size_t i = 0; i < got.size(); ++i) {
      error = std::max(error, static_cast<double>(std::abs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::abs(want[i])));
    }
    error /= scale;
  } else {
    error = -1;
  }
  std::printf("%s %d %.6f %ld %ld %.0f %.3g\n", stem.c_str(), threads, median(times), proc_status_kb("VmHWM"), base,
              flops, error);
  return 0;
}

// ---- the parent -------------------------------------------------------------------------------------------

/// One engine's figures for one (model, threads), or why there are none.
struct Cell {
  double ms = 0;
  long peak_kb = 0, base_kb = 0;
  double flops = 0, error = 0;
  std::string failure;  // empty when measured
};

/// One engine's rounds of a (model, threads) cell as one cell: the median of the measured rounds'
/// medians, the highest peak RSS and output error; the first failure when no round was measured.
Cell combine(const std::vector<Cell>& rounds) {
  Cell out;
  std::vector<double> ms;
  for (const Cell& c : rounds) {
    if (!c.failure.empty()) continue;
    if (ms.empty()) out = c;
    ms.push_back(c.ms);
    out.peak_kb = std::max(out.peak_kb, c.peak_kb);
    out.error = c.error < 0 || out.error < 0 ? -1 : std::max(out.error, c.error);
  }
  if (ms.empty()) return rounds.empty() ? Cell{.failure = "not run"} : rounds.front();
  out.ms = median(std::move(ms));
  return out;
}

/// The median over the rounds measured by both engines of a's time over b's; 0 when there is none.
double paired_ratio(const std::vector<Cell>& a, const std::vector<Cell>& b) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i].failure.empty() && b[i].failure.empty() && b[i].ms > 0) ratios.push_back(a[i].ms / b[i].ms);
  return median(std::move(ratios));
}

/// Runs a child command (stderr merged); the line starting with `<stem> <threads> ` gives the figures, else
/// the first other line that is not a comment becomes the failure.
Cell run_cell(const std::string& command, const std::string& stem, int threads) {
  Cell cell;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return Cell{.failure = "popen failed"};
  char line[4096];
  const std::string prefix = stem + " " + std::to_string(threads) + " ";
  bool measured = false;
  std::string first_other;
  while (std::fgets(line, sizeof line, pipe)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (s.rfind(prefix, 0) == 0) {
      std::istringstream in(s.substr(prefix.size()));
      in >> cell.ms >> cell.peak_kb >> cell.base_kb >> cell.flops >> cell.error;
      measured = true;
    } else if (!s.empty() && s[0] != '#' && first_other.empty()) {
      first_other = s;
    }
  }
  const int rc = pclose(pipe);
  if (!measured) cell.failure = first_other.empty() ? "exit status " + std::to_string(rc) : first_other;
  return cell;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string ms_text(double ms) { return fmt(ms < 0.1 ? "%.4f" : ms < 1 ? "%.3f" : ms < 100 ? "%.2f" : "%.1f", ms); }

bool generate(const std::string& source, const fs::path& dir, const char* flags) {
  std::cout << "generating fixtures into " << dir << " ...\n" << std::flush;
  const std::string cmd = "/usr/bin/python3 " + shell_quote(source + "/tests/zoo/gen_zoo.py") + " " + flags +
                          " --out " + shell_quote(dir.string()) + " > /dev/null";
  if (std::system(cmd.c_str()) == 0) return true;
  std::cerr << "bench_realsize: fixture generation failed: " << cmd << "\n";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--child")
    return run_child(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]));

  bool quick = env_or("RML_BENCH_QUICK", "0") != "0";
  bool markdown = false;  // --markdown: the table as a Markdown table (what docs/exporters.md holds)
  std::string only;       // --models a,b: a comma-separated subset of stems
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--markdown") {
      markdown = true;
    } else if (arg == "--models" && i + 1 < argc) {
      only = "," + std::string(argv[++i]) + ",";
    } else {
      std::cerr << "usage: bench_realsize [--quick] [--markdown] [--models stem,stem,...]\n";
      return 2;
    }
  }
  const int runs = std::max(1, std::atoi(env_or("RML_BENCH_RUNS", quick ? "3" : "20").c_str()));
  const int rounds = std::clamp(std::atoi(env_or("RML_BENCH_ROUNDS", quick ? "1" : "3").c_str()), 1, runs);
  const int round_runs = (runs + rounds - 1) / rounds;  // each round's share, rounded up
  const std::string source = RML_SOURCE_DIR, self = fs::canonical("/proc/self/exe").string();
  const fs::path real_dir = fs::absolute(env_or("RML_REALSIZE_DIR", "bench_realsize"));
  const fs::path zoo_dir = fs::absolute(env_or("RML_ZOO_DIR", "bench_zoo"));
  const fs::path real16_dir = fs::absolute(env_or("RML_REALSIZE16_DIR", "bench_realsize16"));
  const auto dir_of = [&](const Model& m) {
    return m.dir == "real" ? real_dir : m.dir == "real16" ? real16_dir : zoo_dir;
  };
  const std::string ort_dir = env_or("RML_ORT_DIR", "");
  if (!fs::exists(real_dir / "linear1024_b64.flops") && !generate(source, real_dir, "--real")) return 1;
  if (!fs::exists(zoo_dir / "resnet18_b1.onnx") && !generate(source, zoo_dir, "--keep-onnx")) return 1;
  const auto selected = [&](const Model& m) {
    return only.empty() || only.find("," + m.stem + ",") != std::string::npos;
  };
  const bool any_16bit = std::any_of(std::begin(kModels), std::end(kModels),
                                     [&](const Model& m) { return m.dir == "real16" && selected(m); });
  // gen_zoo.py --real16 writes READY after its last fixture.
  if (any_16bit && !fs::exists(real16_dir / "READY") && !generate(source, real16_dir, "--real16")) return 1;

  std::printf("# FMA peak: %d chains of %s FMAs, -O3 -march=native\n", kChains, kVectorName);
  std::printf("# rml's Winograd transforms: %s (RML_WINOGRAD)\n", env_or("RML_WINOGRAD", "f2").c_str());
  const double peak_before[3] = {0, fma_peak(1), fma_peak(2)};
  std::printf("# peak before the models: %.1f GFLOP/s at 1 thread, %.1f at 2\n", peak_before[1], peak_before[2]);
  std::fflush(stdout);

  struct Row {
    Model model;
    int threads;
    Cell rml, ort, torch;               // the rounds combined
    double rml_ort = 0, rml_torch = 0;  // the rounds' median ratios (0: none measured by both)
  };
  std::vector<Row> rows;
  for (const auto& model : kModels) {
    if (!selected(model)) continue;
    const fs::path dir = dir_of(model);
    // A 16-bit row's peers run the f32 model.
    const fs::path peer_dir = model.dir == "real16" ? real_dir : dir;
    const std::string peer_stem = f32_stem(model);
    for (int threads : {1, 2}) {
      const std::string t = std::to_string(threads), r = std::to_string(round_runs);
      std::vector<Cell> rml, ort, torch;
      for (int round = 0; round < rounds; ++round) {
        rml.push_back(
            run_cell(shell_quote(self) + " --child " + shell_quote(dir.string()) + " " + model.stem + " " + t + " " + r,
                     model.stem, threads));
        Cell o;
        if (ort_dir.empty())
          o.failure = "set RML_ORT_DIR";
        else if (std::ifstream why(peer_dir / (peer_stem + ".onnx_error")); why && std::getline(why, o.failure))
          o.failure = "torch.onnx.export failed: " + o.failure;
        else
          o = run_cell("NODE_PATH=" + shell_quote(ort_dir + "/node_modules") + " node " +
                           shell_quote(source + "/benchmarks/peers/zoo_ort.js") + " " + shell_quote(peer_dir.string()) +
                           " " + t + " " + r + " " + peer_stem,
                       peer_stem, threads);
        ort.push_back(std::move(o));
        torch.push_back(run_cell("/usr/bin/python3 " + shell_quote(source + "/benchmarks/peers/zoo_torch.py") +
                                     " --threads " + t + " --runs " + r + " " + peer_stem,
                                 peer_stem, threads));
      }
      Row row{
          model, threads, combine(rml), combine(ort), combine(torch), paired_ratio(rml, ort), paired_ratio(rml, torch)};
      std::printf("# %-24s %d thr: rml %s, ORT %s, PyTorch %s\n", model.stem.c_str(), threads,
                  row.rml.failure.empty() ? ms_text(row.rml.ms).c_str() : "-",
                  row.ort.failure.empty() ? ms_text(row.ort.ms).c_str() : "-",
                  row.torch.failure.empty() ? ms_text(row.torch.ms).c_str() : "-");
      std::fflush(stdout);
      rows.push_back(std::move(row));
    }
  }

  const double peak_after[3] = {0, fma_peak(1), fma_peak(2)};
  std::printf("# peak after the models: %.1f GFLOP/s at 1 thread, %.1f at 2\n", peak_after[1], peak_after[2]);
  const double peak[3] = {0, std::max(peak_before[1], peak_after[1]), std::max(peak_before[2], peak_after[2])};
  std::printf(
      "# %d round(s) of %d timed runs per engine and cell, the engines in turn each round; ms: the median of the "
      "rounds' medians; rml/ORT, rml/torch: the median of the rounds' ratios; %%peak against %.1f / %.1f GFLOP/s "
      "(1 / 2 threads)\n\n",
      rounds, round_runs, peak[1], peak[2]);

  // One line of the table: aligned columns, or a Markdown row.
  const auto print_line = [markdown](const std::vector<std::string>& cells) {
    static const int widths[] = {-24, 3, 9, 9, 7, 9, 9, 8, 6, 6, 6, 19};
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (markdown)
        std::printf("| %s ", cells[i].c_str());
      else
        std::printf(i ? " %*s" : "%*s", widths[i], cells[i].c_str());
    }
    std::printf(markdown ? "|\n" : "\n");
  };
  print_line({"model", "thr", "rml", "ORT", "rml/ORT", "PyTorch", "rml/torch", "MFLOP", "rml%pk", "ORT%pk", "pt%pk",
              "peak RSS MB r/O/pt"});
  if (markdown) std::printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  std::vector<std::string> notes;
  for (const auto& row : rows) {
    const auto& stem = row.model.stem;
    auto ms = [](const Cell& c) { return c.failure.empty() ? ms_text(c.ms) : std::string("-"); };
    auto ratio = [&](double r) { return r > 0 ? fmt(r < 0.1 ? "%.3f" : "%.2f", r) : std::string("-"); };
    // FLOPs from rml's graph; from the PyTorch count written beside the fixtures when rml has none.
    double flops = row.rml.failure.empty() ? row.rml.flops : 0;
    if (flops == 0) {
      std::ifstream in(dir_of(row.model) / (stem + ".flops"));
      in >> flops;
    }
    auto share = [&](const Cell& c) {
      return row.model.conv && c.failure.empty() && flops > 0
                 ? fmt("%.1f", flops / (c.ms * 1e6) / peak[row.threads] * 100)
                 : std::string("-");
    };
    auto mb = [](const Cell& c) { return c.failure.empty() ? fmt("%.0f", c.peak_kb / 1024.0) : std::string("-"); };
    print_line({stem, std::to_string(row.threads), ms(row.rml), ms(row.ort), ratio(row.rml_ort), ms(row.torch),
                ratio(row.rml_torch), flops > 0 ? fmt(flops < 1e6 ? "%.3f" : "%.0f", flops * 1e-6) : "-",
                share(row.rml), share(row.ort), share(row.torch),
                mb(row.rml) + " / " + mb(row.ort) + " / " + mb(row.torch)});
    auto note = [&](const std::string& text) {  // once per model unless the thread counts differ
      if (std::find(notes.begin(), notes.end(), text) == notes.end()) notes.push_back(text);
    };
    for (const auto& [engine, cell] : {std::pair{"rml", &row.rml}, {"ORT", &row.ort}, {"PyTorch", &row.torch}})
      if (!cell->failure.empty() && cell->failure != "set RML_ORT_DIR")
        note(stem + ", " + engine + ": " + cell->failure);
    if (row.rml.failure.empty() && (row.rml.error > 1e-3 || row.rml.error < 0))
      note(stem + ": rml's output differs from PyTorch's by " + fmt("%.3g", row.rml.error) +
           " x max(1, max |output|) at " + std::to_string(row.threads) + " thread(s)");
  }
  // The runtimes alone: each engine's VmRSS before its model was loaded (the first measured cell).
  auto base = [&](Cell Row::*engine) {
    for (const auto& row : rows)
      if ((row.*engine).failure.empty()) return fmt("%.0f MB", (row.*engine).base_kb / 1024.0);
    return std::string("-");
  };
  std::printf(
      "\n# peak RSS: VmHWM of the engine's own process (one model each); before loading a model the "
      "process held rml %s, ORT %s, PyTorch %s\n",
      base(&Row::rml).c_str(), base(&Row::ort).c_str(), base(&Row::torch).c_str());
  if (ort_dir.empty()) std::printf("# ONNX Runtime skipped: set RML_ORT_DIR (see docs/exporters.md)\n");
  for (const auto& note : notes) std::printf("# %s\n", note.c_str());
  return 0;
}
