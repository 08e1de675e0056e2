// The CUDA face's pool placement, occupancy and stream priority calls: the
// read-only pool attributes CUDA 13 adds after cudaMemPoolAttrUsedMemHigh,
// the memory-location forms of the pool calls (cudaMemGetDefaultMemPool,
// cudaMemGetMemPool, cudaMemSetMemPool) and how they agree with the device
// forms, the occupancy calculator's model, and cudaStreamGetPriority; each
// with its error cases and CUDA's codes.
//
// The tests run on two simulated devices; each resets the implicit runtime
// when it ends.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "gtest/gtest.h"

namespace {

// The CUDA face's attribute values are the table's (src/pool/pool_attrs.def);
// streampool's own (from 0x1000) have no CUDA name.
#define SP_POOL_ATTR(name, value, cxx_name, snake_name, kind, access, trace_name, doc) \
  static_assert(cuda##name == (value),                                                 \
                "cuda" #name " has not the value src/pool/pool_attrs.def gives it");
#define SP_OWN_POOL_ATTR(...)
#include "src/pool/pool_attrs.def"

#define CUDA_ASSERT_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define CUDA_EXPECT_OK(expr) EXPECT_EQ((expr), cudaSuccess) << #expr

const auto kForgedStream = reinterpret_cast<cudaStream_t>(uintptr_t{0x7777});
const auto kForgedPool = reinterpret_cast<cudaMemPool_t>(uintptr_t{0x7777});

class CudaMemLocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("STREAMPOOL_CUDA_DEVICES", "2", 1);
    CUDA_ASSERT_OK(cudaSetDevice(0));
  }
  void TearDown() override {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
    unsetenv("STREAMPOOL_CUDA_DEVICES");
  }

  static cudaMemPool_t NewPool(cudaMemLocationType type, int id, size_t max_size = 0,
                               cudaMemAllocationHandleType handles = cudaMemHandleTypeNone) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = handles;
    props.location.type = type;
    props.location.id = id;
    props.maxSize = max_size;
    cudaMemPool_t pool = nullptr;
    EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    return pool;
  }
  template <class T>
  static T Get(cudaMemPool_t pool, cudaMemPoolAttr attr) {
    T v{};
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, attr, &v), cudaSuccess) << attr;
    return v;
  }
};

__global__ void Fill(char* p, int n, char v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    p[i] = v;
  }
}

// -------------------------------------------------------- pool attributes

TEST_F(CudaMemLocationTest, PlacementAttributesHaveCudasValues) {
  static_assert(cudaMemPoolAttrAllocationType == 0x9);
  static_assert(cudaMemPoolAttrExportHandleTypes == 0xA);
  static_assert(cudaMemPoolAttrLocationId == 0xB);
  static_assert(cudaMemPoolAttrLocationType == 0xC);
  static_assert(cudaMemPoolAttrMaxPoolSize == 0xD);
  static_assert(cudaMemPoolAttrHwDecompressEnabled == 0xE);
  static_assert(cudaMemAllocationTypeManaged == 0x2);
  static_assert(cudaMemLocationTypeInvisible == 5);
  // The sp* API has the same numbers, so the face passes them through.
  static_assert(static_cast<int>(cudaMemPoolAttrMaxPoolSize) == spMemPoolAttrMaxPoolSize);
  static_assert(static_cast<int>(cudaMemPoolAttrHwDecompressEnabled) ==
                spMemPoolAttrHwDecompressEnabled);
}

TEST_F(CudaMemLocationTest, PlacementAttributesReadThePoolsProperties) {
  cudaMemPool_t def = nullptr;
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 1));
  EXPECT_EQ(Get<cudaMemAllocationType>(def, cudaMemPoolAttrAllocationType),
            cudaMemAllocationTypePinned);
  EXPECT_EQ(Get<cudaMemAllocationHandleType>(def, cudaMemPoolAttrExportHandleTypes),
            cudaMemHandleTypeNone);
  EXPECT_EQ(Get<int>(def, cudaMemPoolAttrLocationId), 1);
  EXPECT_EQ(Get<cudaMemLocationType>(def, cudaMemPoolAttrLocationType), cudaMemLocationTypeDevice);
  EXPECT_EQ(Get<uint64_t>(def, cudaMemPoolAttrMaxPoolSize), 0u);  // no maximum
  EXPECT_EQ(Get<int>(def, cudaMemPoolAttrHwDecompressEnabled), 0);

  cudaMemPool_t exportable =
      NewPool(cudaMemLocationTypeDevice, 0, 32 << 20, cudaMemHandleTypePosixFileDescriptor);
  EXPECT_EQ(Get<cudaMemAllocationHandleType>(exportable, cudaMemPoolAttrExportHandleTypes),
            cudaMemHandleTypePosixFileDescriptor);
  EXPECT_EQ(Get<uint64_t>(exportable, cudaMemPoolAttrMaxPoolSize), uint64_t{32} << 20);
  EXPECT_EQ(Get<int>(exportable, cudaMemPoolAttrLocationId), 0);

  cudaMemPool_t host = NewPool(cudaMemLocationTypeHost, 0);
  EXPECT_EQ(Get<cudaMemAllocationType>(host, cudaMemPoolAttrAllocationType),
            cudaMemAllocationTypePinned);
  EXPECT_EQ(Get<cudaMemLocationType>(host, cudaMemPoolAttrLocationType), cudaMemLocationTypeHost);
  EXPECT_EQ(Get<int>(host, cudaMemPoolAttrLocationId), cudaCpuDeviceId);

  CUDA_EXPECT_OK(cudaMemPoolDestroy(host));
  CUDA_EXPECT_OK(cudaMemPoolDestroy(exportable));
}

