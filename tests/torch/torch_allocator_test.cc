// libstreampool-torch through its C functions, as PyTorch and the Python
// module call them. Without a CUDA driver or device (spRuntimeCreate with
// spExecutorCuda answers spErrorInsufficientDriver or spErrorNoDevice) every
// allocation fails cleanly and the settings are still checked; with a GPU,
// allocations round-trip on the legacy stream and on an adopted CUstream.
//
// The library's state is the process's, and the shipped pass runs every test
// in one process: a test that configures puts the environment back
// (configure(NULL)), and what configure answers depends on whether an earlier
// test made the runtime.
#include "streampool/torch_allocator.h"

#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr ssize_t kMiB = ssize_t{1} << 20;

// What a CUDA runtime answers on this machine, asked of the test's own
// libstreampool: spSuccess with a GPU, else why not.
spError_t CudaRuntimeStatus() {
  static const spError_t status = [] {
    spRuntimeConfig config;
    spRuntimeConfigInit(&config);
    config.executor = spExecutorCuda;
    config.deviceCount = 0;
    config.deviceCapacity = 0;
    spRuntime_t rt = nullptr;
    const spError_t e = spRuntimeCreate(&rt, &config);
    if (e == spSuccess) spRuntimeDestroy(rt);
    return e;
  }();
  return status;
}

bool NoCuda(spError_t e) { return e == spErrorInsufficientDriver || e == spErrorNoDevice; }

// What configure answers for a well-formed string: the settings apply only
// before the runtime is made.
int Accepted() { return streampool_torch_runtime() == nullptr ? spSuccess : spErrorNotSupported; }

std::string StatsJson(int device) {
  size_t length = 0;
  EXPECT_EQ(streampool_torch_stats_json(device, nullptr, 0, &length), spSuccess);
  std::string text(length + 1, '\0');
  EXPECT_EQ(streampool_torch_stats_json(device, text.data(), text.size(), &length), spSuccess);
  text.resize(length);
  return text;
}

spMemPoolStats Stats(int device) {
  spMemPoolStats stats = {};
  EXPECT_EQ(streampool_torch_get_stats(device, &stats), spSuccess);
  return stats;
}

// ----------------------------------------------------------- anywhere

TEST(TorchAllocatorTest, SizeZeroOrNegativeAllocatesNothing) {
  EXPECT_EQ(streampool_torch_alloc(0, 0, nullptr), nullptr);
  EXPECT_EQ(streampool_torch_alloc(-1, 0, nullptr), nullptr);
}

TEST(TorchAllocatorTest, NullPointersAreNoOps) {
  streampool_torch_free(nullptr, 0, 0, nullptr);
  streampool_torch_free(nullptr, kMiB, -1, reinterpret_cast<void*>(0x1234));
  streampool_torch_record_stream(nullptr, nullptr);
  streampool_torch_record_stream(nullptr, reinterpret_cast<void*>(0x1234));
}

TEST(TorchAllocatorTest, ForeignPointersAreNoOps) {
  int not_ours = 0;
  streampool_torch_free(&not_ours, sizeof not_ours, 0, nullptr);
  streampool_torch_record_stream(&not_ours, nullptr);
  EXPECT_EQ(not_ours, 0);
}

TEST(TorchAllocatorTest, ConfigureRejectsBadKeysAndValues) {
  const char* const bad[] = {
      "bogus=1",                                 // unknown key
      "Release_Threshold=0",                     // keys are lower case
      "release_threshold",                       // no '='
      "=1",                                      // no key
      "release_threshold=",                      // no value
      "release_threshold=-1",                    // no sign
      "release_threshold=12X",                   // no such suffix
      "release_threshold=1 6",                   // no space inside
      "release_threshold=18446744073709551616",  // beyond 64 bits
      "release_threshold=16777216T",
      "release_threshold=99999999999G",  // beyond 64 bits once scaled
      "follow_event_dependencies=2",
      "opportunistic=yes",
      "internal_dependencies=true",
      "growth=huge",
      "growth=default",
      "max_size=max",                      // "max" is a threshold's word; a limit of 0 is none
      "growth=chunked,growth=expandable",  // a key twice
      "growth=chunked;max_size=1G",        // ';' is no separator
  };
  for (const char* settings : bad) {
    SCOPED_TRACE(settings);
    EXPECT_EQ(streampool_torch_configure(settings), spErrorInvalidValue);
    EXPECT_STRNE(streampool_torch_error_message(), "");
  }
  EXPECT_EQ(streampool_torch_configure("bogus=1"), spErrorInvalidValue);
  EXPECT_THAT(streampool_torch_error_message(), HasSubstr("bogus"));
  EXPECT_EQ(streampool_torch_configure("growth=huge"), spErrorInvalidValue);
  EXPECT_THAT(streampool_torch_error_message(), HasSubstr("expandable or chunked"));
}

