// The definitions behind the executor's and run_node's declarations: the program builder and
// eager ops, over the kernel table and Eigen. Included by rml/exec/executor.hpp and
// rml/exec/eager.hpp wherever RML_SPLIT_DEFINED is 1 (see rml/core/linkage.hpp).
#pragma once

#include "rml/exec/detail/program_builder.hpp"
#include "rml/exec/detail/run_node.hpp"
