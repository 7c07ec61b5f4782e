// The MPI pipeline's tests, one program run under mpiexec by tests/dist/suite.cmake. Every rank
// checks what it must see and the program exits 0 only when each rank did (mpiexec then does).
//
//   check_pipeline identical STEM MICRO_BATCHES   outputs == one process's, bit for bit, and
//                                                 micro-batch 0 == PyTorch's (STEM.expected)
//   check_pipeline wrong-model STEM OTHER         rank 1 loads OTHER: every rank names rank 1
//   check_pipeline fail-at STEM RANK M            RANK's stage fails at micro-batch M of 100
//   check_pipeline bad-input STEM M               rank 0 is given a wrongly shaped micro-batch M
//   check_pipeline hang STEM RANK M               RANK hangs at micro-batch M past the timeout
//   check_pipeline die STEM RANK M                RANK exits at micro-batch M (no Status at all)
//   check_pipeline kill STEM RANK M               RANK raises SIGKILL at micro-batch M
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rml/dist/mpi.hpp"

namespace {

using Clock = std::chrono::steady_clock;
int g_rank = 0;
rml::dist::MpiSession* g_mpi = nullptr;

int fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  return 1;
}

/// Micro-batch m's inputs: the recorded inputs, varied per micro-batch so that each one's outputs
/// differ (floats scaled, token ids rotated), which makes lost or reordered micro-batches visible.
std::vector<std::vector<rml::Tensor>> make_batches(const std::vector<rml::Tensor>& base, std::size_t count) {
  std::vector<std::vector<rml::Tensor>> batches;
  for (std::size_t m = 0; m < count; ++m) {
    std::vector<rml::Tensor> batch;
    for (const rml::Tensor& t : base) {
      rml::Tensor x = t.clone();
      if (x.dtype() == rml::DType::f32) {
        auto* p = x.mutable_data<float>();
        for (std::int64_t i = 0; i < x.numel(); ++i) p[i] *= 1.0F + 0.01F * static_cast<float>(m);
      } else if (x.dtype() == rml::DType::i32) {
        auto* p = x.mutable_data<std::int32_t>();
        const auto n = static_cast<std::size_t>(x.numel());
        std::vector<std::int32_t> copy(p, p + n);
        for (std::size_t i = 0; i < n; ++i) p[i] = copy[(i + m) % n];
      }
      batch.push_back(std::move(x));
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

struct Reference {
  std::vector<rml::Tensor> inputs, outputs;
};

rml::Result<Reference> read_reference(const std::string& stem) {
  RML_ASSIGN_OR_RETURN(auto reader, rml::SafetensorsReader::open(stem + ".expected.safetensors"));
  Reference ref;
  for (std::size_t i = 0;; ++i) {
    auto t = reader.get("input." + std::to_string(i));
    if (!t.ok()) break;
    ref.inputs.push_back(t->clone());
  }
  for (std::size_t i = 0;; ++i) {
    auto t = reader.get("output." + std::to_string(i));
    if (!t.ok()) break;
    ref.outputs.push_back(t->clone());
  }
  return ref;
}

bool bitwise_equal(const rml::Tensor& a, const rml::Tensor& b) { return a.equal(b); }

/// |got - want| <= 1e-4 * max(1, max |want|): the zoo's tolerance against PyTorch.
bool close_to_torch(const rml::Tensor& got, const rml::Tensor& want) {
  if (got.type() != want.type() || want.dtype() != rml::DType::f32) return false;
  auto g = got.span<float>(), w = want.span<float>();
  double peak = 1;
  for (float x : w) peak = std::max(peak, static_cast<double>(std::fabs(x)));
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= 1e-4 * peak)) return false;
  return true;
}

rml::dist::PipelineOptions test_options() {
  rml::dist::PipelineOptions o;
  o.threads = 1;
  o.timeout = std::chrono::milliseconds(10000);
  return o;
}

int identical(const std::string& stem, std::size_t count) {
  auto ref = read_reference(stem);
  if (!ref.ok()) return fail(ref.status().to_string());
  const auto batches = make_batches(ref->inputs, count);
  rml::Result<rml::Graph> graph = rml::load_graph(stem);
  auto pipeline = rml::dist::Pipeline::create(MPI_COMM_WORLD, graph, test_options());
  if (!pipeline.ok()) return fail(pipeline.status().to_string());
  auto got = pipeline->run(batches);
  if (!got.ok()) return fail(got.status().to_string());
  std::printf("rank %d: stage %d of %d, %llu micro-batches, received %llu bytes\n", g_rank, pipeline->stage(),
              pipeline->stages(), static_cast<unsigned long long>(pipeline->stats().micro_batches),
              static_cast<unsigned long long>(pipeline->stats().bytes_received));
  if (g_rank != 0) return got->empty() ? 0 : fail("outputs on a rank other than the output rank");
  // The reference: the whole graph in this one process, the same kernels at one thread.
  auto whole = rml::Executor::create(*graph, {.threads = 1});
  if (!whole.ok()) return fail(whole.status().to_string());
  if (got->size() != count)
    return fail(std::to_string(got->size()) + " micro-batches came back, not " + std::to_string(count));
  for (std::size_t m = 0; m < count; ++m) {
    auto want = whole->run(batches[m]);
    if (!want.ok()) return fail(want.status().to_string());
    if ((*got)[m].size() != want->size()) return fail("micro-batch " + std::to_string(m) + ": wrong output count");
    for (std::size_t i = 0; i < want->size(); ++i)
      if (!bitwise_equal((*got)[m][i], (*want)[i]))
        return fail("micro-batch " + std::to_string(m) + ", output " + std::to_string(i) +
                    ": differs from the single-process run");
  }
  for (std::size_t i = 0; i < ref->outputs.size(); ++i)
    if (!close_to_torch((*got)[0][i], ref->outputs[i]))
      return fail("micro-batch 0, output " + std::to_string(i) + ": differs from PyTorch's");
  std::string cuts;
  for (std::uint64_t b : pipeline->plan().cut_bytes) cuts += " " + std::to_string(b);
  std::printf("rank 0: %zu micro-batches bitwise equal to one process, micro-batch 0 matches PyTorch; cut bytes:%s\n",
              count, cuts.c_str());
  return 0;
}

/// Every rank must fail with a status containing `expect`, within `bound`.
int expect_failure(const rml::Status& status, Clock::time_point start, const std::string& expect,
                   std::chrono::seconds bound) {
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("rank %d: after %.2f s: %s\n", g_rank, took, status.to_string().c_str());
  if (status.ok()) return fail("expected a failure naming '" + expect + "', got OK");
  if (status.message().find(expect) == std::string::npos)
    return fail("the status does not name '" + expect + "': " + status.to_string());
  if (took > static_cast<double>(bound.count())) return fail("took " + std::to_string(took) + " s");
  return 0;
}

int wrong_model(const std::string& stem, const std::string& other) {
  const auto start = Clock::now();
  auto pipeline =
      rml::dist::Pipeline::create(MPI_COMM_WORLD, rml::load_graph(g_rank == 1 ? other : stem), test_options());
  return expect_failure(pipeline.status(), start, "rank(s) 1 hold a different graph", std::chrono::seconds(10));
}

enum class Fault { stage_status, bad_input, hang, die, kill };

int fault_at(const std::string& stem, int bad_rank, std::uint64_t at, Fault kind) {
  auto ref = read_reference(stem);
  if (!ref.ok()) return fail(ref.status().to_string());
  auto batches = make_batches(ref->inputs, 100);
  rml::dist::PipelineOptions options = test_options();
  if (kind == Fault::hang || kind == Fault::die || kind == Fault::kill)
    options.timeout = std::chrono::milliseconds(1500);
  if (g_rank == bad_rank)
    options.fault = [kind, at](int, std::uint64_t m) -> rml::Status {
      if (m != at) return {};
      if (kind == Fault::hang) std::this_thread::sleep_for(std::chrono::seconds(4));
      if (kind == Fault::die) std::_Exit(3);
      if (kind == Fault::kill) std::raise(SIGKILL);
      if (kind == Fault::stage_status) return rml::invalid_argument("injected fault");
      return {};
    };
  if (kind == Fault::bad_input) batches[at][0] = rml::Tensor::zeros(rml::DType::f32, {1, 2, 3});
  auto pipeline = rml::dist::Pipeline::create(MPI_COMM_WORLD, rml::load_graph(stem), options);
  if (!pipeline.ok()) return fail(pipeline.status().to_string());
  const auto start = Clock::now();
  auto got = pipeline->run(batches);
  const std::string m = std::to_string(at);
  switch (kind) {
    case Fault::stage_status:
      return expect_failure(got.status(), start,
                            "rank " + std::to_string(bad_rank) + " (stage " + std::to_string(bad_rank) +
                                "), micro-batch " + m + ": injected fault",
                            std::chrono::seconds(20));
    case Fault::bad_input:
      return expect_failure(got.status(), start, "rank 0 (stage 0), micro-batch " + m + ": input 0 must be",
                            std::chrono::seconds(20));
    case Fault::hang:
      // The ranks that wait on the hung one time out and say so; it hears of that once it wakes.
      return expect_failure(got.status(), start, "waited 1500 ms", std::chrono::seconds(20));
    case Fault::die:
    case Fault::kill:
      // Only when mpiexec lets the others run on (--mca orte_abort_on_non_zero_status 0); by default
      // it ends the whole job as soon as a rank exits early.
      // Whichever rank times out first (waiting to receive from the lost rank, or for it to take
      // a send) reports it to the others.
      if (expect_failure(got.status(), start, "waited 1500 ms", std::chrono::seconds(20)) != 0) return 1;
      if (got.status().message().find("rank " + std::to_string(bad_rank) + ": the peer died") == std::string::npos)
        return fail("the status does not name rank " + std::to_string(bad_rank));
      // MPI_Finalize would wait for the lost rank forever (Open MPI 4.1 has no fault tolerance).
      g_mpi->abandon();
      std::printf("rank %d: survived the loss of rank %d\n", g_rank, bad_rank);
      std::fflush(stdout);
      return 0;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rml::dist::MpiSession mpi(&argc, &argv);
  if (!mpi.status().ok()) return fail(mpi.status().to_string());
  g_mpi = &mpi;
  g_rank = rml::dist::MpiSession::world_rank();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) return fail("usage: check_pipeline MODE STEM ...");
  const std::string& mode = args[0];
  const std::string& stem = args[1];
  const auto arg = [&](std::size_t i) { return i < args.size() ? std::stoull(args[i]) : 0ULL; };
  if (mode == "identical") return identical(stem, arg(2));
  if (mode == "wrong-model" && args.size() > 2) return wrong_model(stem, args[2]);
  if (mode == "fail-at") return fault_at(stem, static_cast<int>(arg(2)), arg(3), Fault::stage_status);
  if (mode == "bad-input") return fault_at(stem, -1, arg(2), Fault::bad_input);
  if (mode == "hang") return fault_at(stem, static_cast<int>(arg(2)), arg(3), Fault::hang);
  if (mode == "die") return fault_at(stem, static_cast<int>(arg(2)), arg(3), Fault::die);
  if (mode == "kill") return fault_at(stem, static_cast<int>(arg(2)), arg(3), Fault::kill);
  return fail("unknown mode '" + mode + "'");
}
