// Synchronous pinned host memory through the C API (spMallocHost,
// spFreeHost), the NULL-handle rule of docs/design.md for it, and what a device's
// memory info reports (Runtime::MemGetInfo, cudaMemGetInfo's source).
#include <cstdint>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr

constexpr uint64_t kMiB = uint64_t{1} << 20;

class MallocHostTest : public ::testing::TestWithParam<spBacking> {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = 2;
    cfg.deviceCapacity = 64 * kMiB;
    cfg.backing = GetParam();
    SP_ASSERT_OK(spRuntimeCreate(&rt_, &cfg));
  }
  void TearDown() override { EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess); }

  spRuntime_t rt_ = nullptr;
};

TEST_P(MallocHostTest, IsAlignedTouchableAndReportedAsHost) {
  void* p = nullptr;
  SP_ASSERT_OK(spMallocHost(&p, 1000, rt_));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  // Touchable whatever the devices' backing: the host's own pages.
  std::memset(p, 0xab, 1000);
  EXPECT_EQ(static_cast<unsigned char*>(p)[999], 0xab);
  spPointerAttributes attr;
  SP_ASSERT_OK(spPointerGetAttributes(&attr, static_cast<char*>(p) + 500));
  EXPECT_EQ(attr.device, -1);
  EXPECT_EQ(attr.pool, nullptr);
  EXPECT_EQ(attr.base, p);
  EXPECT_EQ(attr.size, 1000u);
  SP_ASSERT_OK(spFreeHost(rt_, p));
  EXPECT_EQ(spPointerGetAttributes(&attr, p), spErrorInvalidValue) << "gone after the free";
}

TEST_P(MallocHostTest, IsChargedToNoDevice) {
  auto view = streampool::Runtime::FromC(rt_);
  ASSERT_TRUE(view.ok());
  auto before = (*view)->MemGetInfo(0);
  ASSERT_TRUE(before.ok());
  void* p = nullptr;
  // More than a device holds: host memory is bounded by the system only.
  SP_ASSERT_OK(spMallocHost(&p, 80 * kMiB, rt_));
  auto after = (*view)->MemGetInfo(0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->free, before->free);
  EXPECT_EQ(after->total, 64 * kMiB);
  SP_ASSERT_OK(spFreeHost(rt_, p));
}

TEST_P(MallocHostTest, CopiesFromEveryDevicesStreams) {
  if (GetParam() != spBackingHost) GTEST_SKIP() << "device memory is not touchable";
  void* host = nullptr;
  SP_ASSERT_OK(spMallocHost(&host, 4096, rt_));
  std::memset(host, 7, 4096);
  for (int d = 0; d < 2; ++d) {
    spStream_t s;
    SP_ASSERT_OK(spStreamCreate(&s, rt_, d, spStreamNonBlocking));
    void* dev = nullptr;
    SP_ASSERT_OK(spMallocAsync(&dev, 4096, s));
    SP_ASSERT_OK(spMemcpyAsync(dev, host, 4096, s));
    SP_ASSERT_OK(spMemsetAsync(host, 0, 4096, s));
    SP_ASSERT_OK(spMemcpyAsync(host, dev, 4096, s));
    SP_ASSERT_OK(spStreamSynchronize(s));
    EXPECT_EQ(static_cast<unsigned char*>(host)[4095], 7) << "device " << d;
    SP_ASSERT_OK(spFreeAsync(dev, s));
    SP_ASSERT_OK(spStreamDestroy(s));
  }
  SP_ASSERT_OK(spFreeHost(rt_, host));
}

TEST_P(MallocHostTest, EachFreeTakesOnlyItsOwnKind) {
  void* host = nullptr;
  void* dev = nullptr;
  SP_ASSERT_OK(spMallocHost(&host, 256, rt_));
  SP_ASSERT_OK(spMalloc(&dev, 256, rt_, 0));
  spStream_t legacy;
  SP_ASSERT_OK(spStreamGetLegacy(&legacy, rt_, 0));
  EXPECT_EQ(spFree(rt_, host), spErrorInvalidValue);
  EXPECT_EQ(spFreeAsync(host, legacy), spErrorInvalidValue);
  EXPECT_EQ(spFreeHost(rt_, dev), spErrorInvalidValue);
  int local = 0;
  EXPECT_EQ(spFreeHost(rt_, &local), spErrorInvalidValue) << "a foreign pointer";
  EXPECT_EQ(spFreeHost(rt_, static_cast<char*>(host) + 64), spErrorInvalidValue)
      << "not the allocation's start";
  // The failed frees changed nothing: both still free once, then not again.
  SP_ASSERT_OK(spFreeHost(rt_, host));
  EXPECT_EQ(spFreeHost(rt_, host), spErrorInvalidValue) << "double free";
  SP_ASSERT_OK(spFree(rt_, dev));
}

TEST_P(MallocHostTest, BadArguments) {
  void* p = reinterpret_cast<void*>(uintptr_t{0x5eed});
  EXPECT_EQ(spMallocHost(nullptr, 16, rt_), spErrorInvalidValue);
  EXPECT_EQ(spMallocHost(&p, 16, nullptr), spErrorInvalidValue) << "NULL runtime";
  spStream_t s;
  SP_ASSERT_OK(spStreamGetLegacy(&s, rt_, 0));
  EXPECT_EQ(spMallocHost(&p, 16, reinterpret_cast<spRuntime_t>(s)), spErrorInvalidResourceHandle)
      << "a stream is no runtime";
  EXPECT_EQ(p, reinterpret_cast<void*>(uintptr_t{0x5eed})) << "no failed call wrote it";
  SP_ASSERT_OK(spMallocHost(&p, 0, rt_));
  EXPECT_EQ(p, nullptr) << "size 0";
  SP_ASSERT_OK(spFreeHost(rt_, nullptr));
  EXPECT_EQ(spFreeHost(nullptr, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMallocHost(&p, SIZE_MAX, rt_), spErrorMemoryAllocation);
}

TEST_P(MallocHostTest, MemGetInfoFollowsPoolsAndMalloc) {
  auto view = streampool::Runtime::FromC(rt_);
  ASSERT_TRUE(view.ok());
  auto info = (*view)->MemGetInfo(1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total, 64 * kMiB);
  EXPECT_EQ(info->free, 64 * kMiB);
  void* p = nullptr;
  SP_ASSERT_OK(spMalloc(&p, 5000, rt_, 1));
  info = (*view)->MemGetInfo(1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->free, 64 * kMiB - 8192) << "whole pages";
  spStream_t s;
  SP_ASSERT_OK(spStreamCreate(&s, rt_, 1, 0));
  void* q = nullptr;
  SP_ASSERT_OK(spMallocAsync(&q, 100, s));
  info = (*view)->MemGetInfo(1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->free, 64 * kMiB - 8192 - 2 * kMiB) << "a pool's 2 MiB granule";
  EXPECT_EQ((*view)->MemGetInfo(2).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*view)->MemGetInfo(-1).status().code(), absl::StatusCode::kOutOfRange);
  SP_ASSERT_OK(spFreeAsync(q, s));
  SP_ASSERT_OK(spFree(rt_, p));
  SP_ASSERT_OK(spStreamDestroy(s));
}

INSTANTIATE_TEST_SUITE_P(Backings, MallocHostTest,
                         ::testing::Values(spBackingHost, spBackingAddressOnly),
                         [](const ::testing::TestParamInfo<spBacking>& info) {
                           return info.param == spBackingHost ? "Host" : "AddressOnly";
                         });

}  // namespace
