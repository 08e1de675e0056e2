// Allocator: the paths without the runtime's lock. A thread allocating from
// its device's current pool may have found a pool just before another thread
// destroyed it; the pool must not be freed under it. An allocation that must
// grow its pool holds the pool's lock and the ordering core's, not the
// runtime's (ASan and TSan in CI watch these tests).
#include "src/runtime/allocator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
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

// Host memory whose Map can be held at a gate, so that a test can act while
// an allocation is inside its pool's growth.
class GatedMemory final : public PhysicalMemory {
 public:
  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (armed_) {
        entered_ = true;
        cv_.notify_all();
        // A bound, not a pause: the test opens the gate as soon as it is done.
        cv_.wait_for(lock, std::chrono::seconds(60), [this] { return open_; });
      }
    }
    return inner_->Map(bytes);
  }
  void Unmap(const Mapping& mapping) override { inner_->Unmap(mapping); }
  bool touchable() const override { return true; }
  const char* name() const override { return "gated"; }

  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [this] { return entered_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::unique_ptr<PhysicalMemory> inner_ = NewHostMemory();
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool entered_ = false;
  bool open_ = false;
};

static_assert(kIsPhysicalMemory<GatedMemory>);

TEST(AllocatorTest, GrowthHoldsThePoolAndOrderingLocksNotTheRuntimes) {
  RuntimeConfig cfg;
  cfg.device_capacity = uint64_t{1} << 30;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  (*rt)->EnableChecker(false);  // the checker's records need the runtime's lock
  auto gated = std::make_shared<GatedMemory>();
  PoolProps props;
  absl::StatusOr<PoolId> pool = (*rt)->CreatePool(props, gated);
  ASSERT_TRUE(pool.ok());
  absl::StatusOr<StreamId> s = (*rt)->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  gated->Arm();
  absl::StatusOr<AllocInfo> grown;
  std::thread grower([&] { grown = (*rt)->MallocFromPoolAsync(4 << 20, *pool, *s); });
  ASSERT_TRUE(gated->WaitEntered());
  // Calls that need the runtime's lock (and neither that pool's lock nor the
  // ordering core's) finish while the growth is held at the gate.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread other([&] {
    absl::StatusOr<PoolId> q = (*rt)->CreatePool(props);
    EXPECT_TRUE(q.ok());
    absl::StatusOr<uint64_t> reserved = (*rt)->GetPoolAttribute(*q, PoolAttr::kReservedMemCurrent);
    EXPECT_TRUE(reserved.ok());
    EXPECT_TRUE((*rt)->DestroyPool(*q).ok());
    absl::StatusOr<EventId> e = (*rt)->CreateEvent();
    EXPECT_TRUE(e.ok());
    EXPECT_TRUE((*rt)->DestroyEvent(*e).ok());
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  // Bounded: were the runtime's lock held, `other` would wait for the gate.
  bool finished_first;
  {
    std::unique_lock<std::mutex> lock(mu);
    finished_first = cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; });
  }
  gated->Open();
  other.join();
  grower.join();
  EXPECT_TRUE(finished_first) << "a call waited for another pool's growth";
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->rule, ReuseRule::kFresh);
  ASSERT_TRUE((*rt)->FreeAsync(grown->ptr, *s).ok());
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  EXPECT_TRUE((*rt)->CheckPoolInvariants(*pool).ok());
}

}  // namespace
}  // namespace streampool
