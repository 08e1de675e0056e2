// Lock ranks: the one order in which a thread may take the library's locks,
// checked on every acquisition in debug and sanitizer builds.
//
// A deadlock needs a cycle of threads, each holding a lock the next one
// wants. If every lock has a rank and a thread only ever takes a lock of a
// higher rank than all those it holds, no cycle can form. Checking that on
// each acquisition reports an inversion the first time the code path runs,
// not the rare time two threads interleave badly enough to hang (the idea of
// the Linux kernel's lockdep, with the order fixed up front instead of
// learned). Two locks of one rank are never held together: two stream locks
// taken in different orders by two threads were exactly such a cycle.
//
// The order is src/README.md's ("Locks"): the runtime's lock, then a pool's,
// then the ordering core's, then a stream's, then the leaves (executor queues,
// the DVPP window, the process registry, the page map's growth, the fault
// hook), which never take another lock of the library while held — but for
// the executor's, which nest among themselves in rank order.
//
// STREAMPOOL_LOCK_RANK_CHECK is set by the build for debug and sanitizer
// builds; without it every hook is an empty inline function.
#ifndef STREAMPOOL_SRC_UTIL_LOCK_RANK_H_
#define STREAMPOOL_SRC_UTIL_LOCK_RANK_H_

#include <cstdint>

namespace streampool::internal {

enum class LockRank : uint8_t {
  kRuntime = 10,        // RuntimeImpl::mu_
  kPool = 20,           // MemPool::central_mu_
  kOrdering = 30,       // the ordering core's (Sequencer)
  kStream = 40,         // a stream slot's SpinLock (pos(S), its front caches)
  kRecorder = 45,       // Recorder: the open recording's tables and buffer
  kExecWorkers = 50,    // ThreadExecutor: the worker table
  kExecQueue = 51,      // ThreadExecutor: one worker's queue; AdapterExecutor's state
  kExecDone = 52,       // ThreadExecutor: completions, for cross-stream waits
  kDvppWindow = 60,     // the process's DVPP address window
  kRegistry = 70,       // the process registry (runtimes, address ranges)
  kPageMapGrowth = 80,  // the page map's node allocation
  kFaultHook = 90,      // the test-only fault injection (called under anything)
};

const char* LockRankName(LockRank rank);

#if defined(STREAMPOOL_LOCK_RANK_CHECK) && STREAMPOOL_LOCK_RANK_CHECK
#define SP_LOCK_RANK_CHECK_ENABLED 1
// Aborts, naming both locks, when this thread holds a lock whose rank is not
// below `rank`; then records `lock` as held.
void LockRankAcquired(LockRank rank, const void* lock);
// Forgets `lock` (locks may be released in any order).
void LockRankReleased(const void* lock);
// The number of locks this thread holds (for tests).
int LockRankHeldCount();
#else
#define SP_LOCK_RANK_CHECK_ENABLED 0
inline void LockRankAcquired(LockRank, const void*) {}
inline void LockRankReleased(const void*) {}
inline int LockRankHeldCount() { return 0; }
#endif

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_LOCK_RANK_H_
