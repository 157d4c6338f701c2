// ids.h — strong 32-bit ids and vectors indexed by them.
// NodeId and ValueId are distinct types, so a node index cannot be used where a value index is
// expected; IdVector<ValueId, T> only accepts a ValueId.
//   IdVector<ValueId, int64_t> size_bytes(graph.num_values());
//   size_bytes[ValueId{3}] = 64;      // size_bytes[NodeId{3}] does not compile
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace remat {

template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(int32_t v) : v_(v) {}
  constexpr int32_t value() const { return v_; }
  constexpr bool valid() const { return v_ >= 0; }
  auto operator<=>(const Id&) const = default;

 private:
  int32_t v_ = -1;
};

using NodeId = Id<struct NodeTag>;
using ValueId = Id<struct ValueTag>;
inline constexpr NodeId kNoNode{};
inline constexpr ValueId kNoValue{};

// The plain indices of `nodes`, for code that works on flat arrays (annealing, CP, Python).
inline std::vector<int32_t> node_indices(std::span<const NodeId> nodes) {
  std::vector<int32_t> out;
  out.reserve(nodes.size());
  for (NodeId n : nodes) out.push_back(n.value());
  return out;
}

// A std::vector indexed by one id type.
template <class IdType, class T>
class IdVector {
 public:
  IdVector() = default;
  explicit IdVector(size_t n, const T& init = T()) : data_(n, init) {}

  T& operator[](IdType id) { return data_[static_cast<size_t>(id.value())]; }
  const T& operator[](IdType id) const { return data_[static_cast<size_t>(id.value())]; }
  size_t size() const { return data_.size(); }
  void assign(size_t n, const T& init) { data_.assign(n, init); }
  void push_back(T x) { data_.push_back(std::move(x)); }
  auto begin() { return data_.begin(); }
  auto end() { return data_.end(); }
  auto begin() const { return data_.begin(); }
  auto end() const { return data_.end(); }
  std::vector<T>& raw() { return data_; }
  const std::vector<T>& raw() const { return data_; }

 private:
  std::vector<T> data_;
};

}  // namespace remat

template <class Tag>
struct std::hash<remat::Id<Tag>> {
  size_t operator()(remat::Id<Tag> id) const noexcept { return std::hash<int32_t>()(id.value()); }
};
