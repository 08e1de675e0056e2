// Host memory registration through the C API (spHostRegister,
// spHostUnregister, spHostGetDevicePointer): the error rules, that kernels
// and copies may use a registered range, and what the checker makes of it.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr

constexpr size_t kPage = 4096;

// Host memory the runtime never saw: a few pages of its own mapping.
class HostPages {
 public:
  explicit HostPages(size_t pages) : size_(pages * kPage) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~HostPages() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;
  char* at(size_t offset) const { return base_ + offset; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  char* base_;
};

class HostRegisterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = 2;
    cfg.deviceCapacity = uint64_t{64} << 20;
    SP_ASSERT_OK(spRuntimeCreate(&rt_, &cfg));
    // Reports are collected, not fatal: several tests provoke them.
    SP_ASSERT_OK(spCheckerEnable(rt_, 1));
    SP_ASSERT_OK(spStreamCreate(&s_, rt_, 0, spStreamNonBlocking));
    ASSERT_NE(pages_.at(0), nullptr);
  }
  void TearDown() override { EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess); }

  std::vector<spCheckReport> Reports() {
    size_t n = 0;
    EXPECT_EQ(spCheckerGetReports(rt_, nullptr, 0, &n), spSuccess);
    std::vector<spCheckReport> out(n);
    if (n != 0) {
      EXPECT_EQ(spCheckerGetReports(rt_, out.data(), n, &n), spSuccess);
    }
    return out;
  }
  void Kernel(const void* p, size_t size, int write) {
    const spAccess a{p, size, write};
    ASSERT_EQ(spLaunchKernel(s_, 100, &a, 1), spSuccess);
  }

  spRuntime_t rt_ = nullptr;
  spStream_t s_ = nullptr;
  HostPages pages_{4};
};

TEST_F(HostRegisterTest, RegisteredRangeHasADevicePointerUntilUnregistered) {
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(0), 2 * kPage, spHostRegisterDefault));
  void* dev = nullptr;
  SP_ASSERT_OK(spHostGetDevicePointer(rt_, &dev, pages_.at(0)));
  EXPECT_EQ(dev, pages_.at(0)) << "one address space";
  SP_ASSERT_OK(spHostGetDevicePointer(rt_, &dev, pages_.at(2 * kPage - 1)));
  EXPECT_EQ(dev, pages_.at(2 * kPage - 1)) << "any byte of the range";
  EXPECT_EQ(spHostGetDevicePointer(rt_, &dev, pages_.at(2 * kPage)), spErrorHostMemoryNotRegistered)
      << "one past the end";
  SP_ASSERT_OK(spHostUnregister(rt_, pages_.at(0)));
  EXPECT_EQ(spHostGetDevicePointer(rt_, &dev, pages_.at(0)), spErrorHostMemoryNotRegistered);
}

TEST_F(HostRegisterTest, ErrorCasesChangeNothing) {
  void* dev = nullptr;
  EXPECT_EQ(spHostRegister(rt_, nullptr, kPage, 0), spErrorInvalidValue);
  EXPECT_EQ(spHostRegister(rt_, pages_.at(0), 0, 0), spErrorInvalidValue);
  EXPECT_EQ(spHostRegister(rt_, pages_.at(0), kPage, 0x10), spErrorInvalidValue) << "flags";
  EXPECT_EQ(spHostRegister(rt_, reinterpret_cast<void*>(UINTPTR_MAX - 10), 100, 0),
            spErrorInvalidValue)
      << "wraps";
  EXPECT_EQ(spHostRegister(nullptr, pages_.at(0), kPage, 0), spErrorInvalidValue);
  EXPECT_EQ(spHostGetDevicePointer(rt_, &dev, pages_.at(0)), spErrorHostMemoryNotRegistered)
      << "nothing was registered by the failures";

  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(kPage), 2 * kPage, 0));
  // Any shared byte is a double registration: same range, inside, straddling.
  EXPECT_EQ(spHostRegister(rt_, pages_.at(kPage), 2 * kPage, 0),
            spErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(spHostRegister(rt_, pages_.at(2 * kPage), 16, 0), spErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(spHostRegister(rt_, pages_.at(0), kPage + 1, 0), spErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(spHostRegister(rt_, pages_.at(3 * kPage - 1), 2, 0),
            spErrorHostMemoryAlreadyRegistered);
  // Neighbours share nothing.
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(0), kPage, 0));
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(3 * kPage), kPage, 0));

  // Unregistering takes the pointer the registration started at.
  EXPECT_EQ(spHostUnregister(rt_, pages_.at(kPage + 8)), spErrorHostMemoryNotRegistered);
  EXPECT_EQ(spHostUnregister(rt_, nullptr), spErrorInvalidValue);
  SP_ASSERT_OK(spHostUnregister(rt_, pages_.at(kPage)));
  EXPECT_EQ(spHostUnregister(rt_, pages_.at(kPage)), spErrorHostMemoryNotRegistered) << "twice";
  EXPECT_EQ(spHostGetDevicePointer(rt_, nullptr, pages_.at(0)), spErrorInvalidValue);
  EXPECT_EQ(spHostGetDevicePointer(rt_, &dev, nullptr), spErrorInvalidValue);
  EXPECT_STREQ(spGetErrorName(spErrorHostMemoryAlreadyRegistered),
               "spErrorHostMemoryAlreadyRegistered");
  EXPECT_STREQ(spGetErrorName(spErrorHostMemoryNotRegistered), "spErrorHostMemoryNotRegistered");
  EXPECT_TRUE(Reports().empty());
}

