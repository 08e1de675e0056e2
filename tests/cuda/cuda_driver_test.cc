// The driver API of the CUDA face (include/streampool/cuda/cuda.h,
// src/cuda/driver_api.cc): initialization, the device queries against their
// runtime counterparts, the error strings, and that a driver call never
// becomes the runtime's last error. Also CUDA's include guards, which
// CUDA's samples test (helper_cuda.h, helper_cuda_drvapi.h).
//
// The implicit runtime is process-wide: every test resets it when it ends, so
// that the tests also pass when the binary runs them all in one process.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

#ifndef __cuda_cuda_h__
#error "cuda.h defines CUDA's guard __cuda_cuda_h__"
#endif
#ifndef __DRIVER_TYPES_H__
#error "driver_types.h defines CUDA's guard __DRIVER_TYPES_H__"
#endif
#ifndef __CUDA_RUNTIME_API_H__
#error "cuda_runtime_api.h defines CUDA's guard __CUDA_RUNTIME_API_H__"
#endif
#ifndef __CUDA_RUNTIME_H__
#error "cuda_runtime.h defines CUDA's guard __CUDA_RUNTIME_H__"
#endif

namespace {

#define CU_ASSERT_OK(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr

// Every attribute cuda.h names, each once.
constexpr CUdevice_attribute kAttributes[] = {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
    CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE,
    CU_DEVICE_ATTRIBUTE_MAX_PITCH,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
    CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT,
    CU_DEVICE_ATTRIBUTE_GPU_OVERLAP,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT,
    CU_DEVICE_ATTRIBUTE_INTEGRATED,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
    CU_DEVICE_ATTRIBUTE_COMPUTE_MODE,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS,
    CU_DEVICE_ATTRIBUTE_ECC_ENABLED,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
    CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
    CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
};

// Every code cuda.h names.
constexpr CUresult kCodes[] = {
    CUDA_SUCCESS,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_OUT_OF_MEMORY,
    CUDA_ERROR_NOT_INITIALIZED,
    CUDA_ERROR_DEINITIALIZED,
    CUDA_ERROR_NO_DEVICE,
    CUDA_ERROR_INVALID_DEVICE,
    CUDA_ERROR_INVALID_CONTEXT,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
    CUDA_ERROR_INVALID_HANDLE,
    CUDA_ERROR_NOT_FOUND,
    CUDA_ERROR_NOT_READY,
    CUDA_ERROR_ILLEGAL_ADDRESS,
    CUDA_ERROR_LAUNCH_FAILED,
    CUDA_ERROR_NOT_PERMITTED,
    CUDA_ERROR_NOT_SUPPORTED,
    CUDA_ERROR_UNKNOWN,
};

class CudaDriverTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
  }
};

// In a process of its own (re-executed, so that no earlier test has made the
// runtime): before cuInit and before any runtime call, the device queries
// fail; after cuInit(0) they answer.
TEST_F(CudaDriverTest, DeviceCallsNeedCuInitOrTheRuntime) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int count = -1;
        CUdevice device = -1;
        const bool before = cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED &&
                            cuDeviceGet(&device, 0) == CUDA_ERROR_NOT_INITIALIZED && count == -1;
        const bool bad_flags = cuInit(1) == CUDA_ERROR_INVALID_VALUE;
        const bool after =
            cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&count) == CUDA_SUCCESS && count >= 1;
        std::exit(before && bad_flags && after ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        int count = 0;
        const bool ok = cudaGetDeviceCount(&count) == cudaSuccess &&
                        cuDeviceGetCount(&count) == CUDA_SUCCESS && count >= 1;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << "a runtime call initializes the driver";
}

