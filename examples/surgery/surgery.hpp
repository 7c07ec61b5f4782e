// What every surgery example shares: three small models, a trace helper, and printers.
//
// rectify computes h = relu(x), twice y = x + x, pool y = -(sum of each row of relu(x)), all over
// one f32 [2, 3] input. label() names a node by its input name, or by its op code after the part
// its name starts with (`encoder/Relu`).
//
// The examples include only the edit headers; exec_hooks.cpp, compiled once and linked into each,
// registers the executor that finalize() and run() use. A program of your own includes
// <rml/rml.hpp>, which does both.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "rml/edit/edit.hpp"

namespace surgery {

using rml::Graph;
using rml::Node;
using rml::NodeKind;
using rml::Tensor;
namespace ops = rml::ops;

// h = relu(x).
inline std::vector<Tensor> rectify(const std::vector<Tensor>& inputs) { return {ops::relu(inputs[0])}; }

// y = x + x.
inline std::vector<Tensor> twice(const std::vector<Tensor>& inputs) { return {ops::add(inputs[0], inputs[0])}; }

// y = -(the sum of each row of relu(x)): the [2, 3] input pools to [2, 1].
inline std::vector<Tensor> pool(const std::vector<Tensor>& inputs) {
  return {ops::neg(ops::sum(ops::relu(inputs[0]), {1}, true))};
}

// A trace of `model` over one f32 [2, 3] input called `input`, its output called `output`: every op
// as written, nothing optimized or finalized.
inline Graph trace_graph(const rml::TraceFunction& model, const std::string& input, const std::string& output) {
  return rml::trace(model, {{input, rml::DType::f32, {2, 3}}}, "merge_and_split", {output}).value();
}

// An input's name, or an operator's op code after the part its name starts with.
inline std::string label(const Node& node) {
  if (node.kind() == NodeKind::input) return node.name();
  const std::size_t slash = node.name().find('/');
  const std::string part = slash == std::string::npos ? std::string() : node.name().substr(0, slash + 1);
  return part + std::string(rml::op_code_name(node.op_code()));
}

// Items separated by spaces.
inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : " ") + item;
  return out;
}

// The labels of a graph's nodes, in order.
inline std::string labels(const Graph& graph) {
  std::vector<std::string> out;
  for (const Node& node : graph.nodes()) out.push_back(label(node));
  return join(out);
}

// A graph's input names, then its output names.
inline std::string io(const Graph& graph) { return join(graph.input_names()) + " -> " + join(graph.output_names()); }

// What a rename names.
inline const char* kind_name(rml::NameKind kind) {
  switch (kind) {
    case rml::NameKind::node:
      return "node";
    case rml::NameKind::input:
      return "input";
    case rml::NameKind::output:
      return "output";
  }
  return "node";
}

// The input every program runs, [2, 3].
inline Tensor input() { return Tensor::from_vector<float>({1.0F, -2.0F, 3.0F, -4.0F, 5.0F, -6.0F}, {2, 3}); }

// A tensor's values, flattened.
inline std::string values(const Tensor& tensor) {
  std::vector<std::string> out;
  for (const float value : tensor.reshape({-1}).to_vector<float>()) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", static_cast<double>(value));
    out.emplace_back(text);
  }
  return join(out);
}

// `CODE | message` for a refused call.
inline void print_refusal(const rml::Status& status) {
  std::printf("%s | %s\n", std::string(status.code_name()).c_str(), status.message().c_str());
}

}  // namespace surgery
