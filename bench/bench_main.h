// bench_main.h — the shared entry of the bench programs: `--help` prints the program's usage, and
// a bad argument or input ends with one line on stderr and exit code 2 (like the CLI) instead of
// an uncaught exception, which would abort the process.
//   int main(int argc, char** argv) {
//     return remat::bench::guarded_main("mincut_bench", kUsage, argc, argv, [&] { ...; return 0;
//     });
//   }
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <exception>
#include <functional>
#include <string_view>
#include <system_error>

#include "remat/error.h"

namespace remat::bench {

inline int guarded_main(std::string_view program, std::string_view usage, int argc, char** argv,
                        const std::function<int()>& body) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      fmt::print("{}", usage);
      return 0;
    }
  try {
    return body();
  } catch (const InputError& e) {
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return 1;
  }
}

// `text` as a number of type T (an integer or double), whole, or InputError naming `what`.
template <class T>
T number_argument(std::string_view what, const char* text) {
  T value{};
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || ptr == text)
    throw InputError(fmt::format("{} must be a number, got '{}'", what, text));
  return value;
}

}  // namespace remat::bench
