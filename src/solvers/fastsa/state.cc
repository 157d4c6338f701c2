#include "state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "remat/error.h"

namespace remat::fastsa {
namespace {

// Nop slots sit this far below any real memory figure, so the tree's maximum is always taken
// over occupied slots (Appendix C.2 uses the same trick for the log-add-exp tree).
constexpr int64_t kNopOffset = int64_t{1} << 62;
constexpr double kSoftNopOffset = 1e4;  // 2^-1e4 is 0 in double
// Graphs with at least this many values prefetch the times of a mutation's values.
constexpr int32_t kPrefetchValues = 1 << 15;

}  // namespace

SaState::SaState(const UnitTable& units, int32_t slots, std::span<const int32_t> order,
                 double soft_peak_scale)
    : units_(&units), slots_(slots), soft_scale_(soft_peak_scale) {
  REMAT_CHECK(slots > 0 && (slots & (slots - 1)) == 0, "fastsa: slot count must be a power of 2");
  REMAT_CHECK(static_cast<size_t>(slots) > order.size(), "fastsa: more units than slots");
  int64_t total = 0;
  for (int64_t s : units.value_size) total += s;
  for (int64_t s : units.temp) total = std::max(total, s);
  if (total >= kNopOffset / 4)
    throw InputError(
        fmt::format("fastsa: the value sizes add up to {} bytes, too large for the "
                    "memory tree (limit {})",
                    total, kNopOffset / 4));
  slot_.assign(static_cast<size_t>(slots), kNop);
  occupied_pos_.assign(static_cast<size_t>(slots), -1);
  occupied_.reserve(static_cast<size_t>(slots) / 2);
  place_all(order);
}

// The state of adding `order` one unit at a time, built at once: the trees' leaves from every
// value's live intervals (a difference array), so a graph of a million nodes is set up in time
// linear in slots and edges instead of one tree update per interval.
void SaState::place_all(std::span<const int32_t> order) {
  const auto k = static_cast<int64_t>(order.size());
  std::vector<int32_t> produced(static_cast<size_t>(units_->num_values()), 0);
  std::vector<int32_t> used(static_cast<size_t>(units_->num_values()), 0);
  for (int32_t unit : order) {
    for (int32_t v : units_->inputs(unit)) ++used[static_cast<size_t>(v)];
    for (int32_t v : units_->outputs(unit)) ++produced[static_cast<size_t>(v)];
  }
  times_.reset(produced, used);
  auto slot_of = [&](int64_t i) { return static_cast<int32_t>((i + 1) * slots_ / (k + 1)); };
  for (int64_t i = 0; i < k; ++i) {
    REMAT_CHECK(is_nop(slot_of(i)), "fastsa: initial layout collision");
    occupy(order[static_cast<size_t>(i)], slot_of(i));
  }
  // Slots ascend, so every list stays sorted; a value's productions go in before its uses.
  for (int64_t i = 0; i < k; ++i)
    for (int32_t v : units_->outputs(order[static_cast<size_t>(i)]))
      times_.push_production(v, slot_of(i));
  for (int64_t i = 0; i < k; ++i)
    for (int32_t v : units_->inputs(order[static_cast<size_t>(i)])) times_.push_use(v, slot_of(i));
  std::vector<int64_t> leaves;
  std::vector<double> soft;
  leaves_from_scratch(leaves, soft);
  max_tree_.reset(leaves);
  if (!soft.empty()) soft_tree_.reset(soft);
  // The log-add-exp tree's doubles would come back rounded otherwise than by the inverse
  // mutation's adds, which the plans are made with: with it, undo stays the inverse mutation.
  max_tree_.keep_undo_log(soft.empty());
}

void SaState::leaves_from_scratch(std::vector<int64_t>& leaves, std::vector<double>& soft) const {
  const auto slots = static_cast<size_t>(slots_);
  std::vector<int64_t> live(slots + 1, 0);
  for (int32_t v = 0; v < units_->num_values(); ++v) {
    const std::span<const int32_t> prod = times_.productions(v);
    const int64_t size = units_->value_size[static_cast<size_t>(v)];
    for (size_t j = 0; j < prod.size() && size != 0; ++j) {
      const int32_t next = j + 1 < prod.size() ? prod[j + 1] : kNoTime;
      live[static_cast<size_t>(prod[j])] += size;
      live[static_cast<size_t>(interval_end(v, prod[j], next)) + 1] -= size;
    }
  }
  leaves.assign(slots, 0);
  soft.assign(soft_scale_ > 0 ? slots : 0, 0.0);
  int64_t bytes = 0;
  for (size_t t = 0; t < slots; ++t) {
    bytes += live[t];
    const int32_t unit = slot_[t];
    const int64_t temp = unit == kNop ? 0 : units_->temp[static_cast<size_t>(unit)];
    leaves[t] = bytes + temp - (unit == kNop ? kNopOffset : 0);
    if (!soft.empty())
      soft[t] =
          static_cast<double>(bytes + temp) * soft_scale_ - (unit == kNop ? kSoftNopOffset : 0);
  }
}

bool SaState::trees_match_rebuild() const {
  std::vector<int64_t> leaves;
  std::vector<double> soft;
  leaves_from_scratch(leaves, soft);
  for (int32_t t = 0; t < slots_; ++t) {
    if (max_tree_.leaf(t) != leaves[static_cast<size_t>(t)]) return false;
    if (!soft.empty() && std::abs(soft_tree_.leaf(t) - soft[static_cast<size_t>(t)]) >
                             1e-6 * (1 + std::abs(soft[static_cast<size_t>(t)])))
      return false;
  }
  // The root is the maximum over the leaves (a stale inner node would show here).
  return max_tree_.root() == *std::max_element(leaves.begin(), leaves.end());
}

double SaState::soft_peak() const {
  return soft_tree_.root() / soft_scale_ + static_cast<double>(units_->resident_bytes);
}

bool SaState::can_add(int32_t unit, int32_t t) const {
  if (!units_->recomputable[static_cast<size_t>(unit)]) return false;
  for (int32_t v : units_->inputs(unit))
    if (times_.first(v).production >= t) return false;
  return true;
}

bool SaState::can_remove(int32_t t) const {
  const int32_t unit = unit_at(t);
  if (!units_->recomputable[static_cast<size_t>(unit)]) return false;
  for (int32_t v : units_->outputs(unit)) {
    const FirstTimes& first = times_.first(v);
    if (first.production < t) continue;  // an earlier production serves every use
    // t is the first production: no use may come before the next one, and an output must
    // keep a production.
    if (first.second_production == kNoTime) {
      if (units_->value_is_output[static_cast<size_t>(v)] || first.use != kNoTime) return false;
    } else if (first.use < first.second_production) {
      return false;
    }
  }
  return true;
}

bool SaState::after_first_production(int32_t unit, int32_t t) const {
  const std::span<const int32_t> outputs = units_->outputs(unit);
  return !outputs.empty() && std::all_of(outputs.begin(), outputs.end(),
                                         [&](int32_t v) { return times_.first(v).production < t; });
}

bool SaState::can_move(int32_t from, int32_t to) const {
  const int32_t unit = unit_at(from);
  for (int32_t v : units_->inputs(unit))
    if (times_.first(v).production >= to) return false;
  if (to < from) return true;  // every output is produced earlier than before
  for (int32_t v : units_->outputs(unit)) {
    const FirstTimes& first = times_.first(v);
    if (first.production < from) continue;
    if (first.use < std::min(first.second_production, to)) return false;
  }
  return true;
}

std::pair<int32_t, int32_t> SaState::move_range(int32_t from) const {
  const int32_t unit = unit_at(from);
  int32_t lo = -1, hi = slots_;
  for (int32_t v : units_->inputs(unit)) lo = std::max(lo, times_.first(v).production);
  for (int32_t v : units_->outputs(unit)) {
    const FirstTimes& first = times_.first(v);
    if (first.production == from && first.use < first.second_production)
      hi = std::min(hi, first.use);
  }
  return {lo, hi};
}

void SaState::add(int32_t unit, int32_t t) {
  last_ = {.kind = Mutation::kAdd, .unit = unit, .to = t};
  max_tree_.clear_undo_log();
  add_deferred(unit, t);
  rebuild_trees();
}

void SaState::remove(int32_t t) {
  last_ = {.kind = Mutation::kRemove, .unit = unit_at(t), .from = t};
  max_tree_.clear_undo_log();
  remove_deferred(t);
  rebuild_trees();
}

void SaState::move(int32_t from, int32_t to) {
  const int32_t unit = unit_at(from);
  last_ = {.kind = Mutation::kMove, .unit = unit, .from = from, .to = to};
  max_tree_.clear_undo_log();
  remove_deferred(from);
  add_deferred(unit, to);
  rebuild_trees();
}

void SaState::undo_last() {
  const LastMutation last = last_;
  REMAT_CHECK(last.kind != Mutation::kNone, "fastsa: undo_last without a mutation to undo");
  if (soft_scale_ == 0) {
    // The slots and times as the inverse mutation leaves them (the occupied slots in its order,
    // which the sampling reads), and the tree from its undo log: the same peaks from here on.
    if (last.kind == Mutation::kAdd) take_back(last.to);
    if (last.kind == Mutation::kRemove) put_back(last.unit, last.from);
    if (last.kind == Mutation::kMove) move_back(last.to, last.from);
    max_tree_.restore();
    last_ = {};
    return;
  }
  switch (last.kind) {
    case Mutation::kAdd:
      remove(last.to);
      break;
    case Mutation::kRemove:
      add(last.unit, last.from);
      break;
    case Mutation::kMove:
      move(last.to, last.from);
      break;
    case Mutation::kNone:
      break;
  }
  last_ = {};
}

// Only where the values' times outgrow the caches: on a small graph they are all there already.
void SaState::prefetch_times(int32_t unit) const {
  if (units_->num_values() < kPrefetchValues) return;
  for (int32_t v : units_->inputs(unit)) times_.prefetch(v);
  for (int32_t v : units_->outputs(unit)) times_.prefetch(v);
}

void SaState::add_deferred(int32_t unit, int32_t t) {
  prefetch_times(unit);
  for (int32_t v : units_->inputs(unit)) add_use(v, t);
  for (int32_t v : units_->outputs(unit)) add_production(v, t);
  place(unit, t);
}

void SaState::remove_deferred(int32_t t) {
  const int32_t unit = unit_at(t);
  prefetch_times(unit);
  for (int32_t v : units_->inputs(unit)) remove_use(v, t);
  for (int32_t v : units_->outputs(unit)) remove_production(v, t);
  clear(t);
}

void SaState::take_back(int32_t t) {
  const int32_t unit = unit_at(t);
  prefetch_times(unit);
  for (int32_t v : units_->inputs(unit)) times_.erase_use(v, t);
  for (int32_t v : units_->outputs(unit)) times_.erase_production(v, t);
  vacate(t);
}

void SaState::put_back(int32_t unit, int32_t t) {
  prefetch_times(unit);
  for (int32_t v : units_->inputs(unit)) times_.insert_use(v, t);
  for (int32_t v : units_->outputs(unit)) {
    const std::span<const int32_t> prod = times_.productions(v);
    const int32_t index = count_before(prod, t);
    times_.insert_production_at(v, index, t);
  }
  occupy(unit, t);
}

void SaState::move_back(int32_t from, int32_t to) {
  const int32_t unit = unit_at(from);
  prefetch_times(unit);
  for (int32_t v : units_->inputs(unit)) times_.replace_use(v, from, to);
  for (int32_t v : units_->outputs(unit)) times_.replace_production(v, from, to);
  vacate(from);
  occupy(unit, to);
}

std::vector<int32_t> SaState::sequence() const {
  std::vector<int32_t> order;
  order.reserve(occupied_.size());
  for (int32_t t = 0; t < slots_; ++t)
    if (!is_nop(t)) order.push_back(unit_at(t));
  return order;
}

void SaState::rebuild_trees() {
  max_tree_.rebuild();
  if (soft_scale_ > 0) soft_tree_.rebuild();
}

void SaState::add_live(int32_t first, int32_t last, int64_t bytes) {
  if (first > last || bytes == 0) return;
  max_tree_.add_deferred(first, last, bytes);
  if (soft_scale_ > 0)
    soft_tree_.add_deferred(first, last, static_cast<double>(bytes) * soft_scale_);
}

int32_t SaState::interval_end(int32_t v, int32_t p, int32_t next) const {
  if (next == kNoTime && units_->value_is_output[static_cast<size_t>(v)]) return slots_ - 1;
  const std::span<const int32_t> u = times_.uses(v);
  auto it = next == kNoTime ? u.end() : u.begin() + count_before(u, next);
  if (it != u.begin() && *(it - 1) > p) return *(it - 1);
  return p;
}

// A use at t extends the interval of the production before it (case 2 of §2.2.1) when it is
// the new last use; a use with no production before it does not count (only during a move).
void SaState::add_use(int32_t v, int32_t t) {
  const std::span<const int32_t> prod = times_.productions(v);
  auto it = prod.begin() + count_before(prod, t);
  if (it != prod.begin()) {
    const int32_t p = *(it - 1), next = it == prod.end() ? kNoTime : *it;
    const int32_t end = interval_end(v, p, next);
    if (end < t) add_live(end + 1, t, units_->value_size[static_cast<size_t>(v)]);
  }
  times_.insert_use(v, t);
}

void SaState::remove_use(int32_t v, int32_t t) {
  times_.erase_use(v, t);
  const std::span<const int32_t> prod = times_.productions(v);
  auto it = prod.begin() + count_before(prod, t);
  if (it == prod.begin()) return;
  const int32_t p = *(it - 1), next = it == prod.end() ? kNoTime : *it;
  const int32_t end = interval_end(v, p, next);
  if (end < t) add_live(end + 1, t, -units_->value_size[static_cast<size_t>(v)]);
}

// A production at t opens [t, end] and cuts the previous production's interval at its last use
// before t (cases 2 and 3 of §2.2.1).
void SaState::add_production(int32_t v, int32_t t) {
  const std::span<const int32_t> prod = times_.productions(v);
  const auto it = prod.begin() + count_before(prod, t);
  const int32_t next = it == prod.end() ? kNoTime : *it;
  const int64_t size = units_->value_size[static_cast<size_t>(v)];
  add_live(t, interval_end(v, t, next), size);
  if (it != prod.begin()) {
    const int32_t p = *(it - 1);
    const int32_t old_end = interval_end(v, p, next), new_end = interval_end(v, p, t);
    if (old_end > new_end) add_live(new_end + 1, old_end, -size);
  }
  times_.insert_production_at(v, static_cast<int32_t>(it - prod.begin()), t);
}

// The inverse: closes [t, end] and lets the previous production's interval run on to the uses
// t served (case 4 of §2.2.1, merge).
void SaState::remove_production(int32_t v, int32_t t) {
  times_.erase_production(v, t);
  const std::span<const int32_t> prod = times_.productions(v);
  auto it = prod.begin() + count_before(prod, t);
  const int32_t next = it == prod.end() ? kNoTime : *it;
  const int64_t size = units_->value_size[static_cast<size_t>(v)];
  add_live(t, interval_end(v, t, next), -size);
  if (it != prod.begin()) {
    const int32_t p = *(it - 1);
    const int32_t old_end = interval_end(v, p, t), new_end = interval_end(v, p, next);
    if (new_end > old_end) add_live(old_end + 1, new_end, size);
  }
}

void SaState::occupy(int32_t unit, int32_t t) {
  slot_[static_cast<size_t>(t)] = unit;
  occupied_pos_[static_cast<size_t>(t)] = static_cast<int32_t>(occupied_.size());
  occupied_.push_back(t);
  cost_ += units_->cost[static_cast<size_t>(unit)];
}

void SaState::vacate(int32_t t) {
  const int32_t unit = unit_at(t);
  const int32_t pos = occupied_pos_[static_cast<size_t>(t)];
  const int32_t last = occupied_.back();
  occupied_[static_cast<size_t>(pos)] = last;
  occupied_pos_[static_cast<size_t>(last)] = pos;
  occupied_.pop_back();
  occupied_pos_[static_cast<size_t>(t)] = -1;
  slot_[static_cast<size_t>(t)] = kNop;
  cost_ -= units_->cost[static_cast<size_t>(unit)];
}

void SaState::place(int32_t unit, int32_t t) {
  occupy(unit, t);
  const int64_t temp = units_->temp[static_cast<size_t>(unit)];
  max_tree_.add_to_leaf_deferred(t, kNopOffset + temp);
  if (soft_scale_ > 0)
    soft_tree_.add_deferred(t, t, kSoftNopOffset + static_cast<double>(temp) * soft_scale_);
}

void SaState::clear(int32_t t) {
  const int32_t unit = unit_at(t);
  vacate(t);
  const int64_t temp = units_->temp[static_cast<size_t>(unit)];
  max_tree_.add_to_leaf_deferred(t, -(kNopOffset + temp));
  if (soft_scale_ > 0)
    soft_tree_.add_deferred(t, t, -(kSoftNopOffset + static_cast<double>(temp) * soft_scale_));
}

}  // namespace remat::fastsa
