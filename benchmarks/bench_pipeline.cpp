// Throughput of a model as a k-stage MPI pipeline against one process, and the bytes that cross
// each cut against the plan's computed cut size. Not a Google Benchmark: it needs mpirun.
//
//   mpirun -np K bench_pipeline MODEL [--micro-batches N] [--threads T]
//   bench_pipeline MODEL --model-only [--bandwidth-gbs B]   (the cost model for k = 2, 4, 8, 16)
//
// The one-process baseline runs on rank 0 while the other ranks sleep in a polled barrier (an
// MPI_Barrier would spin and take the cores it is measured on).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rml/dist/mpi.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<rml::Tensor> make_batch(const rml::Graph& graph, std::size_t m) {
  std::vector<rml::Tensor> batch;
  for (const std::string& name : graph.input_names()) {
    rml::Tensor t = rml::Tensor::zeros(graph.value(name).value().type());
    if (t.dtype() == rml::DType::f32)
      for (std::int64_t i = 0; i < t.numel(); ++i)
        t.mutable_data<float>()[i] =
            static_cast<float>(std::sin(0.37 * static_cast<double>(i) + static_cast<double>(m)));
    batch.push_back(std::move(t));
  }
  return batch;
}

void polled_barrier() {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  for (int done = 0; !done;) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// The cost model of docs/distributed.md: stage s takes t_s = T1 * F_s / F (T1 the one-process
/// time of a micro-batch, F_s its estimated FLOPs); its cut of b_s bytes takes b_s / B on a link of
/// bandwidth B. With transfers overlapping compute, a pipeline of k stages finishes one micro-batch
/// every max_s max(t_s, b_s / B); without overlap every max_s (t_s + b_s / B).
int model_only(const std::string& stem, double one_process_ms, double bandwidth_gbs) {
  auto graph = rml::load_graph(stem);
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().to_string().c_str()), 1;
  double total = 0;
  for (const rml::NodeDef& n : graph->def().nodes) total += rml::estimate_flops(graph->def(), n);
  std::printf("%s: %zu operators, %.3g FLOPs; one process %.2f ms per micro-batch; link %.2f GB/s\n", stem.c_str(),
              graph->def().nodes.size(), total, one_process_ms, bandwidth_gbs);
  std::printf("%4s %12s %12s %14s %14s %10s\n", "k", "max stage", "max cut", "mb/s overlap", "mb/s serial", "speed-up");
  for (std::size_t k : {1, 2, 4, 8, 16}) {
    auto plan = rml::plan_stages(*graph, {.stages = k, .op_cost = {}});
    if (!plan.ok()) continue;
    double overlap = 0, serial = 0;
    std::uint64_t widest = 0;
    for (std::size_t s = 0; s < k; ++s) {
      const double t = one_process_ms * 1e-3 * plan->stage_cost[s] / total;
      const double in = s == 0 ? 0.0 : static_cast<double>(plan->cut_bytes[s - 1]) / (bandwidth_gbs * 1e9);
      if (s > 0) widest = std::max(widest, plan->cut_bytes[s - 1]);
      overlap = std::max(overlap, std::max(t, in));
      serial = std::max(serial, t + in);
    }
    std::printf("%4zu %11.1f%% %9.1f KiB %14.1f %14.1f %9.2fx\n", k, 100 * plan->max_stage_cost / total,
                static_cast<double>(widest) / 1024, 1 / overlap, 1 / serial, one_process_ms * 1e-3 / overlap);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: mpirun -np K %s MODEL [--micro-batches N]\n", argv[0]), 2;
  const std::string stem = argv[1];
  std::size_t count = 64;
  int threads = 1;
  double one_ms = 0, bandwidth = 1.25;
  bool only_model = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    const double value = i + 1 < argc ? std::atof(argv[i + 1]) : 0;
    if (flag == "--model-only") only_model = true;
    if (flag == "--micro-batches") count = static_cast<std::size_t>(std::max(1.0, value)), ++i;
    if (flag == "--threads") threads = static_cast<int>(std::max(1.0, value)), ++i;
    if (flag == "--one-process-ms") one_ms = value, ++i;
    if (flag == "--bandwidth-gbs") bandwidth = value, ++i;
  }
  if (only_model) return model_only(stem, one_ms, bandwidth);

  rml::dist::MpiSession mpi(&argc, &argv);
  const int rank = rml::dist::MpiSession::world_rank(), size = rml::dist::MpiSession::world_size();
  auto graph = rml::load_graph(stem);
  std::vector<std::vector<rml::Tensor>> batches;
  if (rank == 0 && graph.ok())
    for (std::size_t m = 0; m < count; ++m) batches.push_back(make_batch(*graph, m));
  rml::dist::PipelineOptions options;
  options.threads = threads;
  auto pipeline = rml::dist::Pipeline::create(MPI_COMM_WORLD, graph, options);
  if (!pipeline.ok()) return std::fprintf(stderr, "rank %d: %s\n", rank, pipeline.status().to_string().c_str()), 1;
  const std::vector<std::vector<rml::Tensor>> warm(batches.begin(),
                                                   batches.begin() + std::min<std::size_t>(4, batches.size()));
  if (auto w = pipeline->run(warm); !w.ok()) return std::fprintf(stderr, "%s\n", w.status().to_string().c_str()), 1;
  polled_barrier();
  const auto t0 = Clock::now();
  auto out = pipeline->run(batches);
  const double piped = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!out.ok()) return std::fprintf(stderr, "rank %d: %s\n", rank, out.status().to_string().c_str()), 1;

  // Per rank: compute seconds and bytes received per micro-batch, gathered on rank 0.
  const rml::dist::PipelineStats& st = pipeline->stats();
  double mine[2] = {st.compute_seconds,
                    st.micro_batches ? static_cast<double>(st.bytes_received) / static_cast<double>(count) : 0};
  std::vector<double> all(2 * static_cast<std::size_t>(size));
  MPI_Gather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  double alone = 0;
  if (rank == 0) {
    auto whole = rml::Executor::create(*graph, {.threads = threads}).value();
    for (std::size_t m = 0; m < std::min<std::size_t>(4, count); ++m) (void)whole.run(batches[m]).value();
    const auto t1 = Clock::now();
    for (const auto& b : batches) (void)whole.run(b).value();
    alone = std::chrono::duration<double>(Clock::now() - t1).count();
  }
  polled_barrier();
  if (rank != 0) return 0;
  const rml::StagePlan& plan = pipeline->plan();
  std::printf("%s, %d ranks, %zu micro-batches, %d thread(s) per rank\n", stem.c_str(), size, count, threads);
  std::printf("one process: %.2f ms per micro-batch (%.1f/s); pipeline: %.2f ms (%.1f/s), %.2fx\n",
              1e3 * alone / static_cast<double>(count), static_cast<double>(count) / alone,
              1e3 * piped / static_cast<double>(count), static_cast<double>(count) / piped, alone / piped);
  for (int s = 0; s < pipeline->stages(); ++s) {
    const auto us = static_cast<std::size_t>(s);
    std::printf("  stage %d: %.1f%% of the FLOPs, compute %.2f ms per micro-batch", s,
                100 * plan.stage_cost[us] /
                    std::max(1.0,
                             [&] {
                               double t = 0;
                               for (double c : plan.stage_cost) t += c;
                               return t;
                             }()),
                1e3 * all[2 * us] / static_cast<double>(count));
    if (s > 0)
      std::printf(
          "; received %.0f bytes per micro-batch for a cut of %llu bytes (message %zu with header and alignment)",
          all[2 * us + 1], static_cast<unsigned long long>(plan.cut_bytes[us - 1]), pipeline->message_bytes(s));
    std::printf("\n");
  }
  return 0;
}
