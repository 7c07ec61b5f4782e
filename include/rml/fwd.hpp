// Forward declarations of rml's main types: cheap to include in headers that only name them.
#pragma once

#include "rml/core/config.hpp"

#include <cstdint>

namespace rml {

enum class Code : std::uint8_t;
enum class DType : std::uint8_t;
class Status;
template <typename T>
class Result;
class Error;
class Shape;
struct TensorType;
class Storage;
class Tensor;
struct Device;
struct Origin;
struct ValueDef;
struct ConstantDef;
struct NodeDef;
struct GraphDef;
class Graph;
class SafetensorsReader;

}  // namespace rml