TEST_F(CudaDriverTest, VersionNeedsNoInitialization) {
  int driver = 0;
  int runtime = 0;
  ASSERT_EQ(cuDriverGetVersion(&driver), CUDA_SUCCESS);
  ASSERT_EQ(cudaDriverGetVersion(&runtime), cudaSuccess);
  EXPECT_EQ(driver, runtime);
  EXPECT_EQ(cuDriverGetVersion(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CudaDriverTest, DevicesAreTheRuntimesOrdinals) {
  CU_ASSERT_OK(cuInit(0));
  int count = 0;
  int runtime_count = 0;
  CU_ASSERT_OK(cuDeviceGetCount(&count));
  ASSERT_EQ(cudaGetDeviceCount(&runtime_count), cudaSuccess);
  EXPECT_EQ(count, runtime_count);
  for (int i = 0; i < count; ++i) {
    CUdevice device = -1;
    CU_ASSERT_OK(cuDeviceGet(&device, i));
    EXPECT_EQ(device, i);
  }
  CUdevice device = 77;
  EXPECT_EQ(cuDeviceGet(&device, count), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGet(&device, -1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(device, 77) << "a failed call leaves its output alone";
  EXPECT_EQ(cuDeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetCount(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CudaDriverTest, NameIsThePropertiesNameCutToFit) {
  CU_ASSERT_OK(cuInit(0));
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  char name[256];
  CU_ASSERT_OK(cuDeviceGetName(name, sizeof name, 0));
  EXPECT_STREQ(name, prop.name);

  char cut[5] = {'x', 'x', 'x', 'x', 'x'};
  CU_ASSERT_OK(cuDeviceGetName(cut, sizeof cut, 0));
  EXPECT_EQ(std::string(cut), std::string(prop.name, 4));

  EXPECT_EQ(cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetName(nullptr, 10, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetName(name, sizeof name, 99), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(CudaDriverTest, AttributesAreTheRuntimes) {
  CU_ASSERT_OK(cuInit(0));
  for (const CUdevice_attribute attr : kAttributes) {
    int driver = -12345;
    int runtime = -54321;
    ASSERT_EQ(cuDeviceGetAttribute(&driver, attr, 0), CUDA_SUCCESS) << attr;
    ASSERT_EQ(cudaDeviceGetAttribute(&runtime, static_cast<cudaDeviceAttr>(attr), 0), cudaSuccess)
        << attr;
    EXPECT_EQ(driver, runtime) << attr;
  }
  int mode = -1;
  CU_ASSERT_OK(cuDeviceGetAttribute(&mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0));
  EXPECT_EQ(mode, CU_COMPUTEMODE_DEFAULT);

  int value = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(9999), 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 99),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CudaDriverTest, DriverErrorsAreNotTheLastError) {
  CU_ASSERT_OK(cuInit(0));
  cudaGetLastError();
  CUdevice device = 0;
  EXPECT_EQ(cuDeviceGet(&device, 99), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // A runtime error stays the last one across a failing driver call.
  EXPECT_EQ(cudaSetDevice(99), cudaErrorInvalidDevice);
  EXPECT_EQ(cuDeviceGetCount(nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

TEST_F(CudaDriverTest, ErrorNamesAndStrings) {
  for (const CUresult code : kCodes) {
    const char* name = nullptr;
    const char* text = nullptr;
    ASSERT_EQ(cuGetErrorName(code, &name), CUDA_SUCCESS) << code;
    ASSERT_EQ(cuGetErrorString(code, &text), CUDA_SUCCESS) << code;
    ASSERT_NE(name, nullptr);
    ASSERT_NE(text, nullptr);
    EXPECT_EQ(std::strncmp(name, "CUDA_", 5), 0) << name;
    EXPECT_GT(std::strlen(text), 0u) << name;
  }
  const char* name = nullptr;
  ASSERT_EQ(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, "CUDA_ERROR_INVALID_VALUE");

  const char* unknown = "untouched";
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(12345), &unknown), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(unknown, nullptr);
  unknown = "untouched";
  EXPECT_EQ(cuGetErrorString(static_cast<CUresult>(12345), &unknown), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(unknown, nullptr);
  EXPECT_EQ(cuGetErrorName(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetErrorString(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
