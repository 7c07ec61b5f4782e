// InferenceSession: a model file and its executor behind ONNX Runtime's shape of API — inputs and
// outputs described by name and type, feeds keyed by name, outputs chosen by name.
//
//   auto session = rml::InferenceSession::create("tests/data/torch_mlp").value();  // or model.msgpack
//   auto out = session.run({{"input", x}}).value();                                // every output
//   rml::Tensor y = out.at("output");
//
// It adds names to rml::Executor and nothing else: the same checks, kernels, arena and thread pool.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/executor.hpp"
#include "rml/exec/thread_pool.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/ir/graph.hpp"
#include "rml/serial/serialize.hpp"

namespace rml {

/// How a session runs (ExecutorOptions under ONNX Runtime's name).
struct SessionOptions {
  /// Intra-op threads, the caller included; 0 = all cores (see ExecutorOptions::threads).
  int threads = 0;
  /// The workers to run on; none = the process-wide pool (see ExecutorOptions::pool).
  std::shared_ptr<const ThreadPool> pool = nullptr;
};

/// One input or output of a session: its name and type (ONNX Runtime's NodeArg).
struct NodeArg {
  std::string name;
  TensorType type;
};

/// Tensors by name: a run's feeds and its outputs.
using NamedTensors = std::map<std::string, Tensor>;

/// A checked, compiled model that runs on tensors fed by name. Cheap to copy; run() and run_into()
/// are safe from several threads at once, as Executor's.
class InferenceSession {
 public:
  /// Loads `model`: a `.msgpack` file (serialize_to_file) or an rml-graph stem or `.json` file
  /// (load_graph), with their errors unchanged; then compiles it as Executor::create does.
  static Result<InferenceSession> create(const std::filesystem::path& model, SessionOptions options = {}) {
    Result<Graph> graph = model.extension() == ".msgpack" ? deserialize_from_file<Graph>(model) : load_graph(model);
    if (!graph.ok()) return graph.error();
    return create(*graph, std::move(options));
  }
  static Result<InferenceSession> create(const Graph& graph, SessionOptions options = {}) {
    ExecutorOptions exec;
    exec.threads = options.threads;
    exec.pool = std::move(options.pool);
    RML_ASSIGN_OR_RETURN(Executor executor, Executor::create(graph, exec));
    InferenceSession s(std::move(executor));
    for (std::size_t i = 0; i < s.executor_.input_names().size(); ++i)
      s.inputs_.push_back({s.executor_.input_names()[i], s.executor_.input_type(i)});
    for (std::size_t i = 0; i < s.executor_.output_names().size(); ++i)
      s.outputs_.push_back({s.executor_.output_names()[i], s.executor_.output_type(i)});
    return s;
  }

  /// The graph's inputs and outputs, in the graph's order.
  [[nodiscard]] const std::vector<NodeArg>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] const std::vector<NodeArg>& outputs() const noexcept { return outputs_; }

  /// Runs on `feeds` (one tensor per input, by name) and returns the outputs named in `output_names`
  /// (all outputs when empty). INVALID_ARGUMENT naming the input for a missing or unknown feed, a
  /// wrong dtype or shape, and naming the output for an unknown output name.
  [[nodiscard]] Result<NamedTensors> run(const NamedTensors& feeds,
                                         std::span<const std::string> output_names = {}) const {
    RML_ASSIGN_OR_RETURN(std::vector<Tensor> in, ordered_feeds(feeds));
    for (const std::string& name : output_names) RML_RETURN_IF_ERROR(output_index(name).status());
    RML_ASSIGN_OR_RETURN(std::vector<Tensor> out, executor_.run(in));
    NamedTensors result;
    for (std::size_t k = 0; k < outputs_.size(); ++k)
      if (output_names.empty() ||
          std::find(output_names.begin(), output_names.end(), outputs_[k].name) != output_names.end())
        result.emplace(outputs_[k].name, std::move(out[k]));
    return result;
  }
  [[nodiscard]] Result<NamedTensors> run(const NamedTensors& feeds,
                                         std::initializer_list<std::string> output_names) const {
    return run(feeds, std::span<const std::string>(output_names.begin(), output_names.size()));
  }

  /// Runs into caller-allocated, writable outputs keyed by output name: each is written in place and
  /// nothing is allocated when every output is given. Outputs left out are computed into temporaries
  /// and dropped. INVALID_ARGUMENT as run(), and naming the output for an unknown name or a tensor
  /// of the wrong type.
  Status run_into(const NamedTensors& feeds, NamedTensors& outputs) const {
    RML_ASSIGN_OR_RETURN(std::vector<Tensor> in, ordered_feeds(feeds));
    std::vector<Tensor> out(outputs_.size());
    for (auto& [name, tensor] : outputs) {
      RML_ASSIGN_OR_RETURN(std::size_t k, output_index(name));
      out[k] = tensor;  // shares the caller's storage
    }
    for (std::size_t k = 0; k < out.size(); ++k)
      if (!out[k].defined()) out[k] = Tensor::zeros(outputs_[k].type);
    return executor_.run_into(in, out);
  }

  /// The executor underneath (input order, arena size, thread count).
  [[nodiscard]] const Executor& executor() const noexcept { return executor_; }

 private:
  explicit InferenceSession(Executor executor) : executor_(std::move(executor)) {}

  std::string input_list() const {
    std::string names;
    for (const NodeArg& a : inputs_) names += (names.empty() ? "" : ", ") + a.name;
    return names;
  }

  /// `feeds` in the graph's input order, every name and type checked.
  Result<std::vector<Tensor>> ordered_feeds(const NamedTensors& feeds) const {
    for (const auto& [name, tensor] : feeds) {
      const bool known = std::any_of(inputs_.begin(), inputs_.end(), [&](const NodeArg& a) { return a.name == name; });
      if (!known)
        return invalid_argument("run: the graph has no input '" + name + "' (its inputs: " + input_list() + ")");
    }
    std::vector<Tensor> in;
    in.reserve(inputs_.size());
    for (const NodeArg& a : inputs_) {
      const auto it = feeds.find(a.name);
      if (it == feeds.end())
        return invalid_argument("run: input '" + a.name + "' (" + a.type.to_string() + ") is not fed");
      const Tensor& t = it->second;
      if (!t.defined() || t.type() != a.type)
        return invalid_argument("run: input '" + a.name + "' must be " + a.type.to_string() + ", got " +
                                (t.defined() ? t.type().to_string() : std::string("a tensor without data")));
      in.push_back(t);
    }
    return in;
  }

  Result<std::size_t> output_index(const std::string& name) const {
    for (std::size_t k = 0; k < outputs_.size(); ++k)
      if (outputs_[k].name == name) return k;
    std::string names;
    for (const NodeArg& a : outputs_) names += (names.empty() ? "" : ", ") + a.name;
    return invalid_argument("run: the graph has no output '" + name + "' (its outputs: " + names + ")");
  }

  Executor executor_;
  std::vector<NodeArg> inputs_, outputs_;
};

}  // namespace rml
