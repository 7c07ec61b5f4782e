// Registers the executor with rml/edit for every surgery example (compiled once, linked into each).
#include "rml/exec/edit_hooks.hpp"
