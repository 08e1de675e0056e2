// SpinLock: the lock of a stream's few-instruction critical sections (its
// position and its front caches, docs/design.md "Performance model").
//
// Why not Mutex (std::mutex): its lock and unlock are locked
// read-modify-writes, and on the same-stream alloc/free pair such
// instructions are most of the time left. It is held for tens of
// nanoseconds; waiting spins, then yields the CPU. Never hold it across
// anything that blocks.
//
// Biased to one thread. A stream is nearly always driven by one host thread,
// so the lock belongs to the first thread that takes it, which then takes it
// with plain stores and loads: it raises `owner_in_`, and enters unless
// `revoking_` is set (the hot half of an AsymmetricFence handshake). The
// first other thread to come revokes the bias: under the
// shared lock it raises `revoking_`, runs the heavy fence (so the owner,
// whatever it is doing, either shows it is inside or will see the flag) and
// waits for the owner to leave; from then on everyone takes the shared lock,
// an exchange, until one thread has taken it many times in a row and the
// bias goes to it (Rebias). Where the heavy fence
// is unavailable, or under ThreadSanitizer (which cannot see it), the lock is
// never biased.
#ifndef STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_
#define STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "src/util/asymmetric_fence.h"
#include "src/util/lock_rank.h"

namespace streampool::internal {

class ABSL_LOCKABLE SpinLock {
 public:
  // Stream locks are the only spin locks; the rank is fixed.
  static constexpr LockRank kRank = LockRank::kStream;

  ABSL_ATTRIBUTE_ALWAYS_INLINE void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    LockRankAcquired(kRank, this);
    const uintptr_t me = ThisThread();
    uintptr_t owner = owner_.load(std::memory_order_relaxed);
    if (owner == kUnowned && kMayBias && AsymmetricFence::cheap() &&
        owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed)) {
      owner = me;  // the one read-modify-write of the bias, the first time
    }
    if (owner == me) {
      owner_in_.store(true, std::memory_order_relaxed);
      AsymmetricFence::Light();
      // `revoking_` first, then the owner again: a Rebias clears `revoking_`
      // only after the revocation's kShared, so a thread that sees it clear
      // from a later Rebias sees the bias gone too, never its own stale
      // ownership. The owner was the last to hold the lock before the bias
      // was taken (Rebias runs in its shared hold), so there is no other
      // holder's release to acquire.
      if (!revoking_.load(std::memory_order_acquire) &&
          owner_.load(std::memory_order_relaxed) == me) {
        biased_hold_ = true;
        return;
      }
      owner_in_.store(false, std::memory_order_release);
    }
    LockShared();
    biased_hold_ = false;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (biased_hold_) {
      owner_in_.store(false, std::memory_order_release);
    } else {
      locked_.store(false, std::memory_order_release);
    }
    LockRankReleased(this);
  }

  // Whether the lock is still biased to a thread (tests).
  bool biased() const {
    const uintptr_t o = owner_.load(std::memory_order_relaxed);
    return o != kUnowned && o != kShared;
  }

 private:
  static constexpr uintptr_t kUnowned = 0;
  static constexpr uintptr_t kShared = 1;
#if defined(__SANITIZE_THREAD__)
  static constexpr bool kMayBias = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  static constexpr bool kMayBias = false;
#else
  static constexpr bool kMayBias = true;
#endif
#else
  static constexpr bool kMayBias = true;
#endif

  // A thread's token: the address of a thread-local, distinct among live
  // threads (a later thread may reuse an exited one's, and with it the bias:
  // the exited thread holds nothing).
  static uintptr_t ThisThread() {
    static thread_local char token __attribute__((tls_model("initial-exec")));
    return reinterpret_cast<uintptr_t>(&token);
  }

  // The shared lock; then, if the lock is still biased, the revocation.
  ABSL_ATTRIBUTE_NOINLINE void LockShared() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= 64) sched_yield();
      }
    }
    // Read again under the shared lock: a revoker stored kShared before it
    // let the lock go.
    uintptr_t owner = owner_.load(std::memory_order_relaxed);
    if (owner == kShared) {
      Rebias();
      return;
    }
    if (owner == kUnowned &&
        owner_.compare_exchange_strong(owner, kShared, std::memory_order_relaxed)) {
      return;  // never biased (off), and now never will be
    }
    if (owner == kShared) return;
    if (owner != ThisThread()) {
      revoking_.store(true, std::memory_order_relaxed);
      AsymmetricFence::Heavy();
      // Acquire: the owner's last section happens before this one.
      for (int spins = 0; owner_in_.load(std::memory_order_acquire); ++spins) {
        if (spins >= 64) sched_yield();
      }
    }
    owner_.store(kShared, std::memory_order_relaxed);
  }

  // Shared, the lock goes back to a thread that has taken it kRebiasStreak
  // times in a row: the stream has a new driver (a worker given a stream its
  // maker touched first). Two threads taking turns more slowly than that pay
  // a revocation (a membarrier call, microseconds) per streak.
  void Rebias() {
    const uintptr_t me = ThisThread();
    if (last_ != me) {
      last_ = me;
      streak_ = 1;
      return;
    }
    if (++streak_ < kRebiasStreak || !kMayBias || !AsymmetricFence::cheap()) return;
    streak_ = 0;
    revoking_.store(false, std::memory_order_release);
    owner_.store(me, std::memory_order_relaxed);
  }

  std::atomic<uintptr_t> owner_{kUnowned};
  std::atomic<bool> owner_in_{false};
  std::atomic<bool> revoking_{false};
  std::atomic<bool> locked_{false};
  static constexpr uint32_t kRebiasStreak = 1024;
  // The holder's alone: how it holds the lock.
  bool biased_hold_ = false;
  // The shared lock's holder's: who took it last, how many times in a row.
  uintptr_t last_ = kUnowned;
  uint32_t streak_ = 0;
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  ABSL_ATTRIBUTE_ALWAYS_INLINE explicit SpinLockHolder(SpinLock* mu)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const mu_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_
