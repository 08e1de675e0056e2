// The lock the runtime and registry use: std::mutex with
// Abseil's thread-safety annotations, so clang still checks ABSL_GUARDED_BY.
//
// Why not absl::Mutex: Debian's Abseil is built without NDEBUG, so every
// absl::Mutex acquisition runs deadlock-cycle detection. Measured on the
// same-stream alloc/free pair that was ~110 of ~245 ns; turning it off is a
// process-wide setting an embedded library must not make for its host.
#ifndef STREAMPOOL_SRC_UTIL_MUTEX_H_
#define STREAMPOOL_SRC_UTIL_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "src/util/lock_rank.h"

namespace streampool::internal {

// Every Mutex has its rank in the library's lock order (lock_rank.h),
// checked on each Lock in debug and sanitizer builds.
class ABSL_LOCKABLE Mutex {
 public:
  explicit Mutex(LockRank rank) : rank_(rank) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    LockRankAcquired(rank_, this);
    // A pool's lock is held for a few hundred nanoseconds, far less than a
    // sleep and a wake-up through the kernel cost; std::mutex sleeps at the
    // first failed attempt, so two threads sharing a pool spent their time
    // in futex calls. Spin for a few microseconds at most first (as glibc's
    // adaptive mutexes do), then block.
    for (int i = 0; i < kSpinAttempts; ++i) {
      if (mu_.try_lock()) return;
      for (int p = 0; p < 2; ++p) CpuRelax();
    }
    mu_.lock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    LockRankReleased(this);
  }

 private:
  friend class CondVar;
  static constexpr int kSpinAttempts = 40;
  static void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  std::mutex mu_;
  const LockRank rank_;
};

// Waits for a condition guarded by a Mutex (the one blocking lock type: the
// threads executor's queues and completion waits use it too).
class CondVar {
 public:
  // Releases *mu while waiting; holds it again on return. Spurious wakeups
  // happen: callers loop on their condition. The lock order check keeps *mu
  // as held throughout: this thread takes nothing else until it returns.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's MutexLock unlocks it
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_MUTEX_H_
