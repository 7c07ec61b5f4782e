// run_node's definition: compiles one node and calls its kernel (see rml/exec/eager.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "rml/check/compile.hpp"
#include "rml/core/tensor.hpp"
#include "rml/exec/eager.hpp"
#include "rml/exec/kernel_table.hpp"
#include "rml/ir/graph.hpp"

namespace rml {

RML_SPLIT_API Result<std::vector<Tensor>> run_node(const NodeDef& node, std::span<const Tensor> inputs) {
  constexpr std::size_t kInline = 4;
  TensorType inline_types[kInline];
  std::vector<TensorType> heap_types;
  std::span<TensorType> types(inline_types, std::min(inputs.size(), kInline));
  if (inputs.size() > kInline) {
    heap_types.resize(inputs.size());
    types = heap_types;
  }
  const std::byte* inline_ptrs[kInline];
  std::vector<const std::byte*> heap_ptrs;
  std::span<const std::byte*> ptrs(inline_ptrs, types.size());
  if (inputs.size() > kInline) {
    heap_ptrs.resize(inputs.size());
    ptrs = heap_ptrs;
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      return invalid_argument(detail::node_label(node) + ": input " + std::to_string(i) + " holds no data");
    types[i] = inputs[i].type();
    ptrs[i] = inputs[i].raw_data();
  }
  auto compiled = detail::compile_node(node, types);
  if (!compiled.ok()) return compiled.error().with_prefix(detail::node_label(node) + ": ");
  std::vector<Tensor> outputs;
  outputs.reserve(compiled->outputs.size());
  std::vector<std::byte*> out_ptrs;
  for (const TensorType& t : compiled->outputs) {
    outputs.push_back(Tensor::zeros(t));
    out_ptrs.push_back(outputs.back().mutable_raw_data());
  }
  const Kernel& k = compiled->kernel;
  std::unique_ptr<std::byte[]> scratch;
  if (const std::size_t bytes = detail::scratch_bytes(k, 1)) scratch = std::make_unique<std::byte[]>(bytes);
  const detail::KernelArgs args{ptrs, out_ptrs, nullptr, scratch.get(), nullptr, nullptr, {}};
  Status st = detail::find_kernel(k)(k, args);
  if (!st.ok()) return st.with_prefix(detail::node_label(node) + ": ");
  return outputs;
}

}  // namespace rml
