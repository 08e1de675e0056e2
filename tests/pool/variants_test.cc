// Pool variants selected by pool properties: DVPP, huge-page, pinned host,
// the ACL rounding rule, and user upstreams (DESIGN.md "Pool variants").
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/memory/upstreams.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

uint64_t AlignUp(uint64_t v, uint64_t k) { return (v - 1) / k * k + k; }

std::unique_ptr<Runtime> MakeRuntime(Backing backing, uint64_t capacity = kGiB) {
  RuntimeConfig cfg;
  cfg.backing = backing;
  cfg.device_capacity = capacity;
  auto rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return *std::move(rt);
}

bool MachineHasExplicitHugePages() {
  std::ifstream f("/proc/sys/vm/nr_hugepages");
  uint64_t n = 0;
  f >> n;
  return n > 0;
}

class BackingTest : public ::testing::TestWithParam<Backing> {};

TEST_P(BackingTest, DvppBlocksStart128AlignedAndUseTheDvppSizeRule) {
  auto rt = MakeRuntime(GetParam());
  PoolProps props;
  props.alloc_type = AllocationType::kDvpp;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  uint64_t expected_used = 0;
  std::vector<void*> ptrs;
  for (uint64_t len : {1, 31, 32, 96, 100, 127, 128, 1000, 4096, 65535}) {
    auto a = rt->MallocFromPoolAsync(len, *pool, *s);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->ptr) % 128, 0u) << len;
    expected_used += AlignUp(AlignUp(len, 32) + 32, 128);
    ptrs.push_back(a->ptr);
    auto used = rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent);
    ASSERT_TRUE(used.ok());
    EXPECT_EQ(*used, expected_used) << "after len " << len;
  }
  // The example: 100 bytes occupy 256.
  auto a = rt->MallocFromPoolAsync(100, *pool, *s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent), expected_used + 256);
  // Inside the process's DVPP window.
  const uintptr_t base = internal::DvppWindow::Get().base();
  const auto p = reinterpret_cast<uintptr_t>(a->ptr);
  EXPECT_GE(p, base);
  EXPECT_LT(p, base + internal::DvppWindow::kSize);
  EXPECT_TRUE(rt->CheckPoolInvariants(*pool).ok());
}

TEST_P(BackingTest, PinnedHostPoolIs64ByteAlignedAndReportsDeviceMinusOne) {
  auto rt = MakeRuntime(GetParam());
  PoolProps props;
  props.alloc_type = AllocationType::kPinnedHost;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto s = rt->CreateStream(0);
  auto a = rt->MallocFromPoolAsync(1, *pool, *s);
  ASSERT_TRUE(a.ok());
  auto b = rt->MallocFromPoolAsync(1, *pool, *s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->ptr) - reinterpret_cast<uintptr_t>(a->ptr), 64u);
  EXPECT_EQ(*rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent), 128u);
  auto attr = rt->GetPointerAttributes(b->ptr);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->device, -1);
  EXPECT_EQ(attr->pool, *pool);
  // Pinned pools cannot be a device's current pool.
  EXPECT_EQ(rt->SetCurrentPool(0, *pool).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BackingTest, AclRoundingRuleSizesBlocksAlignUp32Plus32) {
  auto rt = MakeRuntime(GetParam());
  PoolProps props;
  props.acl_rounding = true;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  uint64_t used = 0;
  for (uint64_t len : {1, 32, 33, 100, 4096}) {
    ASSERT_TRUE(rt->MallocFromPoolAsync(len, *pool, *s).ok());
    used += AlignUp(len, 32) + 32;
    EXPECT_EQ(*rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent), used) << len;
  }
  EXPECT_EQ(used, 64u + 64 + 96 + 160 + 4128);
  PoolProps pinned;
  pinned.alloc_type = AllocationType::kPinnedHost;
  pinned.acl_rounding = true;
  EXPECT_EQ(rt->CreatePool(pinned).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BackingTest, HugePageBytesByKindSumToReserved) {
  auto rt = MakeRuntime(GetParam());
  for (PagePolicy policy : {PagePolicy::kHugeFirst, PagePolicy::kNormalOnly}) {
    PoolProps props;
    props.alloc_type = AllocationType::kHugePage;
    props.page_policy = policy;
    auto pool = rt->CreatePool(props);
    ASSERT_TRUE(pool.ok());
    auto s = rt->CreateStream(0);
    ASSERT_TRUE(rt->MallocFromPoolAsync(5 * kMiB, *pool, *s).ok());
    auto st = rt->GetPoolStats(*pool);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->reserved_bytes, 6 * kMiB);
    EXPECT_EQ(st->huge_page_bytes + st->transparent_huge_page_bytes + st->normal_page_bytes,
              st->reserved_bytes);
    if (policy == PagePolicy::kNormalOnly) {
      EXPECT_EQ(st->normal_page_bytes, st->reserved_bytes);
    } else if (GetParam() == Backing::kAddressOnly) {
      // Nothing is mapped: bytes count under the policy's first choice.
      EXPECT_EQ(st->huge_page_bytes, st->reserved_bytes);
    }
  }
}

