// The one translation unit of this program that compiles rml's kernels (and Eigen).
#define RML_KERNELS_IMPLEMENTATION
#include <rml/rml.hpp>