TEST(TorchAllocatorTest, ConfigureAcceptsGoodSettings) {
  const char* const good[] = {
      "",
      " , ",
      "release_threshold=max",
      "release_threshold=0",
      "release_threshold=64M",
      "release_threshold=18446744073709551615",
      "follow_event_dependencies=0, opportunistic=1 ,internal_dependencies=0",
      "growth=chunked,max_size=8G",
      "growth=expandable,",
      " max_size = 1048576 ",
      "max_size=0",
  };
  for (const char* settings : good) {
    SCOPED_TRACE(settings);
    EXPECT_EQ(streampool_torch_configure(settings), Accepted());
  }
  EXPECT_EQ(streampool_torch_configure(nullptr), Accepted());
}

TEST(TorchAllocatorTest, ReportsCheckTheirArguments) {
  char buffer[8];
  EXPECT_EQ(streampool_torch_stats_json(-1, buffer, sizeof buffer, nullptr), spErrorInvalidValue);
  size_t length = 0;
  EXPECT_EQ(streampool_torch_snapshot_json(-1, nullptr, 16, &length), spErrorInvalidValue);
  EXPECT_EQ(streampool_torch_get_stats(0, nullptr), spErrorInvalidValue);
}

// ----------------------------------------------------- without a driver

class TorchAllocatorNoCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaRuntimeStatus() == spSuccess) GTEST_SKIP() << "a CUDA device is present";
    // Here a CUDA runtime must fail for want of a driver or a device, and for
    // nothing else.
    ASSERT_THAT(CudaRuntimeStatus(), AnyOf(spErrorInsufficientDriver, spErrorNoDevice))
        << spGetErrorName(CudaRuntimeStatus());
  }
};

TEST_F(TorchAllocatorNoCudaTest, AllocationFailsAndInitSaysWhy) {
  EXPECT_EQ(streampool_torch_alloc(kMiB, 0, nullptr), nullptr);
  EXPECT_EQ(streampool_torch_alloc(kMiB, 0, reinterpret_cast<void*>(0x1234)), nullptr);
  EXPECT_EQ(streampool_torch_runtime(), nullptr);
  EXPECT_EQ(streampool_torch_init(), CudaRuntimeStatus());
  EXPECT_THAT(streampool_torch_error_message(), HasSubstr(spGetErrorName(CudaRuntimeStatus())));
  // The reports give the same reason.
  spMemPoolStats stats;
  EXPECT_EQ(streampool_torch_get_stats(0, &stats), CudaRuntimeStatus());
  size_t length = 0;
  EXPECT_EQ(streampool_torch_stats_json(-1, nullptr, 0, &length), CudaRuntimeStatus());
  EXPECT_EQ(streampool_torch_snapshot_json(0, nullptr, 0, &length), CudaRuntimeStatus());
  EXPECT_EQ(streampool_torch_leak_report_json(-1, nullptr, 0, &length), CudaRuntimeStatus());
}

TEST_F(TorchAllocatorNoCudaTest, ConfigureAfterAFailedCreationTriesAgain) {
  EXPECT_EQ(streampool_torch_init(), CudaRuntimeStatus());
  // The failure made no runtime, so settings are still taken, and they clear
  // the remembered failure: the next allocation tries again (and fails again).
  EXPECT_EQ(streampool_torch_configure("growth=chunked"), spSuccess);
  size_t length = 0;
  EXPECT_EQ(streampool_torch_stats_json(-1, nullptr, 0, &length), spErrorNotReady);
  EXPECT_EQ(streampool_torch_alloc(kMiB, 0, nullptr), nullptr);
  EXPECT_EQ(streampool_torch_init(), CudaRuntimeStatus());
  EXPECT_EQ(streampool_torch_configure(nullptr), spSuccess);
}

