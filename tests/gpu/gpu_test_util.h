// What the device tests share: a CUDA runtime or the reason there is none,
// and the few driver calls the tests make behind the runtime's back.
//
// The tests build and run on machines without a GPU: a runtime whose
// creation reports no driver (spErrorInsufficientDriver) or no device
// (spErrorNoDevice) skips the test. The driver is reached as the runtime
// reaches it, through dlopen("libcuda.so.1"), so nothing links libcuda and
// the binaries load everywhere. What the tests ask the driver directly is
// what streampool must not be the one to answer: how much device memory is
// really free (cuMemGetInfo), and work finishing without streampool being
// told (cuStreamSynchronize on a native stream).
#ifndef STREAMPOOL_TESTS_GPU_GPU_TEST_UTIL_H_
#define STREAMPOOL_TESTS_GPU_GPU_TEST_UTIL_H_

#include <dirent.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::gpu_test {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// A CUDA runtime's configuration as the tests use it: the first device, all
// of its memory unless a test caps it, everything else at its default (which
// a CUDA runtime requires of backing, api_call_ns and copy_bytes_per_us).
inline RuntimeConfig CudaConfig(uint64_t device_capacity = 0) {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kCuda;
  cfg.device_count = 1;
  cfg.device_capacity = device_capacity;
  return cfg;
}

// Whether a failed creation means this machine has no GPU to run on, rather
// than a fault of the runtime.
inline bool NoGpu(const absl::Status& status) {
  const spError_t code = ToCError(status);
  return code == spErrorInsufficientDriver || code == spErrorNoDevice;
}

// Declares `var`, a std::unique_ptr<Runtime> made from `config`, or skips the
// test when the machine has no CUDA driver or device. Any other failure to
// create it fails the test.
#define SP_CUDA_RUNTIME_OR_SKIP(var, config)                                      \
  std::unique_ptr<::streampool::Runtime> var;                                     \
  {                                                                               \
    auto sp_created_ = ::streampool::Runtime::Create(config);                     \
    if (!sp_created_.ok() && ::streampool::gpu_test::NoGpu(sp_created_.status())) \
      GTEST_SKIP() << "no CUDA driver/device: " << sp_created_.status();          \
    ASSERT_TRUE(sp_created_.ok()) << sp_created_.status();                        \
    var = *std::move(sp_created_);                                                \
  }

// Open file descriptors of this process (/proc/self/fd), -1 if unreadable.
inline int OpenFdCount() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory stream's own descriptor
}

// The driver API calls the tests make, loaded as the runtime loads them:
// dlopen, then every entry point through cuGetProcAddress_v2 at the CUDA 12
// ABI (cuMemGetInfo is then cuMemGetInfo_v2, as cuda.h's macros make it).
// The library is never closed: the driver may run threads of its own from
// cuInit on, and the runtime holds it open too.
class Driver {
 public:
  // The loaded driver with device 0's primary context (the one the runtime
  // uses) current on the calling thread, or why not.
  static absl::StatusOr<std::unique_ptr<Driver>> Open() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return absl::UnavailableError("libcuda.so.1 cannot be loaded");
    std::unique_ptr<Driver> d(new Driver);
    if (absl::Status st = d->Resolve(lib); !st.ok()) return st;
    if (int r = d->init_(0); r != 0) return Failed("cuInit", r);
    if (int r = d->device_get_(&d->device_, 0); r != 0) return Failed("cuDeviceGet", r);
    if (int r = d->retain_(&d->context_, d->device_); r != 0) {
      return Failed("cuDevicePrimaryCtxRetain", r);
    }
    d->retained_ = true;
    if (int r = d->set_current_(d->context_); r != 0) return Failed("cuCtxSetCurrent", r);
    return d;
  }
  ~Driver() {
    if (retained_) release_(device_);
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Bytes free on device 0 now, as the driver counts them (every context's
  // memory, the runtime's pools included).
  absl::StatusOr<uint64_t> FreeBytes() {
    size_t free = 0, total = 0;
    if (int r = mem_get_info_(&free, &total); r != 0) return Failed("cuMemGetInfo", r);
    return static_cast<uint64_t>(free);
  }
  // Waits for a native stream's work, without streampool knowing.
  absl::Status StreamSynchronize(void* stream) {
    if (int r = stream_sync_(stream); r != 0) return Failed("cuStreamSynchronize", r);
    return absl::OkStatus();
  }

 private:
  Driver() = default;

  static absl::Status Failed(const char* call, int result) {
    return absl::InternalError(absl::StrCat(call, " returned CUresult ", result));
  }

  // cuGetProcAddress_v2(symbol, &fn, cudaVersion, flags, &symbolStatus).
  using GetProcAddress = int (*)(const char*, void**, int, uint64_t, int*);
  template <typename Fn>
  static bool Load(GetProcAddress get, Fn* fn, const char* name) {
    void* p = nullptr;
    int found = 0;
    if (get(name, &p, /*cudaVersion=*/12000, /*flags=*/0, &found) != 0) return false;
    *fn = reinterpret_cast<Fn>(p);
    return p != nullptr;
  }
  absl::Status Resolve(void* lib) {
    auto get = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
    if (get == nullptr) return absl::UnavailableError("the driver has no cuGetProcAddress_v2");
    if (!Load(get, &init_, "cuInit") || !Load(get, &device_get_, "cuDeviceGet") ||
        !Load(get, &retain_, "cuDevicePrimaryCtxRetain") ||
        !Load(get, &release_, "cuDevicePrimaryCtxRelease") ||
        !Load(get, &set_current_, "cuCtxSetCurrent") ||
        !Load(get, &mem_get_info_, "cuMemGetInfo") ||
        !Load(get, &stream_sync_, "cuStreamSynchronize")) {
      return absl::UnavailableError("the driver lacks a call the tests make");
    }
    return absl::OkStatus();
  }

  int device_ = 0;
  void* context_ = nullptr;
  bool retained_ = false;
  int (*init_)(unsigned) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*retain_)(void**, int) = nullptr;
  int (*release_)(int) = nullptr;
  int (*set_current_)(void*) = nullptr;
  int (*mem_get_info_)(size_t*, size_t*) = nullptr;
  int (*stream_sync_)(void*) = nullptr;
};

}  // namespace streampool::gpu_test

#endif  // STREAMPOOL_TESTS_GPU_GPU_TEST_UTIL_H_
