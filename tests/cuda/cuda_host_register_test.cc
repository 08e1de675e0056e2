// cudaHostRegister, cudaHostUnregister and cudaHostGetDevicePointer: malloc'd
// memory made device-accessible, as CUDA programs pin a buffer they own.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/cuda/interop.h"
#include "streampool/runtime.h"

namespace {

#define CUDA_ASSERT_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

constexpr size_t kPage = 4096;

class CudaHostRegisterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDA_ASSERT_OK(cudaSetDevice(0));
    void* p = mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    pages_ = static_cast<char*>(p);
  }
  void TearDown() override {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
    munmap(pages_, 4 * kPage);
  }

  char* pages_ = nullptr;
};

__global__ void AddOne(int* data) { data[threadIdx.x] += 1; }

TEST_F(CudaHostRegisterTest, KernelsWriteRegisteredMemoryThroughItsDevicePointer) {
  constexpr int kN = 256;
  int* host = reinterpret_cast<int*>(pages_);
  for (int i = 0; i < kN; ++i) host[i] = i;
  CUDA_ASSERT_OK(cudaHostRegister(host, kN * sizeof(int), cudaHostRegisterMapped));
  int* dev = nullptr;
  CUDA_ASSERT_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  EXPECT_EQ(dev, host) << "unified addressing";
  cudaPointerAttributes attr;
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&attr, host));
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  EXPECT_EQ(attr.devicePointer, dev);
  EXPECT_EQ(attr.hostPointer, host);

  cudaStream_t s;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  ASSERT_EQ(spcudaLaunchKernel(AddOne, 1, kN, 0, s, {{dev, kN * sizeof(int), 1}}, dev),
            cudaSuccess);
  // And a device copy of it, through the device pointer.
  int* d = nullptr;
  CUDA_ASSERT_OK(cudaMallocAsync(&d, kN * sizeof(int), s));
  CUDA_ASSERT_OK(cudaMemcpyAsync(d, dev, kN * sizeof(int), cudaMemcpyDeviceToDevice, s));
  std::vector<int> back(kN);
  CUDA_ASSERT_OK(cudaMemcpyAsync(back.data(), d, kN * sizeof(int), cudaMemcpyDeviceToHost, s));
  CUDA_ASSERT_OK(cudaFreeAsync(d, s));
  CUDA_ASSERT_OK(cudaStreamSynchronize(s));
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(host[i], i + 1) << i;
    ASSERT_EQ(back[i], i + 1) << i;
  }
  CUDA_ASSERT_OK(cudaStreamDestroy(s));
  CUDA_ASSERT_OK(cudaHostUnregister(host));
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&attr, host));
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered) << "plain host memory again";
}

TEST_F(CudaHostRegisterTest, ErrorCases) {
  void* dev = nullptr;
  EXPECT_EQ(cudaHostRegister(nullptr, kPage, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostRegister(pages_, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostRegister(pages_, kPage, 0x40), cudaErrorInvalidValue) << "flags";
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, pages_, 0), cudaErrorInvalidValue) << "not registered";
  CUDA_ASSERT_OK(cudaHostRegister(pages_, 2 * kPage, cudaHostRegisterDefault));
  EXPECT_EQ(cudaHostRegister(pages_ + kPage, kPage, 0), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, pages_, 1), cudaErrorInvalidValue) << "flags";
  EXPECT_EQ(cudaHostGetDevicePointer(nullptr, pages_, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostUnregister(pages_ + kPage), cudaErrorHostMemoryNotRegistered);
  EXPECT_EQ(cudaHostUnregister(nullptr), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaHostUnregister(pages_));
  EXPECT_EQ(cudaHostUnregister(pages_), cudaErrorHostMemoryNotRegistered);

  // cudaMallocHost memory is pinned already, with a device pointer of its own.
  void* pinned = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&pinned, kPage));
  EXPECT_EQ(cudaHostRegister(pinned, kPage, 0), cudaErrorHostMemoryAlreadyRegistered);
  CUDA_ASSERT_OK(cudaHostGetDevicePointer(&dev, pinned, 0));
  EXPECT_EQ(dev, pinned);
  CUDA_ASSERT_OK(cudaFreeHost(pinned));
  // Device memory cannot be registered.
  void* d = nullptr;
  CUDA_ASSERT_OK(cudaMalloc(&d, kPage));
  EXPECT_EQ(cudaHostRegister(d, kPage, 0), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaFree(d));
  cudaGetLastError();
}

}  // namespace
