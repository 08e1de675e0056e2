// The CUDA executor against a scripted driver (tests/fakecuda/fake_libcuda.cc,
// loaded as libcuda.so.1 through LD_LIBRARY_PATH): not a GPU, but the driver
// calls the executor makes, checked against the driver's rules (whole-mapping
// unmaps, waits that hold a stream until the record is reached, objects
// counted). Streams run only when a test says so, so what the pools may reuse
// before and after the device ran is exact. The same scenarios on a real card
// are tests/gpu/.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

struct Fake {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  template <typename F>
  F* Fn(const char* name) {
    return reinterpret_cast<F*>(dlsym(lib, name));
  }
  void Run(void* stream = nullptr) { Fn<void(void*)>("fakecuda_run")(stream); }
  size_t Pending(void* stream) { return Fn<size_t(void*)>("fakecuda_pending")(stream); }
  long Live(const char* kind) { return Fn<long(const char*)>("fakecuda_live")(kind); }
  uint64_t Mapped() { return Fn<uint64_t()>("fakecuda_device_memory_mapped")(); }
  uint64_t Calls() { return Fn<uint64_t()>("fakecuda_calls")(); }
};

std::unique_ptr<Runtime> CudaRuntime() {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kCuda;
  cfg.device_count = 0;
  cfg.device_capacity = 0;
  auto rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *std::move(rt) : nullptr;
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

class ScriptedDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = CudaRuntime();
    ASSERT_NE(rt_, nullptr);
    fake_ = Fake{};  // the runtime loaded it
    ASSERT_NE(fake_.lib, nullptr) << "the scripted driver is not the one loaded";
  }
  PoolId Pool() { return *rt_->DefaultPool(0); }
  Fake fake_;
  std::unique_ptr<Runtime> rt_;
};

TEST_F(ScriptedDriverTest, DevicesAndCapacityComeFromTheDriver) {
  EXPECT_EQ(rt_->config().device_count, 1);
  EXPECT_EQ(rt_->config().device_capacity, uint64_t{8} << 30);
}

TEST_F(ScriptedDriverTest, ASameStreamPairMakesNoDriverCall) {
  auto s = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  auto warm = rt_->MallocAsync(4 * kMiB, *s);  // the first growth maps
  ASSERT_TRUE(warm.ok());
  ASSERT_TRUE(rt_->FreeAsync(warm->ptr, *s).ok());
  const uint64_t calls = fake_.Calls();
  for (int i = 0; i < 1000; ++i) {
    auto a = rt_->MallocAsync(64u << (i % 14), *s);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(rt_->FreeAsync(a->ptr, *s).ok());
  }
  EXPECT_EQ(fake_.Calls(), calls);
}

TEST_F(ScriptedDriverTest, EventDependencyReuseWaitsNatively) {
  auto a = rt_->CreateStream(0);
  auto b = rt_->CreateStream(0);
  auto ev = rt_->CreateEvent();
  ASSERT_TRUE(a.ok() && b.ok() && ev.ok());
  auto x = rt_->MallocAsync(2 * kMiB, *a);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *b).ok());
  ASSERT_TRUE(rt_->RecordEvent(*ev, *b).ok());
  ASSERT_TRUE(rt_->StreamWaitEvent(*a, *ev).ok());
  void* na = *rt_->NativeStream(*a);
  EXPECT_EQ(fake_.Pending(na), 1u);  // the wait, held until b runs
  auto y = rt_->MallocAsync(2 * kMiB, *a);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->ptr, x->ptr);
  EXPECT_EQ(y->rule, ReuseRule::kEventDependency);
  fake_.Run();
  EXPECT_TRUE(rt_->DeviceSynchronize(0).ok());
}

