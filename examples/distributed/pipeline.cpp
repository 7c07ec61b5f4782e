// A model run as a k-stage pipeline across MPI processes, a stream of micro-batches through it.
//
//   mpirun -np 3 ./pipeline MODEL [--micro-batches N] [--threads T] [--timeout-ms MS]
//
// Every rank loads MODEL; rank s runs stage s. Rank 0 makes N micro-batches (deterministic inputs
// of the graph's input types), streams them through, checks every output against the whole graph
// run in this one process, and prints the plan, a checksum and the throughput of both.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rml/dist/mpi.hpp"

namespace {

/// Micro-batch m: floats sin(0.37 i + m) / 2, integers i + m modulo 8 (small enough to index any table).
std::vector<rml::Tensor> make_batch(const rml::Graph& graph, std::size_t m) {
  std::vector<rml::Tensor> batch;
  for (const std::string& name : graph.input_names()) {
    const rml::TensorType type = graph.value(name).value().type();
    rml::Tensor t = rml::Tensor::zeros(type);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const auto k = static_cast<double>(i);
      if (type.dtype == rml::DType::f32)
        t.mutable_data<float>()[i] = static_cast<float>(std::sin(0.37 * k + static_cast<double>(m)) / 2);
      else if (type.dtype == rml::DType::i32)
        t.mutable_data<std::int32_t>()[i] = static_cast<std::int32_t>((static_cast<std::size_t>(i) + m) % 8);
    }
    batch.push_back(std::move(t));
  }
  return batch;
}

double checksum(const std::vector<std::vector<rml::Tensor>>& outputs) {
  double sum = 0;
  for (const auto& batch : outputs)
    for (const rml::Tensor& t : batch)
      if (t.dtype() == rml::DType::f32)
        for (float x : t.span<float>()) sum += x;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  rml::dist::MpiSession mpi(&argc, &argv);
  if (!mpi.status().ok()) {
    std::fprintf(stderr, "%s\n", mpi.status().to_string().c_str());
    return 1;
  }
  const int rank = rml::dist::MpiSession::world_rank();
  if (argc < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: mpirun -np K %s MODEL [--micro-batches N] [--threads T]\n", argv[0]);
    return 2;
  }
  const std::string model = argv[1];
  std::size_t count = 32;
  rml::dist::PipelineOptions options;
  options.threads = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--micro-batches") count = static_cast<std::size_t>(std::max(1L, value));
    if (flag == "--threads") options.threads = static_cast<int>(std::max(1L, value));
    if (flag == "--timeout-ms") options.timeout = std::chrono::milliseconds(std::max(1L, value));
  }

  // Inputs exist on rank 0 only; the other ranks pass an empty stream.
  std::vector<std::vector<rml::Tensor>> batches;
  rml::Result<rml::Graph> graph = rml::load_graph(model);
  if (rank == 0 && graph.ok())
    for (std::size_t m = 0; m < count; ++m) batches.push_back(make_batch(*graph, m));

  const auto t0 = std::chrono::steady_clock::now();
  auto report = rml::dist::run_pipeline(MPI_COMM_WORLD, model, batches, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!report.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, report.status().to_string().c_str());
    return 1;
  }
  if (rank != 0) return 0;

  const rml::StagePlan& plan = report->plan;
  std::printf("%s: %d stages over %zu operators\n", model.c_str(), report->stages, plan.bounds.back());
  for (std::size_t s = 0; s < plan.stage_cost.size(); ++s) {
    std::printf("  stage %zu: operators [%zu, %zu), %.3g estimated FLOPs", s, plan.bounds[s], plan.bounds[s + 1],
                plan.stage_cost[s]);
    if (s + 1 < plan.stage_cost.size())
      std::printf(", then %llu bytes in %zu values cross", static_cast<unsigned long long>(plan.cut_bytes[s]),
                  plan.carried[s + 1].size());
    std::printf("\n");
  }

  // The same micro-batches through the whole graph in this process, for the check and the baseline.
  auto whole = rml::Executor::create(*graph, {.threads = options.threads}).value();
  std::vector<std::vector<rml::Tensor>> expected;
  const auto t1 = std::chrono::steady_clock::now();
  for (const auto& batch : batches) expected.push_back(whole.run(batch).value());
  const double alone = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  bool same = report->outputs.size() == expected.size();
  for (std::size_t m = 0; same && m < expected.size(); ++m)
    for (std::size_t i = 0; same && i < expected[m].size(); ++i) same = report->outputs[m][i].equal(expected[m][i]);
  std::printf("%zu micro-batches, checksum %.6g, bitwise equal to one process: %s\n", report->outputs.size(),
              checksum(report->outputs), same ? "yes" : "NO");
  std::printf("pipeline %.1f micro-batches/s (load and split included), one process %.1f micro-batches/s\n",
              static_cast<double>(count) / seconds, static_cast<double>(count) / alone);
  return same ? 0 : 1;
}
