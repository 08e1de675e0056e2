// Pool variants selected by pool properties: DVPP, huge-page, pinned host,
// the ACL rounding rule, and user upstreams (docs/design.md "Pool variants"); and
// the growth mode each can have (docs/design.md "Block lifecycle"). The variant
// tests run with chunked and with expandable growth: the figures they pin are
// the same in both, except where a test says otherwise.
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/memory/upstreams.h"
#include "src/runtime/pools.h"
#include "src/runtime/process.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

uint64_t AlignUp(uint64_t v, uint64_t k) { return (v - 1) / k * k + k; }

// The pool's own rules and failures: without the runtime's out-of-memory
// reclaim, which tests/runtime/oom_test.cc covers.
std::unique_ptr<Runtime> MakeRuntime(Backing backing, uint64_t capacity = kGiB) {
  RuntimeConfig cfg;
  cfg.backing = backing;
  cfg.device_capacity = capacity;
  cfg.oom_reclaim = false;
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

std::string GrowthName(PoolGrowth growth) {
  return growth == PoolGrowth::kChunked ? "Chunked" : "Expandable";
}

// A backing and a growth mode: Variants/BackingTest.<Test>/Host_Expandable.
class BackingTest : public ::testing::TestWithParam<std::tuple<Backing, PoolGrowth>> {
 protected:
  static Backing backing() { return std::get<0>(GetParam()); }
  static PoolGrowth growth() { return std::get<1>(GetParam()); }
  // Pool properties of the given type in this test's growth mode.
  static PoolProps Props(AllocationType type = AllocationType::kDevice) {
    PoolProps props;
    props.alloc_type = type;
    props.growth = growth();
    return props;
  }
};

TEST_P(BackingTest, DvppBlocksStart128AlignedAndUseTheDvppSizeRule) {
  auto rt = MakeRuntime(backing());
  PoolProps props = Props(AllocationType::kDvpp);
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
  const uintptr_t base = internal::Process::Default().dvpp_window().base();
  const auto p = reinterpret_cast<uintptr_t>(a->ptr);
  EXPECT_GE(p, base);
  EXPECT_LT(p, base + internal::DvppWindow::kSize);
  EXPECT_TRUE(rt->CheckPoolInvariants(*pool).ok());
}

TEST_P(BackingTest, PinnedHostPoolIs64ByteAlignedAndReportsDeviceMinusOne) {
  auto rt = MakeRuntime(backing());
  PoolProps props = Props(AllocationType::kPinnedHost);
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

// CANN's rule for carving aclrtMalloc memory: m = ALIGN_UP(len, 32) + 32,
// each block starting ALIGN_UP(m, 64) after the one before.
TEST_P(BackingTest, AclRoundingRuleSizesBlocksAlignUp32Plus32To64) {
  auto rt = MakeRuntime(backing());
  PoolProps props = Props();
  props.acl_rounding = true;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  uint64_t used = 0;
  for (uint64_t len : {1, 32, 33, 100, 4096}) {
    auto a = rt->MallocFromPoolAsync(len, *pool, *s);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->ptr) % 64, 0u) << len;
    used += AlignUp(AlignUp(len, 32) + 32, 64);
    EXPECT_EQ(*rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent), used) << len;
  }
  EXPECT_EQ(used, 64u + 64 + 128 + 192 + 4160);
  PoolProps pinned = Props(AllocationType::kPinnedHost);
  pinned.acl_rounding = true;
  EXPECT_EQ(rt->CreatePool(pinned).status().code(), absl::StatusCode::kInvalidArgument);
}

// aclrtMallocAlign32 drops the extra 32 bytes; blocks still start 64-B
// aligned, so a 32-byte request occupies 64.
TEST_P(BackingTest, AclAlign32RuleDropsTheExtra32Bytes) {
  auto rt = MakeRuntime(backing());
  PoolProps props = Props(AllocationType::kHugePage);
  props.page_policy = PagePolicy::kNormalOnly;
  props.acl_rounding = true;
  props.acl_align32 = true;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  uint64_t used = 0;
  for (uint64_t len : {1, 32, 33, 64, 100, 4096}) {
    auto a = rt->MallocFromPoolAsync(len, *pool, *s);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->ptr) % 64, 0u) << len;
    used += AlignUp(len, 64);
    EXPECT_EQ(*rt->GetPoolAttribute(*pool, PoolAttr::kUsedMemCurrent), used) << len;
  }
  EXPECT_EQ(used, 64u + 64 + 64 + 64 + 128 + 4096);
}

