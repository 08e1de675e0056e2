// Host memory made device-visible through the AscendCL face: the zero-copy
// flow some AscendCL programs write (aclrtMallocHost, then
// aclrtRegisterMemory / aclrtGetMemDeviceAddress / aclrtUnregisterMemory
// with a context), CANN's aclrtHostRegister family, contexts, and every
// function's error cases.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/acl/acl_test_util.h"

namespace streampool::acl_test {
namespace {

constexpr size_t kPage = 4096;

TEST_F(AclTest, ZeroCopyHostMemoryThroughAContext) {
  aclrtContext ctx = nullptr;
  ACL_ASSERT_OK(aclrtCreateContext(&ctx, 0));
  aclrtStream s = nullptr;
  ACL_ASSERT_OK(aclrtCreateStream(&s));

  constexpr size_t kCount = 1024;
  constexpr size_t kBytes = kCount * sizeof(float);
  void* host = nullptr;
  ACL_ASSERT_OK(aclrtMallocHost(&host, kBytes));
  ACL_ASSERT_OK(aclrtRegisterMemory(host, kBytes, ctx));
  void* dev = nullptr;
  ACL_ASSERT_OK(aclrtGetMemDeviceAddress(&dev, host, ctx));
  ASSERT_NE(dev, nullptr);

  // The host writes the input, a kernel reads and writes through the device
  // address, and the host reads the result where it wrote: no copy.
  float* h = static_cast<float*>(host);
  for (size_t i = 0; i < kCount; ++i) h[i] = static_cast<float>(i);
  auto square = [](float* data) { data[GetBlockIdx()] *= data[GetBlockIdx()]; };
  ACL_ASSERT_OK(spaclLaunchKernel(square, kCount, s, {{dev, kBytes, 1}}, static_cast<float*>(dev)));
  ACL_ASSERT_OK(aclrtSynchronizeStream(s));
  for (size_t i = 0; i < kCount; i += 97) EXPECT_EQ(h[i], static_cast<float>(i * i)) << i;

  // A device buffer filled from the device address: copies take it too.
  void* buf = nullptr;
  ACL_ASSERT_OK(aclrtMalloc(&buf, kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
  ACL_ASSERT_OK(aclrtMemcpy(buf, kBytes, dev, kBytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
  std::vector<float> back(kCount);
  ACL_ASSERT_OK(aclrtMemcpy(back.data(), kBytes, buf, kBytes, ACL_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(back[31], 961.0f);
  ACL_ASSERT_OK(aclrtFree(buf));

  ACL_ASSERT_OK(aclrtUnregisterMemory(host, ctx));
  EXPECT_EQ(aclrtGetMemDeviceAddress(&dev, host, ctx), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
  ACL_ASSERT_OK(aclrtFreeHost(host));
  ACL_ASSERT_OK(aclrtDestroyStream(s));
  ACL_ASSERT_OK(aclrtDestroyContext(ctx));
}

TEST_F(AclTest, RegisterMemoryErrorCases) {
  aclrtContext ctx = nullptr;
  ACL_ASSERT_OK(aclrtCreateContext(&ctx, 0));
  void* host = nullptr;
  ACL_ASSERT_OK(aclrtMallocHost(&host, 2 * kPage));
  void* dev = nullptr;

  EXPECT_EQ(aclrtRegisterMemory(nullptr, kPage, ctx), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtRegisterMemory(host, 0, ctx), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtRegisterMemory(host, kPage, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtRegisterMemory(host, kPage, ForgedContext()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtGetMemDeviceAddress(&dev, host, ctx), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED)
      << "none of the failures registered anything";
  EXPECT_EQ(aclrtUnregisterMemory(host, ctx), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);

  ACL_ASSERT_OK(aclrtRegisterMemory(host, kPage, ctx));
  EXPECT_EQ(aclrtRegisterMemory(host, kPage, ctx), ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(aclrtRegisterMemory(static_cast<char*>(host) + 64, 64, ctx),
            ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
      << "inside a registered range";
  EXPECT_EQ(aclrtRegisterMemory(host, 2 * kPage, ctx), ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(aclrtRegisterMemory(static_cast<char*>(host) + kPage, 2 * kPage, ctx),
            ACL_ERROR_RT_PARAM_INVALID)
      << "past the end of the host allocation";
  EXPECT_EQ(aclrtGetMemDeviceAddress(nullptr, host, ctx), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetMemDeviceAddress(&dev, nullptr, ctx), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetMemDeviceAddress(&dev, host, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtUnregisterMemory(nullptr, ctx), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtUnregisterMemory(static_cast<char*>(host) + 64, ctx),
            ACL_ERROR_HOST_MEMORY_NOT_REGISTERED)
      << "not the registered start";
  ACL_ASSERT_OK(aclrtUnregisterMemory(host, ctx));
  EXPECT_EQ(aclrtUnregisterMemory(host, ctx), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED) << "twice";

  // A destroyed context registers nothing.
  ACL_ASSERT_OK(aclrtDestroyContext(ctx));
  EXPECT_EQ(aclrtRegisterMemory(host, kPage, ctx), ACL_ERROR_RT_PARAM_INVALID);
  ACL_ASSERT_OK(aclrtFreeHost(host));
}

TEST_F(AclTest, FreeingRegisteredHostMemoryIsReported) {
  auto view = View();
  // Collected rather than fatal, whatever the environment says.
  view->EnableChecker(true);
  view->ClearCheckReports();
  aclrtContext ctx = nullptr;
  ACL_ASSERT_OK(aclrtGetCurrentContext(&ctx));
  void* host = nullptr;
  ACL_ASSERT_OK(aclrtMallocHost(&host, kPage));
  ACL_ASSERT_OK(aclrtRegisterMemory(host, kPage, ctx));
  ACL_ASSERT_OK(aclrtFreeHost(host));
  const std::vector<CheckReport> r = view->CheckReports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, CheckKind::kFreeWhileRegistered);
  EXPECT_EQ(r[0].ptr, host);
  void* dev = nullptr;
  EXPECT_EQ(aclrtGetMemDeviceAddress(&dev, host, ctx), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED)
      << "the free ended the registration";
  view->ClearCheckReports();
}

TEST_F(AclTest, HostRegisterFollowsCannsRules) {
  void* pages =
      mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  char* p = static_cast<char*>(pages);
  void* dev = nullptr;
  EXPECT_EQ(aclrtHostRegister(nullptr, kPage, ACL_HOST_REGISTER_MAPPED, &dev),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostRegister(p, 0, ACL_HOST_REGISTER_MAPPED, &dev), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostRegister(p, kPage, ACL_HOST_REGISTER_MAPPED, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostRegister(p + 64, kPage, ACL_HOST_REGISTER_MAPPED, &dev),
            ACL_ERROR_INVALID_PARAM)
      << "not on a 4 KiB page";
  EXPECT_EQ(aclrtHostRegister(p, kPage, static_cast<aclrtHostRegisterType>(2), &dev),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostRegister(p, kPage, ACL_HOST_REGISTER_READONLY, &dev),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtHostGetDevicePointer(p, &dev, 0), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);

  ACL_ASSERT_OK(aclrtHostRegister(p, 2 * kPage, ACL_HOST_REGISTER_MAPPED, &dev));
  EXPECT_EQ(dev, p);
  ACL_ASSERT_OK(aclrtHostRegister(p + 2 * kPage, kPage, ACL_HOST_REGISTER_IOMEMORY, &dev));
  EXPECT_EQ(aclrtHostRegister(p + kPage, kPage, ACL_HOST_REGISTER_MAPPED, &dev),
            ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  void* got = nullptr;
  ACL_ASSERT_OK(aclrtHostGetDevicePointer(p + 100, &got, 0));
  EXPECT_EQ(got, p + 100);
  EXPECT_EQ(aclrtHostGetDevicePointer(p, &got, 1), ACL_ERROR_INVALID_PARAM) << "flag";
  EXPECT_EQ(aclrtHostGetDevicePointer(nullptr, &got, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostGetDevicePointer(p, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostUnregister(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostUnregister(p + kPage), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
  ACL_ASSERT_OK(aclrtHostUnregister(p));
  ACL_ASSERT_OK(aclrtHostUnregister(p + 2 * kPage));
  EXPECT_EQ(aclrtHostUnregister(p), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
  munmap(pages, 4 * kPage);
}

TEST_F(AclTest, ContextsNameDevicesPerThread) {
  // The fixture set device 0: the thread is in its default context.
  aclrtContext def = nullptr;
  ACL_ASSERT_OK(aclrtGetCurrentContext(&def));
  ASSERT_NE(def, nullptr);
  aclrtContext again = nullptr;
  ACL_ASSERT_OK(aclrtGetCurrentContext(&again));
  EXPECT_EQ(again, def) << "one default context per device";
  EXPECT_EQ(aclrtDestroyContext(def), ACL_ERROR_INVALID_PARAM) << "the default one stays";

  aclrtContext ctx = nullptr;
  ACL_ASSERT_OK(aclrtCreateContext(&ctx, 0));
  EXPECT_NE(ctx, def);
  aclrtContext cur = nullptr;
  ACL_ASSERT_OK(aclrtGetCurrentContext(&cur));
  EXPECT_EQ(cur, ctx) << "creating makes it current";

  // Another thread starts with none, and takes the context's device with it.
  std::thread([&] {
    aclrtContext none = nullptr;
    EXPECT_EQ(aclrtGetCurrentContext(&none), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_EQ(aclrtSetCurrentContext(ctx), ACL_SUCCESS);
    int32_t device = -1;
    EXPECT_EQ(aclrtGetDevice(&device), ACL_SUCCESS);
    EXPECT_EQ(device, 0);
    aclrtContext mine = nullptr;
    EXPECT_EQ(aclrtGetCurrentContext(&mine), ACL_SUCCESS);
    EXPECT_EQ(mine, ctx);
  }).join();

  EXPECT_EQ(aclrtCreateContext(nullptr, 0), ACL_ERROR_INVALID_PARAM);
  aclrtContext bad = nullptr;
  EXPECT_EQ(aclrtCreateContext(&bad, 99), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(aclrtSetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSetCurrentContext(ForgedContext()), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtGetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyContext(nullptr), ACL_ERROR_INVALID_PARAM);
  ACL_ASSERT_OK(aclrtDestroyContext(ctx));
  EXPECT_EQ(aclrtDestroyContext(ctx), ACL_ERROR_RT_PARAM_INVALID) << "twice";
  EXPECT_EQ(aclrtSetCurrentContext(ctx), ACL_ERROR_RT_PARAM_INVALID);
  ACL_ASSERT_OK(aclrtGetCurrentContext(&cur));
  EXPECT_EQ(cur, def) << "back in the device's default context";
}

}  // namespace
}  // namespace streampool::acl_test
