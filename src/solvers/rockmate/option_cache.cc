#include "option_cache.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "remat/error.h"
#include "remat/files.h"

namespace remat::rockmate {
namespace {

std::filesystem::path cache_file(const OptionParams& p, const std::string& key) {
  return std::filesystem::path(p.cache_dir) / fmt::format("rockmate-{}.json", key);
}

}  // namespace

std::string cache_key(uint64_t hash, const std::string& form, const OptionParams& p,
                      double class_work, uint64_t seed) {
  // "-5": since entries hold the work spent and keys the class's share and seed ("-4": MILPs
  // and repairs stop on work limits; "-3": options also from greedy_drop_plans; "-2": from the
  // starts where a MILP finds nothing). The share in hexadecimal: exactly the double.
  return fmt::format("{:016x}-{:016x}-{}x{}-{}-{}-{}-{}-w{:a}-s{}-5", hash,
                     std::hash<std::string>{}(form), p.peak_points, p.save_points,
                     p.milp_iterations, p.milp_time_limit_s, p.milp_gap, p.milp_max_columns,
                     class_work, seed);
}

std::string memory_key(const std::string& key) { return "rockmate/" + key; }

std::optional<CachedOptions> read_disk(const OptionParams& p, const std::string& key,
                                       size_t positions) {
  if (p.cache_dir.empty()) return std::nullopt;
  std::ifstream in(cache_file(p, key));
  if (!in) return std::nullopt;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    if (doc.at("key").get<std::string>() != key) return std::nullopt;
    CachedOptions out;
    out.work = doc.at("work").get<double>();
    if (!std::isfinite(out.work) || out.work < 0) return std::nullopt;
    for (const auto& o : doc.at("options")) {
      LocalOption lo{o.at("forward").get<std::vector<int32_t>>(),
                     o.at("backward").get<std::vector<int32_t>>()};
      for (const auto* run : {&lo.forward, &lo.backward})
        for (int32_t i : *run)
          if (i < 0 || static_cast<size_t>(i) >= positions) return std::nullopt;
      out.options.push_back(std::move(lo));
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged cache entry is recomputed (and rewritten)
  }
}

void write_disk(const OptionParams& p, const std::string& key, const CachedOptions& kept) {
  if (p.cache_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(p.cache_dir, ec);
  if (ec)
    throw InputError(fmt::format("rockmate: cannot create the cache directory '{}': {}",
                                 p.cache_dir, ec.message()));
  nlohmann::json doc = {
      {"format", "remat-rockmate-options"}, {"version", 2}, {"key", key}, {"work", kept.work}};
  nlohmann::json list = nlohmann::json::array();
  for (const LocalOption& o : kept.options)
    list.push_back({{"forward", o.forward}, {"backward", o.backward}});
  doc["options"] = std::move(list);
  // Through the one atomic writer: a reader in another process never sees a partial entry.
  write_text_file_atomic(cache_file(p, key).string(), doc.dump() + '\n');
}

}  // namespace remat::rockmate
