// What creating a CUDA runtime through the C++ API promises on any machine,
// GPU or not: the configuration rules are checked before the driver is
// loaded (kInvalidArgument), and without a driver the creation fails at once
// with a status whose C code is CUDA's own, so an embedder can probe for the
// executor on every start. tests/capi/cuda_runtime_errors_test.cc holds the
// same promises of the C API.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"
#include "tests/gpu/gpu_test_util.h"

namespace streampool::gpu_test {
namespace {

bool DriverInstalled() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return false;
  dlclose(lib);
  return true;
}

TEST(GpuRuntimeConfigTest, WithoutADriverCreationFailsFastWithInsufficientDriver) {
  if (DriverInstalled()) GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed here";
  // The process's first runtime sets up what every runtime shares; that is
  // not the CUDA executor's cost.
  ASSERT_TRUE(Runtime::Create().ok());

  const auto start = std::chrono::steady_clock::now();
  auto rt = Runtime::Create(CudaConfig());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(ToCError(rt.status()), spErrorInsufficientDriver) << rt.status();
  EXPECT_LT(took, std::chrono::milliseconds(1))
      << std::chrono::duration<double, std::micro>(took).count() << " us";
}

// The settings a CUDA runtime cannot honour, refused as bad arguments
// whether or not a driver is there: device memory is not host or
// address-only memory, and the device, not a cost model, decides how long
// calls and copies take.
struct BadCudaConfig {
  const char* name;
  void (*apply)(RuntimeConfig&);
};

const BadCudaConfig kBadConfigs[] = {
    {"AddressOnlyBacking", [](RuntimeConfig& c) { c.backing = Backing::kAddressOnly; }},
    {"CopyBandwidth", [](RuntimeConfig& c) { c.copy_bytes_per_us = 1000; }},
    {"ApiCallCost", [](RuntimeConfig& c) { c.api_call_ns = 1; }},
    {"NegativeDeviceCount", [](RuntimeConfig& c) { c.device_count = -1; }},
};

class GpuBadConfigTest : public ::testing::TestWithParam<BadCudaConfig> {};

TEST_P(GpuBadConfigTest, IsAnInvalidArgumentBeforeTheDriverIsLoaded) {
  RuntimeConfig cfg = CudaConfig();
  GetParam().apply(cfg);
  auto rt = Runtime::Create(cfg);
  ASSERT_FALSE(rt.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(rt.status())) << rt.status();
  EXPECT_EQ(ToCError(rt.status()), spErrorInvalidValue) << rt.status();
}

INSTANTIATE_TEST_SUITE_P(Rules, GpuBadConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const ::testing::TestParamInfo<BadCudaConfig>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace streampool::gpu_test