TEST_F(TorchAllocatorNoCudaTest, FreeAndRecordStreamWithoutARuntimeAreNoOps) {
  streampool_torch_free(reinterpret_cast<void*>(0x10000), kMiB, 0, nullptr);
  streampool_torch_record_stream(reinterpret_cast<void*>(0x10000), nullptr);
  EXPECT_EQ(streampool_torch_runtime(), nullptr);
}

// ------------------------------------------------------------ with a GPU

// The few driver calls that make a CUstream of the primary context, as
// PyTorch's streams are, loaded at run time like the library's own driver:
// through cuGetProcAddress_v2 (CUDA 12's entry points), which the scripted
// driver of tests/fakecuda/ offers too.
class Driver {
 public:
  Driver() {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    get_ = reinterpret_cast<GetProcAddress>(dlsym(lib_, "cuGetProcAddress_v2"));
    Load("cuInit", &init_);
    Load("cuDeviceGet", &device_get_);
    Load("cuDevicePrimaryCtxRetain", &retain_);
    Load("cuCtxSetCurrent", &set_current_);
    Load("cuStreamCreate", &stream_create_);
    Load("cuStreamSynchronize", &stream_sync_);
  }

  // A new non-blocking stream on device 0 (CU_STREAM_NON_BLOCKING, as
  // PyTorch makes its streams), or nullptr. Never destroyed: the allocator
  // keeps the streams it adopted for the process's life.
  void* NewStream() {
    if (init_ == nullptr || device_get_ == nullptr || retain_ == nullptr ||
        set_current_ == nullptr || stream_create_ == nullptr) {
      return nullptr;
    }
    int device = 0;
    void* context = nullptr;
    void* stream = nullptr;
    if (init_(0) != 0 || device_get_(&device, 0) != 0 || retain_(&context, device) != 0 ||
        set_current_(context) != 0 || stream_create_(&stream, 1) != 0) {
      return nullptr;
    }
    return stream;
  }
  bool Synchronize(void* stream) { return stream_sync_ != nullptr && stream_sync_(stream) == 0; }

 private:
  // cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus).
  using GetProcAddress = int (*)(const char*, void**, int, uint64_t, int*);
  static constexpr int kCudaVersion = 12000;

  template <typename F>
  void Load(const char* name, F* fn) {
    void* p = nullptr;
    if (get_ == nullptr || get_(name, &p, kCudaVersion, 0, nullptr) != 0) p = nullptr;
    *fn = reinterpret_cast<F>(p);
  }

  void* lib_ = nullptr;
  GetProcAddress get_ = nullptr;
  int (*init_)(unsigned) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*retain_)(void**, int) = nullptr;
  int (*set_current_)(void*) = nullptr;
  int (*stream_create_)(void**, unsigned) = nullptr;
  int (*stream_sync_)(void*) = nullptr;
};

class TorchAllocatorCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (NoCuda(CudaRuntimeStatus())) {
      GTEST_SKIP() << "no CUDA runtime here: " << spGetErrorName(CudaRuntimeStatus());
    }
    ASSERT_EQ(CudaRuntimeStatus(), spSuccess) << spGetErrorName(CudaRuntimeStatus());
    ASSERT_EQ(streampool_torch_init(), spSuccess) << streampool_torch_error_message();
    ASSERT_NE(streampool_torch_runtime(), nullptr);
  }
};

