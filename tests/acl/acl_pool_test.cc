// AscendCL's stream-ordered pools (acl/acl_rt_memory.h) on streampool: every
// pool function's error cases with CANN's codes, the Aclnn two-phase flow of
// a workspace freed on the stream right after the launch, DVPP buffers
// feeding inference, and the VMM functions as the upstream of an expandable
// pool. The suite runs under STREAMPOOL_CHECK_STREAM_ORDER=fatal.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "acl/ops/acl_dvpp.h"
#include "tests/acl/acl_test_util.h"

namespace streampool::acl_test {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST_F(AclTest, PoolCreateErrorCases) {
  aclrtMemPool pool = nullptr;
  aclrtMemPoolProps props = Props();
  EXPECT_EQ(aclrtMemPoolCreate(nullptr, &props), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolCreate(&pool, nullptr), ACL_ERROR_INVALID_PARAM);
  props.allocType = static_cast<aclrtMemAllocationType>(1);
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_INVALID_PARAM);
  props = Props();
  props.location.type = ACL_MEM_LOCATION_TYPE_HOST;
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_INVALID_PARAM);
  props = Props();
  props.reserved[31] = 1;
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_INVALID_PARAM);
  props = Props(7);
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_RT_INVALID_DEVICEID);
  props = Props();
  props.handleType = ACL_MEM_HANDLE_TYPE_POSIX;
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  props.handleType = static_cast<aclrtMemHandleType>(3);  // in the enum's range, not CANN's
  EXPECT_EQ(aclrtMemPoolCreate(&pool, &props), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(pool, nullptr);  // nothing made
  props = Props();
  ACL_ASSERT_OK(aclrtMemPoolCreate(&pool, &props));
  EXPECT_NE(pool, nullptr);
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  EXPECT_EQ(aclrtMemPoolDestroy(pool), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolDestroy(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolDestroy(ForgedPool()), ACL_ERROR_RT_PARAM_INVALID);
}

TEST_F(AclTest, PoolAttributeErrorCasesAndValues) {
  aclrtMemPool pool = nullptr;
  const aclrtMemPoolProps props = Props();
  ACL_ASSERT_OK(aclrtMemPoolCreate(&pool, &props));
  uint32_t on = 0;
  uint64_t bytes = 0;
  EXPECT_EQ(aclrtMemPoolGetAttr(nullptr, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, &on),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolSetAttr(nullptr, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, &on),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, nullptr),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolGetAttr(pool, static_cast<aclrtMemPoolAttr>(0), &bytes),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolGetAttr(pool, static_cast<aclrtMemPoolAttr>(9), &bytes),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolGetAttr(ForgedPool(), ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, &bytes),
            ACL_ERROR_RT_PARAM_INVALID);
  // Switches are uint32_t 0 or 1, on by default.
  for (auto attr :
       {ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
        ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
    ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, attr, &on));
    EXPECT_EQ(on, 1u);
    uint32_t two = 2;
    EXPECT_EQ(aclrtMemPoolSetAttr(pool, attr, &two), ACL_ERROR_RT_PARAM_INVALID);
    uint32_t off = 0;
    ACL_ASSERT_OK(aclrtMemPoolSetAttr(pool, attr, &off));
    ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, attr, &on));
    EXPECT_EQ(on, 0u);
  }
  uint64_t threshold = 8 * kMiB;
  ACL_ASSERT_OK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &threshold));
  ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &bytes));
  EXPECT_EQ(bytes, 8 * kMiB);
  // Current attributes are read-only; High ones reset with 0 only.
  EXPECT_EQ(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT, &threshold),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &threshold),
            ACL_ERROR_RT_PARAM_INVALID);
  uint64_t zero = 0;
  ACL_ASSERT_OK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &zero));

  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* p = nullptr;
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&p, 100, pool, s));
  ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, &bytes));
  EXPECT_EQ(bytes, 192u);  // ALIGN_UP(ALIGN_UP(100, 32) + 32, 64)
  ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT, &bytes));
  EXPECT_EQ(bytes, 2 * kMiB);
  ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH, &bytes));
  EXPECT_EQ(bytes, 2 * kMiB);
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(p, s));
  ACL_ASSERT_OK(aclrtSynchronizeStream(s));
  ACL_ASSERT_OK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &bytes));
  EXPECT_EQ(bytes, 192u);
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

