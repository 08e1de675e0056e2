// The CUDA guide's stream-ordered allocator snippets, built against
// streampool's <cuda_runtime.h> and run under the fatal stream-order checker
// (the test suite's STREAMPOOL_CHECK_STREAM_ORDER=fatal), one test each.
//
// Source of the snippets: CUDA C++ Programming Guide, appendix F "Stream
// Ordered Memory Allocator", in the Chinese translation kept at
// ../shared/reference/cuda-stream-ordered-allocator.zh.txt (NVIDIA
// Corporation; quoted for testing). The code is the guide's, re-flowed onto
// lines. Edits: each `kernel<<<..., stream>>>(ptr, ...)` is rewritten as an
// spcudaLaunchKernel call declaring what the kernel touches; where the guide's
// text would not compile with CUDA either (a typo), the fix is marked
// "guide typo". Each test then asserts what the guide says should happen.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "gtest/gtest.h"
#include "streampool/cuda/interop.h"

namespace {

constexpr size_t kBytes = 512;
// A whole 2 MiB granule: a second allocation of it can only be the first's
// bytes reused, never unused bytes beside them (which streampool's pools
// prefer to reuse through a dependency), and it bypasses the per-stream front
// caches (up to 1 MiB), so the reuse rules the guide describes decide.
constexpr size_t kGranule = size_t{2} << 20;

// The guide's `kernel`: reads and writes its buffer.
__global__ void kernel(void* ptr) { static_cast<unsigned char*>(ptr)[threadIdx.x] += 1; }

// kernel<<<1, 32, 0, stream>>>(ptr) with its access declared.
cudaError_t Launch(void* ptr, size_t size, cudaStream_t stream) {
  return spcudaLaunchKernel(kernel, 1, 32, 0, stream, {{ptr, size, 1}}, ptr);
}

class GuideTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
  }
};

