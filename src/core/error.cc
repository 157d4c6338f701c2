#include "remat/error.h"

#include <cstdio>
#include <cstdlib>

namespace remat {

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "remat: internal error at %s:%d: check '%s' failed: %s\n", file, line,
               condition, message.c_str());
  std::abort();
}

}  // namespace remat