TEST_F(AclTest, PoolMallocFreeAndTrimErrorCases) {
  aclrtMemPool pool = nullptr;
  aclrtMemPoolProps props = Props();
  props.maxSize = 4 * kMiB;
  ACL_ASSERT_OK(aclrtMemPoolCreate(&pool, &props));
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* p = reinterpret_cast<void*>(uintptr_t{0x1234});
  EXPECT_EQ(aclrtMemPoolMallocAsync(nullptr, 64, pool, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolMallocAsync(&p, 64, nullptr, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolMallocAsync(&p, 64, pool, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolMallocAsync(&p, 64, ForgedPool(), s), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolMallocAsync(&p, 64, pool, ForgedStream()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolMallocAsync(&p, 8 * kMiB, pool, s), ACL_ERROR_RT_MEMORY_ALLOCATION);
  // Size 0 succeeds and leaves the pointer alone, as CANN's does.
  p = reinterpret_cast<void*>(uintptr_t{0x1234});
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&p, 0, pool, s));
  EXPECT_EQ(p, reinterpret_cast<void*>(uintptr_t{0x1234}));
  EXPECT_EQ(Stats(pool).alloc_count, 0u);
  EXPECT_EQ(Stats(pool).failed_alloc_count, 1u);

  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&p, 64, pool, s));
  EXPECT_EQ(aclrtMemPoolFreeAsync(nullptr, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolFreeAsync(static_cast<char*>(p) + 64, s), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolFreeAsync(p, ForgedStream()), ACL_ERROR_RT_PARAM_INVALID);
  void* synchronous = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&synchronous, 64, ACL_MEM_MALLOC_HUGE_FIRST));
  EXPECT_EQ(aclrtFree(p), ACL_ERROR_RT_PARAM_INVALID);  // pool memory: not aclrtFree's
  ACL_ASSERT_OK(aclrtFree(synchronous));
  EXPECT_EQ(Stats(pool).used_bytes, 64u + 64u);  // ALIGN_UP(64 + 32, 64)
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(p, s));
  EXPECT_EQ(aclrtMemPoolFreeAsync(p, s), ACL_ERROR_RT_PARAM_INVALID);  // double free
  // NULL is the current device's default stream.
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&p, 64, pool, s));
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(p, nullptr));

  EXPECT_EQ(aclrtMemPoolTrimTo(nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemPoolTrimTo(ForgedPool(), 0), ACL_ERROR_RT_PARAM_INVALID);
  uint64_t keep_all = UINT64_MAX;
  ACL_ASSERT_OK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &keep_all));
  ACL_ASSERT_OK(aclrtSynchronizeDevice());
  EXPECT_EQ(Stats(pool).reserved_bytes, 2 * kMiB);
  ACL_ASSERT_OK(aclrtMemPoolTrimTo(pool, 0));
  EXPECT_EQ(Stats(pool).reserved_bytes, 0u);
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

