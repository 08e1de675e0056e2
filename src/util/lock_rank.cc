#include "src/util/lock_rank.h"

#include <cstdio>
#include <cstdlib>

namespace streampool::internal {

const char* LockRankName(LockRank rank) {
  switch (rank) {
    case LockRank::kRuntime:
      return "the runtime's lock";
    case LockRank::kPool:
      return "a pool's lock";
    case LockRank::kOrdering:
      return "the ordering core's lock";
    case LockRank::kStream:
      return "a stream's lock";
    case LockRank::kRecorder:
      return "the recorder's lock";
    case LockRank::kExecWorkers:
      return "the threads executor's worker table";
    case LockRank::kExecQueue:
      return "an executor's queue";
    case LockRank::kExecDone:
      return "the threads executor's completions";
    case LockRank::kDvppWindow:
      return "the DVPP window";
    case LockRank::kRegistry:
      return "the process registry";
    case LockRank::kPageMapGrowth:
      return "the page map's growth";
    case LockRank::kFaultHook:
      return "the fault hook";
  }
  return "an unknown lock";
}

#if SP_LOCK_RANK_CHECK_ENABLED
namespace {

// Deeper nesting than this is a bug by itself: the order has twelve ranks
// and no rank is held twice.
constexpr int kMaxHeld = 16;

struct Held {
  const void* lock;
  LockRank rank;
};

// Trivially destructible and constant-initialized: no per-thread
// constructor, so locks taken while a thread starts or exits are fine.
thread_local Held held[kMaxHeld];
thread_local int held_count = 0;

[[noreturn]] void Fail(const char* what, LockRank rank, const void* lock, const Held* other) {
  if (other != nullptr) {
    std::fprintf(stderr,
                 "streampool: lock order violation: %s %s (rank %d, %p) while holding %s "
                 "(rank %d, %p); the order is src/README.md's\n",
                 what, LockRankName(rank), static_cast<int>(rank), lock, LockRankName(other->rank),
                 static_cast<int>(other->rank), other->lock);
  } else {
    std::fprintf(stderr, "streampool: lock order check: %s %s (rank %d, %p)\n", what,
                 LockRankName(rank), static_cast<int>(rank), lock);
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace

void LockRankAcquired(LockRank rank, const void* lock) {
  for (int i = 0; i < held_count; ++i) {
    if (held[i].rank >= rank) Fail("taking", rank, lock, &held[i]);
  }
  if (held_count == kMaxHeld) Fail("too many locks held, taking", rank, lock, nullptr);
  held[held_count++] = Held{lock, rank};
}

void LockRankReleased(const void* lock) {
  for (int i = held_count - 1; i >= 0; --i) {
    if (held[i].lock == lock) {
      // Order among the rest does not matter: the check scans them all.
      held[i] = held[--held_count];
      return;
    }
  }
  std::fprintf(stderr,
               "streampool: lock order check: releasing %p, which this thread does not hold\n",
               lock);
  std::abort();
}

int LockRankHeldCount() { return held_count; }
#endif

}  // namespace streampool::internal
