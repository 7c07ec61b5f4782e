// InferenceSession (feeds and outputs by name, against the MLP's PyTorch reference) and the shared
// thread pool (one set of workers per process and device, limits, clamping, start failures).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "rml/edit/edit.hpp"
#include "rml/exec/edit_hooks.hpp"
#include "rml/exec/session.hpp"
#include "rml/io/safetensors.hpp"

using namespace rml;
namespace fs = std::filesystem;

namespace {

const fs::path kMlp = fs::path(RML_TEST_DATA_DIR) / "torch_mlp";

Tensor reference(const char* name) {
  auto reader = SafetensorsReader::open(fs::path(RML_TEST_DATA_DIR) / "torch_mlp.expected.safetensors").value();
  return reader.get(name).value();
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.type() == want.type());
  const auto g = got.span<float>(), w = want.span<float>();
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(std::abs(g[i] - w[i]) <= 1e-5f * (1 + std::abs(w[i])));
}

std::string error_of(const Result<NamedTensors>& r) { return r.ok() ? "OK" : r.error().to_string(); }

/// Threads of this process, from /proc (0 where there is no /proc).
std::ptrdiff_t process_threads() {
  std::error_code ec;
  fs::directory_iterator it("/proc/self/task", ec);
  if (ec) return 0;
  return std::distance(it, fs::directory_iterator());
}

/// y = relu(x) + 1, then, for each of `devices`, one more `relu` on that device: consecutive nodes on
/// different devices make separate stages.
Graph chain_on(const std::vector<Device>& devices) {
  GraphDef g;
  const TensorType type{DType::f32, Shape{256, 64}};
  g.values.push_back({"x", type});
  g.inputs = {0};
  for (const Device& d : devices) {
    g.values.push_back({"", type});
    NodeDef node;
    node.op = "relu";
    node.inputs = {static_cast<ValueId>(g.values.size() - 2)};
    node.outputs = {static_cast<ValueId>(g.values.size() - 1)};
    node.device = d;
    g.nodes.push_back(node);
  }
  g.values.back().name = "y";
  g.outputs = {static_cast<ValueId>(g.values.size() - 1)};
  return Graph(std::move(g));
}

}  // namespace

TEST_CASE("a session loads a stem, a .json file or a .msgpack file and matches PyTorch's output") {
  const Tensor x = reference("x"), y = reference("y");
  const fs::path packed = fs::path(RML_TEST_BUILD_DIR) / "session_mlp.msgpack";
  REQUIRE(serialize_to_file(load_graph(kMlp).value(), packed).ok());
  for (const fs::path& model : {kMlp, fs::path(kMlp.string() + ".json"), packed}) {
    CAPTURE(model.string());
    auto session = InferenceSession::create(model, {.threads = 2});
    REQUIRE_MESSAGE(session.ok(), session.error().to_string());
    REQUIRE(session->inputs().size() == 1);
    CHECK(session->inputs()[0].name == "x");
    CHECK(session->inputs()[0].type == x.type());
    REQUIRE(session->outputs().size() == 1);
    CHECK(session->outputs()[0].name == "y");
    CHECK(session->outputs()[0].type == y.type());
    auto out = session->run({{"x", x}});
    REQUIRE_MESSAGE(out.ok(), out.error().to_string());
    REQUIRE(out->size() == 1);
    check_close(out->at("y"), y);
    auto chosen = session->run({{"x", x}}, {"y"});
    REQUIRE(chosen.ok());
    check_close(chosen->at("y"), y);
  }
  CHECK(InferenceSession::create(fs::path(RML_TEST_DATA_DIR) / "no_such_model").error().code() == Code::not_found);
}

TEST_CASE("a session refuses bad feeds and output names, naming the input or output") {
  const auto session = InferenceSession::create(kMlp, {.threads = 1}).value();
  const Tensor x = reference("x");
  CHECK(error_of(session.run({})) == "INVALID_ARGUMENT: run: input 'x' (f32 [2, 12]) is not fed");
  CHECK(error_of(session.run({{"x", x}, {"z", x}})) ==
        "INVALID_ARGUMENT: run: the graph has no input 'z' (its inputs: x)");
  CHECK(error_of(session.run({{"x", Tensor::zeros(DType::i32, {2, 12})}})) ==
        "INVALID_ARGUMENT: run: input 'x' must be f32 [2, 12], got i32 [2, 12]");
  CHECK(error_of(session.run({{"x", Tensor::zeros({DType::f32, Shape{3, 12}})}})) ==
        "INVALID_ARGUMENT: run: input 'x' must be f32 [2, 12], got f32 [3, 12]");
  CHECK(error_of(session.run({{"x", Tensor()}})) ==
        "INVALID_ARGUMENT: run: input 'x' must be f32 [2, 12], got a tensor without data");
  CHECK(error_of(session.run({{"x", x}}, {"logits"})) ==
        "INVALID_ARGUMENT: run: the graph has no output 'logits' (its outputs: y)");
}