TEST_F(ScriptedDriverTest, OpportunisticReuseOnlyAfterTheDeviceRan) {
  auto a = rt_->CreateStream(0);
  auto b = rt_->CreateStream(0);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(rt_->SetPoolAttribute(Pool(), PoolAttr::kReuseAllowInternalDependencies, 0).ok());
  auto x = rt_->MallocAsync(2 * kMiB, *b);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(rt_->LaunchKernel(*b, 1000, {}).ok());
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *b).ok());
  // b has not run: the free cannot be known complete.
  auto y = rt_->MallocAsync(2 * kMiB, *a);
  ASSERT_TRUE(y.ok());
  EXPECT_NE(y->ptr, x->ptr);
  fake_.Run();
  auto z = rt_->MallocAsync(2 * kMiB, *a);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->ptr, x->ptr);
  EXPECT_EQ(z->rule, ReuseRule::kOpportunistic);
  ASSERT_TRUE(rt_->FreeAsync(y->ptr, *a).ok());
  ASSERT_TRUE(rt_->FreeAsync(z->ptr, *a).ok());
  EXPECT_TRUE(rt_->DeviceSynchronize(0).ok());
}

TEST_F(ScriptedDriverTest, InternalDependencyInsertsANativeWait) {
  auto a = rt_->CreateStream(0);
  auto b = rt_->CreateStream(0);
  ASSERT_TRUE(a.ok() && b.ok());
  PoolProps props;
  props.max_size = 2 * kMiB;
  auto pool = rt_->CreatePool(props);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto x = rt_->MallocFromPoolAsync(2 * kMiB, *pool, *a);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(rt_->LaunchKernel(*a, 1000, {}).ok());
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *a).ok());
  auto y = rt_->MallocFromPoolAsync(2 * kMiB, *pool, *b);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->ptr, x->ptr);
  EXPECT_EQ(y->rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(rt_->GetPoolStats(*pool)->waits_inserted, 1u);
  EXPECT_EQ(fake_.Pending(*rt_->NativeStream(*b)), 1u);  // the wait on a's marker
  ASSERT_TRUE(rt_->FreeAsync(y->ptr, *b).ok());
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  EXPECT_EQ(fake_.Pending(*rt_->NativeStream(*b)), 0u);
  ASSERT_TRUE(rt_->DestroyPool(*pool).ok());
}

TEST_F(ScriptedDriverTest, ReleaseAtSynchronizeAndTrimUnmapDeviceMemory) {
  auto s = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  const uint64_t before = fake_.Mapped();
  auto x = rt_->MallocAsync(64 * kMiB, *s);
  ASSERT_TRUE(x.ok());
  EXPECT_GE(fake_.Mapped(), before + 64 * kMiB);
  // Any granule mapping is a whole one: a partial unmap would fail in the
  // driver, and the bytes would stay mapped.
  EXPECT_GE(fake_.Live("mappings"), 32);
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *s).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());  // threshold 0: all goes back
  EXPECT_EQ(fake_.Mapped(), before);
  EXPECT_EQ(fake_.Live("mappings"), 0);
  ASSERT_TRUE(rt_->SetPoolAttribute(Pool(), PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  auto y = rt_->MallocAsync(6 * kMiB + 100, *s);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(rt_->FreeAsync(y->ptr, *s).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());
  EXPECT_GT(fake_.Mapped(), before);
  ASSERT_TRUE(rt_->TrimTo(Pool(), 2 * kMiB).ok());
  EXPECT_LE(fake_.Mapped(), before + 2 * kMiB);
  ASSERT_TRUE(rt_->TrimTo(Pool(), 0).ok());
  EXPECT_EQ(fake_.Mapped(), before);
}

TEST_F(ScriptedDriverTest, CopiesFillsKernelsAndHostFunctionsRunOnTheStream) {
  auto s = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  auto x = rt_->MallocAsync(kMiB, *s);
  ASSERT_TRUE(x.ok());
  std::vector<unsigned char> host(kMiB, 0);
  bool ran = false;
  ASSERT_TRUE(rt_->MemsetAsync(x->ptr, 0xab, kMiB, *s).ok());
  ASSERT_TRUE(rt_->LaunchKernel(*s, 5000, {}).ok());
  ASSERT_TRUE(rt_->MemcpyAsync(host.data(), x->ptr, kMiB, *s).ok());
  ASSERT_TRUE(rt_->LaunchHostFunc(*s, [&ran] { ran = true; }).ok());
  EXPECT_FALSE(ran);
  EXPECT_EQ(host[0], 0);
  ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(host[0], 0xab);
  EXPECT_EQ(host[kMiB - 1], 0xab);
  EXPECT_EQ(fake_.Live("modules"), 1);  // the wait kernel, loaded once
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *s).ok());
}