TEST_F(AclTest, PoolFreeRefusesTheSynchronousAllocatorsMemory) {
  // aclrtMalloc and acldvppMalloc serve from pools of the face's own; their
  // memory has its own frees, and a stream-ordered free would strand it.
  void* p = nullptr;
  void* d = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
  ACL_ASSERT_OK(acldvppMalloc(&d, 64));
  EXPECT_EQ(aclrtMemPoolFreeAsync(p, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemPoolFreeAsync(d, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  ACL_EXPECT_OK(aclrtFree(p));
  ACL_EXPECT_OK(acldvppFree(d));
}

// ------------------------------------------------------- Aclnn two phases

// A toy aclnn operator: out = x + y (bytes, saturating), needing a workspace
// of one partial sum per 4 KiB tile plus scratch, as real operators' sizes
// depend on their inputs.
uint64_t AddGetWorkspaceSize(uint64_t n) { return (n + 4095) / 4096 * 8 + 64 * 1024; }

aclError Add(const uint8_t* x, const uint8_t* y, uint8_t* out, uint64_t n, void* workspace,
             uint64_t workspace_size, aclrtStream stream) {
  auto body = [](const uint8_t* x, const uint8_t* y, uint8_t* out, uint64_t n, uint64_t* tiles) {
    // Each block adds its share of the elements.
    const uint64_t share = (n + GetBlockNum() - 1) / GetBlockNum();
    const uint64_t begin = GetBlockIdx() * share;
    for (uint64_t i = begin; i < n && i < begin + share; ++i) {
      const unsigned sum = x[i] + y[i];
      out[i] = static_cast<uint8_t>(sum > 255 ? 255 : sum);
      tiles[i / 4096] += out[i];
    }
  };
  return spaclLaunchKernel(body, 4, stream,
                           {{x, n, 0}, {y, n, 0}, {out, n, 1}, {workspace, workspace_size, 1}}, x,
                           y, out, n, static_cast<uint64_t*>(workspace));
}

TEST_F(AclTest, AclnnWorkspaceFreedOnTheStreamRightAfterTheLaunch) {
  aclrtMemPool pool = nullptr;
  const aclrtMemPoolProps props = Props();
  ACL_ASSERT_OK(aclrtMemPoolCreate(&pool, &props));
  constexpr int kStreams = 2;
  constexpr int kCalls = 3;
  constexpr uint64_t kN = 64 * 1024;
  aclrtStream streams[kStreams];
  for (aclrtStream& s : streams) ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* x = nullptr;
  void* y = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&x, kN, ACL_MEM_MALLOC_HUGE_FIRST));
  ACL_ASSERT_OK(aclrtMalloc(&y, kN, ACL_MEM_MALLOC_HUGE_FIRST));
  ACL_ASSERT_OK(aclrtMemset(x, kN, 20, kN));
  ACL_ASSERT_OK(aclrtMemset(y, kN, 3, kN));
  std::vector<void*> outs;
  for (int call = 0; call < kCalls; ++call) {
    for (aclrtStream s : streams) {
      void* out = nullptr;
      ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&out, kN, pool, s));
      // Phase one: the size. Phase two: workspace, launch, free at once.
      const uint64_t ws_size = AddGetWorkspaceSize(kN);
      void* ws = nullptr;
      ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&ws, ws_size, pool, s));
      ACL_ASSERT_OK(aclrtMemsetAsync(ws, ws_size, 0, ws_size, s));
      ACL_ASSERT_OK(Add(static_cast<uint8_t*>(x), static_cast<uint8_t*>(y),
                        static_cast<uint8_t*>(out), kN, ws, ws_size, s));
      ACL_ASSERT_OK(aclrtMemPoolFreeAsync(ws, s));
      outs.push_back(out);
    }
  }
  ACL_ASSERT_OK(aclrtSynchronizeDevice());
  std::vector<uint8_t> host(kN);
  for (void* out : outs) {
    ACL_ASSERT_OK(aclrtMemcpy(host.data(), kN, out, kN, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(host[0], 23);
    EXPECT_EQ(host[kN - 1], 23);
    ACL_ASSERT_OK(aclrtMemPoolFreeAsync(out, nullptr));
  }
  // After its first call each stream gets its own pending workspace back.
  const PoolStats stats = Stats(pool);
  EXPECT_EQ(stats.alloc_count, 2u * kStreams * kCalls);
  EXPECT_GE(stats.reuse_same_stream, uint64_t{kStreams} * (kCalls - 1));
  EXPECT_TRUE(View()->CheckReports().empty());
  ACL_ASSERT_OK(aclrtFree(x));
  ACL_ASSERT_OK(aclrtFree(y));
  ACL_ASSERT_OK(aclrtSynchronizeDevice());
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  for (aclrtStream s : streams) ACL_EXPECT_OK(aclrtDestroyStream(s));
}

// Decoded frames in DVPP memory are the inputs of inference directly, with
// no copy into aclrtMalloc memory.
TEST_F(AclTest, DvppBuffersFeedInference) {
  constexpr uint64_t kFrame = 96 * 1024;
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* frames[2] = {};
  for (void*& f : frames) {
    ACL_ASSERT_OK(acldvppMalloc(&f, kFrame));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f) % 128, 0u);
  }
  // The "decoder" writes the frames on the stream.
  ACL_ASSERT_OK(aclrtMemsetAsync(frames[0], kFrame, 100, kFrame, s));
  ACL_ASSERT_OK(aclrtMemsetAsync(frames[1], kFrame, 50, kFrame, s));
  void* result = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&result, kFrame, ACL_MEM_MALLOC_HUGE_FIRST));
  aclrtMemPool pool = nullptr;
  const aclrtMemPoolProps props = Props();
  ACL_ASSERT_OK(aclrtMemPoolCreate(&pool, &props));
  const uint64_t ws_size = AddGetWorkspaceSize(kFrame);
  void* ws = nullptr;
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&ws, ws_size, pool, s));
  ACL_ASSERT_OK(aclrtMemsetAsync(ws, ws_size, 0, ws_size, s));
  ACL_ASSERT_OK(Add(static_cast<uint8_t*>(frames[0]), static_cast<uint8_t*>(frames[1]),
                    static_cast<uint8_t*>(result), kFrame, ws, ws_size, s));
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(ws, s));
  std::vector<uint8_t> host(kFrame);
  ACL_ASSERT_OK(
      aclrtMemcpyAsync(host.data(), kFrame, result, kFrame, ACL_MEMCPY_DEVICE_TO_HOST, s));
  ACL_ASSERT_OK(aclrtSynchronizeStream(s));
  EXPECT_EQ(host[0], 150);
  EXPECT_EQ(host[kFrame - 1], 150);
  for (void* f : frames) ACL_EXPECT_OK(acldvppFree(f));
  ACL_ASSERT_OK(aclrtFree(result));
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

