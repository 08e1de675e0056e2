// AsymmetricFence: the two halves of a store-then-load handshake between a
// hot side that runs often and a cold side that runs rarely.
//
// Each side stores its flag, then loads the other's; without a full fence on
// both sides each may miss the other's store. A full fence on the hot side
// costs what a locked instruction does, so the fence is moved to the cold
// side alone: membarrier(2)'s PRIVATE_EXPEDITED command makes every running
// thread of the process execute a full fence, which orders the hot side's
// store and load as though it had fenced itself (the asymmetric fence of RCU
// and of folly's asymmetric_thread_fence_heavy). The hot side then needs only
// the compiler's ordering. Where the kernel lacks the command, the light half
// is a real fence and users that only win with the cheap half (the biased
// stream lock) switch themselves off.
#ifndef STREAMPOOL_SRC_UTIL_ASYMMETRIC_FENCE_H_
#define STREAMPOOL_SRC_UTIL_ASYMMETRIC_FENCE_H_

#include <atomic>

namespace streampool::internal {

class AsymmetricFence {
 public:
  // Registers the process for the heavy half, once; later calls return at
  // once. Made before the first light half runs (a runtime's construction).
  static void Init();
  // Whether the light half is only the compiler's barrier.
  static bool cheap() { return cheap_.load(std::memory_order_relaxed); }
  static void Light() {
    if (cheap()) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  // A full fence on every thread of the process running now, this one too.
  static void Heavy();

 private:
  static inline std::atomic<bool> cheap_{false};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_ASYMMETRIC_FENCE_H_