TEST_F(HostRegisterTest, DeviceAndPoolMemoryCannotBeRegistered) {
  void* d = nullptr;
  SP_ASSERT_OK(spMalloc(&d, 1 << 20, rt_, 0));
  EXPECT_EQ(spHostRegister(rt_, d, kPage, 0), spErrorInvalidValue);
  void* a = nullptr;
  SP_ASSERT_OK(spMallocAsync(&a, 1 << 20, s_));
  EXPECT_EQ(spHostRegister(rt_, a, kPage, 0), spErrorInvalidValue);
  SP_ASSERT_OK(spFreeAsync(a, s_));
  SP_ASSERT_OK(spFree(rt_, d));
  // Pinned host memory may be, within one allocation.
  void* h = nullptr;
  SP_ASSERT_OK(spMallocHost(&h, 3 * kPage, rt_));
  EXPECT_EQ(spHostRegister(rt_, h, 4 * kPage, 0), spErrorInvalidValue) << "past its end";
  SP_ASSERT_OK(spHostRegister(rt_, h, 3 * kPage, 0));
  SP_ASSERT_OK(spHostUnregister(rt_, h));
  SP_ASSERT_OK(spFreeHost(rt_, h));
  EXPECT_TRUE(Reports().empty());
}

TEST_F(HostRegisterTest, KernelsAndCopiesUseTheDeviceAddress) {
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(0), kPage, 0));
  void* dev = nullptr;
  SP_ASSERT_OK(spHostGetDevicePointer(rt_, &dev, pages_.at(0)));
  Kernel(dev, kPage, 1);
  Kernel(static_cast<char*>(dev) + 100, 50, 0);
  EXPECT_TRUE(Reports().empty()) << "registered memory is in bounds";
  // A copy into device memory and back through the device address.
  std::memset(pages_.at(0), 0x5a, 256);
  void* a = nullptr;
  SP_ASSERT_OK(spMallocAsync(&a, 256, s_));
  SP_ASSERT_OK(spMemcpyAsync(a, dev, 256, s_));
  SP_ASSERT_OK(spMemsetAsync(dev, 0, 256, s_));
  SP_ASSERT_OK(spMemcpyAsync(static_cast<char*>(dev) + 1024, a, 256, s_));
  SP_ASSERT_OK(spFreeAsync(a, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(static_cast<unsigned char>(pages_.at(0)[0]), 0u);
  EXPECT_EQ(static_cast<unsigned char>(pages_.at(0)[1024]), 0x5au);
  EXPECT_EQ(static_cast<unsigned char>(pages_.at(0)[1024 + 255]), 0x5au);
  EXPECT_TRUE(Reports().empty());

  // Past the range, and after unregistering, the device may not touch it.
  Kernel(pages_.at(kPage - 8), 16, 0);
  SP_ASSERT_OK(spStreamSynchronize(s_));
  SP_ASSERT_OK(spHostUnregister(rt_, pages_.at(0)));
  Kernel(dev, 8, 1);
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].kind, spCheckOutOfBounds);
  EXPECT_EQ(r[0].ptr, pages_.at(kPage - 8));
  EXPECT_EQ(r[1].kind, spCheckOutOfBounds);
  EXPECT_EQ(r[1].ptr, dev);
  EXPECT_NE(std::string(r[1].message).find("registered host range"), std::string::npos)
      << r[1].message;
}

