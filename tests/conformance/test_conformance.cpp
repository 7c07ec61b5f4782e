// Conformance: the model zoo and the ONNX backend node tests, run by rml's executor against reference outputs.
//
// Zoo: every model exported by both routes (PyTorch fx and ONNX) must reproduce PyTorch's outputs within
// max |got - ref| <= 1e-4 * max(1, max |ref|), at 1 and 2 threads. ONNX node tests: every case the converter
// (convert_node_tests.py, a CTest fixture) lowered must match the test's expected outputs within the tolerance
// written in its manifest (|got - ref| <= atol + rtol * |ref|; integer and bool outputs exactly). A case whose
// graph uses f16, bf16, i64 or bool, or integer arithmetic (manifest note `newrules`), and that
// Executor::create refuses is counted and listed as refused at create, not as a failure: the op table
// admits those dtypes op by op; once it admits them all, none is refused. One that runs must match like
// any other.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rml/exec/executor.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/io/safetensors.hpp"

namespace fs = std::filesystem;

namespace {

struct Reference {
  std::vector<rml::Tensor> inputs, outputs;
};

/// Reads `input.<i>` / `output.<i>` from a safetensors file.
rml::Result<Reference> read_reference(const fs::path& path) {
  RML_ASSIGN_OR_RETURN(auto reader, rml::SafetensorsReader::open(path));
  Reference ref;
  for (const char* kind : {"input", "output"}) {
    auto& list = std::string_view(kind) == "input" ? ref.inputs : ref.outputs;
    for (std::size_t i = 0;; ++i) {
      auto t = reader.get(std::string(kind) + "." + std::to_string(i));
      if (!t.ok()) break;
      list.push_back(std::move(*t));
    }
  }
  if (ref.outputs.empty()) return rml::invalid_argument(path.string() + ": no output.0");
  return ref;
}

struct Tolerance {
  double atol = 0, rtol = 0;
  double zoo = 0;  ///< when nonzero, the zoo rule: |got - ref| <= zoo * max(1, max |ref|)
};
constexpr Tolerance kZooTolerance{0, 0, 1e-4};

/// The 16-bit zoo models against PyTorch in the same dtype: 8 units of roundoff of the output dtype
/// (2^-11 for f16, 2^-8 for bf16) times max(1, max |ref|). Both engines round every op's result to the
/// dtype, in different places (rml folds batch norm into the convolution, sums in another order), so
/// each op on the path contributes about one rounding of difference; independent roundings add like a
/// random walk, and sqrt of the ~60 ops on ResNet-18's longest path is about 8. Measured: 1.4-3.7 units
/// on ResNet-18 (64 and 224 squared) and the d32 and d768 encoder layers, in both dtypes.
Tolerance half_tolerance(rml::DType d) { return {0, 0, 8.0 * std::ldexp(1.0, d == rml::DType::bf16 ? -8 : -11)}; }

/// Empty when `got` matches `want`; otherwise what differs first.
std::string compare(const rml::Tensor& got, const rml::Tensor& want, Tolerance tol) {
  if (got.type() != want.type()) return "type " + got.type().to_string() + " != " + want.type().to_string();
  if (!rml::is_float_dtype(want.dtype())) {  // i32, i64, bool: exactly
    return rml::visit_dtype(want.dtype(), [&](auto d) -> std::string {
      using T = rml::dtype_type_t<decltype(d)::value>;
      if constexpr (std::is_integral_v<T>) {
        auto g = got.span<T>(), w = want.span<T>();
        for (std::size_t i = 0; i < w.size(); ++i)
          if (g[i] != w[i])
            return "element " + std::to_string(i) + ": " + std::to_string(static_cast<std::int64_t>(g[i])) +
                   " != " + std::to_string(static_cast<std::int64_t>(w[i]));
      }
      return {};
    });
  }
  // Floats, the 16-bit ones widened (exactly) to f32.
  std::vector<float> g(static_cast<std::size_t>(got.numel())), w(static_cast<std::size_t>(want.numel()));
  rml::visit_dtype(want.dtype(), [&](auto d) {
    using T = rml::dtype_type_t<decltype(d)::value>;
    if constexpr (rml::is_float_dtype(decltype(d)::value))
      for (std::size_t i = 0; i < w.size(); ++i) {
        g[i] = static_cast<float>(got.span<T>()[i]);
        w[i] = static_cast<float>(want.span<T>()[i]);
      }
  });
  double bound = tol.atol;
  if (tol.zoo > 0) {
    double peak = 1.0;
    for (float x : w) peak = std::max(peak, static_cast<double>(std::fabs(x)));
    bound = tol.zoo * peak;
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double a = g[i], b = w[i];
    if (std::isnan(b) && std::isnan(a)) continue;
    if (std::isinf(b) && a == b) continue;
    const double limit = tol.zoo > 0 ? bound : tol.atol + tol.rtol * std::fabs(b);
    if (!(std::fabs(a - b) <= limit)) {
      std::ostringstream os;
      os << "element " << i << ": " << a << " vs " << b << " (|diff| " << std::fabs(a - b) << " > " << limit << ")";
      return os.str();
    }
  }
  return {};
}

/// Loads `<stem>`, runs it on the reference inputs, compares every output; empty when all match.
std::string run_case(const fs::path& stem, const Reference& ref, Tolerance tol, int threads) {
  auto graph = rml::load_graph(stem);
  if (!graph.ok()) return "load: " + graph.error().to_string();
  auto exec = rml::Executor::create(*graph, rml::ExecutorOptions{threads});
  if (!exec.ok()) return "create: " + exec.error().to_string();
  auto outputs = exec->run(ref.inputs);
  if (!outputs.ok()) return "run: " + outputs.error().to_string();
  if (outputs->size() != ref.outputs.size())
    return std::to_string(outputs->size()) + " outputs, expected " + std::to_string(ref.outputs.size());
  for (std::size_t i = 0; i < ref.outputs.size(); ++i) {
    std::string problem = compare((*outputs)[i], ref.outputs[i], tol);
    if (!problem.empty()) return "output " + std::to_string(i) + ": " + problem;
  }
  return {};
}

void check_zoo(const fs::path& dir, const std::vector<std::string>& models) {
  for (const auto& model : models) {
    for (int batch : {1, 2}) {
      const std::string base = model + "_b" + std::to_string(batch);
      auto ref = read_reference(dir / (base + ".expected.safetensors"));
      REQUIRE_MESSAGE(ref.ok(), ref.error().to_string());
      for (const char* route : {"", "_onnx"}) {
        for (int threads : {1, 2}) {
          const std::string problem = run_case(dir / (base + route), *ref, kZooTolerance, threads);
          CHECK_MESSAGE(problem.empty(), base << route << " (" << threads << " threads): " << problem);
        }
      }
    }
  }
}

/// The f16 and bf16 exports of `models` at batch 1 (gen_zoo.py --half) against PyTorch in the same dtype.
void check_zoo_half(const fs::path& dir, const std::vector<std::string>& models) {
  for (const auto& model : models) {
    for (const auto& [suffix, dtype] :
         {std::pair{"_b1_f16", rml::DType::f16}, std::pair{"_b1_bf16", rml::DType::bf16}}) {
      const std::string base = model + suffix;
      auto ref = read_reference(dir / (base + ".expected.safetensors"));
      REQUIRE_MESSAGE(ref.ok(), ref.error().to_string());
      REQUIRE(ref->outputs[0].dtype() == dtype);
      for (int threads : {1, 2}) {
        const std::string problem = run_case(dir / base, *ref, half_tolerance(dtype), threads);
        CHECK_MESSAGE(problem.empty(), base << " (" << threads << " threads): " << problem);
      }
    }
  }
}

std::vector<std::vector<std::string>> read_tsv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> row;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, '\t');) row.push_back(field);
    if (!row.empty()) rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

