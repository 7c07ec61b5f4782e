// A consumer library that links rml::rml and is installed in the consumer's own export set.
#include <rml/core/status.hpp>

rml::Status app_status() { return rml::invalid_argument("app: not ready"); }
