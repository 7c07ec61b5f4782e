// rml: header-only C++20 inference graphs. This umbrella includes every entry header.
#pragma once

#include "rml/core/config.hpp"  // #error unless the compiler is in C++20 mode
#include "rml/version.hpp"

#include "rml/core/equal.hpp"
#include "rml/core/reflect.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"

#include "rml/ir/device.hpp"
#include "rml/ir/graph.hpp"
#include "rml/ir/ops.hpp"

#include "rml/io.hpp"

#include "rml/check/compile.hpp"
#include "rml/check/infer.hpp"

#include "rml/edit/edit.hpp"

#include "rml/serial/serialize.hpp"

#include "rml/exec/edit_hooks.hpp"  // the executor, and Graph::run / eager ops through it
#include "rml/exec/executor.hpp"
#include "rml/exec/session.hpp"  // InferenceSession: feeds and outputs by name