TEST_P(BackingTest, HugeOnlyFailsCleanlyWithoutHugePages) {
  auto rt = MakeRuntime(GetParam());
  PoolProps props;
  props.alloc_type = AllocationType::kHugePage;
  props.page_policy = PagePolicy::kHugeOnly;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  if (GetParam() == Backing::kHost && MachineHasExplicitHugePages()) {
    GTEST_SKIP() << "this machine has explicit huge pages; the failure path needs none";
  }
  if (GetParam() == Backing::kAddressOnly) {
    // Address-only memory always "gets" its first choice; the budget is what
    // makes HugeOnly fail there.
    ASSERT_TRUE(rt->SetHugePageBudget(0, 2 * kMiB).ok());
    ASSERT_TRUE(rt->MallocFromPoolAsync(kMiB, *pool, *s).ok());
  }
  auto before = rt->GetPoolStats(*pool);
  auto a = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  auto after = rt->GetPoolStats(*pool);
  EXPECT_EQ(after->failed_alloc_count, before->failed_alloc_count + 1);
  EXPECT_EQ(after->reserved_bytes, before->reserved_bytes);
  EXPECT_EQ(after->upstream_maps, before->upstream_maps);
  EXPECT_TRUE(rt->CheckPoolInvariants(*pool).ok());
}

