// rml/io: the rml-graph model format (JSON + safetensors), loading and saving.
#pragma once

#include "rml/io/graph_io.hpp"
#include "rml/io/graph_json.hpp"
#include "rml/io/safetensors.hpp"
