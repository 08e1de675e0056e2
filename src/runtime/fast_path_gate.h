// FastPathGate: whether the allocator's paths without the runtime's lock may
// run, and the epoch its per-thread memos were resolved under.
//
// Contract. The switch is on only while nothing needs to see each call (no
// checker, no recorded timeline, no per-call host cost, not destroyed): the
// owner says so with Set, under the ordering lock. The epoch is a value no
// gate of this process had before (so a memo left by a destroyed runtime
// never matches a new one at its address); Invalidate replaces it whenever a
// memoized resolution could change (a stream or pool destroyed, a device's
// current pool set, the switch turned), after the change is made and before
// what it unpublished is freed. Readers are lock-free and never write: a
// memo is valid exactly while the epoch it read is the current one.
#ifndef STREAMPOOL_SRC_RUNTIME_FAST_PATH_GATE_H_
#define STREAMPOOL_SRC_RUNTIME_FAST_PATH_GATE_H_

#include <atomic>
#include <cstdint>

namespace streampool::internal {

class FastPathGate {
 public:
  FastPathGate() = default;
  FastPathGate(const FastPathGate&) = delete;
  FastPathGate& operator=(const FastPathGate&) = delete;

  bool on() const { return on_.load(std::memory_order_acquire); }
  // The epoch, read before a resolution it will validate ...
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // ... and re-read under a stream lock, which orders it: the fast path's
  // check, a plain load.
  uint64_t epoch_relaxed() const { return epoch_.load(std::memory_order_relaxed); }

  void Set(bool on) {
    on_.store(on, std::memory_order_release);
    Invalidate();
  }
  void Invalidate() { epoch_.store(NewEpoch(), std::memory_order_release); }

 private:
  static uint64_t NewEpoch() {
    // Process-wide: see the contract.
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<bool> on_{false};
  std::atomic<uint64_t> epoch_{NewEpoch()};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_FAST_PATH_GATE_H_