TEST_F(CudaMemLocationTest, PlacementAttributesCannotBeSet) {
  cudaMemPool_t pool = NewPool(cudaMemLocationTypeDevice, 0, 32 << 20);
  for (cudaMemPoolAttr attr :
       {cudaMemPoolAttrAllocationType, cudaMemPoolAttrExportHandleTypes, cudaMemPoolAttrLocationId,
        cudaMemPoolAttrLocationType, cudaMemPoolAttrHwDecompressEnabled}) {
    int v = 1;
    EXPECT_EQ(cudaMemPoolSetAttribute(pool, attr, &v), cudaErrorInvalidValue) << attr;
  }
  uint64_t max = uint64_t{64} << 20;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrMaxPoolSize, &max), cudaErrorInvalidValue);
  EXPECT_EQ(Get<uint64_t>(pool, cudaMemPoolAttrMaxPoolSize), uint64_t{32} << 20);
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrLocationId, nullptr),
            cudaErrorInvalidValue);
  int id = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(kForgedPool, cudaMemPoolAttrLocationId, &id),
            cudaErrorInvalidResourceHandle);
  CUDA_EXPECT_OK(cudaMemPoolDestroy(pool));
}

// ------------------------------------------------ memory-location pool calls

TEST_F(CudaMemLocationTest, DeviceLocationsAreTheDeviceCalls) {
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 1};
  cudaMemPool_t by_location = nullptr;
  cudaMemPool_t by_device = nullptr;
  CUDA_ASSERT_OK(cudaMemGetDefaultMemPool(&by_location, &loc, cudaMemAllocationTypePinned));
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&by_device, 1));
  EXPECT_EQ(by_location, by_device);
  CUDA_ASSERT_OK(cudaMemGetMemPool(&by_location, &loc, cudaMemAllocationTypePinned));
  EXPECT_EQ(by_location, by_device);  // nothing set yet: the default

  // Set through either form, read through the other.
  cudaMemPool_t mine = NewPool(cudaMemLocationTypeDevice, 1);
  CUDA_ASSERT_OK(cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, mine));
  CUDA_ASSERT_OK(cudaDeviceGetMemPool(&by_device, 1));
  EXPECT_EQ(by_device, mine);
  cudaMemPool_t def = nullptr;
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 1));
  CUDA_ASSERT_OK(cudaDeviceSetMemPool(1, def));
  CUDA_ASSERT_OK(cudaMemGetMemPool(&by_location, &loc, cudaMemAllocationTypePinned));
  EXPECT_EQ(by_location, def);

  // The pool must live at that location; device 0's current pool is
  // untouched by device 1's.
  cudaMemLocation zero = {cudaMemLocationTypeDevice, 0};
  EXPECT_EQ(cudaMemSetMemPool(&zero, cudaMemAllocationTypePinned, mine), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaMemGetMemPool(&by_location, &zero, cudaMemAllocationTypePinned));
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 0));
  EXPECT_EQ(by_location, def);

  // Destroying the current pool makes the default current again.
  CUDA_ASSERT_OK(cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, mine));
  CUDA_ASSERT_OK(cudaMemPoolDestroy(mine));
  CUDA_ASSERT_OK(cudaMemGetMemPool(&by_location, &loc, cudaMemAllocationTypePinned));
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 1));
  EXPECT_EQ(by_location, def);
}