TEST_CASE("a session's run_into writes the caller's tensors in place") {
  const auto session = InferenceSession::create(kMlp, {.threads = 2}).value();
  const Tensor x = reference("x"), y = reference("y");
  Tensor out = Tensor::zeros(y.type());
  const std::byte* where = out.raw_data();
  NamedTensors outputs{{"y", out}};
  REQUIRE(session.run_into({{"x", x}}, outputs).ok());
  CHECK(outputs.at("y").raw_data() == where);
  check_close(out, y);
  NamedTensors none;  // every output left out: computed and dropped
  CHECK(session.run_into({{"x", x}}, none).ok());
  NamedTensors wrong{{"y", Tensor::zeros({DType::f32, Shape{2, 5}})}};
  CHECK(session.run_into({{"x", x}}, wrong).to_string() ==
        "INVALID_ARGUMENT: run_into: output 0 (\"y\") must be a writable f32 [2, 4] tensor, got f32 [2, 5]");
  NamedTensors unknown{{"w", out}};
  CHECK(session.run_into({{"x", x}}, unknown).to_string() ==
        "INVALID_ARGUMENT: run: the graph has no output 'w' (its outputs: y)");
}

TEST_CASE("thread pool: executors of one process share one pool per device") {
  std::thread([] {}).join();  // a runtime that starts a helper thread with the first thread (TSan) has now
  const std::ptrdiff_t before = process_threads();
  if (before == 0) return;  // no /proc to count with
  // Device cpu:5 is used by no other test of this executable, so its pool starts here.
  const Graph graph = chain_on({Device::cpu(5)});
  auto a = Executor::create(graph, {.threads = 2});
  auto b = Executor::create(graph, {.threads = 2});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->threads() == 2);
  CHECK(b->threads() == 2);
  CHECK(process_threads() - before == 1);  // one worker between them, not one each

  // Four stages alternating between cpu:6 and cpu:7: one pool per device, not one per stage.
  Graph alternating = chain_on({Device::cpu(6), Device::cpu(7), Device::cpu(6), Device::cpu(7)});
  const std::ptrdiff_t before_stages = process_threads();
  REQUIRE(alternating.finalize().ok());
  const auto per_pool = ThreadPool::clamp_threads(0) - 1;
  CHECK(process_threads() - before_stages == 2 * per_pool);
  std::vector<float> x(256 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  auto y = alternating.run({Tensor::from_vector(x, {256, 64})});
  REQUIRE_MESSAGE(y.ok(), y.error().to_string());
  const auto got = (*y)[0].span<float>();
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(got[i] == std::max(x[i], 0.0f));
}

TEST_CASE("thread pool: a limited handle runs at most its threads at once") {
  auto pool = ThreadPool::create(4);
  REQUIRE(pool.ok());
  CHECK((*pool)->threads() == 4);
  const auto two = (*pool)->limited(2);
  CHECK(two->threads() == 2);
  CHECK((*pool)->limited(9)->threads() == 4);  // never more than the pool's own
  std::atomic<int> active{0}, most{0};
  std::atomic<std::int64_t> sum{0};
  two->parallel_for(64, [&](std::int64_t i) {
    const int now = active.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    sum.fetch_add(i);
    active.fetch_sub(1);
  });
  CHECK(sum.load() == 64 * 63 / 2);
  CHECK(most.load() <= 2);
  // An executor given the pool uses at most its own count, and at most the pool's.
  const Graph graph = chain_on({Device::cpu()});
  CHECK(Executor::create(graph, {.threads = 3, .pool = *pool}).value().threads() == 3);
  CHECK(Executor::create(graph, {.threads = 16, .pool = *pool}).value().threads() == 4);
  CHECK(Executor::create(graph, {.threads = 0, .pool = *pool}).value().threads() == 4);
}