TEST_P(BackingTest, HugePageBytesByKindSumToReserved) {
  auto rt = MakeRuntime(backing());
  for (PagePolicy policy : {PagePolicy::kHugeFirst, PagePolicy::kNormalOnly}) {
    PoolProps props = Props(AllocationType::kHugePage);
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
    } else if (backing() == Backing::kAddressOnly) {
      // Nothing is mapped: bytes count under the policy's first choice.
      EXPECT_EQ(st->huge_page_bytes, st->reserved_bytes);
    }
  }
}

TEST_P(BackingTest, HugeOnlyFailsCleanlyWithoutHugePages) {
  auto rt = MakeRuntime(backing());
  PoolProps props = Props(AllocationType::kHugePage);
  props.page_policy = PagePolicy::kHugeOnly;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  if (backing() == Backing::kHost && MachineHasExplicitHugePages()) {
    GTEST_SKIP() << "this machine has explicit huge pages; the failure path needs none";
  }
  if (backing() == Backing::kAddressOnly) {
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

// A growth mode: Growth/<Suite>.<Test>/Expandable.
class GrowthTest : public ::testing::TestWithParam<PoolGrowth> {
 protected:
  static PoolProps Props(AllocationType type) {
    PoolProps props;
    props.alloc_type = type;
    props.growth = GetParam();
    return props;
  }
  static bool Expandable() { return GetParam() == PoolGrowth::kExpandable; }
  // The expectation of this growth mode, where the two differ.
  static uint64_t ByGrowth(uint64_t chunked, uint64_t expandable) {
    return Expandable() ? expandable : chunked;
  }
};

using HugePageBudgetTest = GrowthTest;

// The same figures in both modes: the 2 MiB request either grows a chunk of
// its own or maps the one granule it lacks above the 3 MiB one; both are the
// 2 MiB beyond the budget.
TEST_P(HugePageBudgetTest, BudgetMakesHugeFirstFallBackToNormal) {
  auto rt = MakeRuntime(Backing::kAddressOnly);
  ASSERT_TRUE(rt->SetHugePageBudget(0, 4 * kMiB).ok());
  auto pool = rt->CreatePool(Props(AllocationType::kHugePage));
  auto s = rt->CreateStream(0);
  auto a = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s);  // 4 MiB: fits the budget
  auto b = rt->MallocFromPoolAsync(2 * kMiB, *pool, *s);  // 2 MiB more: beyond it
  ASSERT_TRUE(a.ok() && b.ok());
  auto st = rt->GetPoolStats(*pool);
  EXPECT_EQ(st->huge_page_bytes, 4 * kMiB);
  EXPECT_EQ(st->normal_page_bytes, 2 * kMiB);
  EXPECT_EQ(st->reserved_bytes, 6 * kMiB);
  // Releasing gives the budget back: after the sync every chunk (granule) is
  // gone, and new memory is on huge pages again.
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE(rt->FreeAsync(b->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_EQ(rt->GetPoolStats(*pool)->reserved_bytes, 0u);
  ASSERT_TRUE(rt->MallocFromPoolAsync(2 * kMiB, *pool, *s).ok());
  EXPECT_EQ(rt->GetPoolStats(*pool)->huge_page_bytes, 2 * kMiB);
}

using DvppWindowTest = GrowthTest;

// The same figures in both modes: 1 GiB occupies 1 GiB + 128 B, which no
// 1 GiB reservation holds, so an expandable pool reserves just enough for it
// (1026 MiB), as a chunked pool maps a 1026 MiB chunk.
TEST_P(DvppWindowTest, SixteenthGiBReservationFailsWhileADevicePoolSucceeds) {
  RuntimeConfig cfg;
  cfg.backing = Backing::kAddressOnly;
  cfg.device_capacity = 64 * kGiB;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  auto p1 = (*rt)->CreatePool(Props(AllocationType::kDvpp));
  auto p2 = (*rt)->CreatePool(Props(AllocationType::kDvpp));
  ASSERT_TRUE(p1.ok() && p2.ok());
  auto s = (*rt)->CreateStream(0);
  const uint64_t window_free = internal::Process::Default().dvpp_window().free_bytes();
  ASSERT_EQ(window_free, internal::DvppWindow::kSize) << "another test left DVPP chunks mapped";
  std::vector<void*> live;
  // Each takes 1026 MiB of the window: 15 fit in 16 GiB.
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
  EXPECT_EQ(internal::Process::Default().dvpp_window().free_bytes(), internal::DvppWindow::kSize);
}

// Where the modes differ: an expandable DVPP pool takes address space from
// the process's window a reservation (1 GiB, a sixteenth) at a time, not a
// chunk at a time, so two pools with 2 MiB each hold 2 GiB of the window; a
// request no reservation of the pool can hold gets one of its own, and a
// reservation that is wholly free and unmapped after a release goes back to
// the window. Reserved (mapped) bytes are the same in both modes.
TEST_P(DvppWindowTest, ExpandablePoolsTakeTheWindowAReservationAtATime) {
  constexpr uint64_t kWindow = internal::DvppWindow::kSize;
  RuntimeConfig cfg;
  cfg.backing = Backing::kAddressOnly;
  cfg.device_capacity = 64 * kGiB;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  const internal::DvppWindow& window = internal::Process::Default().dvpp_window();
  ASSERT_EQ(window.free_bytes(), kWindow) << "another test left DVPP memory in the window";
  auto p1 = (*rt)->CreatePool(Props(AllocationType::kDvpp));
  auto p2 = (*rt)->CreatePool(Props(AllocationType::kDvpp));
  ASSERT_TRUE(p1.ok() && p2.ok());
  auto s = (*rt)->CreateStream(0);
  auto reserved = [&](PoolId p) { return (*rt)->GetPoolStats(p)->reserved_bytes; };

  auto a = (*rt)->MallocFromPoolAsync(kMiB, *p1, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(reserved(*p1), 2 * kMiB);
  EXPECT_EQ(window.free_bytes(), kWindow - ByGrowth(2 * kMiB, kGiB));
  auto b = (*rt)->MallocFromPoolAsync(kMiB, *p2, *s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(window.free_bytes(), kWindow - ByGrowth(4 * kMiB, 2 * kGiB));

  // 1 GiB + 128 B: more than the rest of p1's first reservation, so p1
  // takes a second one, just large enough (1026 MiB).
  auto big = (*rt)->MallocFromPoolAsync(kGiB, *p1, *s);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(reserved(*p1), 2 * kMiB + 1026 * kMiB);
  EXPECT_EQ(window.free_bytes(), kWindow - ByGrowth(4 * kMiB, 2 * kGiB) - 1026 * kMiB);

  // Threshold 0: big's memory goes back, and with it (expandable) its whole
  // reservation; p1's first reservation stays for the live 1 MiB.
  ASSERT_TRUE((*rt)->FreeAsync(big->ptr, *s).ok());
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  EXPECT_EQ(reserved(*p1), 2 * kMiB);
  EXPECT_EQ(window.free_bytes(), kWindow - ByGrowth(4 * kMiB, 2 * kGiB));

  ASSERT_TRUE((*rt)->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE((*rt)->FreeAsync(b->ptr, *s).ok());
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  EXPECT_EQ(reserved(*p1) + reserved(*p2), 0u);
  EXPECT_EQ(window.free_bytes(), kWindow);
  EXPECT_TRUE((*rt)->CheckPoolInvariants(*p1).ok());
  EXPECT_TRUE((*rt)->CheckPoolInvariants(*p2).ok());
}

INSTANTIATE_TEST_SUITE_P(Growth, HugePageBudgetTest,
                         ::testing::Values(PoolGrowth::kChunked, PoolGrowth::kExpandable),
                         [](const auto& info) { return GrowthName(info.param); });
INSTANTIATE_TEST_SUITE_P(Growth, DvppWindowTest,
                         ::testing::Values(PoolGrowth::kChunked, PoolGrowth::kExpandable),
                         [](const auto& info) { return GrowthName(info.param); });

// Every built-in upstream can reserve address space, so a pool that does not
// ask is expandable -- every allocation type, exportable pools and the
// device's default pool included -- and chunked on request. The mode is a
// property: setting the attribute is an error that changes nothing.
class GrowthDefaultTest : public ::testing::TestWithParam<Backing> {};

TEST_P(GrowthDefaultTest, ExpandableOnEveryBuiltInUpstreamChunkedOnRequest) {
  auto rt = MakeRuntime(GetParam());
  auto growth_of = [&](PoolId p) { return *rt->GetPoolAttribute(p, PoolAttr::kGrowth); };
  constexpr uint64_t kChunked = static_cast<uint64_t>(PoolGrowth::kChunked);
  constexpr uint64_t kExpandable = static_cast<uint64_t>(PoolGrowth::kExpandable);
  auto default_pool = rt->DefaultPool(0);
  ASSERT_TRUE(default_pool.ok());
  EXPECT_EQ(growth_of(*default_pool), kExpandable);
  for (AllocationType type : {AllocationType::kDevice, AllocationType::kPinnedHost,
                              AllocationType::kHugePage, AllocationType::kDvpp}) {
    SCOPED_TRACE(AllocationTypeName(type));
    PoolProps props;
    props.alloc_type = type;
    auto by_default = rt->CreatePool(props);
    ASSERT_TRUE(by_default.ok()) << by_default.status();
    EXPECT_EQ(growth_of(*by_default), kExpandable);
    props.growth = PoolGrowth::kChunked;
    auto chunked = rt->CreatePool(props);
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    EXPECT_EQ(growth_of(*chunked), kChunked);
    EXPECT_EQ(rt->SetPoolAttribute(*chunked, PoolAttr::kGrowth, kExpandable).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(growth_of(*chunked), kChunked);
  }
  if (GetParam() != Backing::kHost) return;  // exportable pools need Host backing
  PoolProps exportable;
  exportable.handle_types = 1;  // a POSIX file descriptor: a memfd upstream
  auto memfd = rt->CreatePool(exportable);
  ASSERT_TRUE(memfd.ok()) << memfd.status();
  EXPECT_EQ(growth_of(*memfd), kExpandable);
}

INSTANTIATE_TEST_SUITE_P(Backings, GrowthDefaultTest,
                         ::testing::Values(Backing::kHost, Backing::kAddressOnly),
                         [](const auto& info) {
                           return info.param == Backing::kHost ? "Host" : "AddressOnly";
                         });

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
  EXPECT_EQ(after.oomCount, before.oomCount + 1);
  after.failedAllocCount = before.failedAllocCount;
  after.oomCount = before.oomCount;
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

// An upstream of map and unmap only cannot reserve address space: a pool
// over it grows in chunks whatever it asks by default, and asking for
// expandable growth is not supported. A reserve-then-map upstream is the
// converse. Malformed growth values are invalid everywhere.
TEST(CallbackUpstreamTest, MapOnlyUpstreamIsChunkedAndCannotBeExpandable) {
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  TestUpstream up;
  spUpstream cb{&TestUpstream::Map, &TestUpstream::Unmap, &up, 1};
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  int growth = -1;
  for (int asked : {spPoolGrowthDefault, spPoolGrowthChunked}) {
    props.growth = asked;
    spMemPool_t pool = nullptr;
    ASSERT_EQ(spMemPoolCreateWithUpstream(&pool, rt, &props, &cb), spSuccess) << asked;
    ASSERT_EQ(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, &growth), spSuccess);
    EXPECT_EQ(growth, spPoolGrowthChunked) << asked;
    int expandable = spPoolGrowthExpandable;
    EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrGrowth, &expandable), spErrorInvalidValue);
  }
  spMemPool_t pool = nullptr;
  props.growth = spPoolGrowthExpandable;
  EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, rt, &props, &cb), spErrorNotSupported);
  for (int bad : {-1, 3}) {
    props.growth = bad;
    EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, rt, &props, &cb), spErrorInvalidValue) << bad;
    EXPECT_EQ(spMemPoolCreate(&pool, rt, &props), spErrorInvalidValue) << bad;
  }
  EXPECT_EQ(up.maps, 0) << "creating a pool maps nothing";

  // The reserve-then-map upstream's functions are never reached: the
  // properties are refused first.
  spUpstreamVmm vmm{};
  vmm.reserve = [](size_t, size_t, void*) -> void* { return nullptr; };
  vmm.map = [](void*, size_t, void*) { return -1; };
  vmm.unmap = [](void*, size_t, void*) {};
  vmm.release = [](void*, size_t, void*) {};
  props.growth = spPoolGrowthChunked;
  EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt, &props, &vmm), spErrorNotSupported);
  props.growth = spPoolGrowthDefault;
  ASSERT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt, &props, &vmm), spSuccess);
  ASSERT_EQ(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, &growth), spSuccess);
  EXPECT_EQ(growth, spPoolGrowthExpandable);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
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
  const absl::Status st = rt->MallocFromPoolAsync(100, *pool, *s).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(st.message()),
              AllOf(HasSubstr("the upstream broke its contract"), HasSubstr("aligned to 256"),
                    Not(HasSubstr("left on the device"))));
  EXPECT_EQ(unmaps, 1);
}

