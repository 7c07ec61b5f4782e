// Fuzzes the way from a MessagePack document to a run: deserialize<Graph> (the gate), then
// Executor::create and run on zero-filled inputs. Anything the reader accepts must either be
// refused by create with a Status or run; no input may crash, read out of bounds or overflow.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <rml/exec/executor.hpp>
#include <rml/serial/serialize.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto graph = rml::deserialize<rml::Graph>(std::span<const std::uint8_t>(data, size));
  if (!graph.ok()) return 0;
  // A budget far below the fuzzer's memory limit: a graph needing more is refused by create.
  rml::ExecutorOptions options;
  options.threads = 1;
  options.memory.max_bytes = std::size_t{64} << 20;
  auto exec = rml::Executor::create(*graph, options);
  if (!exec.ok()) return 0;
  std::vector<rml::Tensor> inputs;
  std::size_t input_bytes = 0;
  for (std::size_t i = 0; i < exec->input_names().size(); ++i) {
    const rml::TensorType type = exec->input_type(i);
    input_bytes += static_cast<std::size_t>(*type.checked_nbytes());
    if (input_bytes > (std::size_t{64} << 20)) return 0;
    inputs.push_back(rml::Tensor::zeros(type));
  }
  auto outputs = exec->run(inputs);
  if (outputs.ok()) {
    // run_into into fresh outputs of the same types (its checks and the aliasing rules).
    std::vector<rml::Tensor> into;
    for (const rml::Tensor& t : *outputs) into.push_back(rml::Tensor::zeros(t.type()));
    (void)exec->run_into(inputs, into);
  }
  return 0;
}
