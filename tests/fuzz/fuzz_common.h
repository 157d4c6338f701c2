// fuzz_common.h — what every libFuzzer target in tests/fuzz/ checks: a reader either returns a
// valid object or throws InputError; anything else (a crash, a sanitizer report, another
// exception, a negative peak) is a finding. Built only with -DREMAT_FUZZ=ON and clang.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "remat/error.h"

namespace remat::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`; InputError is the expected way to refuse input, any other exception aborts so
// libFuzzer records the input.
template <class Body>
void expect_value_or_input_error(Body&& body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: unexpected exception: %s\n", e.what());
    std::abort();
  }
}

inline void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz: broken invariant: %s\n", what);
    std::abort();
  }
}

}  // namespace remat::fuzz
