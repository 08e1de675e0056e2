// Leak reports through the CUDA face: STREAMPOOL_CUDA_LEAK_CHECK (and the
// process-wide STREAMPOOL_LEAK_CHECK) list what a program never freed when
// its runtime goes, at cudaDeviceReset or at exit, and =1 fails the process.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

TEST(CudaLeakCheckDeathTest, ExitWithLiveAllocationsFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_CUDA_LEAK_CHECK", "1", 1);
        void* p = nullptr;
        if (cudaMalloc(&p, 100) != cudaSuccess) std::exit(3);
        cudaStream_t s = nullptr;
        if (cudaStreamCreate(&s) != cudaSuccess) std::exit(3);
        void* q = nullptr;
        if (cudaMallocAsync(&q, 200, s) != cudaSuccess) std::exit(3);
        std::exit(0);
      },
      testing::ExitedWithCode(1), "2 live allocations");
}

TEST(CudaLeakCheckDeathTest, ProcessWideVariableCoversTheFace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_LEAK_CHECK", "1", 1);
        void* p = nullptr;
        if (cudaMallocHost(&p, 64) != cudaSuccess) std::exit(3);
        std::exit(0);
      },
      testing::ExitedWithCode(1), "size 64.*host");
}

TEST(CudaLeakCheckDeathTest, EverythingFreedExitsNormally) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_CUDA_LEAK_CHECK", "1", 1);
        void* p = nullptr;
        if (cudaMalloc(&p, 100) != cudaSuccess) std::exit(3);
        if (cudaFree(p) != cudaSuccess) std::exit(3);
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

TEST(CudaLeakCheck, ReportAtDeviceReset) {
  setenv("STREAMPOOL_CUDA_LEAK_CHECK", "report", 1);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 5555), cudaSuccess);
  testing::internal::CaptureStderr();
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("size 5555"));
  unsetenv("STREAMPOOL_CUDA_LEAK_CHECK");
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
}

}  // namespace
