// Vector clocks over the streams of one runtime: for every stream R, the
// highest position of R that some point is ordered after. Missing entries are
// 0.
//
// Clocks are sparse, so that memory grows with the streams that order each
// other rather than with the square of the streams (docs/design.md, "Clocks scale
// with interaction"). A clock has two parts, and Get answers the larger:
//
//   * its own entries, a sorted vector of (stream, position) holding only the
//     streams it learned of (an event wait, an inserted wait, a proof);
//   * shared parts (SharedClock): frozen snapshots of another stream's clock,
//     held by reference. The ordering core makes them of the legacy streams:
//     every blocking stream of a device is ordered after its legacy stream's
//     clock, which covers every blocking stream, so a copy in each would cost
//     N² entries for N blocking streams; a reference costs one.
//
// A shared part's table is a ClockTrie, a persistent radix tree: a change
// copies the nodes on one path and shares the rest with the snapshots that
// still refer to the old version, which go away with the last clock holding
// them. Snapshots of one stream's table are ordered by a version that grows
// with every change, and a later one holds every entry of an earlier one, so
// a clock keeps one snapshot per owner.
#ifndef STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_
#define STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "streampool/executor.h"

namespace streampool::internal {

// A map from stream to position whose copies share their nodes. A handle is
// used like a value: distinct handles may be read, copied and destroyed on
// distinct threads although they share nodes (node counts are atomic, and a
// node reachable from more than one handle is never written: Raise copies
// it first). One handle is not written while another thread uses it.
class ClockTrie {
 public:
  // Slots per node: 16 keeps a path short (4 nodes cover 65 536 streams)
  // and a copied path small.
  static constexpr size_t kFanout = 16;

  ClockTrie() = default;
  ClockTrie(const ClockTrie& other) : root_(other.root_), height_(other.height_) {
    if (root_ != nullptr) root_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  ClockTrie(ClockTrie&& other) noexcept
      : root_(std::exchange(other.root_, nullptr)), height_(std::exchange(other.height_, 0)) {}
  ClockTrie& operator=(const ClockTrie& other) {
    ClockTrie copy(other);
    Swap(copy);
    return *this;
  }
  ClockTrie& operator=(ClockTrie&& other) noexcept {
    ClockTrie moved(std::move(other));
    Swap(moved);
    return *this;
  }
  ~ClockTrie() {
    if (root_ != nullptr) Unref(root_, height_);
  }

  Position Get(StreamIndex s) const {
    const Node* n = root_;
    if (n == nullptr || s >= Span(height_)) return 0;
    for (uint32_t h = height_; h > 0; --h) {
      n = static_cast<const Inner*>(n)->child[(s >> (kBits * h)) & kMask];
      if (n == nullptr) return 0;
    }
    return static_cast<const Leaf*>(n)->slot[s & kMask];
  }
  // Returns whether the entry rose.
  bool Raise(StreamIndex s, Position p);
  bool empty() const { return root_ == nullptr; }
  // One past the highest stream with a nonzero entry.
  size_t Width() const;
  // Nonzero entries, ascending.
  void ForEach(absl::FunctionRef<void(StreamIndex, Position)> f) const;
  // The nonzero entries of `now` in the nodes it does not share with
  // `before`: when `before` is an earlier version of the same table, every
  // entry that may have risen since (and, it being a superset, all that
  // joining `now` into what already holds `before` needs).
  static void ForEachChanged(const ClockTrie& now, const ClockTrie& before,
                             absl::FunctionRef<void(StreamIndex, Position)> f);
  // Calls `visit` on every node, descending below one only when it returns
  // true (so that a caller can count nodes shared by many tables once).
  void VisitNodes(absl::FunctionRef<bool(const void*)> visit) const;

 private:
  static constexpr uint32_t kBits = 4;
  static constexpr StreamIndex kMask = kFanout - 1;
  struct Node {
    std::atomic<uint32_t> refs{1};  // handles and parents referring to it
  };
  struct Leaf : Node {
    Position slot[kFanout] = {};
  };
  struct Inner : Node {
    Node* child[kFanout] = {};
  };
  // Streams covered by a node `height` levels above the leaves.
  static uint64_t Span(uint32_t height) { return uint64_t{1} << (kBits * (height + 1)); }
  static void Unref(Node* n, uint32_t height);
  // Makes *link a node that only this handle reaches, copying a shared one.
  static void Own(Node** link, uint32_t height);
  void Swap(ClockTrie& other) {
    std::swap(root_, other.root_);
    std::swap(height_, other.height_);
  }

  Node* root_ = nullptr;
  uint32_t height_ = 0;  // levels of inner nodes above the leaves
};

// A frozen snapshot of one stream's clock, shared by reference.
struct SharedClock {
  StreamIndex owner = kNoStream;
  Position at = 0;       // the owner's own entry
  uint64_t version = 0;  // of the owner's table: a higher one holds every entry of a lower one
  ClockTrie table;       // the owner's entries for other streams

  Position Get(StreamIndex s) const {
    const Position p = table.Get(s);
    return s == owner ? std::max(p, at) : p;
  }
};

class VectorClock {
 public:
  Position Get(StreamIndex s) const {
    Position p = OwnGet(s);
    for (const SharedClock& sh : shared_) p = std::max(p, sh.Get(s));
    return p;
  }

  void Raise(StreamIndex s, Position p);

  // Componentwise maximum; returns whether anything changed (an entry rose,
  // or a later snapshot of a shared part replaced an earlier one).
  bool Join(const VectorClock& other);
  // Joins `shared` by reference: the clock is now at least that snapshot.
  bool JoinShared(const SharedClock& shared);

  // True when every entry of this clock is <= the same entry of `other`.
  bool LessOrEqual(const VectorClock& other) const;

  // One past the highest stream with a nonzero entry.
  size_t width() const;
  // Entries this clock stores itself: own entries and one per shared part
  // (whose tables ClockFootprint counts, once however many clocks share
  // them).
  size_t stored_entries() const { return entries_.size() + shared_.size(); }
  absl::Span<const SharedClock> shared() const { return shared_; }
  // Own entries, ascending.
  template <typename F>
  void ForEachOwn(F&& f) const {
    for (const Entry& e : entries_) f(e.stream, e.position);
  }

  friend bool operator==(const VectorClock& a, const VectorClock& b) {
    return a.LessOrEqual(b) && b.LessOrEqual(a);
  }

 private:
  friend class ClockFootprint;
  struct Entry {
    StreamIndex stream;
    Position position;
  };

  Position OwnGet(StreamIndex s) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), s,
                               [](const Entry& e, StreamIndex k) { return e.stream < k; });
    return it != entries_.end() && it->stream == s ? it->position : 0;
  }
  Position SharedGet(StreamIndex s) const {
    Position p = 0;
    for (const SharedClock& sh : shared_) p = std::max(p, sh.Get(s));
    return p;
  }
  // Drops own entries a shared part now covers.
  void Prune();

  absl::InlinedVector<Entry, 2> entries_;       // ascending by stream, positions nonzero
  absl::InlinedVector<SharedClock, 1> shared_;  // at most one per owner
};

// The memory clocks hold, in entries: own entries, one per shared part, and
// the slots of every table node once, however many tables share it. For
// tests and tools; it walks every node.
class ClockFootprint {
 public:
  void Add(const VectorClock& clock);
  void Add(const ClockTrie& table);
  size_t entries() const { return entries_; }

 private:
  absl::flat_hash_set<const void*> seen_;
  size_t entries_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_ORDERING_VECTOR_CLOCK_H_
