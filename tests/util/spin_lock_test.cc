// SpinLock: biased to the first thread that takes it, revoked when another
// comes, given to a thread that then takes it many times in a row, and
// mutually exclusive through all of it (a plain counter counts exactly).
#include "src/util/spin_lock.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/util/asymmetric_fence.h"

namespace streampool::internal {
namespace {

class SpinLockTest : public testing::Test {
 protected:
  void SetUp() override { AsymmetricFence::Init(); }
  // Whether this build and kernel bias at all (not under ThreadSanitizer,
  // not without membarrier's expedited command).
  static bool Biases() {
    SpinLock probe;
    { SpinLockHolder hold(&probe); }
    return probe.biased();
  }
};

TEST_F(SpinLockTest, TheFirstThreadTakesTheBiasAndAnotherRevokesIt) {
  if (!Biases()) GTEST_SKIP() << "no bias here: ThreadSanitizer build or no membarrier(2)";
  SpinLock lock;
  EXPECT_FALSE(lock.biased()) << "nobody has taken it yet";
  { SpinLockHolder hold(&lock); }
  EXPECT_TRUE(lock.biased());
  std::thread other([&] { SpinLockHolder hold(&lock); });
  other.join();
  EXPECT_FALSE(lock.biased()) << "another thread came: the bias is gone";
  // The former owner takes the shared lock now, and still excludes.
  { SpinLockHolder hold(&lock); }
  EXPECT_FALSE(lock.biased());
}

TEST_F(SpinLockTest, AThreadTakingItOftenEnoughInARowGetsTheBias) {
  if (!Biases()) GTEST_SKIP() << "no bias here: ThreadSanitizer build or no membarrier(2)";
  SpinLock lock;
  { SpinLockHolder hold(&lock); }
  std::thread worker([&] {
    // The maker touched it first; the worker that drives it takes over.
    for (int i = 0; i < 2000; ++i) SpinLockHolder hold(&lock);
    EXPECT_TRUE(lock.biased());
  });
  worker.join();
}

// Threads that take turns at every size of streak: some acquisitions biased,
// some revoking, some shared, some re-biasing. A plain counter that only the
// holder touches must come out exact.
TEST_F(SpinLockTest, ExcludesThroughRevocationsAndRebiases) {
  SpinLock lock;
  uint64_t counter = 0;
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> expected{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t mine = 0;
      for (int round = 0; round < 40; ++round) {
        // Streaks of 1 to ~2 500: below and above the re-bias streak.
        const int streak = 1 + (round * 97 + t * 31) % 2500;
        for (int i = 0; i < streak; ++i) {
          SpinLockHolder hold(&lock);
          const uint64_t v = counter;
          counter = v + 1;
          ++mine;
        }
        std::this_thread::yield();
      }
      expected += mine;
    });
  }
  for (std::thread& th : threads) th.join();
  SpinLockHolder hold(&lock);
  EXPECT_EQ(counter, expected.load());
}

}  // namespace
}  // namespace streampool::internal
