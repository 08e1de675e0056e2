// Exhaustion is an error, never an abort, and a failed call changes nothing.
// The memory layer's mmap calls and the threads executor's thread starts are
// made to fail on purpose (src/util/fault.h), the n-th one for every n of a
// sweep, through every pool variant, both backings and both growth modes;
// every failure must come back as spErrorMemoryAllocation with the pool's
// statistics as they were (but failedAllocCount), the runtime usable
// afterwards, and nothing leaked (no mapping left behind here; ASan's leak
// checker in the sanitizer build).
#include "src/util/fault.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/memory/upstreams.h"
#include "src/runtime/process.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

using internal::Fault;
using internal::FaultInjection;

constexpr uint64_t kMiB = uint64_t{1} << 20;

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

// Mappings of this process (lines of /proc/self/maps).
int MappingCount() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  int n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) n += c == '\n';
  std::fclose(f);
  return n;
}

spMemPoolStats Stats(spMemPool_t pool) {
  spMemPoolStats s;
  std::memset(&s, 0, sizeof s);
  EXPECT_EQ(spMemPoolGetStats(pool, &s), spSuccess);
  return s;
}

// Allocates `size` from `pool` on `s`: on success the pointer joins `live`;
// on failure it must be spErrorMemoryAllocation with the pool's statistics
// exactly as before but failedAllocCount and oomCount (every size here fits
// the device: a failure is out of memory). Returns whether it failed.
bool AllocOrFailCleanly(spMemPool_t pool, spStream_t s, size_t size, std::vector<void*>* live) {
  const spMemPoolStats before = Stats(pool);
  void* p = nullptr;
  const spError_t e = spMallocFromPoolAsync(&p, size, pool, s);
  if (e == spSuccess) {
    live->push_back(p);
    return false;
  }
  EXPECT_EQ(e, spErrorMemoryAllocation) << "size " << size;
  EXPECT_EQ(p, nullptr);
  spMemPoolStats expected = before;
  ++expected.failedAllocCount;
  ++expected.oomCount;
  const spMemPoolStats after = Stats(pool);
  EXPECT_EQ(std::memcmp(&after, &expected, sizeof after), 0)
      << "a failed allocation of " << size << " changed the pool's statistics";
  return true;
}

struct Variant {
  spMemAllocationType type;
  spBacking backing;
  int growth;
  std::string name;
};

std::vector<Variant> AllVariants() {
  std::vector<Variant> out;
  const std::pair<spMemAllocationType, const char*> types[] = {
      {spMemAllocationTypeDevice, "Device"},
      {spMemAllocationTypePinnedHost, "PinnedHost"},
      {spMemAllocationTypeHugePage, "HugePage"},
      {spMemAllocationTypeDvpp, "Dvpp"}};
  for (const auto& [type, tname] : types) {
    for (spBacking b : {spBackingHost, spBackingAddressOnly}) {
      for (int g : {spPoolGrowthChunked, spPoolGrowthExpandable}) {
        out.push_back(Variant{type, b, g,
                              std::string(tname) + (b == spBackingHost ? "_Host" : "_AddressOnly") +
                                  (g == spPoolGrowthChunked ? "_Chunked" : "_Expandable")});
      }
    }
  }
  return out;
}

class MmapFaultTest : public ::testing::TestWithParam<Variant> {
 protected:
  void TearDown() override { FaultInjection::DisarmAll(); }
};

