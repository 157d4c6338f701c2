#include "dtr/evictor.h"

#include <algorithm>

namespace remat::dtr {
namespace {

// A victim's stored score is refreshed at most this many times per eviction before the heap's
// top is taken as it stands (a bound on the work of one eviction).
constexpr int kMaxRekeys = 64;
// Steps between two looks at the clock.
constexpr int64_t kStepsPerClockCheck = 4096;
// The most nodes a score's recomputation cost looks at.
constexpr int32_t kClosureNodes = 32;

}  // namespace

Evictor::Evictor(const Graph& graph) : g_(graph) {
  const auto values = static_cast<size_t>(g_.num_values());
  size_.resize(values);
  producer_.assign(values, -1);
  evictable_.assign(values, 0);
  hold_until_.assign(values, -1);
  for (int32_t i = 0; i < g_.num_values(); ++i) {
    const ValueId v{i};
    size_[static_cast<size_t>(i)] = g_.value(v).size_bytes;
    if (g_.is_graph_input(v)) {
      input_bytes_ += size_[static_cast<size_t>(i)];
      continue;
    }
    const NodeId p = g_.producer(v);
    producer_[static_cast<size_t>(i)] = p.value();
    evictable_[static_cast<size_t>(i)] =
        g_.node(p).recomputable && !g_.value(v).is_output && size_[static_cast<size_t>(i)] > 0;
  }
  // reach[v]: the last step that reads v or a value whose recomputation may need v (made from it
  // by recomputable nodes, graph outputs aside: they are never evicted, so never made again).
  std::vector<int32_t> reach(values, -1);
  for (int32_t n = g_.num_nodes() - 1; n >= 0; --n) {
    const Node& node = g_.node(NodeId{n});
    pass_ops_ += step_ops(node);
    for (ValueId v : node.outputs) {
      int32_t r = -1;
      for (NodeId u : g_.users(v)) {
        r = std::max(r, u.value());
        if (!g_.node(u).recomputable) continue;
        for (ValueId w : g_.node(u).outputs)
          if (!g_.value(w).is_output) r = std::max(r, reach[static_cast<size_t>(w.value())]);
      }
      reach[static_cast<size_t>(v.value())] = r;
      if (!node.recomputable && !g_.value(v).is_output) {
        hold_until_[static_cast<size_t>(v.value())] = r;
        holds_.emplace_back(r, v.value());
      }
    }
  }
  std::sort(holds_.begin(), holds_.end());
  resident_.resize(values);
  pins_.resize(values);
  read_cursor_.resize(values);
  heap_pos_.resize(values);
  touched_.resize(values);
  key_.resize(values);
  heap_.reserve(values);
  node_stamp_.assign(static_cast<size_t>(g_.num_nodes()), 0);
}

void Evictor::reset(const RunSettings& settings) {
  settings_ = settings;
  std::fill(resident_.begin(), resident_.end(), 0);
  std::fill(pins_.begin(), pins_.end(), 0);
  std::fill(read_cursor_.begin(), read_cursor_.end(), 0);
  std::fill(heap_pos_.begin(), heap_pos_.end(), -1);
  std::fill(touched_.begin(), touched_.end(), 0);
  heap_.clear();
  frames_.clear();
  slot_pinned_.clear();
  next_hold_ = 0;
  resident_bytes_ = input_bytes_;
  evicting_ = true;
  out_ = EvictionRun{};
  out_.sequence.reserve(static_cast<size_t>(g_.num_nodes()) * 2);
  out_.peak_bytes = input_bytes_;
}

EvictionRun Evictor::run(const RunSettings& settings, const Deadline& deadline) {
  reset(settings);
  deadline_ = &deadline;
  // Finishing without evicting runs each node at most once more, besides the rest of the pass.
  evict_ops_ = settings_.ops_limit - 2 * pass_ops_;
  for (int32_t n = 0; n < g_.num_nodes(); ++n) {
    now_ = n;
    if (!execute(n)) {
      out_.needs_freed_value = true;
      return std::move(out_);
    }
    if (settings_.hold_unrecomputable) free_released_holds();
  }
  return std::move(out_);
}

// Past the ops limit, the clock or the most recomputed steps, the run finishes without evicting
// or freeing: every node then runs at most once more.
void Evictor::check_limits() {
  const bool clock = out_.sequence.size() % kStepsPerClockCheck == 0 && deadline_ != nullptr &&
                     deadline_->expired();
  if (out_.ops > evict_ops_ || clock) {
    evicting_ = false;
    out_.cut_short = true;
  } else if (out_.recomputed_steps > settings_.max_recomputed_steps) {
    evicting_ = false;
    out_.thrashed = true;
  }
}

// Runs `node` of the schedule, after whatever its evicted inputs need. A frame visits its inputs
// twice: first it makes those not resident (recursively) and pins each as it is made, then it
// pins the others, making again any that a recomputation in between evicted. The inputs it
// already has stay unpinned while it recomputes (the score keeps them: an evicted value made
// from them is read soon), so a deep recomputation does not hold every level's inputs at once.
bool Evictor::execute(int32_t node) {
  push_frame(node, -1);
  while (!frames_.empty()) {
    Frame& f = frames_.back();
    const std::vector<ValueId>& inputs = g_.node(NodeId{f.node}).inputs;
    const auto count = static_cast<int32_t>(inputs.size());
    if (f.next_input < 2 * count) {
      const int32_t k = f.next_input % count;
      const bool first_visit = f.next_input < count;
      const int32_t v = inputs[static_cast<size_t>(k)].value();
      const auto slot = static_cast<size_t>(f.slot_begin + k);
      if (producer_[static_cast<size_t>(v)] < 0 || slot_pinned_[slot] ||
          (first_visit && resident_[static_cast<size_t>(v)] && f.made != v)) {
        ++f.next_input;
      } else if (resident_[static_cast<size_t>(v)]) {
        if (heap_pos_[static_cast<size_t>(v)] >= 0) heap_remove(v);
        ++pins_[static_cast<size_t>(v)];
        touched_[static_cast<size_t>(v)] = now_ + 1;
        slot_pinned_[slot] = 1;
        f.made = -1;
        ++f.next_input;
      } else {
        const int32_t p = producer_[static_cast<size_t>(v)];
        if (!g_.node(NodeId{p}).recomputable) return false;
        f.made = v;
        push_frame(p, v);  // invalidates f
      }
      continue;
    }
    run_step(f);
    slot_pinned_.resize(static_cast<size_t>(f.slot_begin));
    frames_.pop_back();
  }
  return true;
}

void Evictor::push_frame(int32_t node, int32_t want) {
  const std::vector<ValueId>& inputs = g_.node(NodeId{node}).inputs;
  const auto begin = static_cast<int32_t>(slot_pinned_.size());
  frames_.push_back(Frame{.node = node, .next_input = 0, .slot_begin = begin, .want = want});
  slot_pinned_.resize(slot_pinned_.size() + inputs.size(), 0);
  out_.ops += 1 + static_cast<int64_t>(inputs.size());
}

void Evictor::run_step(const Frame& f) {
  const Node& node = g_.node(NodeId{f.node});
  // Its outputs still resident are made again in place: pinned so that no eviction takes them.
  int64_t need = node.temp_bytes;
  for (ValueId o : node.outputs) {
    const auto v = static_cast<size_t>(o.value());
    if (resident_[v]) {
      if (heap_pos_[v] >= 0) heap_remove(o.value());
      ++pins_[v];
    } else {
      need += size_[v];
      resident_[v] = 2;  // counted once when an output is listed twice
    }
  }
  for (ValueId o : node.outputs)
    if (resident_[static_cast<size_t>(o.value())] == 2)
      resident_[static_cast<size_t>(o.value())] = 0;
  make_room(need);
  const int64_t step_bytes = resident_bytes_ + need;
  out_.peak_bytes = std::max(out_.peak_bytes, step_bytes);
  if (step_bytes > settings_.budget) out_.within_budget = false;
  out_.sequence.push_back(NodeId{f.node});
  if (evicting_) check_limits();
  out_.ops += step_ops(node);
  if (f.want >= 0) ++out_.recomputed_steps;

  for (ValueId o : node.outputs) {
    const auto v = static_cast<size_t>(o.value());
    if (resident_[v]) {
      if (pins_[v] > 0) --pins_[v];  // the pin above (an output listed twice: both unpin)
      continue;
    }
    resident_[v] = 1;
    resident_bytes_ += size_[v];
  }
  // The schedule's step: its inputs' next reads move past it.
  if (f.want < 0)
    for (ValueId input : node.inputs) {
      const auto v = static_cast<size_t>(input.value());
      const std::span<const NodeId> users = g_.users(input);
      while (read_cursor_[v] < static_cast<int32_t>(users.size()) &&
             users[static_cast<size_t>(read_cursor_[v])].value() <= f.node)
        ++read_cursor_[v];
    }
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (slot_pinned_[static_cast<size_t>(f.slot_begin) + i])
      --pins_[static_cast<size_t>(node.inputs[i].value())];
  for (ValueId input : node.inputs)
    if (producer_[static_cast<size_t>(input.value())] >= 0) settle(input.value(), -1);
  for (ValueId o : node.outputs) settle(o.value(), f.want);
}

// After a step: an unpinned value becomes a candidate for eviction, also once the schedule reads
// it no more (a value made from it may be evicted and need it again: scored by that value's next
// read, else zero, the first to go); one that cannot be made again is freed after its last read
// (unless a value made from it may still need it: hold_unrecomputable). The value a recomputation
// made for the frame below is left for that frame to pin.
void Evictor::settle(int32_t v, int32_t want) {
  const auto i = static_cast<size_t>(v);
  if (!resident_[i] || pins_[i] > 0 || v == want || !evicting_) return;
  if (!evictable_[i]) {
    if (remaining_reads(v) == 0 && !g_.value(ValueId{v}).is_output && !held(v)) drop(v);
    return;
  }
  const double key = score(v, false);
  if (heap_pos_[i] >= 0)
    heap_set_key(v, key);
  else
    heap_push(v, key);
}

bool Evictor::held(int32_t v) const {
  return settings_.hold_unrecomputable && hold_until_[static_cast<size_t>(v)] >= now_;
}

// Values of non-recomputable nodes whose hold ended with this step, if the schedule reads them
// no more.
void Evictor::free_released_holds() {
  for (; next_hold_ < holds_.size() && holds_[next_hold_].first <= now_; ++next_hold_) {
    const int32_t v = holds_[next_hold_].second;
    const auto i = static_cast<size_t>(v);
    if (evicting_ && resident_[i] && pins_[i] == 0 && remaining_reads(v) == 0) drop(v);
  }
}

int32_t Evictor::remaining_reads(int32_t v) const {
  return static_cast<int32_t>(g_.users(ValueId{v}).size()) - read_cursor_[static_cast<size_t>(v)];
}

void Evictor::make_room(int64_t need) {
  if (!evicting_) return;
  while (resident_bytes_ + need > settings_.budget && !heap_.empty()) {
    drop(pick_victim());
    ++out_.evictions;
  }
}

// The heap's least score, its stored score refreshed first: stored scores only lag behind
// (the next read comes closer, neighbours are evicted), so a value whose refreshed score is still
// the least is the least.
int32_t Evictor::pick_victim() {
  for (int tries = 0;; ++tries) {
    const int32_t v = heap_[0];
    const double h = score(v, true);
    if (h <= key_[static_cast<size_t>(v)] || tries == kMaxRekeys) return v;
    heap_set_key(v, h);
    if (heap_[0] == v) return v;
  }
}

void Evictor::drop(int32_t v) {
  const auto i = static_cast<size_t>(v);
  if (heap_pos_[i] >= 0) heap_remove(v);
  resident_[i] = 0;
  resident_bytes_ -= size_[i];
}

// h = c / (m × d): c the cost of making v again (with its evicted ancestors' that the
// recomputation needs, kClosureNodes at most: h_DTR's evicted neighbourhood), m its bytes, d the
// steps until it is needed: the schedule's next read of it or of an evicted value made from it
// (DTR's staleness, known here: the plan is made ahead). With `exact` false, c is the producer's
// cost alone and d the schedule's next read of v: a lower bound, for the stored scores.
double Evictor::score(int32_t v, bool exact) {
  const auto i = static_cast<size_t>(v);
  if (size_[i] == 0) return 0;
  ++out_.ops;
  const std::span<const NodeId> users = g_.users(ValueId{v});
  int32_t next = read_cursor_[i] < static_cast<int32_t>(users.size())
                     ? users[static_cast<size_t>(read_cursor_[i])].value()
                     : g_.num_nodes();
  double cost = g_.node(NodeId{producer_[i]}).cost;
  if (exact) {
    if (settings_.neighbours) cost = closure_cost(v);
    for (int32_t k = 0; k < read_cursor_[i]; ++k)
      for (ValueId w : g_.node(users[static_cast<size_t>(k)]).outputs) {
        const auto j = static_cast<size_t>(w.value());
        if (!resident_[j] && remaining_reads(w.value()) > 0)
          next = std::min(next, g_.users(w)[static_cast<size_t>(read_cursor_[j])].value());
      }
    out_.ops += read_cursor_[i];
  }
  if (exact && touched_[i] == now_ + 1) next = now_;  // used by this step's recomputations
  if (next >= g_.num_nodes()) return 0;               // needed by nothing the schedule still reads
  const double steps = std::max(1, next - now_);
  return cost / (static_cast<double>(size_[i]) * steps);
}

// The cost of making v again now: its producer and, through values that are not resident, the
// producers they need, kClosureNodes nodes at most (beyond it the sum so far).
double Evictor::closure_cost(int32_t v) {
  ++epoch_;
  closure_stack_.clear();
  const int32_t first = producer_[static_cast<size_t>(v)];
  closure_stack_.push_back(first);
  node_stamp_[static_cast<size_t>(first)] = epoch_;
  double cost = g_.node(NodeId{first}).cost;
  int32_t nodes = 1;
  while (!closure_stack_.empty() && nodes < kClosureNodes) {
    const Node& node = g_.node(NodeId{closure_stack_.back()});
    closure_stack_.pop_back();
    out_.ops += 1 + static_cast<int64_t>(node.inputs.size());
    for (ValueId input : node.inputs) {
      const int32_t p = producer_[static_cast<size_t>(input.value())];
      if (p < 0 || resident_[static_cast<size_t>(input.value())] ||
          node_stamp_[static_cast<size_t>(p)] == epoch_)
        continue;
      node_stamp_[static_cast<size_t>(p)] = epoch_;
      cost += g_.node(NodeId{p}).cost;
      closure_stack_.push_back(p);
      if (++nodes >= kClosureNodes) break;
    }
  }
  return cost;
}

void Evictor::heap_push(int32_t v, double key) {
  key_[static_cast<size_t>(v)] = key;
  heap_.push_back(v);
  heap_pos_[static_cast<size_t>(v)] = static_cast<int32_t>(heap_.size()) - 1;
  sift_up(static_cast<int32_t>(heap_.size()) - 1);
}

void Evictor::heap_remove(int32_t v) {
  const int32_t i = heap_pos_[static_cast<size_t>(v)];
  heap_pos_[static_cast<size_t>(v)] = -1;
  const int32_t last = heap_.back();
  heap_.pop_back();
  if (last == v) return;
  heap_place(i, last);
  sift_up(i);
  sift_down(heap_pos_[static_cast<size_t>(last)]);
}

void Evictor::heap_set_key(int32_t v, double key) {
  const double old = key_[static_cast<size_t>(v)];
  key_[static_cast<size_t>(v)] = key;
  const int32_t i = heap_pos_[static_cast<size_t>(v)];
  if (key < old)
    sift_up(i);
  else
    sift_down(i);
}

namespace {

// Ties go to the lower value id, so the order never depends on the heap's history alone.
bool before(double ka, int32_t a, double kb, int32_t b) { return ka < kb || (ka == kb && a < b); }

}  // namespace

void Evictor::sift_up(int32_t i) {
  const int32_t v = heap_[static_cast<size_t>(i)];
  const double k = key_[static_cast<size_t>(v)];
  while (i > 0) {
    const int32_t parent = (i - 1) / 2;
    const int32_t p = heap_[static_cast<size_t>(parent)];
    if (!before(k, v, key_[static_cast<size_t>(p)], p)) break;
    heap_place(i, p);
    i = parent;
    ++out_.ops;
  }
  heap_place(i, v);
}

void Evictor::sift_down(int32_t i) {
  const auto n = static_cast<int32_t>(heap_.size());
  const int32_t v = heap_[static_cast<size_t>(i)];
  const double k = key_[static_cast<size_t>(v)];
  for (;;) {
    int32_t child = 2 * i + 1;
    if (child >= n) break;
    const int32_t c0 = heap_[static_cast<size_t>(child)];
    if (child + 1 < n) {
      const int32_t c1 = heap_[static_cast<size_t>(child) + 1];
      if (before(key_[static_cast<size_t>(c1)], c1, key_[static_cast<size_t>(c0)], c0)) ++child;
    }
    const int32_t c = heap_[static_cast<size_t>(child)];
    if (!before(key_[static_cast<size_t>(c)], c, k, v)) break;
    heap_place(i, c);
    i = child;
    ++out_.ops;
  }
  heap_place(i, v);
}

void Evictor::heap_place(int32_t i, int32_t v) {
  heap_[static_cast<size_t>(i)] = v;
  heap_pos_[static_cast<size_t>(v)] = i;
}

}  // namespace remat::dtr
