// The lock order check (src/util/lock_rank.h): in debug and sanitizer builds
// a lock taken out of rank order aborts at once, naming both locks, whether
// or not another thread is there to deadlock with.
#include "src/util/lock_rank.h"

#include "gtest/gtest.h"
#include "src/util/mutex.h"
#include "src/util/spin_lock.h"

namespace streampool::internal {
namespace {

#if SP_LOCK_RANK_CHECK_ENABLED

TEST(LockRankTest, InOrderNestingIsAllowedAndTracked) {
  Mutex runtime(LockRank::kRuntime), pool(LockRank::kPool), order(LockRank::kOrdering);
  SpinLock stream;
  EXPECT_EQ(LockRankHeldCount(), 0);
  {
    MutexLock a(&runtime);
    MutexLock b(&pool);
    MutexLock c(&order);
    SpinLockHolder d(&stream);
    EXPECT_EQ(LockRankHeldCount(), 4);
  }
  EXPECT_EQ(LockRankHeldCount(), 0);
  // Released out of order, then taken again from the bottom.
  runtime.Lock();
  pool.Lock();
  runtime.Unlock();
  EXPECT_EQ(LockRankHeldCount(), 1);
  pool.Unlock();
  MutexLock again(&runtime);
  EXPECT_EQ(LockRankHeldCount(), 1);
}

using LockRankDeathTest = ::testing::Test;

TEST(LockRankDeathTest, ARuntimeLockUnderAPoolLockAbortsNamingBoth) {
  Mutex runtime(LockRank::kRuntime), pool(LockRank::kPool);
  EXPECT_DEATH(
      {
        MutexLock a(&pool);
        MutexLock b(&runtime);
      },
      "lock order violation: taking the runtime's lock .* while holding a pool's lock");
}

TEST(LockRankDeathTest, TwoStreamLocksAtOnceAbort) {
  // Two locks of one rank have no order between them: the statistics
  // deadlock was two threads taking stream locks in different orders.
  SpinLock s1, s2;
  EXPECT_DEATH(
      {
        SpinLockHolder a(&s1);
        SpinLockHolder b(&s2);
      },
      "taking a stream's lock .* while holding a stream's lock");
}

TEST(LockRankDeathTest, AStreamLockBeforeTheOrderingLockAborts) {
  SpinLock stream;
  Mutex order(LockRank::kOrdering);
  EXPECT_DEATH(
      {
        SpinLockHolder a(&stream);
        MutexLock b(&order);
      },
      "taking the ordering core's lock .* while holding a stream's lock");
}

TEST(LockRankDeathTest, ReleasingALockNotHeldAborts) {
  Mutex pool(LockRank::kPool);
  EXPECT_DEATH(LockRankReleased(&pool), "does not hold");
}

#else

TEST(LockRankTest, OffInThisBuild) {
  GTEST_SKIP() << "the lock order check is built in debug and sanitizer builds only "
                  "(STREAMPOOL_LOCK_RANK_CHECK)";
}

#endif

TEST(LockRankTest, EveryRankHasAName) {
  for (LockRank r :
       {LockRank::kRuntime, LockRank::kPool, LockRank::kOrdering, LockRank::kStream,
        LockRank::kExecWorkers, LockRank::kExecQueue, LockRank::kExecDone, LockRank::kDvppWindow,
        LockRank::kRegistry, LockRank::kPageMapGrowth, LockRank::kFaultHook}) {
    EXPECT_STRNE(LockRankName(r), "an unknown lock");
  }
}

}  // namespace
}  // namespace streampool::internal
