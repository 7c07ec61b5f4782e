// The one translation unit of the test programs that defines rml's heavy functions (kernels,
// program builder, model readers and writers, surgery): every other test translation unit is
// compiled with RML_SEPARATE_KERNELS (rml::rml_split) and only declares them. See
// include/rml/core/linkage.hpp and docs/packaging.md, "Compiling the kernels once".
#define RML_KERNELS_IMPLEMENTATION
#include <rml/rml.hpp>