// How many pools the runtime holds: a recording's header names each.
int LivePools(Runtime& rt) {
  const std::string path = ::testing::TempDir() + "/variants_test_pools.trace";
  EXPECT_TRUE(rt.StartRecording(path).ok());
  EXPECT_TRUE(rt.StopRecording().ok());
  std::ifstream in(path);
  int pools = 0;
  for (std::string line; std::getline(in, line);) pools += absl::StartsWith(line, "pool ");
  std::remove(path.c_str());
  return pools;
}

// A pool over a caller's upstream takes one that exists: a null upstream,
// what the factories return when a function is missing, is bad input and
// makes nothing -- it never falls back to the runtime's own memory.
TEST(CallbackUpstreamTest, NullUpstreamIsRefusedAndMakesNoPool) {
  auto rt = MakeRuntime(Backing::kHost);
  VmmCallbacks vmm;
  vmm.reserve = [](uint64_t, uint64_t) -> void* { return nullptr; };
  vmm.map = [](void*, uint64_t) { return false; };
  vmm.unmap = [](void*, uint64_t) {};
  EXPECT_EQ(NewVmmCallbackMemory(vmm), nullptr) << "release is missing";
  UpstreamCallbacks chunks;
  chunks.map = [](uint64_t) -> void* { return nullptr; };
  EXPECT_EQ(NewCallbackMemory(chunks), nullptr) << "unmap is missing";

  const int before = LivePools(*rt);
  ASSERT_EQ(before, 1);  // the device's default pool
  absl::StatusOr<PoolId> refused =
      rt->CreatePool(PoolProps{}, std::shared_ptr<PhysicalMemory>(NewVmmCallbackMemory(vmm)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("upstream is null"));
  EXPECT_EQ(rt->CreatePool(PoolProps{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LivePools(*rt), before);

  // With the function supplied the same call makes a pool, and a pool with
  // no upstream argument still gets the type's own.
  vmm.release = [](void*, uint64_t) {};
  absl::StatusOr<PoolId> made =
      rt->CreatePool(PoolProps{}, std::shared_ptr<PhysicalMemory>(NewVmmCallbackMemory(vmm)));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(rt->CreatePool(PoolProps{}).ok());
  EXPECT_EQ(LivePools(*rt), before + 2);
}

// Reserve-then-map functions over real PROT_NONE address space that refuse
// or misbehave on command.
struct FailingVmm {
  enum class Mode { kWorks, kRefuseReserve, kMisalignReserve, kRefuseMap };
  Mode mode = Mode::kWorks;
  // What each returned reservation's mmap covers.
  std::map<uintptr_t, std::pair<void*, size_t>> regions;

  VmmCallbacks Callbacks() {
    VmmCallbacks cb;
    cb.reserve = [this](uint64_t bytes, uint64_t alignment) -> void* {
      if (mode == Mode::kRefuseReserve) return nullptr;
      const size_t len = bytes + 2 * alignment;
      void* raw = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (raw == MAP_FAILED) return nullptr;
      uintptr_t p = AlignUp(reinterpret_cast<uintptr_t>(raw) + 1, alignment);
      if (mode == Mode::kMisalignReserve) p += 4096;
      regions[p] = {raw, len};
      return reinterpret_cast<void*>(p);
    };
    cb.map = [this](void* addr, uint64_t bytes) {
      return mode != Mode::kRefuseMap && mprotect(addr, bytes, PROT_READ | PROT_WRITE) == 0;
    };
    cb.unmap = [](void* addr, uint64_t bytes) { mprotect(addr, bytes, PROT_NONE); };
    cb.release = [this](void* base, uint64_t) {
      auto it = regions.find(reinterpret_cast<uintptr_t>(base));
      ASSERT_NE(it, regions.end());
      munmap(it->second.first, it->second.second);
      regions.erase(it);
    };
    return cb;
  }
};

// An upstream's failure is the allocation's error as what it was -- a
// refused reservation, a refused map, a reservation that breaks the
// alignment contract -- with the code of any allocation failure
// (kResourceExhausted: spErrorMemoryAllocation), not a device that ran out.
TEST(CallbackUpstreamTest, UpstreamFailuresAreNamedInTheAllocationError) {
  auto rt = MakeRuntime(Backing::kHost);
  FailingVmm vmm;
  auto pool = rt->CreatePool(PoolProps{}, NewVmmCallbackMemory(vmm.Callbacks()));
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  auto allocation_error = [&](FailingVmm::Mode mode) {
    vmm.mode = mode;
    const absl::Status st = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
    EXPECT_THAT(std::string(st.message()), AllOf(HasSubstr("cannot allocate 3145728 bytes: "),
                                                 Not(HasSubstr("left on the device"))));
    EXPECT_TRUE(vmm.regions.empty()) << "a failed growth keeps no reservation";
    return std::string(st.message());
  };
  // Refused its usual reservation (the device), the pool asks for one just
  // large enough; the last refusal is the one named.
  EXPECT_THAT(allocation_error(FailingVmm::Mode::kRefuseReserve),
              HasSubstr("the upstream refused a reservation of 4194304 bytes"));
  EXPECT_THAT(allocation_error(FailingVmm::Mode::kMisalignReserve),
              AllOf(HasSubstr("the upstream's reservation is not aligned to 2097152"),
                    HasSubstr("broke the contract")));
  EXPECT_THAT(allocation_error(FailingVmm::Mode::kRefuseMap),
              HasSubstr("the upstream refused to map 4194304 bytes at 0x"));
  // Nothing of the pool changed but its failure counts: it still serves.
  vmm.mode = FailingVmm::Mode::kWorks;
  auto a = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  const PoolStats stats = *rt->GetPoolStats(*pool);
  EXPECT_EQ(stats.failed_alloc_count, 3u);
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB);
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE(rt->DestroyPool(*pool).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
}

// The same for map/unmap functions: a refused chunk is named.
TEST(CallbackUpstreamTest, RefusedChunkIsNamedInTheAllocationError) {
  auto rt = MakeRuntime(Backing::kHost);
  UpstreamCallbacks cb;
  cb.map = [](uint64_t) -> void* { return nullptr; };
  cb.unmap = [](void*, uint64_t) {};
  auto pool = rt->CreatePool(PoolProps{}, NewCallbackMemory(cb));
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0);
  const absl::Status st = rt->MallocFromPoolAsync(3 * kMiB, *pool, *s).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(st.message()),
              AllOf(HasSubstr("the upstream refused to map 4194304 bytes"),
                    Not(HasSubstr("left on the device"))));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, BackingTest,
    ::testing::Combine(::testing::Values(Backing::kHost, Backing::kAddressOnly),
                       ::testing::Values(PoolGrowth::kChunked, PoolGrowth::kExpandable)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == Backing::kHost ? "Host" : "AddressOnly") + "_" +
             GrowthName(std::get<1>(info.param));
    });

}  // namespace
}  // namespace streampool
