// The AscendCL face (include/streampool/acl/, src/acl/) outside its pools:
// init and devices, streams and events, host functions, the synchronous
// allocators with CANN's size rules, copies with destMax, emulated kernels,
// the last error, and the implicit runtime's environment.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "acl/ops/acl_dvpp.h"
#include "tests/acl/acl_test_util.h"

namespace streampool::acl_test {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

TEST(AclInitTest, InitAndFinalizeAreCountedOnce) {
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(aclInit("/no/such/acl.json"), ACL_ERROR_INVALID_FILE);
  ACL_ASSERT_OK(aclInit(nullptr));
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  ACL_ASSERT_OK(aclFinalize());
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  aclrtGetLastError(ACL_RT_THREAD_LEVEL);
}

TEST_F(AclTest, DevicesAreTheEnvironmentsAndPerThread) {
  uint32_t count = 0;
  ACL_ASSERT_OK(aclrtGetDeviceCount(&count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
  int32_t device = -1;
  ACL_ASSERT_OK(aclrtGetDevice(&device));
  EXPECT_EQ(device, 0);
  EXPECT_EQ(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtResetDevice(5), ACL_ERROR_RT_INVALID_DEVICEID);
  // A thread that never chose a device has no context.
  std::thread([] {
    int32_t d = 0;
    EXPECT_EQ(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_CONTEXT_NULL);
  }).join();
  ACL_EXPECT_OK(aclrtSynchronizeDevice());
}

TEST_F(AclTest, LastErrorIsPerThreadAndClearedByGet) {
  EXPECT_EQ(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
  uint32_t count = 0;
  ACL_ASSERT_OK(aclrtGetDeviceCount(&count));  // a success keeps it
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
  std::thread([] { EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS); }).join();
}

TEST_F(AclTest, MemInfoCountsAclrtMallocAndPhysicalMemory) {
  size_t free0 = 0, total = 0;
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total));
  EXPECT_EQ(total, size_t{1} << 30);
  EXPECT_EQ(free0, total);
  EXPECT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, nullptr, &total), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetMemInfo(static_cast<aclrtMemAttr>(31), &free0, &total),
            ACL_ERROR_INVALID_PARAM);
  void* p = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&p, 3 << 20, ACL_MEM_MALLOC_NORMAL_ONLY));
  size_t free1 = 0;
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
  EXPECT_EQ(free0 - free1, size_t{4} << 20);  // two 2 MiB granules
  ACL_ASSERT_OK(aclrtFree(p));
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
  EXPECT_EQ(free1, free0);  // given back at once, as CANN's aclrtFree does
}

