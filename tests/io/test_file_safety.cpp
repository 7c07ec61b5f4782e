// Files that cannot lose data: save_graph's pair binding and its crash-safe protocol (a writer
// killed at random points, saves racing loads), exclusive temporaries, failed saves, paths that
// name no file, readers facing FIFOs and devices, weights cut short under a mapping, and numbers
// written the same in every locale.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <locale>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rml/core/equal.hpp>
#include <rml/exec/executor.hpp>
#include <rml/io/graph_io.hpp>
#include <rml/serial/serialize.hpp>

#include "support/temp_dir.hpp"

using namespace rml;
using rml::testing::read_text;
using rml::testing::TempDir;
using rml::testing::write_text;
namespace fs = std::filesystem;

namespace {

// y = x + w over f32 [n], with w = (seed, seed + 1, ...) / 8 stored in the weights file. Models
// with different n and seeds differ in both files.
GraphDef model(std::int64_t n, float seed) {
  GraphDef g;
  g.name = "m" + std::to_string(n);
  g.values = {{"x", {DType::f32, {n}}}, {"w", {DType::f32, {n}}}, {"y", {DType::f32, {n}}}};
  g.inputs = {0};
  g.outputs = {2};
  std::vector<float> w(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = (seed + static_cast<float>(i)) / 8.0F;
  g.constants.push_back({1, "w", Tensor::from_vector(w, {n}), false});
  NodeDef add;
  add.op = "add";
  add.inputs = {0, 1};
  add.outputs = {2};
  g.nodes.push_back(add);
  return g;
}

// Which of `candidates` the model at `stem` is (its index), or -1 when it loads as none of them;
// `why` holds the load error.
int which_model(const fs::path& stem, const std::vector<GraphDef>& candidates, std::string& why) {
  auto g = load_graph(stem);
  if (!g.ok()) {
    why = g.status().to_string();
    return -1;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (structural_equal(g->def(), candidates[i])) return static_cast<int>(i);
  why = "loaded a graph that is none of the saved ones: " + to_debug_string(g->def()).substr(0, 200);
  return -1;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a JSON with the weights of another save is DATA_LOSS naming both files; old files still load") {
  TempDir dir;
  const GraphDef a = model(3, 1);
  const GraphDef b = model(3, 100);  // same shapes: a mix would load and compute wrong numbers
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  fs::create_directories(dir / "mixed");
  REQUIRE(save_graph(Graph(a), dir / "a" / "m").ok());
  REQUIRE(save_graph(Graph(b), dir / "b" / "m").ok());
  fs::copy_file(dir / "a" / "m.json", dir / "mixed" / "m.json");
  fs::copy_file(dir / "b" / "m.safetensors", dir / "mixed" / "m.safetensors");
  const Status mixed = load_graph(dir / "mixed" / "m").status();
  CHECK(mixed.code() == Code::data_loss);
  CHECK_MESSAGE(contains(mixed.message(), (dir / "mixed" / "m.json").string() + ": " +
                                              (dir / "mixed" / "m.safetensors").string() + ": does not belong"),
                mixed.message());
  CHECK(contains(mixed.message(), "different saves"));

  // The weights file of the right save, cut short: its size no longer matches.
  const std::string weights = read_text(dir / "a" / "m.safetensors");
  write_text(dir / "mixed" / "m.safetensors", weights.substr(0, weights.size() - 4));
  CHECK(load_graph(dir / "mixed" / "m").status().code() == Code::data_loss);
  // ... and missing.
  fs::remove(dir / "mixed" / "m.safetensors");
  const Status missing = load_graph(dir / "mixed" / "m").status();
  CHECK(missing.code() == Code::data_loss);
  CHECK_MESSAGE(contains(missing.message(), "m.safetensors: missing, but the JSON records weights pair"),
                missing.message());

  // A document without a binding (an older rml, the exporters) loads with whatever weights sit beside it.
  std::string json = read_text(dir / "a" / "m.json");
  const std::size_t at = json.find("  \"weights\": ");
  REQUIRE(at != std::string::npos);
  json.erase(at, json.find('\n', at) + 1 - at);
  write_text(dir / "mixed" / "m.json", json);
  fs::copy_file(dir / "b" / "m.safetensors", dir / "mixed" / "m.safetensors");
  auto unbound = load_graph(dir / "mixed" / "m");
  REQUIRE_MESSAGE(unbound.ok(), unbound.status().to_string());
  CHECK(structural_equal(unbound->def(), b));
  CHECK(load_graph(fs::path(RML_TEST_DATA_DIR) / "torch_mlp").ok());

  // A malformed binding is refused by name.
  write_text(dir / "mixed" / "m.json", json.substr(0, json.find('{') + 1) +
                                           R"("weights": {"pair": "XYZ", "bytes": 1},)" +
                                           json.substr(json.find('{') + 1));
  const Status bad = load_graph(dir / "mixed" / "m").status();
  CHECK(bad.code() == Code::invalid_argument);
  CHECK_MESSAGE(contains(bad.message(), "weights.pair: must be 32 lowercase hex digits"), bad.message());
}

TEST_CASE("save_graph runs the gate: an invalid graph is refused and the previous files stay as they were") {
  TempDir dir;
  REQUIRE(save_graph(Graph(model(3, 1)), dir / "m").ok());
  const std::string json = read_text(dir / "m.json");
  const std::string weights = read_text(dir / "m.safetensors");
  const auto names = names_in(dir.path());
  struct Case {
    const char* name;
    GraphDef def;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({"a value read before it is defined", model(3, 1), "nodes[0].inputs[0]: value 0 (x) is read before"});
  cases.back().def.inputs.clear();
  cases.push_back({"a negative dimension", model(3, 1), "values[2].shape[0]: dimension -3 is negative"});
  cases.back().def.values[2].type.shape = Shape({-3});
  cases.push_back({"a node without outputs", model(3, 1), "nodes[0].outputs: a node must produce at least one value"});
  cases.back().def.nodes[0].outputs.clear();
  cases.push_back({"a value defined twice", model(3, 1), "nodes[0].outputs[0]: value 0 (x) is already defined"});
  cases.back().def.nodes[0].outputs = {0};
  cases.push_back({"a name with a control character", model(3, 1), "values[1].name: holds a control character"});
  cases.back().def.values[1].name = "w\n";
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const Status s = save_graph(Graph(c.def), dir / "m");
    CHECK(s.code() == Code::invalid_argument);
    CHECK_MESSAGE(s.message().rfind(std::string("save_graph: ") + c.message, 0) == 0, s.message());
    CHECK(read_text(dir / "m.json") == json);
    CHECK(read_text(dir / "m.safetensors") == weights);
    CHECK(names_in(dir.path()) == names);
  }
}

TEST_CASE("saving one graph twice writes identical files; different graphs get different pair ids") {
  TempDir dir;
  fs::create_directories(dir / "other");
  GraphDef g = model(5, 2);
  g.nodes[0].attrs = {{"alpha", 0.5}, {"axes", std::vector<std::int64_t>{0, 1}}};
  g.metadata = {{"source", "test"}};
  REQUIRE(save_graph(Graph(g), dir / "m").ok());
  const std::string json = read_text(dir / "m.json");
  const std::string weights = read_text(dir / "m.safetensors");
  REQUIRE(save_graph(Graph(g), dir / "m").ok());
  CHECK(read_text(dir / "m.json") == json);
  CHECK(read_text(dir / "m.safetensors") == weights);
  // Another stem, another directory, a graph loaded back from the files: the same bytes.
  REQUIRE(save_graph(Graph(g), dir / "other" / "n").ok());
  CHECK(read_text(dir / "other" / "n.json") == json);
  CHECK(read_text(dir / "other" / "n.safetensors") == weights);
  const Graph loaded = load_graph(dir / "m").value();
  REQUIRE(save_graph(loaded, dir / "other" / "again").ok());
  CHECK(read_text(dir / "other" / "again.json") == json);
  CHECK(read_text(dir / "other" / "again.safetensors") == weights);

  // The id changes with any weight byte, and with the JSON alone.
  const auto pair_of = [&](const GraphDef& def) {
    REQUIRE(save_graph(Graph(def), dir / "p").ok());
    return SafetensorsReader::open(dir / "p.safetensors").value().metadata().at("rml.pair");
  };
  const std::string base = pair_of(g);
  CHECK(base == SafetensorsReader::open(dir / "m.safetensors").value().metadata().at("rml.pair"));
  CHECK(contains(json, "\"pair\": \"" + base + "\""));
  GraphDef one_bit = g;
  std::vector<float> w = g.constants[0].data.to_vector<float>();
  std::uint32_t bits = 0;
  std::memcpy(&bits, &w[4], 4);
  bits ^= 1U;
  std::memcpy(&w[4], &bits, 4);
  one_bit.constants[0].data = Tensor::from_vector(w, {5});
  GraphDef renamed = g;
  renamed.nodes[0].name = "add";
  GraphDef attr = g;
  attr.nodes[0].attrs["alpha"] = 0.25;
  std::vector<std::string> pairs = {base, pair_of(one_bit), pair_of(renamed), pair_of(attr), pair_of(model(5, 3))};
  for (const auto& p : pairs) CHECK(detail::is_pair_id(p));
  std::sort(pairs.begin(), pairs.end());
  CHECK(std::unique(pairs.begin(), pairs.end()) == pairs.end());
}

TEST_CASE("the content hash: independent of how the stream is cut, every bit reaches both lanes") {
  std::string message(100, '\0');
  for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 37 + 11);
  const auto hash = [](std::string_view text, std::size_t piece) {
    detail::ContentHash h;
    for (std::size_t at = 0; at < text.size(); at += piece)
      h.update(text.data() + at, std::min(piece, text.size() - at));
    return h.hex();
  };
  const std::string whole = hash(message, message.size());
  CHECK(whole.size() == 32);
  for (std::size_t piece : {1U, 3U, 7U, 8U, 9U, 64U}) CHECK(hash(message, piece) == whole);
  // Trailing zeros are not padding: the length is hashed.
  CHECK(hash(std::string(""), 1) != hash(std::string(1, '\0'), 1));
  CHECK(hash(std::string(7, '\0'), 7) != hash(std::string(8, '\0'), 8));
  // Each of the 800 one-bit changes changes both 64-bit halves.
  for (std::size_t bit = 0; bit < 8 * message.size(); ++bit) {
    std::string flipped = message;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    const std::string h = hash(flipped, flipped.size());
    CHECK(h.substr(0, 16) != whole.substr(0, 16));
    CHECK(h.substr(16) != whole.substr(16));
  }
}

TEST_CASE("a save removes the staged weights its stem's committed JSON does not name, and nothing else") {
  TempDir dir;
  fs::create_directories(dir / "b");
  const GraphDef a = model(3, 1);
  const GraphDef b = model(4, 9);
  REQUIRE(save_graph(Graph(a), dir / "m").ok());
  // A save of b killed between its commit and its last rename: b's JSON, and its weights under the
  // staged name only (the old weights file still in place).
  REQUIRE(save_graph(Graph(b), dir / "b" / "m").ok());
  const std::string b_pair = SafetensorsReader::open(dir / "b" / "m.safetensors").value().metadata().at("rml.pair");
  fs::copy_file(dir / "b" / "m.safetensors", dir / ("m.safetensors." + b_pair));
  fs::copy_file(dir / "b" / "m.json", dir / "m.json", fs::copy_options::overwrite_existing);
  std::string why;
  REQUIRE_MESSAGE(which_model(dir / "m", {a, b}, why) == 1, why);  // it loads through the staged file

  // Orphans: saves killed after naming their weights, before their commit.
  const std::string orphan1 = "m.safetensors." + std::string(32, 'a');
  const std::string orphan2 = "m.safetensors.0123456789abcdef0123456789abcdef";
  write_text(dir / orphan1, "orphan");
  write_text(dir / orphan2, "orphan");
  // Not staged weights of this stem: left alone.
  write_text(dir / "victim", "keep me");
  const std::vector<std::string> others = {
      "m.safetensors." + std::string(31, 'a'),           // too short
      "m.safetensors." + std::string(33, 'a'),           // too long
      "m.safetensors." + std::string(32, 'A'),           // not lowercase hex
      "m.safetensors." + std::string(32, 'a') + ".tmp",  // a temporary (a save may be writing it)
      "n.safetensors." + std::string(32, 'a'),           // another stem
      "xm.safetensors." + std::string(32, 'a'),          // another stem ending like this one
      "m.json." + std::string(32, 'a'),                  // not weights
  };
  for (const auto& name : others) write_text(dir / name, "other");
  const std::string link = "m.safetensors." + std::string(32, 'b');
  fs::create_symlink(dir / "victim", dir / link);
  const std::string directory = "m.safetensors." + std::string(32, 'c');
  fs::create_directory(dir / directory);

  REQUIRE(save_graph(Graph(a), dir / "m").ok());
  CHECK(which_model(dir / "m", {a, b}, why) == 0);
  CHECK(!fs::exists(dir / ("m.safetensors." + b_pair)));
  CHECK(!fs::exists(dir / orphan1));
  CHECK(!fs::exists(dir / orphan2));
  for (const auto& name : others) CHECK_MESSAGE(read_text(dir / name) == "other", name);
  CHECK(fs::is_symlink(dir / link));
  CHECK(read_text(dir / "victim") == "keep me");
  CHECK(fs::is_directory(dir / directory));
  // A stem inside a directory named like staged weights is still only a stem.
  REQUIRE(save_graph(Graph(a), dir / directory / "m").ok());
  CHECK(fs::is_directory(dir / directory));
}

TEST_CASE("a symlink planted at the predictable staged name is replaced, never followed") {
  TempDir dir;
  fs::create_directories(dir / "probe");
  const GraphDef g = model(3, 1);
  REQUIRE(save_graph(Graph(g), dir / "probe" / "m").ok());  // the same contents: the same pair id
  const std::string pair = SafetensorsReader::open(dir / "probe" / "m.safetensors").value().metadata().at("rml.pair");
  write_text(dir / "victim", "do not overwrite");
  fs::create_symlink(dir / "victim", dir / ("m.safetensors." + pair));
  REQUIRE(save_graph(Graph(g), dir / "m").ok());
  CHECK(read_text(dir / "victim") == "do not overwrite");
  CHECK(fs::is_regular_file(fs::symlink_status(dir / "m.safetensors")));
  CHECK(!fs::exists(fs::symlink_status(dir / ("m.safetensors." + pair))));
  std::string why;
  CHECK_MESSAGE(which_model(dir / "m", {g}, why) == 0, why);
}

TEST_CASE("paths that name no file are refused, and nothing is written") {
  TempDir dir;
  const Graph g(model(3, 1));
  for (const fs::path& p : {fs::path(""), dir.path() / "", fs::path(dir.path().string() + "/"), dir / "."}) {
    const Status s = save_graph(g, p);
    CHECK_MESSAGE(s.code() == Code::invalid_argument, std::string(p.string() + ": " + s.to_string()));
    CHECK(serialize_to_file(g, p).code() == Code::invalid_argument);
  }
  CHECK(contains(save_graph(g, "").message(), "the path is empty"));
  CHECK(names_in(dir.path()).empty());
  CHECK(!fs::exists(".json"));
  CHECK(!fs::exists(".safetensors"));
}

TEST_CASE("temporaries are created exclusively: a planted symlink is never followed") {
  TempDir dir;
  const std::string secret = "do not overwrite";
  write_text(dir / "victim", secret);
  // The names an older writer used, and the target of each write, planted as symlinks to the victim.
  for (const char* name : {"m.json.tmp", "m.safetensors.tmp", "s.bin.tmp", "m.json"})
    fs::create_symlink(dir / "victim", dir / name);
  REQUIRE(save_graph(Graph(model(3, 1)), dir / "m").ok());
  REQUIRE(serialize_to_file(Graph(model(3, 1)), dir / "s.bin").ok());
  CHECK(read_text(dir / "victim") == secret);
  CHECK(fs::is_regular_file(fs::symlink_status(dir / "m.json")));  // the link was replaced, not followed
  CHECK(load_graph(dir / "m").ok());

  // The staging primitive itself refuses an existing name, symlink or not.
  for (const char* name : {"victim", "m.json.tmp"}) {
    auto staged = detail::write_staged_file(dir / name, dir / "out", [](detail::FileSink& sink) {
      sink.write("overwritten");
      return Status();
    });
    CHECK(!staged.ok());
  }
  CHECK(read_text(dir / "victim") == secret);
  // Temporary names are random: two of them for one target differ.
  CHECK(detail::temporary_name(dir / "m.json") != detail::temporary_name(dir / "m.json"));
}

TEST_CASE("a failed save leaves the previous model loadable and nothing behind") {
  TempDir dir;
  const GraphDef old_model = model(3, 1);
  REQUIRE(save_graph(Graph(old_model), dir / "m").ok());
  REQUIRE(serialize_to_file(Graph(old_model), dir / "s.bin").ok());
  const std::string old_bytes = read_text(dir / "s.bin");
  const auto before = names_in(dir.path());

  // A child process whose files may not grow past 4 KiB (the disk-full of a test): both writers
  // fail on the 16 KiB of new weights, and must say so.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const Graph big(model(4096, 7));
    const Status saved = save_graph(big, dir / "m");
    const Status serialized = serialize_to_file(big, dir / "s.bin");
    ::_exit(saved.code() == Code::data_loss && serialized.code() == Code::data_loss ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::string why;
  CHECK_MESSAGE(which_model(dir / "m", {old_model}, why) == 0, why);
  CHECK(read_text(dir / "s.bin") == old_bytes);
  CHECK(names_in(dir.path()) == before);  // no staged weights, no temporaries
}

TEST_CASE("a save killed at random points leaves the old pair or the new one, never a mix") {
  TempDir dir;
  const std::vector<GraphDef> models = {model(3, 1), model(3, 100), model(700, 5)};
  REQUIRE(save_graph(Graph(models[0]), dir / "m").ok());
  std::mt19937 rng(20260601);
  int trials = 0;
  int between_renames = 0;  // loads after a kill between steps 3 and 4: the new JSON beside the old weights
  std::vector<int> seen(models.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  // A few hundred kills, at most ~8 s of them.
  while (trials < 300 && std::chrono::steady_clock::now() - start < std::chrono::seconds(8)) {
    const int first = static_cast<int>(rng() % models.size());
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (int i = 0; i < 100000; ++i) (void)save_graph(Graph(models[(first + i) % models.size()]), dir / "m");
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(rng() % 3000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ++trials;
    const std::string json = read_text(dir / "m.json");
    const auto weights = SafetensorsReader::open(dir / "m.safetensors");
    if (weights.ok() && !contains(json, "\"pair\": \"" + weights->metadata().at("rml.pair") + "\"")) ++between_renames;
    std::string why;
    const int got = which_model(dir / "m", models, why);
    REQUIRE_MESSAGE(got >= 0, "trial ", trials, ": ", why);
    ++seen[static_cast<std::size_t>(got)];
  }
  MESSAGE(trials, " kills; loaded models ", seen[0], "/", seen[1], "/", seen[2], "; ", between_renames,
          " loads found the new JSON beside the old weights (a kill between the two renames, which the next "
          "save repairs) and loaded through the staged weights");
  CHECK(trials >= 50);
  // A save that completes afterwards cleans up and loads.
  REQUIRE(save_graph(Graph(models[2]), dir / "m").ok());
  std::string why;
  CHECK(which_model(dir / "m", models, why) == 2);
}

TEST_CASE("saves racing loads and each other: every load sees one whole pair") {
  TempDir dir;
  const std::vector<GraphDef> models = {model(3, 1), model(3, 100), model(500, 5)};
  REQUIRE(save_graph(Graph(models[0]), dir / "m").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> saves{0};
  std::atomic<int> save_failures{0};
  const auto writer = [&](int offset) {
    for (int i = offset; !stop.load(); ++i) {
      if (!save_graph(Graph(models[static_cast<std::size_t>(i) % models.size()]), dir / "m").ok()) ++save_failures;
      ++saves;
    }
  };
  std::thread w1(writer, 0);
  std::thread w2(writer, 1);
  int loads = 0;
  std::string failure;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
    std::string why;
    if (which_model(dir / "m", models, why) < 0 && failure.empty()) failure = why;
    ++loads;
  }
  stop = true;
  w1.join();
  w2.join();
  MESSAGE(loads, " loads during ", saves.load(), " saves by two writers");
  CHECK_MESSAGE(failure.empty(), failure);
  CHECK(save_failures.load() == 0);
  CHECK(saves.load() > 4);
  std::string why;
  CHECK_MESSAGE(which_model(dir / "m", models, why) >= 0, why);
  // Two writers leave no staged weights behind once both are done.
  for (const auto& name : names_in(dir.path())) CHECK_MESSAGE(name.rfind("m.safetensors.", 0) != 0, name);
}

TEST_CASE("readers refuse FIFOs, devices and directories at once") {
  TempDir dir;
  REQUIRE(::mkfifo((dir / "f.json").c_str(), 0644) == 0);
  REQUIRE(::mkfifo((dir / "w.safetensors").c_str(), 0644) == 0);
  REQUIRE(::mkfifo((dir / "s.bin").c_str(), 0644) == 0);
  REQUIRE(save_graph(Graph(model(3, 1)), dir / "ok").ok());
  fs::copy_file(dir / "ok.json", dir / "w.json");
  fs::create_symlink("/dev/zero", dir / "z.json");
  fs::create_directory(dir / "d.bin");

  const auto start = std::chrono::steady_clock::now();
  const Status fifo = load_graph(dir / "f").status();
  CHECK(fifo.code() == Code::invalid_argument);
  CHECK_MESSAGE(contains(fifo.message(), "f.json: is a FIFO, not a regular file"), fifo.message());
  const Status weights_fifo = load_graph(dir / "w").status();
  CHECK(weights_fifo.code() == Code::invalid_argument);
  CHECK_MESSAGE(contains(weights_fifo.message(), "is a FIFO"), weights_fifo.message());
  CHECK(SafetensorsReader::open(dir / "w.safetensors").status().code() == Code::invalid_argument);
  const Status zero = load_graph(dir / "z").status();
  CHECK(zero.code() == Code::invalid_argument);
  CHECK_MESSAGE(contains(zero.message(), "is a character device"), zero.message());
  CHECK(SafetensorsReader::open("/dev/zero").status().code() == Code::invalid_argument);
  CHECK(deserialize_from_file<Graph>("/dev/zero").status().code() == Code::invalid_argument);
  CHECK(deserialize_from_file<Graph>(dir / "s.bin").status().code() == Code::invalid_argument);
  CHECK(contains(deserialize_from_file<Graph>(dir / "d.bin").status().message(), "is a directory"));
  CHECK(deserialize_from_file<Graph>(dir / "none.bin").status().code() == Code::not_found);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("weights cut short after loading are DATA_LOSS where rml reads them, not SIGBUS") {
  TempDir dir;
  const GraphDef def = model(4096, 3);  // 16 KiB of weights: several pages
  REQUIRE(save_graph(Graph(def), dir / "m").ok());
  const Graph mapped = load_graph(dir / "m").value();
  const Graph read = load_graph(dir / "m", LoadOptions{.mmap = false}).value();
  const auto* storage = dynamic_cast<const detail::MappedFile*>(mapped.def().constants[0].data.storage().get());
  REQUIRE(storage != nullptr);
  CHECK(storage->mapped());
  CHECK(storage->verify().ok());
  CHECK(Executor::create(mapped).ok());

  // Cut in place (as `truncate -s 8` or a writer reopening with O_TRUNC would).
  REQUIRE(::truncate((dir / "m.safetensors").c_str(), 8) == 0);
  const Status verify = storage->verify();
  CHECK(verify.code() == Code::data_loss);
  CHECK_MESSAGE(contains(verify.message(), (dir / "m.safetensors").string() + ": the file shrank from"),
                verify.message());
  CHECK(Executor::create(mapped).status().code() == Code::data_loss);
  CHECK(serialize_to_file(mapped, dir / "out.bin").code() == Code::data_loss);
  CHECK(!fs::exists(dir / "out.bin"));
  CHECK(save_graph(mapped, dir / "copy").code() == Code::data_loss);
  CHECK(!fs::exists(dir / "copy.json"));

  // Read into memory, the weights are the program's own: the cut cannot reach them.
  auto run = Executor::create(read);
  REQUIRE_MESSAGE(run.ok(), run.status().to_string());
  const Tensor x = Tensor::from_vector(std::vector<float>(4096, 1.0F), {4096});
  const std::vector<Tensor> y = run->run({x}).value();
  for (std::size_t i = 0; i < 4096; i += 1000)
    CHECK(y[0].span<float>()[i] == 1.0F + (3.0F + static_cast<float>(i)) / 8.0F);
}

namespace {

// A numpunct that writes "1.234,5": the conventions of de_DE, without needing its locale data.
struct CommaNumpunct : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// Sets the C library's locale (which printf and strtod follow) to a comma-decimal one, and the
// C++ global locale to CommaNumpunct; restores both on destruction.
class CommaLocale {
 public:
  CommaLocale() : cpp_(std::locale::global(std::locale(std::locale::classic(), new CommaNumpunct))) {
    const char* previous = std::setlocale(LC_ALL, nullptr);
    c_ = previous ? previous : "C";
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"}) {
      if (std::setlocale(LC_ALL, name)) {
        name_ = name;
        break;
      }
    }
  }
  ~CommaLocale() {
    std::setlocale(LC_ALL, c_.c_str());
    std::locale::global(cpp_);
  }
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  std::locale cpp_;
  std::string c_;
  std::string name_;
};

}  // namespace

TEST_CASE("numbers are written and read the same under a comma-decimal locale") {
  GraphDef g = model(6, 1);
  const std::vector<float> odd = {5.0F, 0.1F, -1e-7F, 3.4028235e38F, 1.4e-45F, 123456.789F};
  g.constants[0].data = Tensor::from_vector(odd, {6});
  g.constants[0].inline_data = true;  // written into the JSON as numbers (and so without a stored name)
  g.constants[0].tensor.clear();
  g.nodes[0].attrs = {{"scale", 5.0}, {"eps", 1e-300}, {"list", std::vector<double>{0.5, -2.25e10, 1.0 / 3.0}}};
  TempDir dir;
  const CommaLocale comma;
  REQUIRE_MESSAGE(!comma.name().empty(), "no comma-decimal C locale is installed (Debian: locales-all)");
  char probe[16];
  std::snprintf(probe, sizeof probe, "%.1f", 5.0);
  REQUIRE_MESSAGE(std::string(probe) == "5,0", "the locale ", comma.name(), " does not write a comma: ", probe);

  REQUIRE(save_graph(Graph(g), dir / "m").ok());
  const std::string json = read_text(dir / "m.json");
  CHECK(contains(json, "\"scale\": 5.0"));
  CHECK(!contains(json, "5,0"));
  auto back = load_graph(dir / "m");
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK_MESSAGE(assert_structural_equal(back->def(), g).ok(), assert_structural_equal(back->def(), g).message());
  const auto values = back->def().constants[0].data.span<float>();
  for (std::size_t i = 0; i < odd.size(); ++i) CHECK(values[i] == odd[i]);
  CHECK(std::get<double>(back->def().nodes[0].attrs.at("eps")) == 1e-300);
}
