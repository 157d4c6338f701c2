// moccasin_data.h — where the bench programs find the MOCCASIN data set (../shared/benchmarks):
// the folder ($REMAT_BENCH_DATA, else next to the checkout) and a graph file by name prefix.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "remat/error.h"

namespace remat::bench {

inline std::string moccasin_data_dir() {
  if (const char* env = std::getenv("REMAT_BENCH_DATA")) return env;
  return (std::filesystem::path(REMAT_SOURCE_DIR) / ".." / "shared" / "benchmarks" / "moccasin")
      .string();
}

// The file of `dir` whose name starts with `prefix` (the data set names carry parameters).
inline std::string find_data_file(const std::string& dir, std::string_view prefix) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with(prefix)) return entry.path().string();
  throw InputError(fmt::format("no file starting with '{}' in {}", prefix, dir));
}

}  // namespace remat::bench
