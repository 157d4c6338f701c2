#include "remat/error.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace remat {

std::string shorten(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  return fmt::format("{}... ({} bytes)", text.substr(0, max_chars), text.size());
}

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "remat: internal error at %s:%d: check '%s' failed: %s\n", file, line,
               condition, message.c_str());
  std::abort();
}

}  // namespace remat
