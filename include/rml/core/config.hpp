// The one build requirement every rml header checks first: a C++20 compiler mode.
#pragma once

// MSVC reports __cplusplus as 199711L unless /Zc:__cplusplus is given; _MSVC_LANG holds the real mode.
#if defined(_MSVC_LANG) && _MSVC_LANG > __cplusplus
#define RML_CPLUSPLUS _MSVC_LANG
#else
#define RML_CPLUSPLUS __cplusplus
#endif

#if RML_CPLUSPLUS < 202002L
#error "rml: needs C++20 (compile with -std=c++20, or /std:c++20 with MSVC)"
// Stop here rather than fail hundreds of times in the headers below: a missing include is a fatal
// error in GCC, Clang and MSVC alike.
#include <rml: the C++20 check above failed>
#endif
