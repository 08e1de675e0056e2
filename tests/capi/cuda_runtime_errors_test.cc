// A CUDA runtime on a machine as it is: without a driver (the build machines)
// creating one fails at once with CUDA's own code and leaves nothing behind;
// the arguments that do not apply are refused before the driver is looked
// for. With a driver these tests check what holds on any machine.
#include <chrono>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

spRuntimeConfig CudaConfig() {
  spRuntimeConfig c;
  spRuntimeConfigInit(&c);
  c.executor = spExecutorCuda;
  c.deviceCount = 0;
  c.deviceCapacity = 0;
  return c;
}

TEST(CudaRuntimeErrorsTest, WithoutADriverCreationFailsFastWithCudasCode) {
  spRuntimeConfig c = CudaConfig();
  spRuntime_t rt = nullptr;
  const auto start = std::chrono::steady_clock::now();
  const spError_t e = spRuntimeCreate(&rt, &c);
  const auto took = std::chrono::steady_clock::now() - start;
  if (e == spSuccess) {
    ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
    GTEST_SKIP() << "this machine has a CUDA driver and a device";
  }
  EXPECT_TRUE(e == spErrorInsufficientDriver || e == spErrorNoDevice) << spGetErrorName(e);
  EXPECT_EQ(rt, nullptr);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::microseconds>(took).count(), 1000);
  // Again and again: nothing was left half made.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(spRuntimeCreate(&rt, &c), e);
  EXPECT_EQ(rt, nullptr);
}

TEST(CudaRuntimeErrorsTest, SettingsOfTheSimulatorAreRefusedBeforeTheDriverIsLookedFor) {
  spRuntime_t rt = nullptr;
  spRuntimeConfig c = CudaConfig();
  c.backing = spBackingAddressOnly;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  c = CudaConfig();
  c.copyBytesPerUs = 5;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  c = CudaConfig();
  c.apiCallNs = 10;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  c = CudaConfig();
  c.deviceCount = -1;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  c = CudaConfig();
  c.deviceCount = 65;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  EXPECT_EQ(rt, nullptr);
  // deviceCount 0 stays a bad value for the simulator.
  c = CudaConfig();
  c.executor = spExecutorSimulator;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
  c.executor = static_cast<spExecutorKind>(3);
  c.deviceCount = 1;
  c.deviceCapacity = 1 << 30;
  EXPECT_EQ(spRuntimeCreate(&rt, &c), spErrorInvalidValue);
}

TEST(CudaRuntimeErrorsTest, TheNewCodesHaveNames) {
  EXPECT_STREQ(spGetErrorName(spErrorInsufficientDriver), "spErrorInsufficientDriver");
  EXPECT_STREQ(spGetErrorName(spErrorNoDevice), "spErrorNoDevice");
  EXPECT_EQ(static_cast<int>(spErrorInsufficientDriver), 35);
  EXPECT_EQ(static_cast<int>(spErrorNoDevice), 100);
  EXPECT_EQ(static_cast<int>(spExecutorCuda), 2);
}

TEST(CudaRuntimeErrorsTest, NativeStreamsOfASimulatorRuntimeAreNotSupported) {
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  spStream_t s = nullptr;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  void* native = nullptr;
  EXPECT_EQ(spStreamGetNative(s, &native), spErrorNotSupported);
  EXPECT_EQ(spStreamGetNative(s, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spStreamGetNative(nullptr, &native), spErrorInvalidValue);
  spStream_t adopted = nullptr;
  int dummy = 0;
  EXPECT_EQ(spStreamCreateFromNative(&adopted, rt, 0, &dummy), spErrorNotSupported);
  EXPECT_EQ(spStreamCreateFromNative(nullptr, rt, 0, &dummy), spErrorInvalidValue);
  EXPECT_EQ(spStreamCreateFromNative(&adopted, nullptr, 0, &dummy), spErrorInvalidValue);
  EXPECT_EQ(adopted, nullptr);
  ASSERT_EQ(spStreamDestroy(s), spSuccess);
  ASSERT_EQ(spStreamGetNative(s, &native), spErrorInvalidResourceHandle);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

}  // namespace
