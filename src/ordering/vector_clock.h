// A vector clock over the streams of one runtime: for every stream R, the
// highest position of R that some point is ordered after. Missing entries are
// 0, so clocks of streams created early stay short until they learn of later
// streams.
#ifndef STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_
#define STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_

#include <algorithm>
#include <cstddef>

#include "absl/container/inlined_vector.h"
#include "streampool/executor.h"

namespace streampool::internal {

class VectorClock {
 public:
  Position Get(StreamIndex s) const { return s < v_.size() ? v_[s] : 0; }

  void Raise(StreamIndex s, Position p) {
    if (s >= v_.size()) {
      if (p == 0) return;
      v_.resize(s + 1, 0);
    }
    v_[s] = std::max(v_[s], p);
  }

  // Componentwise maximum; returns whether anything changed.
  bool Join(const VectorClock& other) {
    bool changed = false;
    if (other.v_.size() > v_.size()) v_.resize(other.v_.size(), 0);
    for (size_t i = 0; i < other.v_.size(); ++i) {
      if (other.v_[i] > v_[i]) {
        v_[i] = other.v_[i];
        changed = true;
      }
    }
    return changed;
  }

  // True when every entry of this clock is <= the same entry of `other`.
  bool LessOrEqual(const VectorClock& other) const {
    for (size_t i = 0; i < v_.size(); ++i) {
      if (v_[i] > other.Get(static_cast<StreamIndex>(i))) return false;
    }
    return true;
  }

  size_t width() const { return v_.size(); }

  friend bool operator==(const VectorClock& a, const VectorClock& b) {
    const size_t n = std::max(a.v_.size(), b.v_.size());
    for (size_t i = 0; i < n; ++i) {
      if (a.Get(static_cast<StreamIndex>(i)) != b.Get(static_cast<StreamIndex>(i))) return false;
    }
    return true;
  }

 private:
  absl::InlinedVector<Position, 8> v_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_