TEST_CASE("thread pool: thread counts are clamped and a thread that cannot start is a Status") {
  CHECK(ThreadPool::max_threads() <= 1024);
  CHECK(ThreadPool::max_threads() >= 4);
  CHECK(ThreadPool::clamp_threads(1 << 30) == ThreadPool::max_threads());
  CHECK(ThreadPool::clamp_threads(-3) == ThreadPool::clamp_threads(0));
  detail::fail_next_thread_start_for_testing.store(true);
  auto pool = ThreadPool::create(3);
  REQUIRE_FALSE(pool.ok());
  CHECK(pool.error().code() == Code::internal);
  CHECK(pool.error().message().find("thread pool: cannot start worker 1 of 2") != std::string::npos);
  detail::fail_next_thread_start_for_testing.store(true);
  auto exec = Executor::create(chain_on({Device::cpu(8)}), {.threads = 2});
  REQUIRE_FALSE(exec.ok());
  CHECK(exec.error().code() == Code::internal);
  // The next attempt starts the worker.
  CHECK(Executor::create(chain_on({Device::cpu(8)}), {.threads = 2}).value().threads() == 2);
}

TEST_CASE("thread pool: a two-part split follows the share, and the share follows the parts' times") {
  // part_begin: even parts at 0.5 (as total * part / parts), the second of two moved by the share.
  CHECK(detail::part_share == 0.5f);
  for (std::int64_t total : {0, 1, 7, 10, 196})
    for (std::int64_t parts : {1, 2, 3})
      for (std::int64_t part = 0; part <= parts; ++part)
        CHECK(detail::part_begin(total, part, parts) == total * part / parts);
  {
    detail::part_share = 0.7f;
    CHECK(detail::part_begin(10, 1, 2) == 7);
    CHECK(detail::part_begin(196, 1, 2) == 137);  // 98 + round(39.2)
    CHECK(detail::part_begin(10, 2, 2) == 10);
    CHECK(detail::part_begin(9, 1, 3) == 3);  // three parts stay even
    detail::part_share = 0.3f;
    CHECK(detail::part_begin(10, 1, 2) == 3);
    CHECK(detail::part_begin(2, 1, 2) == 1);  // 1 + round(-0.4)
    CHECK(detail::part_begin(3, 1, 2) == 1);  // 1 + round(-0.6), but each part keeps one item
    CHECK(detail::part_begin(1, 1, 2) == 0);
    detail::part_share = 0.5f;
  }
  // rebalanced_share: at 0.5, parts ending after 300 and 200 us run at 1/600 and 1/400 of the work
  // per us, so 0.4 would have them end together; the share moves a third of the way there.
  CHECK(detail::rebalanced_share(0.5f, 300'000, 200'000) == doctest::Approx(0.5 - 0.1 / 3));
  CHECK(detail::rebalanced_share(0.5f, 200'000, 300'000) == doctest::Approx(0.5 + 0.1 / 3));
  CHECK(detail::rebalanced_share(0.4f, 200'000, 300'000) == doctest::Approx(0.4 + (0.5 - 0.4) / 3));
  CHECK(detail::rebalanced_share(0.5f, 19'000, 300'000) == 0.5f);  // too short to tell
  CHECK(detail::rebalanced_share(0.31f, 1'000'000, 100'000) == detail::kMinShare);
  CHECK(detail::rebalanced_share(0.69f, 100'000, 1'000'000) == detail::kMaxShare);

  // On a pool, the worker splits at the share of the thread that posted the job: each index once.
  auto pool = ThreadPool::create(2).value();
  for (float share : {0.3f, 0.5f, 0.7f}) {
    INFO("share ", share);
    detail::part_share = share;
    std::vector<std::atomic<int>> seen(100);
    std::atomic<std::int64_t> second_begin{-1};
    detail::parallel_ranges(pool.get(), 100, 1, [&](std::int64_t b, std::int64_t e) {
      if (b > 0) second_begin.store(b);
      // The caller's part waits, so that the worker takes the second (were the caller to run both,
      // both would split at its own share).
      if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (std::int64_t i = b; i < e; ++i) seen[static_cast<std::size_t>(i)].fetch_add(1);
    });
    CHECK(second_begin.load() == static_cast<std::int64_t>(std::lround(100 * share)));
    CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
  }
  detail::part_share = 0.5f;
  // The parts' times reach the poster when a worker ran part 1.
  detail::part_times = {};
  for (int i = 0; i < 50 && detail::part_times.worker_ns == 0; ++i)
    pool->parallel_for(2, [](std::int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
  CHECK(detail::part_times.worker_ns >= 100'000);
  CHECK(detail::part_times.caller_ns >= 100'000);
}
