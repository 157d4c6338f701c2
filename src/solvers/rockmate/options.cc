// rk-Checkmate options per class of identical blocks (options.h): the block model
// (block_model.h), the grid of MILPs per class (option_grid.h), the caches (option_cache.h).
#include "options.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <thread>

#include "block_model.h"
#include "option_cache.h"
#include "option_grid.h"

namespace remat::rockmate {

bool milp_available() {
#ifdef REMAT_HAVE_CBC
  return true;
#else
  return false;
#endif
}

std::vector<std::vector<LocalOption>> class_options(const Graph& graph, const BlockStructure& bs,
                                                    const OptionParams& params,
                                                    const Limits& limits, SolveCache* cache,
                                                    OptionStats& stats) {
  const size_t classes = bs.classes.size();
  std::vector<std::vector<LocalOption>> out(classes);
  stats.runs_per_class.assign(classes, 0);
  struct Work {
    size_t cls;
    uint64_t seed;
    std::string key;
    BlockModel model;
    std::vector<int64_t> grid;
    ClassResult result;
  };
  // Every class with a grid gets an even share of the work and a seed by its place among them,
  // whether or not the caches hold its options: a class's options, the work they cost and so the
  // plan do not depend on what earlier solves left in the caches.
  std::vector<size_t> with_grid;
  for (size_t c = 0; c < classes; ++c) {
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[c].members.front())];
    out[c] = {keep_all(rep), keep_nothing(graph, rep)};
    // The loss stage has no forward output to hand on: keep-all and keep-nothing only.
    if (params.milp && milp_available() && rep.stage != static_cast<int32_t>(bs.blocks.size()))
      with_grid.push_back(c);
  }
  const double class_work =
      limits.left() / static_cast<double>(std::max<size_t>(with_grid.size(), 1));
  std::vector<Work> work;
  for (size_t t = 0; t < with_grid.size(); ++t) {
    const size_t c = with_grid[t];
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[c].members.front())];
    const uint64_t seed = 1 + t;
    const std::string key = cache_key(bs.classes[c].canonical_hash, canonical_form(graph, rep),
                                      params, class_work, seed);
    std::shared_ptr<const CachedOptions> kept;
    if (cache != nullptr) kept = cache->find<CachedOptions>(memory_key(key));
    if (kept) {
      ++stats.memory_hits;
    } else if (auto disk = read_disk(params, key, rep.nodes.size())) {
      ++stats.disk_hits;
      kept = std::make_shared<const CachedOptions>(std::move(*disk));
      if (cache != nullptr) cache->store(memory_key(key), *kept);
    }
    if (kept) {
      out[c] = kept->options;
      stats.work += kept->work;
      continue;
    }
    Work w{c, seed, key, block_model(graph, rep), {}, {}};
    w.grid = peak_grid(w.model, params.peak_points);
    work.push_back(std::move(w));
  }
  // Independent classes on `threads` workers; results land in fixed slots. An exception leaving a
  // worker thread would end the process: each is kept and the first rethrown after the join.
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(work.size());
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < work.size();) {
      Limits class_limits(class_work, limits.deadline());
      if (class_limits.stop()) {
        work[t].result.cut_short = true;
        continue;
      }
      try {
        work[t].result = solve_class(work[t].model, work[t].grid, params.save_points, params,
                                     class_limits, work[t].seed);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
  };
  const int threads =
      std::clamp<int>(params.threads, 1, static_cast<int>(std::max<size_t>(work.size(), 1)));
  if (threads == 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (Work& w : work) {
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[w.cls].members.front())];
    std::vector<LocalOption>& list = out[w.cls];
    stats.runs_per_class[w.cls] += w.result.runs;
    stats.milp_runs += w.result.runs;
    stats.milp_feasible += w.result.feasible;
    stats.milp_reused += w.result.reused;
    stats.options_from_start += w.result.from_start;
    stats.options_greedy += w.result.greedy;
    stats.classes_too_large += w.result.too_large ? 1 : 0;
    stats.wall_clock_stops += w.result.wall_clock_stops;
    stats.work_limit_stops += w.result.work_limit_stops;
    stats.work += w.result.work;
    for (const Sequence& plan : w.result.plans) {
      LocalOption o = to_option(graph, rep, w.model, plan);
      if (std::find(list.begin(), list.end(), o) == list.end()) list.push_back(std::move(o));
    }
    if (w.result.cut_short) {
      // Only complete grids are kept: a grid the limits cut short depends on them.
      (limits.deadline().expired() ? stats.timed_out : stats.grid_work_limit) = true;
      continue;
    }
    const CachedOptions kept{list, w.result.work};
    if (cache != nullptr) cache->store(memory_key(w.key), kept);
    write_disk(params, w.key, kept);
  }
  return out;
}

}  // namespace remat::rockmate