TEST_F(CudaMemLocationTest, HostLocationHasADefaultPinnedPoolAndACurrentOne) {
  cudaMemLocation host = {cudaMemLocationTypeHost, 0};
  cudaMemPool_t def = nullptr;
  CUDA_ASSERT_OK(cudaMemGetDefaultMemPool(&def, &host, cudaMemAllocationTypePinned));
  ASSERT_NE(def, nullptr);
  cudaMemPool_t again = nullptr;
  CUDA_ASSERT_OK(cudaMemGetDefaultMemPool(&again, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(again, def);
  EXPECT_EQ(Get<cudaMemLocationType>(def, cudaMemPoolAttrLocationType), cudaMemLocationTypeHost);
  cudaMemPool_t current = nullptr;
  CUDA_ASSERT_OK(cudaMemGetMemPool(&current, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(current, def);

  // The default host pool serves allocations the host can touch.
  cudaStream_t s = nullptr;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  char* p = nullptr;
  CUDA_ASSERT_OK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), 4096, def, s));
  CUDA_ASSERT_OK(cudaStreamSynchronize(s));
  p[0] = 7;
  p[4095] = 9;
  EXPECT_EQ(p[0] + p[4095], 16);
  CUDA_ASSERT_OK(cudaFreeAsync(p, s));
  CUDA_ASSERT_OK(cudaStreamSynchronize(s));

  cudaMemPool_t mine = NewPool(cudaMemLocationTypeHost, 0);
  CUDA_ASSERT_OK(cudaMemSetMemPool(&host, cudaMemAllocationTypePinned, mine));
  CUDA_ASSERT_OK(cudaMemGetMemPool(&current, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(current, mine);
  // A device pool is not the host's.
  cudaMemPool_t device_pool = nullptr;
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&device_pool, 0));
  EXPECT_EQ(cudaMemSetMemPool(&host, cudaMemAllocationTypePinned, device_pool),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemSetMemPool(&host, cudaMemAllocationTypePinned, kForgedPool),
            cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaMemGetMemPool(&current, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(current, mine);

  // The default host pool cannot be destroyed; the current one can, and the
  // default is current again.
  EXPECT_EQ(cudaMemPoolDestroy(def), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaMemPoolDestroy(mine));
  CUDA_ASSERT_OK(cudaMemGetMemPool(&current, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(current, def);
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
}

TEST_F(CudaMemLocationTest, LocationCallErrors) {
  cudaMemPool_t pool = nullptr;
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  const cudaMemAllocationType pinned = cudaMemAllocationTypePinned;
  EXPECT_EQ(cudaMemGetDefaultMemPool(nullptr, &loc, pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, nullptr, pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetMemPool(nullptr, &loc, pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetMemPool(&pool, nullptr, pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemSetMemPool(nullptr, pinned, pool), cudaErrorInvalidValue);
  cudaMemPool_t def = nullptr;
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 0));
  EXPECT_EQ(cudaMemSetMemPool(&loc, pinned, nullptr), cudaErrorInvalidValue);

  // Device ordinals out of range: the invalid value CUDA documents for these
  // calls (the device forms say cudaErrorInvalidDevice).
  for (int bad : {-1, 2, 64}) {
    cudaMemLocation dev = {cudaMemLocationTypeDevice, bad};
    EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &dev, pinned), cudaErrorInvalidValue) << bad;
    EXPECT_EQ(cudaMemGetMemPool(&pool, &dev, pinned), cudaErrorInvalidValue) << bad;
    EXPECT_EQ(cudaMemSetMemPool(&dev, pinned, def), cudaErrorInvalidValue) << bad;
  }
  // Allocation types: managed is CUDA's but not supported; others invalid.
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &loc, cudaMemAllocationTypeManaged),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaMemGetMemPool(&pool, &loc, cudaMemAllocationTypeManaged), cudaErrorNotSupported);
  EXPECT_EQ(cudaMemSetMemPool(&loc, cudaMemAllocationTypeManaged, def), cudaErrorNotSupported);
  cudaMemLocation none = {cudaMemLocationTypeNone, 0};
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &none, cudaMemAllocationTypeManaged),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &loc, cudaMemAllocationTypeInvalid),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &loc, static_cast<cudaMemAllocationType>(7)),
            cudaErrorInvalidValue);
  // Locations: NUMA nodes are not supported; none, invisible and unknown
  // types are invalid with a pinned type.
  for (cudaMemLocationType type :
       {cudaMemLocationTypeHostNuma, cudaMemLocationTypeHostNumaCurrent}) {
    cudaMemLocation numa = {type, 0};
    EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &numa, pinned), cudaErrorNotSupported) << type;
    EXPECT_EQ(cudaMemGetMemPool(&pool, &numa, pinned), cudaErrorNotSupported) << type;
    EXPECT_EQ(cudaMemSetMemPool(&numa, pinned, def), cudaErrorNotSupported) << type;
  }
  for (int type : {0, 5, 9}) {
    cudaMemLocation bad = {static_cast<cudaMemLocationType>(type), 0};
    EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &bad, pinned), cudaErrorInvalidValue) << type;
    EXPECT_EQ(cudaMemGetMemPool(&pool, &bad, pinned), cudaErrorInvalidValue) << type;
    EXPECT_EQ(cudaMemSetMemPool(&bad, pinned, def), cudaErrorInvalidValue) << type;
  }
  // A failed call is the thread's last error.
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // Nothing changed.
  CUDA_ASSERT_OK(cudaMemGetMemPool(&pool, &loc, pinned));
  EXPECT_EQ(pool, def);
}