// One program, run with the n-th mmap failing: growth, growth across a
// granule, a sync that releases, regrowth over released granules, TrimTo.
// Returns how many calls failed (0 once n is past every mmap it makes).
int RunProgram(const Variant& v, uint64_t n) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.backing = v.backing;
  cfg.deviceCapacity = 256 * kMiB;
  // An mmap that fails is the call's failure here, not a cue to reclaim and
  // retry (tests/runtime/oom_test.cc tests the reclaim).
  cfg.oomReclaimOff = 1;
  spRuntime_t rt;
  // The runtime itself maps nothing up front, so it is made before arming.
  if (spRuntimeCreate(&rt, &cfg) != spSuccess) {
    ADD_FAILURE() << "runtime creation failed";
    return 0;
  }
  spStream_t s;
  EXPECT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  spMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = v.type;
  props.growth = v.growth;
  spMemPool_t pool;
  EXPECT_EQ(spMemPoolCreate(&pool, rt, &props), spSuccess);
  FaultInjection::Arm(Fault::kMmap, n);

  int failures = 0;
  std::vector<void*> live;
  auto alloc = [&](size_t size) { failures += AllocOrFailCleanly(pool, s, size, &live); };
  auto free_all = [&]() {
    for (void* p : live) EXPECT_EQ(spFreeAsync(p, s), spSuccess);
    live.clear();
  };
  alloc(kMiB);
  alloc(3 * kMiB);  // crosses granules / its own chunk
  alloc(64 * 1024);
  free_all();
  EXPECT_EQ(spStreamSynchronize(s), spSuccess);  // releases (threshold 0)
  alloc(5 * kMiB);                               // regrows over released granules
  alloc(kMiB);
  free_all();
  EXPECT_EQ(spStreamSynchronize(s), spSuccess);
  EXPECT_EQ(spMemPoolTrimTo(pool, 0), spSuccess);

  // Usable again once the system has memory to give.
  FaultInjection::DisarmAll();
  void* p = nullptr;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 2 * kMiB, pool, s), spSuccess);
  EXPECT_EQ(spFreeAsync(p, s), spSuccess);
  auto view = Runtime::FromC(rt);
  EXPECT_TRUE(view.ok());
  if (view.ok()) {
    EXPECT_TRUE((*view)->CheckPoolInvariants(PoolId{reinterpret_cast<uintptr_t>(pool)}).ok());
  }
  EXPECT_EQ(spStreamDestroy(s), spSuccess);
  EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
  return failures;
}

TEST_P(MmapFaultTest, EveryNthMmapFailureIsACleanErrorAndLeaksNothing) {
  const Variant& v = GetParam();
  // Warm-up runs, one clean and one failing, map what stays mapped for the
  // process's life (the DVPP window, the heap arenas the error paths touch
  // first), so that the counts below compare like for like.
  RunProgram(v, 0);
  RunProgram(v, 1);
  const bool dvpp = v.type == spMemAllocationTypeDvpp;
  // DVPP memory lives inside the process's window, one mapping whose pieces
  // the kernel may or may not merge back: count the window's free bytes there.
  const int maps_before = MappingCount();
  const uint64_t window_free_before = internal::Process::Default().dvpp_window().free_bytes();
  int injected_runs = 0;
  for (uint64_t n = 1; n <= 40; ++n) {
    SCOPED_TRACE(n);
    const int failures = RunProgram(v, n);
    if (FaultInjection::injected(Fault::kMmap) == 0) break;  // past the last mmap
    ++injected_runs;
    // The failure may hit a release-side remap that has a fallback, or a
    // growth: either way no call may abort, and some growth must have failed
    // for most n.
    (void)failures;
    if (dvpp) {
      EXPECT_EQ(internal::Process::Default().dvpp_window().free_bytes(), window_free_before)
          << "a DVPP range outlived its runtime";
    }
  }
  // Every range a pool reserved or mapped went back with its runtime (the
  // registry records them all, and no other runtime is alive here).
  EXPECT_FALSE(internal::Process::Default().registry().Intersects(0, UINTPTR_MAX))
      << "a range outlived its runtime";
  // And, counted by the kernel: a leak per failing run would add a mapping
  // per n; the heap may add one or two of its own (a new arena) whatever we
  // do. ThreadSanitizer maps shadow memory as the program touches memory, so
  // the count means nothing there.
  if (!dvpp && !kThreadSanitizer) {
    EXPECT_LE(MappingCount(), maps_before + 2)
        << "mappings outlived their runtimes over " << injected_runs << " failing runs";
  }
  if (dvpp && v.backing == spBackingAddressOnly) {
    // Address-only DVPP memory is the window's own address space: no mmap
    // call to fail.
    EXPECT_EQ(injected_runs, 0);
  } else {
    EXPECT_GT(injected_runs, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, MmapFaultTest, ::testing::ValuesIn(AllVariants()),
                         [](const ::testing::TestParamInfo<Variant>& p) { return p.param.name; });

TEST(ThreadFaultTest, StreamCreateFailsCleanlyWhenNoThreadCanStart) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = spExecutorThreads;
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  spStream_t keep;
  ASSERT_EQ(spStreamCreate(&keep, rt, 0, spStreamDefault), spSuccess);
  for (int round = 0; round < 3; ++round) {
    // Round 0 takes a new slot; later rounds may reuse the destroyed one.
    FaultInjection::Arm(Fault::kThreadCreate, 1);
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spErrorMemoryAllocation);
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(FaultInjection::injected(Fault::kThreadCreate), 1u);
    FaultInjection::DisarmAll();
    // The runtime goes on: the kept stream works, a new stream can be made.
    void* p = nullptr;
    ASSERT_EQ(spMallocAsync(&p, 4096, keep), spSuccess);
    ASSERT_EQ(spFreeAsync(p, keep), spSuccess);
    ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamNonBlocking), spSuccess);
    ASSERT_EQ(spMallocAsync(&p, 4096, s), spSuccess);
    ASSERT_EQ(spFreeAsync(p, s), spSuccess);
    ASSERT_EQ(spStreamSynchronize(s), spSuccess);
    ASSERT_EQ(spStreamDestroy(s), spSuccess);
    ASSERT_EQ(spDeviceSynchronize(rt, 0), spSuccess);
  }
  ASSERT_EQ(spStreamDestroy(keep), spSuccess);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

