// option_cache.h — internal to rockmate: where a class's options are kept between solves, in the
// caller's SolveCache and, with a cache directory, on disk (one JSON file per key).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace remat::rockmate {

// A class's complete grid as a solve computed it: its options and the work units it spent, which
// a solve served from the cache spends as well (so the work left to the DPs, and to a portfolio's
// later members, is the same with or without the cache).
struct CachedOptions {
  std::vector<LocalOption> options;
  double work = 0;
};

// A class's key: its canonical hash and form, the parameters its options depend on, the class's
// share of the work and its MILPs' seed. With all of them in the key an entry is exactly what the
// grid would compute again, so the cache changes no plan.
std::string cache_key(uint64_t hash, const std::string& form, const OptionParams& p,
                      double class_work, uint64_t seed);
// Entries of the caller's SolveCache are CachedOptions by cache_key, under this prefix.
std::string memory_key(const std::string& key);
// The options kept on disk under `key` (nullopt: none, damaged, or a position not below
// `positions`).
std::optional<CachedOptions> read_disk(const OptionParams& p, const std::string& key,
                                       size_t positions);
void write_disk(const OptionParams& p, const std::string& key, const CachedOptions& kept);

}  // namespace remat::rockmate
