// Fuzzes parse_graph: any bytes as the JSON document, bound to a small valid weights file.
// Dictionary: dict/graph_json.dict.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <rml/io/graph_io.hpp>

namespace {

// A weights file holding "w" (f32 [3]), "k" (i32 [2]), "h" (f16 [2]), "b" (bf16 [2]), "l" (i64 [2])
// and "m" (bool [3]), so stored constants of every dtype can bind.
const rml::SafetensorsReader& weights() {
  static const rml::SafetensorsReader reader = [] {
    rml::Tensor mask = rml::Tensor::zeros(rml::DType::boolean, {3});
    mask.mutable_data<bool>()[1] = true;
    auto bytes =
        rml::encode_safetensors({{"w", rml::Tensor::from_vector<float>({1, 2, 3}, {3})},
                                 {"k", rml::Tensor::from_vector<std::int32_t>({4, 5}, {2})},
                                 {"h", rml::Tensor::from_vector<rml::f16>({rml::f16(0.5F), rml::f16(-2.0F)}, {2})},
                                 {"b", rml::Tensor::from_vector<rml::bf16>({rml::bf16(0.5F), rml::bf16(-2.0F)}, {2})},
                                 {"l", rml::Tensor::from_vector<std::int64_t>({std::int64_t{1} << 60, -1}, {2})},
                                 {"m", mask}})
            .value();
    return rml::SafetensorsReader::from_bytes(bytes).value();
  }();
  return reader;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = rml::parse_graph(text, &weights());
  if (graph.ok()) {
    // A graph that parses must be writable and read back the same.
    const auto& def = graph->def();
    for (const auto& c : def.constants) (void)c.data.bytes();
    auto layout = rml::detail::layout_constants(def);
    if (layout.ok()) (void)rml::graph_to_json(def, *layout);
  } else {
    (void)graph.error().message();
  }
  (void)rml::parse_graph(text, nullptr);
  return 0;
}