TEST_F(ScriptedDriverTest, ElapsedTimeIsTheDriversBetweenTwoRecords) {
  auto s = rt_->CreateStream(0);
  auto e1 = rt_->CreateEvent();
  auto e2 = rt_->CreateEvent();
  ASSERT_TRUE(s.ok() && e1.ok() && e2.ok());
  ASSERT_TRUE(rt_->RecordEvent(*e1, *s).ok());
  ASSERT_TRUE(rt_->LaunchKernel(*s, 2000000, {}).ok());  // 2 ms on the scripted clock
  ASSERT_TRUE(rt_->RecordEvent(*e2, *s).ok());
  EXPECT_EQ(rt_->EventElapsedMs(*e1, *e2).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(rt_->EventSynchronize(*e2).ok());
  auto ms = rt_->EventElapsedMs(*e1, *e2);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 2.0f);
}

TEST_F(ScriptedDriverTest, AdoptedStreamsStayTheirOwners) {
  auto own = rt_->CreateStream(0);
  ASSERT_TRUE(own.ok());
  void* native = *rt_->NativeStream(*own);
  auto adopted = rt_->CreateStreamFromNative(0, native);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*rt_->NativeStream(*adopted), native);
  auto legacy = rt_->CreateStreamFromNative(0, nullptr);
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->value, rt_->LegacyStream(0)->value);
  EXPECT_EQ(*rt_->NativeStream(*legacy), nullptr);
  int not_a_stream = 0;
  EXPECT_FALSE(rt_->CreateStreamFromNative(0, &not_a_stream).ok());
  const long streams = fake_.Live("streams");
  auto x = rt_->MallocAsync(kMiB, *adopted);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, *adopted).ok());
  ASSERT_TRUE(rt_->DestroyStream(*adopted).ok());
  fake_.Run();
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  EXPECT_EQ(fake_.Live("streams"), streams);  // the adopted CUstream is still there
}

TEST_F(ScriptedDriverTest, ChurnGrowsNoDriverObjects) {
  auto cycle = [&] {
    auto s = rt_->CreateStream(0);
    auto e = rt_->CreateEvent();
    auto p = rt_->CreatePool(PoolProps{});
    ASSERT_TRUE(s.ok() && e.ok() && p.ok());
    auto x = rt_->MallocFromPoolAsync(kMiB, *p, *s);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(rt_->FreeAsync(x->ptr, *s).ok());
    ASSERT_TRUE(rt_->RecordEvent(*e, *s).ok());
    fake_.Run();
    ASSERT_TRUE(rt_->EventSynchronize(*e).ok());
    ASSERT_TRUE(rt_->DestroyEvent(*e).ok());
    ASSERT_TRUE(rt_->DestroyStream(*s).ok());
    ASSERT_TRUE(rt_->DestroyPool(*p).ok());
  };
  for (int i = 0; i < 100; ++i) cycle();
  const long streams = fake_.Live("streams"), events = fake_.Live("events");
  const long reservations = fake_.Live("reservations");
  for (int i = 0; i < 2000; ++i) cycle();
  EXPECT_LE(fake_.Live("streams"), streams);
  EXPECT_LE(fake_.Live("events"), events);
  EXPECT_LE(fake_.Live("reservations"), reservations);
}

TEST_F(ScriptedDriverTest, MallocIsCuMemAllocAndGoesBackWhenItsFreeRuns) {
  auto s = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  const long allocs = fake_.Live("allocs");
  auto p = rt_->Malloc(3 * kMiB, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(fake_.Live("allocs"), allocs + 1);
  ASSERT_TRUE(rt_->LaunchKernel(*s, 1000, {}).ok());
  ASSERT_TRUE(rt_->FreeAsync(*p, *s).ok());
  // The kernel before the free may still use it: it stays until the stream
  // is seen past the free.
  EXPECT_EQ(fake_.Live("allocs"), allocs + 1);
  ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());
  EXPECT_EQ(fake_.Live("allocs"), allocs);
  auto q = rt_->Malloc(kMiB, 0);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(rt_->Free(*q).ok());
  EXPECT_EQ(fake_.Live("allocs"), allocs);
}