TEST_F(HostRegisterTest, ReadOnlyRegistrationReportsKernelWrites) {
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(0), kPage, spHostRegisterReadOnly));
  Kernel(pages_.at(0), kPage, 0);
  EXPECT_TRUE(Reports().empty());
  Kernel(pages_.at(64), 8, 1);
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckNoAccess);
  EXPECT_EQ(r[0].ptr, pages_.at(64));
  SP_ASSERT_OK(spHostUnregister(rt_, pages_.at(0)));
}

TEST_F(HostRegisterTest, FreeingRegisteredPinnedMemoryIsReportedAndEndsTheRegistration) {
  void* h = nullptr;
  SP_ASSERT_OK(spMallocHost(&h, 2 * kPage, rt_));
  void* inner = static_cast<char*>(h) + kPage;
  SP_ASSERT_OK(spHostRegister(rt_, inner, kPage, 0));
  Kernel(inner, kPage, 1);
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_TRUE(Reports().empty());
  SP_ASSERT_OK(spFreeHost(rt_, h));
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckFreeWhileRegistered);
  EXPECT_EQ(r[0].ptr, h);
  EXPECT_EQ(r[0].size, 2 * kPage);
  EXPECT_EQ(r[0].stream, nullptr);
  EXPECT_EQ(spHostUnregister(rt_, inner), spErrorHostMemoryNotRegistered) << "ended by the free";
}

TEST_F(HostRegisterTest, ACheckerTurnedOnLaterKnowsEarlierRegistrations) {
  SP_ASSERT_OK(spCheckerEnable(rt_, 0));
  SP_ASSERT_OK(spHostRegister(rt_, pages_.at(0), kPage, 0));
  SP_ASSERT_OK(spCheckerEnable(rt_, 1));
  Kernel(pages_.at(0), kPage, 1);
  EXPECT_TRUE(Reports().empty());
  SP_ASSERT_OK(spHostUnregister(rt_, pages_.at(0)));
}

TEST_F(HostRegisterTest, TheSamePagesCanBeRegisteredAgainAndAgain) {
  // A registration loop, as a long-running program has: each range, once
  // unregistered, leaves nothing that refuses or misreports the next one.
  for (int i = 0; i < 1000; ++i) {
    SP_ASSERT_OK(spHostRegister(rt_, pages_.at((i % 4) * kPage), kPage, 0));
    Kernel(pages_.at((i % 4) * kPage), 64, 1);
    SP_ASSERT_OK(spHostUnregister(rt_, pages_.at((i % 4) * kPage)));
  }
  EXPECT_TRUE(Reports().empty());
}

TEST(HostRegisterCppTest, StatusCodesMapToTheCErrors) {
  auto rt = streampool::Runtime::Create(streampool::RuntimeConfig{});
  ASSERT_TRUE(rt.ok());
  HostPages pages(1);
  absl::StatusOr<void*> dev = (*rt)->HostRegister(pages.at(0), kPage);
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(*dev, pages.at(0));
  absl::StatusOr<void*> again = (*rt)->HostRegister(pages.at(0), kPage);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(streampool::ToCError(again.status()), spErrorHostMemoryAlreadyRegistered);
  EXPECT_TRUE((*rt)->HostUnregister(pages.at(0)).ok());
  const absl::Status gone = (*rt)->HostUnregister(pages.at(0));
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(streampool::ToCError(gone), spErrorHostMemoryNotRegistered);
  EXPECT_EQ(streampool::ToCError((*rt)->HostDevicePointer(pages.at(0)).status()),
            spErrorHostMemoryNotRegistered);
  // Other kNotFound statuses keep their meaning.
  EXPECT_EQ(streampool::ToCError(absl::NotFoundError("x")), spErrorInvalidResourceHandle);
}

}  // namespace