TEST(HugePageTest, ExplicitHugePagesWhenTheMachineHasThem) {
  if (!MachineHasExplicitHugePages()) {
    GTEST_SKIP() << "no explicit huge pages configured (vm.nr_hugepages = 0)";
  }
  auto rt = MakeRuntime(Backing::kHost);
  PoolProps props;
  props.alloc_type = AllocationType::kHugePage;
  props.page_policy = PagePolicy::kHugeOnly;
  auto pool = rt->CreatePool(props);
  auto s = rt->CreateStream(0);
  auto a = rt->MallocFromPoolAsync(kMiB, *pool, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(rt->GetPoolStats(*pool)->huge_page_bytes, 2 * kMiB);
}

TEST(HugePageTest, BudgetMakesHugeFirstFallBackToNormal) {
  auto rt = MakeRuntime(Backing::kAddressOnly);
  ASSERT_TRUE(rt->SetHugePageBudget(0, 4 * kMiB).ok());
  PoolProps props;
  props.alloc_type = AllocationType::kHugePage;
  auto pool = rt->CreatePool(props);
  auto s = rt->CreateStream(0);
  auto a = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s);  // 4 MiB: fits the budget
  auto b = rt->MallocFromPoolAsync(2 * kMiB, *pool, *s);  // 2 MiB more: beyond it
  ASSERT_TRUE(a.ok() && b.ok());
  auto st = rt->GetPoolStats(*pool);
  EXPECT_EQ(st->huge_page_bytes, 4 * kMiB);
  EXPECT_EQ(st->normal_page_bytes, 2 * kMiB);
  EXPECT_EQ(st->reserved_bytes, 6 * kMiB);
  // Releasing gives the budget back: after the sync both chunks are gone, and
  // a new reservation is on huge pages again.
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE(rt->FreeAsync(b->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_EQ(rt->GetPoolStats(*pool)->reserved_bytes, 0u);
  ASSERT_TRUE(rt->MallocFromPoolAsync(2 * kMiB, *pool, *s).ok());
  EXPECT_EQ(rt->GetPoolStats(*pool)->huge_page_bytes, 2 * kMiB);
}

TEST(DvppWindowTest, SixteenthGiBReservationFailsWhileADevicePoolSucceeds) {
  RuntimeConfig cfg;
  cfg.backing = Backing::kAddressOnly;
  cfg.device_capacity = 64 * kGiB;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  PoolProps props;
  props.alloc_type = AllocationType::kDvpp;
  auto p1 = (*rt)->CreatePool(props);
  auto p2 = (*rt)->CreatePool(props);
  ASSERT_TRUE(p1.ok() && p2.ok());
  auto s = (*rt)->CreateStream(0);
  const uint64_t window_free = internal::DvppWindow::Get().free_bytes();
  ASSERT_EQ(window_free, internal::DvppWindow::kSize) << "another test left DVPP chunks mapped";
  std::vector<void*> live;
  // 1 GiB occupies 1 GiB + 128 B, so each chunk is 1026 MiB: 15 fit in 16 GiB.
  for (int i = 0; i < 15; ++i) {
    auto a = (*rt)->MallocFromPoolAsync(kGiB, i % 2 ? *p2 : *p1, *s);
    ASSERT_TRUE(a.ok()) << i << ": " << a.status();
    live.push_back(a->ptr);
  }
  EXPECT_EQ((*rt)->GetPoolStats(*p1)->reserved_bytes, 8 * 1026 * kMiB);
  auto sixteenth = (*rt)->MallocFromPoolAsync(kGiB, *p2, *s);
  EXPECT_EQ(sixteenth.status().code(), absl::StatusCode::kResourceExhausted);
  // The device itself still has room.
  auto device = (*rt)->MallocAsync(kGiB, *s);
  EXPECT_TRUE(device.ok()) << device.status();
  // Released memory gives window space back.
  ASSERT_TRUE((*rt)->FreeAsync(live.back(), *s).ok());
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  EXPECT_TRUE((*rt)->MallocFromPoolAsync(kGiB, *p2, *s).ok());
  // And a destroyed runtime gives back its whole share.
  rt->reset();
  EXPECT_EQ(internal::DvppWindow::Get().free_bytes(), internal::DvppWindow::kSize);
}

// An upstream that fails on command, to prove failure leaves nothing behind.
struct TestUpstream {
  bool fail = false;
  int maps = 0;
  int unmaps = 0;
  static void* Map(size_t bytes, void* user) {
    auto* self = static_cast<TestUpstream*>(user);
    if (self->fail) return nullptr;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    ++self->maps;
    return p;
  }
  static void Unmap(void* base, size_t bytes, void* user) {
    ++static_cast<TestUpstream*>(user)->unmaps;
    munmap(base, bytes);
  }
};

TEST(CallbackUpstreamTest, FailureSurfacesAsMemoryAllocationWithNothingLeaked) {
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  TestUpstream up;
  spUpstream cb{&TestUpstream::Map, &TestUpstream::Unmap, &up, 1};
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  spMemPool_t pool;
  ASSERT_EQ(spMemPoolCreateWithUpstream(&pool, rt, &props, &cb), spSuccess);
  spStream_t s;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  void* p = nullptr;
  ASSERT_EQ(spMallocFromPoolAsync(&p, 4096, pool, s), spSuccess);
  EXPECT_EQ(up.maps, 1);
  // The memory is the upstream's and touchable: a fill lands in it.
  ASSERT_EQ(spMemsetAsync(p, 0x5a, 4096, s), spSuccess);
  ASSERT_EQ(spStreamSynchronize(s), spSuccess);
  EXPECT_EQ(static_cast<unsigned char*>(p)[4095], 0x5a);

  spMemPoolStats before, after;
  ASSERT_EQ(spMemPoolGetStats(pool, &before), spSuccess);
  up.fail = true;
  void* q = reinterpret_cast<void*>(1);
  EXPECT_EQ(spMallocFromPoolAsync(&q, 3 << 20, pool, s), spErrorMemoryAllocation);
  EXPECT_EQ(q, nullptr);
  ASSERT_EQ(spMemPoolGetStats(pool, &after), spSuccess);
  EXPECT_EQ(after.failedAllocCount, before.failedAllocCount + 1);
  after.failedAllocCount = before.failedAllocCount;
  EXPECT_EQ(memcmp(&before, &after, sizeof before), 0);
  up.fail = false;
  ASSERT_EQ(spMallocFromPoolAsync(&q, 3 << 20, pool, s), spSuccess);  // still usable
  EXPECT_EQ(up.maps, 2);
  ASSERT_EQ(spFreeAsync(q, s), spSuccess);
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  ASSERT_EQ(spStreamSynchronize(s), spSuccess);  // threshold 0: both chunks go back
  EXPECT_EQ(up.unmaps, 2);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
  EXPECT_EQ(up.maps, up.unmaps);
}

TEST(CallbackUpstreamTest, MisalignedUpstreamMemoryFailsTheAllocationNotTheProcess) {
  auto rt = MakeRuntime(Backing::kHost);
  int unmaps = 0;
  std::vector<char> storage(8 << 20);
  UpstreamCallbacks cb;
  cb.map = [&](uint64_t) -> void* { return storage.data() + 1; };
  cb.unmap = [&](void*, uint64_t) { ++unmaps; };
  auto pool = rt->CreatePool(PoolProps{}, NewCallbackMemory(cb));
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  EXPECT_EQ(rt->MallocFromPoolAsync(100, *pool, *s).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(unmaps, 1);
}

INSTANTIATE_TEST_SUITE_P(Backings, BackingTest,
                         ::testing::Values(Backing::kHost, Backing::kAddressOnly),
                         [](const auto& info) {
                           return info.param == Backing::kHost ? "Host" : "AddressOnly";
                         });

}  // namespace
}  // namespace streampool
