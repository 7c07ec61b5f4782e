// Builds a two-node graph in memory, runs it, and checks the numbers: the packaged headers, their
// dependencies (Eigen, simdjson, msgpack-cxx) and the threads library all link.
#include <cstdio>
#include <vector>

#include <rml/rml.hpp>

int main() {
  rml::GraphDef def;
  def.values.push_back({"x", {rml::DType::f32, rml::Shape{4}}});
  def.values.push_back({"y", {rml::DType::f32, rml::Shape{4}}});
  def.inputs = {0};
  def.outputs = {1};
  rml::NodeDef relu;
  relu.op = "relu";
  relu.inputs = {0};
  relu.outputs = {1};
  def.nodes.push_back(relu);
  auto session = rml::InferenceSession::create(rml::Graph(std::move(def)), {.threads = 1});
  if (!session.ok()) return std::puts(session.error().to_string().c_str()), 1;
  const rml::Tensor x = rml::Tensor::from_vector(std::vector<float>{-1.0F, 2.0F, -3.0F, 4.0F}, {4});
  auto out = session->run({{"x", x}});
  if (!out.ok()) return std::puts(out.error().to_string().c_str()), 1;
  const auto y = out->at("y").span<float>();
  std::printf("rml %d.%d.%d: relu(-1, 2, -3, 4) = %g %g %g %g\n", rml::version.major, rml::version.minor,
              rml::version.patch, y[0], y[1], y[2], y[3]);
  return y[0] == 0.0F && y[1] == 2.0F && y[2] == 0.0F && y[3] == 4.0F ? 0 : 1;
}