// ------------------------------------------------------------------- VMM

TEST_F(AclTest, VmmFunctionsEnforceCannsRules) {
  aclrtPhysicalMemProp prop{};
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  size_t granularity = 0;
  ACL_ASSERT_OK(
      aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity));
  EXPECT_EQ(granularity, 2 * kMiB);
  void* va = nullptr;
  EXPECT_EQ(aclrtReserveMemAddress(nullptr, 4 * kMiB, 0, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReserveMemAddress(&va, 0, 0, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReserveMemAddress(&va, 4 * kMiB, 4096, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReserveMemAddress(&va, 4 * kMiB, 0, reinterpret_cast<void*>(1), 0),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  ACL_ASSERT_OK(aclrtReserveMemAddress(&va, 4 * kMiB, 0, nullptr, 0));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % (2 * kMiB), 0u);

  aclrtDrvMemHandle h = nullptr;
  EXPECT_EQ(aclrtMallocPhysical(&h, 2 * kMiB, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, 2 * kMiB, &prop, 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, 4096, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
  aclrtPhysicalMemProp other = prop;
  other.location.id = 3;
  EXPECT_EQ(aclrtMallocPhysical(&h, 2 * kMiB, &other, 0), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtMallocPhysical(&h, size_t{2} << 30, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
  ACL_ASSERT_OK(aclrtMallocPhysical(&h, 2 * kMiB, &prop, 0));
  size_t free = 0, total = 0;
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free, &total));
  EXPECT_EQ(total - free, 2 * kMiB);

  EXPECT_EQ(aclrtMapMem(va, 2 * kMiB, 4096, h, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMapMem(va, 4 * kMiB, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // not whole
  EXPECT_EQ(aclrtMapMem(static_cast<char*>(va) + 4096, 2 * kMiB, 0, h, 0),
            ACL_ERROR_RT_PARAM_INVALID);
  ACL_ASSERT_OK(aclrtMapMem(static_cast<char*>(va) + 2 * kMiB, 2 * kMiB, 0, h, 0));
  std::memset(static_cast<char*>(va) + 2 * kMiB, 1, 2 * kMiB);  // real memory
  EXPECT_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_PARAM_INVALID);  // still mapped
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtUnmapMem(va), ACL_ERROR_RT_PARAM_INVALID);  // no mapping starts there
  ACL_ASSERT_OK(aclrtUnmapMem(static_cast<char*>(va) + 2 * kMiB));
  ACL_ASSERT_OK(aclrtFreePhysical(h));
  EXPECT_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_PARAM_INVALID);
  ACL_ASSERT_OK(aclrtReleaseMemAddress(va));
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);
}

// An embedder's expandable-segment code: reserve once, back granules with
// physical memory as the pool grows, unmap and free them as it shrinks.
struct VmmUpstream {
  aclrtPhysicalMemProp prop{};
  std::map<uintptr_t, aclrtDrvMemHandle> granules;
  int maps = 0;
  int unmaps = 0;
  int failures = 0;

  static void* Reserve(size_t bytes, size_t alignment, void* user) {
    // CANN's reservations are aligned to its 2 MiB granularity; the pool
    // asks for no more here.
    if (alignment > 2 * kMiB) return nullptr;
    void* va = nullptr;
    return aclrtReserveMemAddress(&va, bytes, 0, nullptr, 0) == ACL_SUCCESS ? va : nullptr;
  }
  static int Map(void* addr, size_t bytes, void* user) {
    auto* up = static_cast<VmmUpstream*>(user);
    ++up->maps;
    const auto base = reinterpret_cast<uintptr_t>(addr);
    for (uintptr_t g = base; g < base + bytes; g += 2 * kMiB) {
      aclrtDrvMemHandle h = nullptr;
      if (aclrtMallocPhysical(&h, 2 * kMiB, &up->prop, 0) != ACL_SUCCESS) {
        Unmap(addr, g - base, user);
        return -1;
      }
      if (aclrtMapMem(reinterpret_cast<void*>(g), 2 * kMiB, 0, h, 0) != ACL_SUCCESS) {
        aclrtFreePhysical(h);
        Unmap(addr, g - base, user);
        return -1;
      }
      up->granules[g] = h;
    }
    return 0;
  }
  static void Unmap(void* addr, size_t bytes, void* user) {
    auto* up = static_cast<VmmUpstream*>(user);
    ++up->unmaps;
    const auto base = reinterpret_cast<uintptr_t>(addr);
    for (uintptr_t g = base; g < base + bytes; g += 2 * kMiB) {
      auto it = up->granules.find(g);
      if (it == up->granules.end()) continue;
      if (aclrtUnmapMem(reinterpret_cast<void*>(g)) != ACL_SUCCESS ||
          aclrtFreePhysical(it->second) != ACL_SUCCESS) {
        ++up->failures;
      }
      up->granules.erase(it);
    }
  }
  static void Release(void* addr, size_t, void* user) {
    if (aclrtReleaseMemAddress(addr) != ACL_SUCCESS) ++static_cast<VmmUpstream*>(user)->failures;
  }
};

TEST_F(AclTest, VmmFunctionsAreTheUpstreamOfAnExpandablePool) {
  VmmUpstream acl;
  acl.prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  acl.prop.memAttr = ACL_HBM_MEM_HUGE;
  acl.prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  spRuntime_t rt = nullptr;
  ACL_ASSERT_OK(spaclGetRuntime(&rt));
  spUpstreamVmm up{};
  up.reserve = &VmmUpstream::Reserve;
  up.map = &VmmUpstream::Map;
  up.unmap = &VmmUpstream::Unmap;
  up.release = &VmmUpstream::Release;
  up.user = &acl;
  up.touchable = 1;
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  props.maxSize = 32 * kMiB;
  spMemPool_t sp_pool = nullptr;
  ASSERT_EQ(spMemPoolCreateWithVmmUpstream(&sp_pool, rt, &props, &up), spSuccess);
  // The pool is an aclrtMemPool like any other.
  auto pool = reinterpret_cast<aclrtMemPool>(sp_pool);
  uint64_t threshold = 0;
  ACL_ASSERT_OK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &threshold));

  aclrtStream a = nullptr, b = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&a));
  ACL_ASSERT_OK(aclrtCreateStream(&b));
  void* x = nullptr;
  void* y = nullptr;
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&x, 3 * kMiB, pool, a));
  ACL_ASSERT_OK(aclrtMemPoolMallocAsync(&y, 5 * kMiB, pool, b));
  ACL_ASSERT_OK(aclrtMemsetAsync(x, 3 * kMiB, 0x5a, 3 * kMiB, a));
  ACL_ASSERT_OK(aclrtMemsetAsync(y, 5 * kMiB, 0xa5, 5 * kMiB, b));
  unsigned char back[2] = {};
  ACL_ASSERT_OK(aclrtMemcpyAsync(&back[0], 1, static_cast<char*>(x) + 3 * kMiB - 1, 1,
                                 ACL_MEMCPY_DEVICE_TO_HOST, a));
  ACL_ASSERT_OK(aclrtMemcpyAsync(&back[1], 1, y, 1, ACL_MEMCPY_DEVICE_TO_HOST, b));
  // x and y are neighbours in one reservation, mapped granule by granule.
  EXPECT_EQ(Stats(pool).reserved_bytes, 8 * kMiB);
  EXPECT_EQ(acl.granules.size(), 4u);
  size_t free = 0, total = 0;
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free, &total));
  EXPECT_GE(total - free, 8 * kMiB);
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(x, a));
  ACL_ASSERT_OK(aclrtMemPoolFreeAsync(y, b));
  ACL_ASSERT_OK(aclrtSynchronizeStream(a));
  ACL_ASSERT_OK(aclrtSynchronizeStream(b));
  EXPECT_EQ(back[0], 0x5a);
  EXPECT_EQ(back[1], 0xa5);
  // Free again, the granules go back through aclrtUnmapMem and
  // aclrtFreePhysical; the reservation stays until the pool goes.
  EXPECT_EQ(Stats(pool).reserved_bytes, 0u);
  EXPECT_TRUE(acl.granules.empty());
  EXPECT_GE(acl.unmaps, 1);
  ACL_ASSERT_OK(aclrtMemPoolDestroy(pool));
  EXPECT_EQ(acl.failures, 0);
  for (aclrtStream s : {a, b}) ACL_EXPECT_OK(aclrtDestroyStream(s));
}

}  // namespace
}  // namespace streampool::acl_test
