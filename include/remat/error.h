// error.h — how remat reports problems.
// Bad input or parameters throw InputError (a std::invalid_argument, so pybind11 raises
// ValueError); the message names the file, line or id. A broken internal invariant is a bug:
// REMAT_CHECK throws InternalError (the CLI prints `remat: bug: …` and exits 1, Python raises
// RuntimeError), so no input ever ends the process from inside the library. "Nothing fits the
// budget" is not an error: it is a status.
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

// A bug: an internal check failed (REMAT_CHECK) or a back end failed in a way no input explains.
class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& what) : std::runtime_error(what) {}
};

// `text` for a one-line message: cut to max_chars (at a UTF-8 character boundary, its length
// noted) so a 10 MB name or budget does not become a 10 MB message, with control characters
// (newline, ESC, DEL, C1 controls) and bytes that are not UTF-8 escaped (`\n`, `\x1b`, `\u009b`)
// so a name cannot split the message into two lines, reach the terminal as an escape sequence, or
// make a message Python cannot decode.
std::string shorten(std::string_view text, size_t max_chars = 80);

// `text` escaped as in shorten(), never cut: what the CLI applies to every message it prints.
std::string escape_control(std::string_view text);

[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& message);

}  // namespace remat

#define REMAT_CHECK(condition, message)                                               \
  do {                                                                                \
    if (!(condition)) ::remat::check_failed(#condition, __FILE__, __LINE__, message); \
  } while (false)
