// option_cache.h — internal to rockmate: where a class's options are kept between solves, in the
// caller's SolveCache and, with a cache directory, on disk (one JSON file per key).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace remat::rockmate {

// A class's key: its canonical hash and form and the parameters its options depend on.
std::string cache_key(uint64_t hash, const std::string& form, const OptionParams& p);
// Entries of the caller's SolveCache are the option lists by cache_key, under this prefix.
std::string memory_key(const std::string& key);
// The options kept on disk under `key` (nullopt: none, damaged, or a position not below
// `positions`).
std::optional<std::vector<LocalOption>> read_disk(const OptionParams& p, const std::string& key,
                                                  size_t positions);
void write_disk(const OptionParams& p, const std::string& key,
                const std::vector<LocalOption>& options);

}  // namespace remat::rockmate