// ------------------------------------------------------------- occupancy

TEST_F(CudaMemLocationTest, OccupancyIsLimitedByThreadsBlockSlotsAndSharedMemory) {
  int blocks = -1;
  // 2048 threads per SM: 128-thread blocks fit 16; 1024-thread blocks 2.
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 128, 0));
  EXPECT_EQ(blocks, 16);
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 1024, 0));
  EXPECT_EQ(blocks, 2);
  // Threads count in whole warps: 33 threads take two.
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 33, 0));
  EXPECT_EQ(blocks, 32);  // 2048 / 64 = 32, which is also the block slots
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 32, 0));
  EXPECT_EQ(blocks, 32);  // the SM's 32 block slots, not 2048 / 32
  // 164 KiB of shared memory per SM, 40 KiB per block: 4.
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 64, 40 << 10));
  EXPECT_EQ(blocks, 4);
  // Beyond a block's limits: none fit.
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 1025, 0));
  EXPECT_EQ(blocks, 0);
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 64, 49 << 10));
  EXPECT_EQ(blocks, 0);
  CUDA_ASSERT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      &blocks, Fill, 256, 0, cudaOccupancyDisableCachingOverride));
  EXPECT_EQ(blocks, 8);
}

TEST_F(CudaMemLocationTest, OccupancyErrors) {
  int blocks = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, Fill, 128, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, 0, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Fill, -32, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, nullptr, 128, 0),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, Fill, 128, 0, 2),
            cudaErrorInvalidValue);
  int grid = 0;
  int block = 0;
  EXPECT_EQ(cudaOccupancyMaxPotentialBlockSize(nullptr, &block, Fill), cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxPotentialBlockSize(&grid, nullptr, Fill), cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxPotentialBlockSize(&grid, &block, Fill, 0, -1), cudaErrorInvalidValue);
}

TEST_F(CudaMemLocationTest, PotentialBlockSizeFillsEveryMultiprocessor) {
  int sms = 0;
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int grid = 0;
  int block = 0;
  // Without shared memory every warp-multiple size up to 1024 keeps 2048
  // threads resident; the largest wins.
  CUDA_ASSERT_OK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, Fill));
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 2 * sms);
  CUDA_ASSERT_OK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, Fill, 0, 200));
  EXPECT_EQ(block, 128);  // 192 keeps 10 x 192 = 1920; 128 keeps 16 x 128 = 2048
  EXPECT_EQ(grid, 16 * sms);
  // 40 KiB per block leaves room for 4 blocks; below 600 threads, 4 of 512
  // keep the most resident.
  CUDA_ASSERT_OK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, Fill, 40 << 10, 600));
  EXPECT_EQ(block, 512);
  EXPECT_EQ(grid, 4 * sms);
}

// -------------------------------------------------------- stream priority

TEST_F(CudaMemLocationTest, StreamPriorityIsTheRangesOnlyValue) {
  int least = -1;
  int greatest = -1;
  CUDA_ASSERT_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, 0);
  cudaStream_t s = nullptr;
  CUDA_ASSERT_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -5));
  int priority = -1;
  CUDA_ASSERT_OK(cudaStreamGetPriority(s, &priority));
  EXPECT_EQ(priority, 0);
  priority = -1;
  CUDA_ASSERT_OK(cudaStreamGetPriority(nullptr, &priority));  // the legacy stream
  EXPECT_EQ(priority, 0);
  CUDA_ASSERT_OK(cudaStreamGetPriority(cudaStreamPerThread, &priority));
  EXPECT_EQ(cudaStreamGetPriority(s, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetPriority(kForgedStream, &priority), cudaErrorInvalidResourceHandle);
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_EQ(cudaStreamGetPriority(s, &priority), cudaErrorInvalidResourceHandle);
}

}  // namespace
