// What a CUDA runtime gives back: device memory the pools map is really
// mapped (the driver's free memory drops) and really unmapped again at a
// trim; ten thousand streams, events and pools made and destroyed leave no
// descriptors, stream slots or device memory behind; and destroying the
// runtime while another thread is blocked in it is safe.
//
// The driver's own count of free memory (cuMemGetInfo) is the witness: it
// sees every context's memory, so the figures allow a little slack for what
// the driver itself allocates (far below one leaked granule per cycle).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"
#include "tests/gpu/gpu_test_util.h"

namespace streampool::gpu_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The driver's own allocations between two readings of free memory (its
// page tables, per-stream and per-event state) stay below this.
constexpr uint64_t kDriverSlack = 32 * kMiB;

TEST(GpuLifetimeTest, AGibibyteIsMappedAtAllocationAndUnmappedByTrim) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto driver = Driver::Open();
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  auto host = rt->MallocHost(4096);
  ASSERT_TRUE(host.ok()) << host.status();

  auto before = (*driver)->FreeBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  auto a = rt->MallocAsync(kGiB, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  auto mapped = (*driver)->FreeBytes();
  ASSERT_TRUE(mapped.ok());
  EXPECT_LE(*mapped + kGiB, *before) << "the pool's growth maps device memory at once";

  // The memory is the device's: a fill on the GPU, read back at its last page.
  auto* p = static_cast<unsigned char*>(a->ptr);
  ASSERT_TRUE(rt->MemsetAsync(p, 0x5a, kGiB, *s).ok());
  std::memset(*host, 0, 4096);
  ASSERT_TRUE(rt->MemcpyAsync(*host, p + kGiB - 4096, 4096, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  const auto* back = static_cast<const unsigned char*>(*host);
  int wrong = 0;
  for (int i = 0; i < 4096; ++i) wrong += back[i] != 0x5a;
  EXPECT_EQ(wrong, 0);

  ASSERT_TRUE(rt->FreeAsync(p, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  auto kept = (*driver)->FreeBytes();
  ASSERT_TRUE(kept.ok());
  EXPECT_LE(*kept, *mapped + kDriverSlack) << "threshold max keeps the memory mapped";

  ASSERT_TRUE(rt->TrimTo(*pool, 0).ok());
  auto stats = rt->GetPoolStats(*pool);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->reserved_bytes, 0u);
  auto trimmed = (*driver)->FreeBytes();
  ASSERT_TRUE(trimmed.ok());
  EXPECT_GE(*trimmed + kDriverSlack, *before) << "the trim gives the device its memory back";
  ASSERT_TRUE(rt->FreeHost(*host).ok());
}

TEST(GpuLifetimeTest, ReleaseAtSynchronizeGivesTheDeviceItsMemoryBack) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto driver = Driver::Open();
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  auto before = (*driver)->FreeBytes();
  ASSERT_TRUE(before.ok());
  auto a = rt->MallocAsync(256 * kMiB, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  auto held = (*driver)->FreeBytes();
  ASSERT_TRUE(held.ok());
  EXPECT_LE(*held + 256 * kMiB, *before);
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());  // threshold 0, the default
  auto after = (*driver)->FreeBytes();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(*after + kDriverSlack, *before);
}

// One cycle of the churn: a stream, an event and a pool made, used and
// destroyed; every other cycle leaves its free pending when the stream and
// the pool go.
absl::Status ChurnCycle(Runtime& rt, uint64_t i) {
  absl::StatusOr<StreamId> s = rt.CreateStream(0, /*non_blocking=*/i % 2 == 0);
  if (!s.ok()) return s.status();
  absl::StatusOr<EventId> e = rt.CreateEvent(kEventDisableTiming);
  if (!e.ok()) return e.status();
  PoolProps props;
  props.device = 0;
  absl::StatusOr<PoolId> pool = rt.CreatePool(props);
  if (!pool.ok()) return pool.status();
  absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(4096 + (i % 64) * 4096, *pool, *s);
  if (!a.ok()) return a.status();
  if (absl::Status st = rt.LaunchKernel(*s, 0, {}); !st.ok()) return st;
  if (absl::Status st = rt.RecordEvent(*e, *s); !st.ok()) return st;
  if (absl::Status st = rt.FreeAsync(a->ptr, *s); !st.ok()) return st;
  if (i % 2 == 1) {
    if (absl::Status st = rt.EventSynchronize(*e); !st.ok()) return st;
  }
  if (absl::Status st = rt.DestroyEvent(*e); !st.ok()) return st;
  if (absl::Status st = rt.DestroyPool(*pool); !st.ok()) return st;
  return rt.DestroyStream(*s);
}

TEST(GpuLifetimeTest, ChurnOfTenThousandStreamsEventsAndPoolsLeavesNothingBehind) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto driver = Driver::Open();
  ASSERT_TRUE(driver.ok()) << driver.status();
  // The first cycles load what the driver loads once (modules, its pools of
  // stream and event objects); the baseline is taken after them.
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(ChurnCycle(*rt, i).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
  const int fds_before = OpenFdCount();
  auto free_before = (*driver)->FreeBytes();
  ASSERT_TRUE(free_before.ok());

  constexpr uint64_t kCycles = 10000;
  constexpr uint64_t kSyncEvery = 256;
  size_t slots_after_first_window = 0;
  for (uint64_t i = 0; i < kCycles; ++i) {
    absl::Status st = ChurnCycle(*rt, i);
    ASSERT_TRUE(st.ok()) << "cycle " << i << ": " << st;
    // A destroyed stream's slot, and a destroyed pool with a free pending,
    // wait for a proof that their work is done; a device synchronize now and
    // then bounds how many wait.
    if (i % kSyncEvery == kSyncEvery - 1) {
      ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
      if (slots_after_first_window == 0) {
        slots_after_first_window = rt->impl().Introspect().clocks.size();
      }
    }
  }
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());

  EXPECT_LE(OpenFdCount(), fds_before + 4) << "descriptors grew over " << kCycles << " cycles";
  // Stream slots (every slot the ordering core ever made): at most one per
  // stream of a window between synchronizes, reused in every later window,
  // never one per stream made.
  EXPECT_LE(slots_after_first_window, kSyncEvery + 2);
  EXPECT_LE(rt->impl().Introspect().clocks.size(), slots_after_first_window)
      << "stream slots grew after the first " << kSyncEvery << " cycles";
  auto live = rt->LiveAllocations();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty()) << live->size() << " allocations outlived their pools";
  auto free_after = (*driver)->FreeBytes();
  ASSERT_TRUE(free_after.ok());
  EXPECT_GE(*free_after + kDriverSlack, *free_before)
      << "device memory not given back: " << (*free_before - *free_after) / kMiB << " MiB";
}

