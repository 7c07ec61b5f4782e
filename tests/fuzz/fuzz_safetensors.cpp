// Fuzzes SafetensorsReader: any bytes as a safetensors file; every tensor it accepts is read whole.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <rml/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto reader = rml::SafetensorsReader::from_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!reader.ok()) return 0;
  volatile std::uint8_t sink = 0;
  for (const auto& entry : reader->entries()) {
    auto tensor = reader->get(entry.name);
    if (!tensor.ok()) continue;
    for (std::byte b : tensor->bytes()) sink = static_cast<std::uint8_t>(sink ^ static_cast<std::uint8_t>(b));
  }
  return 0;
}