// F.2 Query for support.
TEST_F(GuideTest, F2QueryForSupport) {
  int device = 0;
  bool supports_pools = false, supports_fd = false;
  // --- guide ---
  int driverVersion = 0;
  int deviceSupportsMemoryPools = 0;
  int poolSupportedHandleTypes = 0;
  cudaDriverGetVersion(&driverVersion);
  if (driverVersion >= 11020) {
    cudaDeviceGetAttribute(&deviceSupportsMemoryPools, cudaDevAttrMemoryPoolsSupported, device);
  }
  if (deviceSupportsMemoryPools != 0) {
    // `device` supports the Stream Ordered Memory Allocator
    supports_pools = true;
  }
  if (driverVersion >= 11030) {
    cudaDeviceGetAttribute(&poolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes,
                           device);
  }
  if (poolSupportedHandleTypes & cudaMemHandleTypePosixFileDescriptor) {
    // Pools on the specified device can be created with posix file descriptor-based IPC
    supports_fd = true;
  }
  // --- end ---
  EXPECT_TRUE(supports_pools);
  EXPECT_TRUE(supports_fd);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// F.3: allocate, use and free in one stream.
TEST_F(GuideTest, F3AllocateUseFreeOnPerThreadStream) {
  // --- guide ---
  void* ptr;
  size_t size = 512;
  cudaMallocAsync(&ptr, size, cudaStreamPerThread);
  // do work using the allocation
  Launch(ptr, size, cudaStreamPerThread);  // kernel<<<..., cudaStreamPerThread>>>(ptr, ...);
  // An asynchronous free can be specified without synchronizing the CPU and GPU
  cudaFreeAsync(ptr, cudaStreamPerThread);
  // --- end ---
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The same size again on the same stream reuses the freed bytes at once.
  void* again = nullptr;
  ASSERT_EQ(cudaMallocAsync(&again, size, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(again, ptr);
  ASSERT_EQ(cudaFreeAsync(again, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
}

// F.3: cudaFreeAsync frees cudaMalloc memory.
TEST_F(GuideTest, F3FreeAsyncOfMallocMemory) {
  void* ptr;
  size_t size = kBytes;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // --- guide ---
  cudaMalloc(&ptr, size);
  Launch(ptr, size, stream);  // kernel<<<..., stream>>>(ptr, ...);
  cudaFreeAsync(ptr, stream);
  // --- end ---
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, ptr), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);  // gone
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// F.3: cudaFree frees cudaMallocAsync memory after a synchronize.
TEST_F(GuideTest, F3FreeOfMallocAsyncMemoryAfterSynchronize) {
  void* ptr;
  size_t size = kBytes;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // --- guide ---
  cudaMallocAsync(&ptr, size, stream);
  Launch(ptr, size, stream);  // kernel<<<..., stream>>>(ptr, ...);
  // synchronize is needed to avoid prematurely freeing the memory
  cudaStreamSynchronize(stream);
  cudaFree(ptr);
  // --- end ---
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// F.6 Explicit pools, and F.7's release threshold and trim.
TEST_F(GuideTest, F6ExplicitPoolF7ThresholdAndTrim) {
  cudaMemPool_t memPool;
  cudaMemPool_t mempool;  // F.7 spells it so
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // --- guide F.6 ---
  // create a pool similar to the implicit pool on device 0
  int device = 0;
  cudaMemPoolProps poolProps = {};
  poolProps.allocType = cudaMemAllocationTypePinned;
  poolProps.location.id = device;
  poolProps.location.type = cudaMemLocationTypeDevice;
  cudaMemPoolCreate(&memPool, &poolProps);  // guide typo: one ')' too many
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  mempool = memPool;
  ASSERT_EQ(cudaDeviceSetMemPool(device, memPool), cudaSuccess);
  void* ptrs[10];
  size_t size[10];
  for (int j = 0; j < 10; ++j) size[j] = size_t{1} << (12 + j);
  int i, j;
  // --- guide F.7 ---
  cuuint64_t setVal = UINT64_MAX;  // guide typo: Cuuint64_t
  cudaMemPoolSetAttribute(memPool, cudaMemPoolAttrReleaseThreshold, &setVal);
  // application phase needing a lot of memory from the stream ordered allocator
  for (i = 0; i < 10; i++) {
    for (j = 0; j < 10; j++) {
      cudaMallocAsync(&ptrs[j], size[j], stream);
    }
    // kernel<<<...,stream>>>(ptrs,...);
    std::vector<spAccess> touched;
    for (j = 0; j < 10; j++) touched.push_back({ptrs[j], size[j], 1});
    spcudaLaunchKernel([](void**) {}, 1, 1, 0, stream, touched, ptrs);
    for (j = 0; j < 10; j++) {
      cudaFreeAsync(ptrs[j], stream);
    }
  }
  // Process does not need as much memory for the next phase.
  // Synchronize so that the trim operation will know that the allocations are no
  // longer in use.
  cudaStreamSynchronize(stream);
  // --- end (trim below) ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  uint64_t reserved = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(mempool, cudaMemPoolAttrReservedMemCurrent, &reserved),
            cudaSuccess);
  EXPECT_GT(reserved, 0u);  // the threshold kept it through the synchronize
  // --- guide F.7 ---
  cudaMemPoolTrimTo(mempool, 0);
  // Some other process/allocation mechanism can now use the physical memory
  // released by the trimming operation.
  // --- end ---
  ASSERT_EQ(cudaMemPoolGetAttribute(mempool, cudaMemPoolAttrReservedMemCurrent, &reserved),
            cudaSuccess);
  EXPECT_EQ(reserved, 0u);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(memPool), cudaSuccess);
}

// F.8 Resource usage statistics. --- guide --- (helpers at namespace scope)
// sample helper functions for getting the usage statistics in bulk
struct usageStatistics {
  cuuint64_t reserved;
  cuuint64_t reservedHigh;
  cuuint64_t used;
  cuuint64_t usedHigh;
};
// guide typo: cudaMemoryPool_t for cudaMemPool_t, and the attributes passed by
// value where cudaMemPoolGetAttribute takes their address.
void getUsageStatistics(cudaMemPool_t memPool, struct usageStatistics* statistics) {
  cudaMemPoolGetAttribute(memPool, cudaMemPoolAttrReservedMemCurrent, &statistics->reserved);
  cudaMemPoolGetAttribute(memPool, cudaMemPoolAttrReservedMemHigh, &statistics->reservedHigh);
  cudaMemPoolGetAttribute(memPool, cudaMemPoolAttrUsedMemCurrent, &statistics->used);
  cudaMemPoolGetAttribute(memPool, cudaMemPoolAttrUsedMemHigh, &statistics->usedHigh);
}
// resetting the watermarks will make them take on the current value.
void resetStatistics(cudaMemPool_t memPool) {
  cuuint64_t value = 0;
  cudaMemPoolSetAttribute(memPool, cudaMemPoolAttrReservedMemHigh, &value);
  cudaMemPoolSetAttribute(memPool, cudaMemPoolAttrUsedMemHigh, &value);
}
// --- end ---

TEST_F(GuideTest, F8UsageStatistics) {
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  void *a, *b;
  ASSERT_EQ(cudaMallocAsync(&a, 1 << 20, 0), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&b, 1 << 20, 0), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(b, 0), cudaSuccess);
  usageStatistics s{};
  getUsageStatistics(pool, &s);
  EXPECT_GE(s.used, uint64_t{1} << 20);
  EXPECT_GE(s.usedHigh, uint64_t{2} << 20);
  EXPECT_GE(s.reserved, s.used);
  resetStatistics(pool);
  getUsageStatistics(pool, &s);
  EXPECT_EQ(s.usedHigh, s.used);
  EXPECT_EQ(s.reservedHigh, s.reserved);
  ASSERT_EQ(cudaFreeAsync(a, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// F.9.1 cudaMemPoolReuseFollowEventDependencies.
TEST_F(GuideTest, F91ReuseFollowsEventDependencies) {
  void *ptr, *ptr2;
  size_t size = kGranule;
  cudaStream_t originalStream, otherStream;
  cudaEvent_t event;
  ASSERT_EQ(cudaStreamCreateWithFlags(&originalStream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&otherStream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  // --- guide ---
  cudaMallocAsync(&ptr, size, originalStream);
  Launch(ptr, size, originalStream);  // kernel<<<..., originalStream>>>(ptr, ...);
  cudaFreeAsync(ptr, originalStream);
  cudaEventRecord(event, originalStream);
  // waiting on the event that captures the free in another stream
  // allows the allocator to reuse the memory to satisfy
  // a new allocation request in the other stream when
  // cudaMemPoolReuseFollowEventDependencies is enabled.
  cudaStreamWaitEvent(otherStream, event);  // (CUDA's C++ default: flags 0)
  cudaMallocAsync(&ptr2, size, otherStream);
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(ptr2, ptr);
  ASSERT_EQ(Launch(ptr2, size, otherStream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(ptr2, otherStream), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// F.9.2 cudaMemPoolReuseAllowOpportunistic: once the host has seen the free
// complete, another stream may take the bytes with no dependency.
TEST_F(GuideTest, F92OpportunisticReuse) {
  void *ptr, *ptr2;
  size_t size = kGranule;
  cudaStream_t originalStream, otherStream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&originalStream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&otherStream, cudaStreamNonBlocking), cudaSuccess);
  // The guide's `wait`: the host lets time pass, then looks.
  auto wait = [&](int us) {
    spRuntime_t rt;
    ASSERT_EQ(spcudaGetRuntime(&rt), cudaSuccess);
    ASSERT_EQ(spHostAdvance(rt, uint64_t(us) * 1000), spSuccess);
    EXPECT_EQ(cudaStreamQuery(originalStream), cudaSuccess);
  };
  // --- guide ---
  cudaMallocAsync(&ptr, size, originalStream);
  Launch(ptr, size, originalStream);  // kernel<<<..., originalStream>>>(ptr, ...);
  cudaFreeAsync(ptr, originalStream);
  // after some time, the kernel finishes running
  wait(10);
  // When cudaMemPoolReuseAllowOpportunistic is enabled this allocation request
  // can be fulfilled with the prior allocation based on the progress of originalStream.
  cudaMallocAsync(&ptr2, size, otherStream);
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(ptr2, ptr);
  ASSERT_EQ(cudaFreeAsync(ptr2, otherStream), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// F.10: the guide's setAccessOnDevice, on two devices.
// --- guide --- (snippet showing usage of cudaMemPoolSetAccess)
cudaError_t setAccessOnDevice(cudaMemPool_t memPool, int residentDevice, int accessingDevice) {
  cudaMemAccessDesc accessDesc = {};
  accessDesc.location.type = cudaMemLocationTypeDevice;
  accessDesc.location.id = accessingDevice;
  accessDesc.flags = cudaMemAccessFlagsProtReadWrite;
  int canAccess = 0;
  cudaError_t error = cudaDeviceCanAccessPeer(&canAccess, accessingDevice, residentDevice);
  if (error != cudaSuccess) {
    return error;
  } else if (canAccess == 0) {
    return cudaErrorPeerAccessUnsupported;
  }
  // Make the address accessible
  return cudaMemPoolSetAccess(memPool, &accessDesc, 1);
}
// --- end ---

TEST_F(GuideTest, F10DeviceAccessibility) {
  setenv("STREAMPOOL_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  cudaMemPool_t pool;
  // The first call makes the runtime, reading the environment.
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  unsetenv("STREAMPOOL_CUDA_DEVICES");
  cudaMemLocation dev1 = {cudaMemLocationTypeDevice, 1};
  cudaMemAccessFlags flags;
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, pool, &dev1), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtNone);
  EXPECT_EQ(setAccessOnDevice(pool, 0, 1), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, pool, &dev1), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);
  // A device is not its own peer.
  EXPECT_EQ(setAccessOnDevice(pool, 0, 0), cudaErrorPeerAccessUnsupported);
  EXPECT_EQ(setAccessOnDevice(pool, 0, 5), cudaErrorInvalidDevice);
  // Device 1 uses device 0's allocation with the access granted.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s1;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  void* ptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&ptr, kBytes, pool, s1), cudaSuccess);
  ASSERT_EQ(Launch(ptr, kBytes, s1), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(ptr, s1), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s1), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
}

}  // namespace