// spRuntimeDestroy while another thread is blocked synchronizing a stream
// whose kernel still runs, and a third keeps allocating: every call returns
// success or the destroyed handle's error, and the destroy waits for the
// kernel before it unmaps the memory that kernel uses.
TEST(GpuLifetimeTest, DestroyWhileAnotherThreadSynchronizes) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = spExecutorCuda;
  cfg.deviceCount = 1;
  cfg.deviceCapacity = 0;
  spRuntime_t rt = nullptr;
  const spError_t created = spRuntimeCreate(&rt, &cfg);
  if (created == spErrorInsufficientDriver || created == spErrorNoDevice) {
    GTEST_SKIP() << "no CUDA driver/device: " << spGetErrorString(created);
  }
  ASSERT_EQ(created, spSuccess) << spGetErrorString(created);
  spStream_t s = nullptr, other = nullptr;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamNonBlocking), spSuccess);
  ASSERT_EQ(spStreamCreate(&other, rt, 0, spStreamNonBlocking), spSuccess);
  void* p = nullptr;
  ASSERT_EQ(spMallocAsync(&p, 16 << 20, s), spSuccess);
  constexpr auto kKernel = milliseconds(500);
  const spAccess use{p, 16 << 20, 1};
  const auto launched = steady_clock::now();
  ASSERT_EQ(spLaunchKernel(s, std::chrono::nanoseconds(kKernel).count(), &use, 1), spSuccess);
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);

  auto allowed = [](spError_t r) { return r == spSuccess || r == spErrorInvalidResourceHandle; };
  std::atomic<int> sync_result{-1};
  std::thread waiter([&] { sync_result = static_cast<int>(spStreamSynchronize(s)); });
  std::atomic<bool> stop{false};
  std::atomic<int> bad_calls{0};
  std::thread allocator([&] {
    while (!stop.load()) {
      void* q = nullptr;
      const spError_t r = spMallocAsync(&q, 4096, other);
      if (!allowed(r)) ++bad_calls;
      if (r != spSuccess) break;
      if (!allowed(spFreeAsync(q, other))) ++bad_calls;
      const spError_t query = spStreamQuery(other);
      if (!allowed(query) && query != spErrorNotReady) ++bad_calls;
    }
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(sync_result.load(), -1) << "the kernel cannot have ended yet";

  std::atomic<int> destroy_result{-1};
  std::atomic<int64_t> destroyed_after_ms{-1};
  std::thread destroyer([&] {
    destroy_result = static_cast<int>(spRuntimeDestroy(rt));
    destroyed_after_ms =
        std::chrono::duration_cast<milliseconds>(steady_clock::now() - launched).count();
  });
  waiter.join();
  destroyer.join();
  stop = true;
  allocator.join();
  EXPECT_TRUE(allowed(static_cast<spError_t>(sync_result.load()))) << sync_result.load();
  EXPECT_EQ(destroy_result.load(), static_cast<int>(spSuccess));
  EXPECT_GE(destroyed_after_ms.load(), kKernel.count() * 9 / 10)
      << "the destroy returned before the kernel using its memory could have ended";
  EXPECT_EQ(bad_calls.load(), 0);
  EXPECT_EQ(spStreamQuery(s), spErrorInvalidResourceHandle);
  EXPECT_EQ(spMallocAsync(&p, 4096, other), spErrorInvalidResourceHandle);
}

}  // namespace
}  // namespace streampool::gpu_test
