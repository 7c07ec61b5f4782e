// Where rml's heavy definitions are compiled: in every translation unit (the default), or in one.
//
// By default every function of rml is inline and every translation unit that includes it
// compiles all of it: the kernel table (every kernel over every op and dtype), the program
// builder, weight packing, eager ops and Eigen under them; the JSON and safetensors readers and
// writers and simdjson under them; the shape rules; graph surgery. To compile those once per
// program instead, stb-style, with still no library of rml's own:
//
//   - compile every translation unit that includes rml with RML_SEPARATE_KERNELS defined
//     (CMake: link rml::rml_split instead of rml::rml; meson: rml_split_dep); those translation
//     units only declare the functions behind the split and include neither Eigen, nor a
//     kernel, nor simdjson;
//   - in exactly one of them, `#define RML_KERNELS_IMPLEMENTATION` before the first rml include
//     (then `#include <rml/rml.hpp>`): it defines them, non-inline.
//
// Behind the split: rml::detail::build_program (Executor::create) and rml::run_node (exec);
// reading and writing models (io: load_graph, save_graph, parse_graph, SafetensorsReader,
// encode_safetensors, write_safetensors; whole-file helpers for serial); compile_op (check);
// merge, split, extract, min_value_cut, plan_stages, split_stages, Graph::optimize (edit). Each
// public header declares them with RML_SPLIT_API and includes its definitions (a
// detail/*_impl.hpp, or exec/detail/implementation.hpp) only where RML_SPLIT_DEFINED is 1.
//
// No implementation translation unit: the link fails with undefined references to
// rml::detail::build_program, rml::run_node, rml::load_graph... Two: multiple definitions of
// them. Every translation unit of a program must agree on RML_SEPARATE_KERNELS (mixing the modes
// breaks the one-definition rule). See docs/packaging.md, "Compiling the kernels once".
//
// RML_SPLIT_API     `inline` by default, nothing in the separate mode (both kinds of TU).
// RML_SPLIT_DEFINED 1 where the definitions are compiled (default mode, or the implementation
//                   TU), 0 in a declaring TU.
#pragma once

#if defined(RML_KERNELS_IMPLEMENTATION) && !defined(RML_SEPARATE_KERNELS)
#define RML_SEPARATE_KERNELS 1
#endif

#if defined(RML_SEPARATE_KERNELS)
#define RML_SPLIT_API
#if defined(RML_KERNELS_IMPLEMENTATION)
#define RML_SPLIT_DEFINED 1
#else
#define RML_SPLIT_DEFINED 0
#endif
#else
#define RML_SPLIT_API inline
#define RML_SPLIT_DEFINED 1
#endif