TEST_CASE("zoo: committed models") {
  check_zoo(fs::path(RML_TEST_DATA_DIR) / "zoo", {"mlp", "cnn", "transformer", "gpt"});
}

TEST_CASE("zoo: generated models") {
  check_zoo(fs::path(RML_TEST_BUILD_DIR) / "conformance" / "zoo", {"resnet18", "mobilenet_v2"});
}

TEST_CASE("zoo: 16-bit models") {
  check_zoo_half(fs::path(RML_TEST_BUILD_DIR) / "conformance" / "zoo16", {"resnet18", "transformer"});
}

TEST_CASE("onnx node tests") {
  const fs::path dir = fs::path(RML_TEST_BUILD_DIR) / "conformance" / "onnx_nodes";
  REQUIRE_MESSAGE(fs::exists(dir / "manifest.tsv"), "run the onnx_nodes_convert fixture first");
  const auto manifest = read_tsv(dir / "manifest.tsv");
  const auto unsupported = read_tsv(dir / "unsupported.tsv");
  const auto mismatch = read_tsv(dir / "mismatch.tsv");

  std::vector<std::string> failures, refused;
  std::size_t matched = 0;
  for (const auto& row : manifest) {
    REQUIRE(row.size() >= 3);
    const fs::path case_dir = dir / row[0];
    auto ref = read_reference(case_dir / "data.safetensors");
    std::string problem;
    if (!ref.ok()) {
      problem = "data: " + ref.error().to_string();
    } else {
      problem = run_case(case_dir / "model", *ref, Tolerance{std::stod(row[1]), std::stod(row[2]), false}, 1);
    }
    const bool new_dtype = row.size() > 3 && row[3].find("newrules") != std::string::npos;
    if (problem.empty()) {
      ++matched;
    } else if (new_dtype && problem.rfind("create: ", 0) == 0) {
      refused.push_back(row[0] + ": " + problem);
    } else {
      failures.push_back(row[0] + ": " + problem);
    }
  }

  // The report: failures first, then every unsupported case with its reason, summarised by reason.
  std::map<std::string, int> by_reason;
  for (const auto& row : unsupported) {
    std::string reason = row.size() > 1 ? row[1] : "?";
    // Group by what failed, not where: drop the node's name from "cannot lower ONNX op 'X' (node 'n'): why".
    if (auto at = reason.find(" (node '"); at != std::string::npos) {
      if (auto end = reason.find("')", at); end != std::string::npos) reason.erase(at, end + 2 - at);
    }
    ++by_reason[reason];
  }
  std::ofstream report(dir / "report.txt");
  report << "converted " << manifest.size() << ", matched " << matched << ", failed " << failures.size()
         << ", refused at create (f16/bf16/i64/bool or integer ops the table lacks) " << refused.size()
         << ", unsupported " << unsupported.size() << ", reference mismatches " << mismatch.size() << "\n\n";
  for (const auto& f : failures) report << "FAILED " << f << "\n";
  for (const auto& r : refused) report << "REFUSED AT CREATE " << r << "\n";
  for (const auto& row : mismatch) report << "MISMATCH (NumPy reference) " << row[0] << ": " << row.back() << "\n";
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [reason, count] : by_reason) reasons.emplace_back(count, reason);
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  report << "\nunsupported, by reason:\n";
  for (const auto& [count, reason] : reasons) report << "  " << count << "  " << reason << "\n";
  report << "\nunsupported cases:\n";
  for (const auto& row : unsupported) report << "  " << row[0] << "  " << (row.size() > 1 ? row[1] : "") << "\n";

  std::cout << "ONNX node tests: " << manifest.size() << " converted / " << matched << " matched / " << refused.size()
            << " refused at create (new dtype rules) / " << unsupported.size() << " unsupported (" << mismatch.size()
            << " lowered but differ in the NumPy reference); report: " << (dir / "report.txt").string() << "\n";
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(mismatch.empty());
  CHECK(matched >= 150);
}