TEST(ThreadFaultTest, RuntimeCreateFailsCleanlyWhenNoThreadCanStart) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = spExecutorThreads;
  cfg.deviceCount = 3;
  for (uint64_t n = 1; n <= 3; ++n) {
    SCOPED_TRACE(n);
    FaultInjection::Arm(Fault::kThreadCreate, n);
    spRuntime_t rt = nullptr;
    EXPECT_EQ(spRuntimeCreate(&rt, &cfg), spErrorMemoryAllocation);
    EXPECT_EQ(rt, nullptr);
  }
  FaultInjection::DisarmAll();
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

}  // namespace
}  // namespace streampool

namespace streampool {
namespace {

// The C++ API answers the same failures with absl::Status.
TEST(ThreadFaultTest, CppApiReturnsResourceExhaustedWhenNoThreadCanStart) {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kThreads;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  FaultInjection::Arm(Fault::kThreadCreate, 1);
  absl::StatusOr<StreamId> s = (*rt)->CreateStream(0);
  FaultInjection::DisarmAll();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  s = (*rt)->CreateStream(0);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*rt)->DestroyStream(*s).ok());
  FaultInjection::Arm(Fault::kThreadCreate, 1);
  absl::StatusOr<std::unique_ptr<Runtime>> other = Runtime::Create(cfg);
  FaultInjection::DisarmAll();
  EXPECT_EQ(other.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace streampool

namespace streampool {
namespace {

// An embedder's upstream that fails its n-th reserve or map: a reserve-then-
// map upstream (spUpstreamVmm) and a chunk upstream (spUpstream), over mmap,
// counting what is outstanding so that a leak shows.
struct FlakyUpstream {
  uint64_t fail_reserve_at = 0;  // 1-based call number; 0: never
  uint64_t fail_map_at = 0;
  uint64_t reserves = 0, maps = 0;
  int64_t reserved_out = 0, mapped_out = 0;  // outstanding bytes
};

void* FlakyReserve(size_t bytes, size_t alignment, void* user) {
  auto* u = static_cast<FlakyUpstream*>(user);
  if (++u->reserves == u->fail_reserve_at) return nullptr;
  const size_t span = bytes + alignment;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (r + alignment - 1) & ~(alignment - 1);
  if (start > r) munmap(raw, start - r);
  if (r + span > start + bytes)
    munmap(reinterpret_cast<void*>(start + bytes), r + span - start - bytes);
  u->reserved_out += static_cast<int64_t>(bytes);
  return reinterpret_cast<void*>(start);
}
int FlakyMapAt(void* addr, size_t bytes, void* user) {
  auto* u = static_cast<FlakyUpstream*>(user);
  if (++u->maps == u->fail_map_at) return 1;
  if (mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
      MAP_FAILED) {
    return 1;
  }
  u->mapped_out += static_cast<int64_t>(bytes);
  return 0;
}
void FlakyUnmapAt(void* addr, size_t bytes, void* user) {
  mmap(addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  static_cast<FlakyUpstream*>(user)->mapped_out -= static_cast<int64_t>(bytes);
}
void FlakyRelease(void* addr, size_t bytes, void* user) {
  munmap(addr, bytes);
  static_cast<FlakyUpstream*>(user)->reserved_out -= static_cast<int64_t>(bytes);
}
void* FlakyMap(size_t bytes, void* user) {
  auto* u = static_cast<FlakyUpstream*>(user);
  if (++u->maps == u->fail_map_at) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  u->mapped_out += static_cast<int64_t>(bytes);
  return p;
}
void FlakyUnmap(void* base, size_t bytes, void* user) {
  munmap(base, bytes);
  static_cast<FlakyUpstream*>(user)->mapped_out -= static_cast<int64_t>(bytes);
}

// Growth in several runs (a block across granules after a release) so that a
// failure can fall in the middle of one growth. Returns the failed calls.
int RunOnUpstream(FlakyUpstream* u, bool vmm) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  spRuntime_t rt;
  cfg.oomReclaimOff = 1;  // the upstream's failure is the call's (oom_test.cc: the reclaim)
  EXPECT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  spStream_t s;
  EXPECT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  spMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = spMemAllocationTypeDevice;
  spMemPool_t pool;
  if (vmm) {
    spUpstreamVmm up = {FlakyReserve, FlakyMapAt, FlakyUnmapAt, FlakyRelease, u, 1};
    EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt, &props, &up), spSuccess);
  } else {
    spUpstream up = {FlakyMap, FlakyUnmap, u, 1};
    EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, rt, &props, &up), spSuccess);
  }
  int failures = 0;
  std::vector<void*> live;
  auto alloc = [&](size_t size) { failures += AllocOrFailCleanly(pool, s, size, &live); };
  alloc(kMiB);
  alloc(5 * kMiB);
  for (void* p : live) EXPECT_EQ(spFreeAsync(p, s), spSuccess);
  live.clear();
  EXPECT_EQ(spStreamSynchronize(s), spSuccess);  // releases every granule
  alloc(256);                                    // pins the first granule (when it can be mapped)
  alloc(7 * kMiB);                               // the free range above it: several runs to map
  alloc(3 * kMiB);
  for (void* p : live) EXPECT_EQ(spFreeAsync(p, s), spSuccess);
  EXPECT_EQ(spMemPoolDestroy(pool), spSuccess);
  EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
  return failures;
}

TEST(UpstreamFaultTest, EveryNthReserveOrMapOfAnEmbeddersUpstreamFailsCleanly) {
  for (bool vmm : {true, false}) {
    for (bool reserve : {true, false}) {
      if (reserve && !vmm) continue;  // a chunk upstream has no reserve
      for (uint64_t n = 1; n <= 12; ++n) {
        SCOPED_TRACE(testing::Message()
                     << (vmm ? "vmm" : "chunks") << (reserve ? " reserve " : " map ") << n);
        FlakyUpstream u;
        (reserve ? u.fail_reserve_at : u.fail_map_at) = n;
        RunOnUpstream(&u, vmm);
        // Every map undone and every reservation given back by the end.
        EXPECT_EQ(u.mapped_out, 0);
        EXPECT_EQ(u.reserved_out, 0);
      }
    }
  }
}

}  // namespace
}  // namespace streampool