TEST_F(AclTest, StreamAndEventErrorCases) {
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  aclrtEvent e = nullptr;
  ACL_ASSERT_OK(aclrtCreateEvent(&e));
  EXPECT_EQ(aclrtCreateEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyStream(ForgedStream()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtDestroyEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyEvent(ForgedEvent()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtRecordEvent(nullptr, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtRecordEvent(e, ForgedStream()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtStreamWaitEvent(s, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSynchronizeStream(ForgedStream()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtSynchronizeEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  EXPECT_EQ(aclrtQueryEventStatus(e, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtQueryEventStatus(ForgedEvent(), &status), ACL_ERROR_RT_PARAM_INVALID);
  float ms = 0;
  EXPECT_EQ(aclrtEventElapsedTime(nullptr, e, e), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtLaunchHostFunc(s, nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  // Never recorded: complete, as CANN reports it.
  ACL_ASSERT_OK(aclrtQueryEventStatus(e, &status));
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  ACL_ASSERT_OK(aclrtDestroyEvent(e));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
  EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID);
  (void)ms;
}

TEST_F(AclTest, EventsTimeKernelsAndOrderStreams) {
  aclrtStream a = nullptr, b = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&a));
  ACL_ASSERT_OK(aclrtCreateStream(&b));
  aclrtEvent start = nullptr, end = nullptr;
  ACL_ASSERT_OK(aclrtCreateEvent(&start));
  ACL_ASSERT_OK(aclrtCreateEvent(&end));
  std::vector<int> order;
  ACL_ASSERT_OK(aclrtRecordEvent(start, a));
  ACL_ASSERT_OK(spaclLaunchKernel([&order] { order.push_back(1); }, 2, a, {}));
  ACL_ASSERT_OK(aclrtRecordEvent(end, a));
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  ACL_ASSERT_OK(aclrtQueryEventStatus(end, &status));
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  float ms = 0;
  EXPECT_EQ(aclrtEventElapsedTime(&ms, start, end), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
  ACL_ASSERT_OK(aclrtStreamWaitEvent(b, end));
  ACL_ASSERT_OK(aclrtLaunchHostFunc(
      b, [](void* v) { static_cast<std::vector<int>*>(v)->push_back(2); }, &order));
  ACL_ASSERT_OK(aclrtSynchronizeStream(b));
  EXPECT_EQ(order, (std::vector<int>{1, 1, 2}));  // two blocks, then the host function
  ACL_ASSERT_OK(aclrtSynchronizeEvent(end));
  ACL_ASSERT_OK(aclrtEventElapsedTime(&ms, start, end));
  EXPECT_FLOAT_EQ(ms, 0.001f);  // one kernel of STREAMPOOL_ACL_KERNEL_NS (1 us)
  for (aclrtEvent e : {start, end}) ACL_EXPECT_OK(aclrtDestroyEvent(e));
  for (aclrtStream s : {a, b}) ACL_EXPECT_OK(aclrtDestroyStream(s));
}

TEST_F(AclTest, KernelsSeeTheirBlockAndCopiedArguments) {
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* dev = nullptr;
  constexpr uint32_t kBlocks = 8;
  ACL_ASSERT_OK(aclrtMalloc(&dev, kBlocks * sizeof(int64_t), ACL_MEM_MALLOC_HUGE_FIRST));
  auto kernel = [](int64_t* out, int64_t bias) {
    out[GetBlockIdx()] = GetBlockIdx() * 10 + GetBlockNum() + bias;
  };
  ACL_ASSERT_OK(spaclLaunchKernel(kernel, kBlocks, s, {{dev, kBlocks * sizeof(int64_t), 1}},
                                  static_cast<int64_t*>(dev), int64_t{1000}));
  int64_t host[kBlocks] = {};
  ACL_ASSERT_OK(
      aclrtMemcpyAsync(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST, s));
  ACL_ASSERT_OK(aclrtSynchronizeStream(s));
  for (uint32_t i = 0; i < kBlocks; ++i) EXPECT_EQ(host[i], i * 10 + kBlocks + 1000);
  EXPECT_EQ(spaclLaunchKernel(kernel, 0, s, {}, static_cast<int64_t*>(dev), int64_t{0}),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(spaclLaunchKernel(kernel, 65536, s, {}, static_cast<int64_t*>(dev), int64_t{0}),
            ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(aclrtFree(dev));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

TEST_F(AclTest, FailedKernelIsStickyUntilTheDeviceIsReset) {
  ACL_ASSERT_OK(spaclLaunchKernel([] { throw std::runtime_error("bad"); }, 1, nullptr, {}));
  EXPECT_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_AICORE_EXCEPTION);
  aclrtStream s = nullptr;
  EXPECT_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_AICORE_EXCEPTION);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_AICORE_EXCEPTION);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_AICORE_EXCEPTION);
  // The last reference to the device goes: a new runtime, no fault.
  ACL_ASSERT_OK(aclrtResetDevice(0));
  ACL_ASSERT_OK(aclrtSetDevice(0));
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

// aclrtMalloc: ALIGN_UP(ALIGN_UP(len, 32) + 32, 64) bytes per block, 64-B
// aligned starts; aclrtMallocAlign32 without the extra 32 bytes.
TEST_F(AclTest, SynchronousAllocatorsFollowCannsSizeRules) {
  struct Case {
    const char* name;
    aclError (*malloc)(void**, size_t, aclrtMemMallocPolicy);
    uint64_t (*rule)(uint64_t);
  };
  const Case cases[] = {
      {"aclrtMalloc", aclrtMalloc, [](uint64_t n) { return AlignUp(AlignUp(n, 32) + 32, 64); }},
      {"aclrtMallocCached", aclrtMallocCached,
       [](uint64_t n) { return AlignUp(AlignUp(n, 32) + 32, 64); }},
      {"aclrtMallocAlign32", aclrtMallocAlign32, [](uint64_t n) { return AlignUp(n, 64); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<void*> blocks;
    uintptr_t next = 0;
    for (uint64_t len : {1, 32, 33, 64, 100, 1000}) {
      void* p = nullptr;
      ACL_ASSERT_OK(c.malloc(&p, len, ACL_MEM_MALLOC_NORMAL_ONLY));
      const auto at = reinterpret_cast<uintptr_t>(p);
      EXPECT_EQ(at % 64, 0u) << len;
      // Fresh blocks of one granule are carved back to back.
      if (next != 0) {
        EXPECT_EQ(at, next) << len;
      }
      next = at + c.rule(len);
      blocks.push_back(p);
    }
    for (void* p : blocks) ACL_EXPECT_OK(aclrtFree(p));
  }
}

TEST_F(AclTest, MallocErrorCasesAndPolicies) {
  void* p = nullptr;
  EXPECT_EQ(aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&p, 64, static_cast<aclrtMemMallocPolicy>(0x42)), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE1G_ONLY), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtMalloc(&p, 64, ACL_MEM_ACCESS_USER_SPACE_READONLY),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtMalloc(&p, size_t{2} << 30, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_ERROR_RT_MEMORY_ALLOCATION);
  // Memory-type bits ride along with any policy.
  ACL_ASSERT_OK(aclrtMalloc(&p, 64,
                            static_cast<aclrtMemMallocPolicy>(ACL_MEM_MALLOC_HUGE_FIRST_P2P |
                                                              ACL_MEM_TYPE_HIGH_BAND_WIDTH)));
  EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFree(static_cast<char*>(p) + 64), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(acldvppFree(p), ACL_ERROR_RT_PARAM_INVALID);  // not DVPP memory
  ACL_ASSERT_OK(aclrtFree(p));
  EXPECT_EQ(aclrtFree(p), ACL_ERROR_RT_PARAM_INVALID);  // double free
  // HugeOnly without huge pages: a clean allocation error, or huge pages.
  const aclError huge = aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_ONLY);
  EXPECT_TRUE(huge == ACL_SUCCESS || huge == ACL_ERROR_RT_MEMORY_ALLOCATION) << huge;
  if (huge == ACL_SUCCESS) {
    ACL_EXPECT_OK(aclrtFree(p));
  }
}

TEST_F(AclTest, FreeWithDevSyncWaitsForTheDevice) {
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));
  void* p = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
  ACL_ASSERT_OK(aclrtMemsetAsync(p, 4096, 7, 4096, s));
  ACL_ASSERT_OK(aclrtFreeWithDevSync(p));  // the fill completes first
  ACL_ASSERT_OK(aclrtDestroyStream(s));
}

TEST_F(AclTest, HostMemoryIs64ByteAlignedAndFreedWithFreeHost) {
  void* h = nullptr;
  EXPECT_EQ(aclrtMallocHost(nullptr, 64), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocHost(&h, 0), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(aclrtMallocHost(&h, 100));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(h) % 64, 0u);
  std::memset(h, 1, 100);
  EXPECT_EQ(aclrtFree(h), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtFreeHost(nullptr), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(aclrtFreeHost(h));
  EXPECT_EQ(aclrtFreeHost(h), ACL_ERROR_RT_PARAM_INVALID);
}

TEST_F(AclTest, DvppMemoryIs128ByteAlignedInTheDvppRule) {
  void* a = nullptr;
  void* b = nullptr;
  EXPECT_EQ(acldvppMalloc(nullptr, 64), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(acldvppMalloc(&a, 0), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(acldvppMalloc(&a, 1000));
  ACL_ASSERT_OK(acldvppMalloc(&b, 1));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 128, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) - reinterpret_cast<uintptr_t>(a),
            AlignUp(AlignUp(1000, 32) + 32, 128));
  EXPECT_EQ(aclrtFree(a), ACL_ERROR_RT_PARAM_INVALID);  // acldvppFree's
  EXPECT_EQ(acldvppFree(nullptr), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(acldvppFree(a));
  ACL_ASSERT_OK(acldvppFree(b));
}

TEST_F(AclTest, CopiesAndFillsCheckDestMax) {
  void* dev = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
  char host[256];
  std::memset(host, 5, sizeof host);
  EXPECT_EQ(aclrtMemcpy(dev, 128, host, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpy(nullptr, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpyAsync(dev, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE, ForgedStream()),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMemset(dev, 64, 0, 128), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemset(nullptr, 64, 0, 64), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemsetAsync(dev, 64, 0, 128, nullptr), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(aclrtMemcpy(dev, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE));
  ACL_ASSERT_OK(aclrtMemset(dev, 256, 9, 16));
  char back[256] = {};
  ACL_ASSERT_OK(aclrtMemcpy(back, sizeof back, dev, 256, ACL_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(back[0], 9);
  EXPECT_EQ(back[16], 5);
  EXPECT_EQ(back[255], 5);
  ACL_ASSERT_OK(aclrtFree(dev));
}

TEST_F(AclTest, NotSupportedFunctionsSaySo) {
  char buf[64] = {};
  EXPECT_EQ(aclrtMemcpy2d(buf, 8, buf, 8, 8, 2, ACL_MEMCPY_HOST_TO_HOST),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtMemcpy2dAsync(buf, 8, buf, 8, 8, 2, ACL_MEMCPY_HOST_TO_HOST, nullptr),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

TEST(AclEnvironmentTest, TheRuntimeIsReadFromStreampoolAclVariables) {
  setenv("STREAMPOOL_ACL_DEVICES", "3", 1);
  setenv("STREAMPOOL_ACL_CAPACITY", "256M", 1);
  setenv("STREAMPOOL_CUDA_DEVICES", "5", 1);  // the other face's: ignored here
  ACL_ASSERT_OK(aclrtSetDevice(2));
  uint32_t count = 0;
  ACL_ASSERT_OK(aclrtGetDeviceCount(&count));
  EXPECT_EQ(count, 3u);
  size_t free = 0, total = 0;
  ACL_ASSERT_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free, &total));
  EXPECT_EQ(total, size_t{256} << 20);
  ACL_ASSERT_OK(aclrtResetDevice(2));
  unsetenv("STREAMPOOL_ACL_DEVICES");
  unsetenv("STREAMPOOL_ACL_CAPACITY");
  unsetenv("STREAMPOOL_CUDA_DEVICES");
}

}  // namespace
}  // namespace streampool::acl_test