TEST_F(TorchAllocatorCudaTest, RoundTripOnTheLegacyStream) {
  const spMemPoolStats before = Stats(0);
  void* p = streampool_torch_alloc(kMiB, 0, nullptr);
  ASSERT_NE(p, nullptr) << streampool_torch_error_message();
  const spMemPoolStats live = Stats(0);
  EXPECT_EQ(live.allocCount, before.allocCount + 1);
  EXPECT_GE(live.usedBytes, before.usedBytes + kMiB);
  streampool_torch_free(p, kMiB, 0, nullptr);
  EXPECT_EQ(Stats(0).usedBytes, before.usedBytes);
  // The same size again on the same stream: its own free serves it.
  void* q = streampool_torch_alloc(kMiB, 0, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(Stats(0).reuseSameStream, live.reuseSameStream + 1);
  // cudaStreamLegacy is the same stream as NULL.
  streampool_torch_free(q, kMiB, 0, reinterpret_cast<void*>(0x1));
  EXPECT_EQ(Stats(0).freeCount, before.freeCount + 2);
}

TEST_F(TorchAllocatorCudaTest, RoundTripOnAnAdoptedStream) {
  Driver driver;
  void* stream = driver.NewStream();
  void* side = driver.NewStream();
  ASSERT_NE(stream, nullptr);
  ASSERT_NE(side, nullptr);
  const spMemPoolStats before = Stats(0);
  void* p = streampool_torch_alloc(4 * kMiB, 0, stream);
  ASSERT_NE(p, nullptr) << streampool_torch_error_message();
  streampool_torch_free(p, 4 * kMiB, 0, stream);
  void* q = streampool_torch_alloc(4 * kMiB, 0, stream);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(Stats(0).reuseSameStream, before.reuseSameStream + 1);
  // Used on a second stream too: the free waits for nothing, and the bytes
  // are reused by no stream before both streams' work is complete.
  streampool_torch_record_stream(q, side);
  streampool_torch_free(q, 4 * kMiB, 0, stream);
  const spMemPoolStats after = Stats(0);
  EXPECT_EQ(after.freeCount, before.freeCount + 2);
  EXPECT_EQ(after.usedBytes, before.usedBytes);
  EXPECT_TRUE(driver.Synchronize(stream));
  EXPECT_TRUE(driver.Synchronize(side));
  EXPECT_THAT(StatsJson(0), StartsWith("{\"devices\":[{\"device\":0,\"streams\":"));
}

TEST_F(TorchAllocatorCudaTest, SettingsAreRefusedOnceTheRuntimeExists) {
  EXPECT_EQ(streampool_torch_configure("release_threshold=0"), spErrorNotSupported);
  EXPECT_EQ(streampool_torch_configure(nullptr), spErrorNotSupported);
  // A malformed string is still reported as such.
  EXPECT_EQ(streampool_torch_configure("bogus=1"), spErrorInvalidValue);
}

TEST_F(TorchAllocatorCudaTest, ReportsDescribeThePools) {
  void* p = streampool_torch_alloc(3 * kMiB, 0, nullptr);
  ASSERT_NE(p, nullptr);
  const std::string stats = StatsJson(-1);
  EXPECT_THAT(stats, HasSubstr("\"release_threshold\":18446744073709551615"));
  EXPECT_THAT(stats, HasSubstr("\"growth\":\"expandable\""));
  size_t length = 0;
  ASSERT_EQ(streampool_torch_snapshot_json(0, nullptr, 0, &length), spSuccess);
  std::string snapshot(length + 1, '\0');
  ASSERT_EQ(streampool_torch_snapshot_json(0, snapshot.data(), snapshot.size(), &length),
            spSuccess);
  EXPECT_THAT(snapshot, HasSubstr("\"state\":\"live\""));
  ASSERT_EQ(streampool_torch_leak_report_json(0, nullptr, 0, &length), spSuccess);
  std::string leaks(length + 1, '\0');
  ASSERT_EQ(streampool_torch_leak_report_json(0, leaks.data(), leaks.size(), &length), spSuccess);
  EXPECT_THAT(leaks, HasSubstr("\"ptr\":" + std::to_string(reinterpret_cast<uintptr_t>(p))));
  streampool_torch_free(p, 3 * kMiB, 0, nullptr);
  // Too small a buffer: nothing copied, the length still told.
  char small[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(streampool_torch_stats_json(0, small, sizeof small, &length), spSuccess);
  EXPECT_GT(length, sizeof small);
  EXPECT_EQ(small[0], 'x');
}

}  // namespace
