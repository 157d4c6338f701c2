// error.h — how remat reports problems.
// Bad input or parameters throw InputError (a std::invalid_argument, so pybind11 raises
// ValueError); the message names the file, line or id. A broken internal invariant is a bug and
// REMAT_CHECK aborts with a message. "Nothing fits the budget" is not an error: it is a status.
//   if (size < 0) throw InputError(fmt::format("{}: value '{}' has negative size", path, name));
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace remat {

class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& what) : std::invalid_argument(what) {}
};

// A graph that one solver cannot take (rotor on a graph without chain structure): an error from
// that solver only, so `remat compare` marks its row and runs the others.
class UnsupportedGraph : public InputError {
 public:
  using InputError::InputError;
};

// `text` for an error message, cut to max_chars with its length noted, so a 10 MB name or budget
// does not become a 10 MB message.
std::string shorten(std::string_view text, size_t max_chars = 80);

[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& message);

}  // namespace remat

#define REMAT_CHECK(condition, message)                                               \
  do {                                                                                \
    if (!(condition)) ::remat::check_failed(#condition, __FILE__, __LINE__, message); \
  } while (false)
