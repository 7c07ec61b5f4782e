// Fuzzes SafetensorsReader: any bytes as a safetensors file; every tensor it accepts is read whole,
// element by element as its dtype. Dictionary: dict/safetensors.dict.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <rml/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto reader = rml::SafetensorsReader::from_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!reader.ok()) return 0;
  volatile std::uint8_t sink = 0;
  for (const auto& entry : reader->entries()) {
    auto tensor = reader->get(entry.name);
    if (!tensor.ok()) continue;
    for (std::byte b : tensor->bytes()) sink = static_cast<std::uint8_t>(sink ^ static_cast<std::uint8_t>(b));
    // Read every element as its type (UBSan's -fsanitize=bool catches a bool byte other than 0/1
    // that get() let through) and widen the 16-bit floats.
    rml::visit_dtype(tensor->dtype(), [&](auto d) {
      using T = rml::dtype_type_t<decltype(d)::value>;
      for (const T v : tensor->span<T>()) {
        if constexpr (std::is_same_v<T, bool>)
          sink = static_cast<std::uint8_t>(sink ^ (v ? 1 : 0));
        else
          sink = static_cast<std::uint8_t>(sink ^ (static_cast<float>(v) > 0 ? 1 : 0));
      }
    });
  }
  return 0;
}
