// Fuzzes the MessagePack reader (msgpack-cxx's parser under rml's reflection walk): any bytes as an
// rml-msgpack GraphDef. A document it accepts must be one the writer writes (no throw: nothing the
// reader accepts is beyond the writer's limits), read back to a structurally equal graph, and write
// the same bytes again.
#include <cstddef>
#include <cstdint>
#include <span>

#include <rml/core/equal.hpp>
#include <rml/serial/serialize.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto graph = rml::deserialize<rml::GraphDef>(std::span(data, size));
  if (!graph.ok()) return 0;
  const auto bytes = rml::serialize(*graph);
  auto again = rml::deserialize<rml::GraphDef>(bytes);
  if (!again.ok() || !rml::structural_equal(*graph, *again)) __builtin_trap();
  if (rml::serialize(*again) != bytes) __builtin_trap();
  return 0;
}
