// SpinLock: the lock of a stream's few-instruction critical sections (its
// position and its front caches, docs/design.md "Performance model").
//
// Why not Mutex (std::mutex): its unlock is a locked read-modify-write, so a
// lock/unlock pair costs two atomic instructions where this costs one (the
// release is a plain store); on the same-stream alloc/free pair those are
// most of the time left. It is held for tens of nanoseconds and is
// uncontended unless two host threads share a stream or a synchronize call
// flushes the stream's caches, so waiting spins, then yields the CPU.
// Never hold it across anything that blocks.
#ifndef STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_
#define STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "src/util/lock_rank.h"

namespace streampool::internal {

class ABSL_LOCKABLE SpinLock {
 public:
  // Stream locks are the only spin locks; the rank is fixed so the lock
  // stays one byte of state.
  static constexpr LockRank kRank = LockRank::kStream;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    LockRankAcquired(kRank, this);
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= 64) sched_yield();
      }
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    locked_.store(false, std::memory_order_release);
    LockRankReleased(this);
  }

 private:
  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const mu_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_SPIN_LOCK_H_