TEST_F(ScriptedDriverTest, PinnedHostMemoryIsPageLocked) {
  const long allocs = fake_.Live("allocs");
  auto h = rt_->MallocHost(4096);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(fake_.Live("allocs"), allocs + 1);
  std::memset(*h, 1, 4096);
  ASSERT_TRUE(rt_->FreeHost(*h).ok());
  EXPECT_EQ(fake_.Live("allocs"), allocs);
  PoolProps props;
  props.alloc_type = AllocationType::kPinnedHost;
  auto pool = rt_->CreatePool(props);
  ASSERT_TRUE(pool.ok()) << pool.status();
  props.alloc_type = AllocationType::kDvpp;
  EXPECT_EQ(rt_->CreatePool(props).status().code(), absl::StatusCode::kUnimplemented);
  props.alloc_type = AllocationType::kHugePage;
  EXPECT_EQ(rt_->CreatePool(props).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ScriptedDriverLifetimeTest, DestroyingTheRuntimeGivesEveryDriverObjectBack) {
  Fake fake;
  {
    auto rt = CudaRuntime();
    ASSERT_NE(rt, nullptr);
    fake = Fake{};
    auto s = rt->CreateStream(0);
    auto e = rt->CreateEvent();
    ASSERT_TRUE(s.ok() && e.ok());
    auto x = rt->MallocAsync(8 * kMiB, *s);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(rt->LaunchKernel(*s, 100, {}).ok());
    ASSERT_TRUE(rt->RecordEvent(*e, *s).ok());
    ASSERT_TRUE(rt->FreeAsync(x->ptr, *s).ok());
    auto h = rt->MallocHost(4096);
    ASSERT_TRUE(h.ok());
    // Work still queued: the destroy runs it, then gives everything back.
  }
  for (const char* kind : {"streams", "events", "handles", "reservations", "mappings", "allocs"}) {
    EXPECT_EQ(fake.Live(kind), 0) << kind;
  }
  EXPECT_EQ(fake.Mapped(), 0u);
}

TEST(ScriptedDriverLifetimeTest, PeerGrantsMapForThePeerNowAndLater) {
  setenv("FAKECUDA_DEVICES", "2", 1);
  auto rt = CudaRuntime();
  unsetenv("FAKECUDA_DEVICES");
  ASSERT_NE(rt, nullptr);
  ASSERT_EQ(rt->config().device_count, 2);
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  auto pool = rt->CreatePool(PoolProps{});
  ASSERT_TRUE(pool.ok());
  auto x = rt->MallocFromPoolAsync(4 * kMiB, *pool, *s);
  ASSERT_TRUE(x.ok());
  MemAccessDesc grant;
  grant.location = MemLocation{MemLocationType::kDevice, 1};
  grant.flags = MemAccessFlags::kProtReadWrite;
  ASSERT_TRUE(rt->SetPeerAccessible(1, 0, true).ok());
  ASSERT_TRUE(rt->SetPoolAccess(*pool, {&grant, 1}).ok());
  EXPECT_EQ(*rt->GetPoolAccess(*pool, grant.location), MemAccessFlags::kProtReadWrite);
  // Memory mapped after the grant is the peer's too (the driver checks the
  // devices it is given and that every byte is mapped).
  auto y = rt->MallocFromPoolAsync(64 * kMiB, *pool, *s);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_TRUE(rt->FreeAsync(x->ptr, *s).ok());
  ASSERT_TRUE(rt->FreeAsync(y->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
}

TEST(ScriptedDriverLifetimeTest, NoDeviceIsCudasNoDevice) {
  setenv("FAKECUDA_DEVICES", "0", 1);
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kCuda;
  cfg.device_count = 0;
  cfg.device_capacity = 0;
  auto rt = Runtime::Create(cfg);
  unsetenv("FAKECUDA_DEVICES");
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(ToCError(rt.status()), spErrorNoDevice);
  cfg.device_count = 3;  // the scripted machine has one
  rt = Runtime::Create(cfg);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(ToCError(rt.status()), spErrorInvalidDevice);
}

}  // namespace
}  // namespace streampool
