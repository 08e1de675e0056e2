// Allocator: the fast path against pools that come and go. A thread
// allocating from its device's current pool may have found a pool just
// before another thread destroyed it; the pool must not be freed under it
// (ASan and TSan in CI watch this test).
#include "src/runtime/allocator.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

TEST(AllocatorTest, CurrentPoolDestroyedWhileAnotherThreadAllocates) {
  RuntimeConfig cfg;
  cfg.device_capacity = uint64_t{1} << 30;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  // The checker (on through the environment) would keep every call on the
  // runtime's lock; the race is the fast path's.
  (*rt)->EnableChecker(false);
  absl::StatusOr<StreamId> s = (*rt)->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> pairs{0};
  std::thread allocator([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      absl::StatusOr<AllocInfo> a = (*rt)->MallocAsync(256, *s);
      if (!a.ok()) continue;
      EXPECT_TRUE((*rt)->FreeAsync(a->ptr, *s).ok());
      pairs.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Each round makes a pool current, lets the other thread cache in it, and
  // destroys it: the device falls back to its default pool.
  PoolProps props;
  for (int round = 0; round < 200; ++round) {
    absl::StatusOr<PoolId> pool = (*rt)->CreatePool(props);
    ASSERT_TRUE(pool.ok());
    ASSERT_TRUE((*rt)->SetCurrentPool(0, *pool).ok());
    const uint64_t seen = pairs.load(std::memory_order_relaxed);
    while (pairs.load(std::memory_order_relaxed) < seen + 2) std::this_thread::yield();
    ASSERT_TRUE((*rt)->DestroyPool(*pool).ok());
  }
  stop = true;
  allocator.join();
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  absl::StatusOr<PoolId> dflt = (*rt)->DefaultPool(0);
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ((*rt)->CurrentPool(0).value(), *dflt);
  EXPECT_TRUE((*rt)->CheckPoolInvariants(*dflt).ok());
  EXPECT_GT(pairs.load(), 400u);
}

}  // namespace
}  // namespace streampool
