// The CUDA face (include/streampool/cuda/, src/cuda/): every function with its
// error cases and CUDA's codes, the per-thread last error, stream 0 and the
// per-thread stream's ordering, emulated kernels, the implicit runtime's
// environment and its reset.
//
// The implicit runtime is process-wide: every test resets it when it ends, so
// that the tests also pass when the binary runs them all in one process (ctest
// runs each in its own).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streampool/cuda/interop.h"
#include "streampool/runtime.h"

namespace {

using ::testing::HasSubstr;

#define CUDA_ASSERT_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define CUDA_EXPECT_OK(expr) EXPECT_EQ((expr), cudaSuccess) << #expr

// A stream handle no runtime ever made: a handle's kind lives in its top bits.
const auto kForgedStream = reinterpret_cast<cudaStream_t>(uintptr_t{0x7777});
const auto kForgedEvent = reinterpret_cast<cudaEvent_t>(uintptr_t{0x7777});
const auto kForgedPool = reinterpret_cast<cudaMemPool_t>(uintptr_t{0x7777});

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { CUDA_ASSERT_OK(cudaSetDevice(0)); }
  void TearDown() override {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
  }

  // The implicit runtime's C++ view, for timelines.
  std::unique_ptr<streampool::Runtime> View() {
    spRuntime_t rt = nullptr;
    EXPECT_EQ(spcudaGetRuntime(&rt), cudaSuccess);
    auto view = streampool::Runtime::FromC(rt);
    EXPECT_TRUE(view.ok());
    return view.ok() ? *std::move(view) : nullptr;
  }

  static spStream_t SpStream(cudaStream_t s) {
    spStream_t out = nullptr;
    EXPECT_EQ(spcudaGetStream(&out, s), cudaSuccess);
    return out;
  }
};

// The timeline's kernels on `s`, in enqueue order.
std::vector<streampool::TimelineEntry> Kernels(const streampool::Runtime& rt, spStream_t s) {
  std::vector<streampool::TimelineEntry> out;
  for (const streampool::TimelineEntry& e : rt.Timeline()) {
    if (e.kind == streampool::OpKind::kKernel && e.stream.c() == s) out.push_back(e);
  }
  return out;
}

// A kernel that does nothing but occupy its stream for the kernel duration.
__global__ void Idle() {}

__global__ void Scale(float* x, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void VectorAdd(const float* a, const float* b, float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// ------------------------------------------------------------------ errors

TEST_F(CudaTest, ErrorNamesAndStringsAreCudas) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorNotSupported), "cudaErrorNotSupported");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(1000)), "unrecognized error code");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(998)), "unrecognized error code");
  EXPECT_THAT(cudaGetErrorString(cudaErrorMemoryAllocation), HasSubstr("memory"));
  // The numbers are a contract with programs that print or compare them.
  EXPECT_EQ(cudaErrorInvalidValue, 1);
  EXPECT_EQ(cudaErrorMemoryAllocation, 2);
  EXPECT_EQ(cudaErrorCudartUnloading, 4);
  EXPECT_EQ(cudaErrorInvalidConfiguration, 9);
  EXPECT_EQ(cudaErrorInvalidMemcpyDirection, 21);
  EXPECT_EQ(cudaErrorInvalidDevice, 101);
  EXPECT_EQ(cudaErrorPeerAccessUnsupported, 217);
  EXPECT_EQ(cudaErrorInvalidResourceHandle, 400);
  EXPECT_EQ(cudaErrorNotReady, 600);
  EXPECT_EQ(cudaErrorPeerAccessAlreadyEnabled, 704);
  EXPECT_EQ(cudaErrorPeerAccessNotEnabled, 705);
  EXPECT_EQ(cudaErrorLaunchFailure, 719);
  EXPECT_EQ(cudaErrorNotSupported, 801);
  EXPECT_EQ(cudaErrorUnknown, 999);
  EXPECT_EQ(cudaDevAttrComputeMode, 20);
  EXPECT_EQ(cudaDevAttrComputeCapabilityMajor, 75);
  EXPECT_EQ(cudaDevAttrMemoryPoolsSupported, 115);
  EXPECT_EQ(cudaDevAttrMemoryPoolSupportedHandleTypes, 119);
  EXPECT_EQ(cudaMemPoolAttrUsedMemHigh, 8);
}

TEST_F(CudaTest, LastErrorIsKeptUntilReadAndSurvivesSuccesses) {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  // Later successes do not clear it; peeking does not either.
  int count = 0;
  CUDA_EXPECT_OK(cudaGetDeviceCount(&count));
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  // A newer error replaces it.
  EXPECT_EQ(cudaSetDevice(99), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST_F(CudaTest, LastErrorIsPerHostThread) {
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  cudaError_t other_before = cudaErrorUnknown;
  cudaError_t other_after = cudaErrorUnknown;
  std::thread t([&] {
    other_before = cudaPeekAtLastError();
    cudaMallocHost(nullptr, 1);
    other_after = cudaGetLastError();
  });
  t.join();
  EXPECT_EQ(other_before, cudaSuccess);
  EXPECT_EQ(other_after, cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

TEST_F(CudaTest, NotReadyIsNotAnError) {
  cudaStream_t s;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, s, {}), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  CUDA_EXPECT_OK(cudaStreamSynchronize(s));
  CUDA_EXPECT_OK(cudaStreamQuery(s));
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
}

// A kernel that throws is CUDA's sticky error: every later call fails with
// it, cudaGetLastError cannot clear it, and only a reset recovers.
TEST_F(CudaTest, FailedKernelIsStickyUntilReset) {
  auto thrower = [](int) { throw std::runtime_error("device fault"); };
  ASSERT_EQ(spcudaLaunchKernel(thrower, 2, 2, 0, nullptr, {}, 7), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorLaunchFailure);
  EXPECT_EQ(p, nullptr);
  CUDA_ASSERT_OK(cudaDeviceReset());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // this thread's last error
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  CUDA_ASSERT_OK(cudaMalloc(&p, 64));
  CUDA_EXPECT_OK(cudaFree(p));
}

TEST_F(CudaTest, VersionsAreTheMirroredCudas) {
  int v = 0;
  CUDA_ASSERT_OK(cudaDriverGetVersion(&v));
  EXPECT_EQ(v, CUDART_VERSION);
  CUDA_ASSERT_OK(cudaRuntimeGetVersion(&v));
  EXPECT_EQ(v, CUDART_VERSION);
  EXPECT_EQ(cudaDriverGetVersion(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaRuntimeGetVersion(nullptr), cudaErrorInvalidValue);
}

// ----------------------------------------------------------------- devices

TEST_F(CudaTest, CurrentDeviceIsPerHostThread) {
  int count = 0;
  CUDA_ASSERT_OK(cudaGetDeviceCount(&count));
  EXPECT_EQ(count, 1);
  int d = -1;
  CUDA_ASSERT_OK(cudaGetDevice(&d));
  EXPECT_EQ(d, 0);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDevice(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceCount(nullptr), cudaErrorInvalidValue);
}

TEST_F(CudaTest, DeviceAttributesAndProperties) {
  int v = -1;
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0));
  EXPECT_EQ(v, 1);
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolSupportedHandleTypes, 0));
  EXPECT_EQ(v, cudaMemHandleTypePosixFileDescriptor);
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 0));
  EXPECT_EQ(v, cudaComputeModeDefault);
  int major = 0, minor = -1;
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CUDA_ASSERT_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  EXPECT_EQ(cudaDeviceGetAttribute(nullptr, cudaDevAttrWarpSize, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(100), 0), cudaErrorInvalidValue);

  cudaDeviceProp prop;
  CUDA_ASSERT_OK(cudaGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.totalGlobalMem, size_t{1} << 30);  // STREAMPOOL_CUDA_CAPACITY's default
  EXPECT_EQ(prop.major, major);
  EXPECT_EQ(prop.minor, minor);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.memoryPoolsSupported, 1);
  EXPECT_THAT(std::string(prop.name), HasSubstr("streampool"));
  EXPECT_EQ(cudaGetDeviceProperties(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 3), cudaErrorInvalidDevice);
}

TEST_F(CudaTest, MemGetInfoCountsWhatTheDeviceGaveOut) {
  size_t free0 = 0, total = 0;
  CUDA_ASSERT_OK(cudaMemGetInfo(&free0, &total));
  EXPECT_EQ(total, size_t{1} << 30);
  void* p = nullptr;
  CUDA_ASSERT_OK(cudaMalloc(&p, 8 << 20));
  size_t free1 = 0;
  CUDA_ASSERT_OK(cudaMemGetInfo(&free1, &total));
  EXPECT_LE(free1 + (8 << 20), free0);
  CUDA_ASSERT_OK(cudaFree(p));
  CUDA_ASSERT_OK(cudaMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
  EXPECT_EQ(cudaMemGetInfo(nullptr, &total), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetInfo(&free1, nullptr), cudaErrorInvalidValue);
}

TEST_F(CudaTest, OneDeviceHasNoPeer) {
  int can = -1;
  CUDA_ASSERT_OK(cudaDeviceCanAccessPeer(&can, 0, 0));
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cudaDeviceCanAccessPeer(nullptr, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
  int least = 7, greatest = 7;
  CUDA_EXPECT_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, 0);
}

// ----------------------------------------------------------------- streams

TEST_F(CudaTest, StreamAndEventErrorCases) {
  EXPECT_EQ(cudaStreamCreate(nullptr), cudaErrorInvalidValue);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x10), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -3));
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(cudaStreamPerThread), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(kForgedStream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(kForgedStream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaLaunchHostFunc(s, nullptr, nullptr), cudaErrorInvalidValue);

  EXPECT_EQ(cudaEventCreate(nullptr), cudaErrorInvalidValue);
  cudaEvent_t e;
  EXPECT_EQ(cudaEventCreateWithFlags(&e, 0x40), cudaErrorInvalidValue);
  // Interprocess needs DisableTiming, as in CUDA.
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync));
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 2), cudaErrorInvalidValue);  // 1 is cudaEventWaitExternal
  EXPECT_EQ(cudaStreamWaitEvent(s, kForgedEvent, 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(kForgedEvent, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(e, kForgedStream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventSynchronize(kForgedEvent), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(kForgedEvent), cudaErrorInvalidResourceHandle);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(nullptr, e, e), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaEventDestroy(e));
  EXPECT_EQ(cudaEventDestroy(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, e), cudaErrorInvalidResourceHandle);
  CUDA_ASSERT_OK(cudaStreamDestroy(s));
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
}

TEST_F(CudaTest, EventsTimeKernelsInVirtualTime) {
  cudaStream_t s;
  cudaEvent_t start, stop;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  CUDA_ASSERT_OK(cudaEventCreate(&start));
  CUDA_ASSERT_OK(cudaEventCreate(&stop));
  CUDA_ASSERT_OK(cudaEventRecord(start, s));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, s, {}), cudaSuccess);
  CUDA_ASSERT_OK(cudaEventRecord(stop, s));
  float ms = 0;
  EXPECT_EQ(cudaEventQuery(stop), cudaErrorNotReady);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);
  CUDA_ASSERT_OK(cudaEventSynchronize(stop));
  CUDA_ASSERT_OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_FLOAT_EQ(ms, 4 * 1000 / 1e6f);  // four kernels of STREAMPOOL_CUDA_KERNEL_NS=1000
  CUDA_EXPECT_OK(cudaEventDestroy(start));
  CUDA_EXPECT_OK(cudaEventDestroy(stop));
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
}

TEST_F(CudaTest, HostFunctionsRunInStreamOrder) {
  struct Log {
    std::vector<int> order;
  } log;
  cudaStream_t s;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  auto note = [](void* p) { static_cast<Log*>(p)->order.push_back(1); };
  auto note2 = [](void* p) { static_cast<Log*>(p)->order.push_back(2); };
  CUDA_ASSERT_OK(cudaLaunchHostFunc(s, note, &log));
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, s, {}), cudaSuccess);
  CUDA_ASSERT_OK(cudaLaunchHostFunc(s, note2, &log));
  CUDA_ASSERT_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(log.order, (std::vector<int>{1, 2}));
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
}

// Stream 0 is the legacy stream: work on it waits for every blocking stream
// of the device, and blocking streams wait for it; non-blocking ones do not.
TEST_F(CudaTest, StreamZeroIsTheLegacyStream) {
  auto rt = View();
  ASSERT_NE(rt, nullptr);
  rt->RecordTimeline(true);
  cudaStream_t blocking, non_blocking;
  CUDA_ASSERT_OK(cudaStreamCreate(&blocking));
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking));
  EXPECT_EQ(SpStream(nullptr), SpStream(cudaStreamLegacy));
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, blocking, {}), cudaSuccess);
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, non_blocking, {}), cudaSuccess);
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, 0, {}), cudaSuccess);
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, non_blocking, {}), cudaSuccess);
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const auto on_blocking = Kernels(*rt, SpStream(blocking));
  const auto on_legacy = Kernels(*rt, SpStream(nullptr));
  const auto on_non_blocking = Kernels(*rt, SpStream(non_blocking));
  ASSERT_EQ(on_blocking.size(), 1u);
  ASSERT_EQ(on_legacy.size(), 1u);
  ASSERT_EQ(on_non_blocking.size(), 2u);
  EXPECT_GE(on_legacy[0].start_ns, on_blocking[0].end_ns);
  // The non-blocking stream's second kernel runs beside the legacy one.
  EXPECT_LT(on_non_blocking[1].start_ns, on_legacy[0].end_ns);
  CUDA_EXPECT_OK(cudaStreamDestroy(blocking));
  CUDA_EXPECT_OK(cudaStreamDestroy(non_blocking));
}

// cudaStreamPerThread: a stream of the thread's own, which is blocking (it
// orders with the legacy stream) and independent of other threads'.
TEST_F(CudaTest, PerThreadStreamIsTheThreadsOwnAndBlocking) {
  auto rt = View();
  ASSERT_NE(rt, nullptr);
  rt->RecordTimeline(true);
  const spStream_t mine = SpStream(cudaStreamPerThread);
  EXPECT_EQ(SpStream(cudaStreamPerThread), mine);
  EXPECT_NE(mine, SpStream(nullptr));
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, cudaStreamPerThread, {}), cudaSuccess);
  spStream_t theirs = nullptr;
  std::thread t([&] {
    theirs = SpStream(cudaStreamPerThread);
    EXPECT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, cudaStreamPerThread, {}), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  });
  t.join();
  ASSERT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  // The thread's stream went with the thread.
  EXPECT_EQ(spStreamQuery(theirs), spErrorInvalidResourceHandle);
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, cudaStreamLegacy, {}), cudaSuccess);
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const auto on_mine = Kernels(*rt, mine);
  // The timeline names a destroyed stream 0: the other thread's is the only one.
  const auto on_theirs = Kernels(*rt, nullptr);
  const auto on_legacy = Kernels(*rt, SpStream(nullptr));
  ASSERT_EQ(on_mine.size(), 1u);
  ASSERT_EQ(on_legacy.size(), 1u);
  EXPECT_GE(on_legacy[0].start_ns, on_mine[0].end_ns);
  // Other threads' per-thread streams are not ordered with this one's.
  ASSERT_EQ(on_theirs.size(), 1u);
  EXPECT_LT(on_theirs[0].start_ns, on_mine[0].end_ns);
}

TEST_F(CudaTest, ThreadsLeavingDoNotAccumulateStreams) {
  std::vector<spStream_t> streams;
  for (int i = 0; i < 32; ++i) {
    std::thread t([&] { streams.push_back(SpStream(cudaStreamPerThread)); });
    t.join();
  }
  for (spStream_t s : streams) EXPECT_EQ(spStreamQuery(s), spErrorInvalidResourceHandle);
}

// ------------------------------------------------------------------ kernels

TEST_F(CudaTest, KernelsRunEveryThreadOfTheGridInStreamOrder) {
  constexpr int n = 1000;
  std::vector<float> a(n), b(n), c(n, -1);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 2.0f * i;
  }
  float *da, *db, *dc;
  CUDA_ASSERT_OK(cudaMalloc(&da, n * sizeof(float)));
  CUDA_ASSERT_OK(cudaMalloc(&db, n * sizeof(float)));
  CUDA_ASSERT_OK(cudaMalloc(&dc, n * sizeof(float)));
  CUDA_ASSERT_OK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_ASSERT_OK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t bytes = n * sizeof(float);
  const dim3 block(128), grid((n + 127) / 128);
  // VectorAdd<<<grid, block>>>(da, db, dc, n);
  ASSERT_EQ(spcudaLaunchKernel(VectorAdd, grid, block, 0, 0,
                               {{da, bytes, 0}, {db, bytes, 0}, {dc, bytes, 1}}, da, db, dc, n),
            cudaSuccess);
  // Scale<<<grid, block>>>(dc, 0.5f, n): after VectorAdd, in stream order.
  ASSERT_EQ(spcudaLaunchKernel(Scale, grid, block, 0, 0, {{dc, bytes, 1}}, dc, 0.5f, n),
            cudaSuccess);
  CUDA_ASSERT_OK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(c[i], 1.5f * i) << i;
  CUDA_EXPECT_OK(cudaFree(da));
  CUDA_EXPECT_OK(cudaFree(db));
  CUDA_EXPECT_OK(cudaFree(dc));
}

TEST_F(CudaTest, KernelsSeeTheirCoordinatesAndCopiedArguments) {
  struct Seen {
    std::atomic<int> threads{0};
    std::atomic<unsigned> max_linear{0};
    int arg = 0;
  } seen;
  int arg = 5;
  auto kernel = [](Seen* s, int a) {
    s->threads.fetch_add(1);
    s->arg = a;
    const unsigned linear = ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) *
                                (blockDim.x * blockDim.y * blockDim.z) +
                            (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned prev = s->max_linear.load();
    while (linear > prev && !s->max_linear.compare_exchange_weak(prev, linear)) {
    }
  };
  ASSERT_EQ(spcudaLaunchKernel(kernel, dim3(2, 3, 1), dim3(4, 2, 2), 0, 0, {}, &seen, arg),
            cudaSuccess);
  arg = 6;  // the launch copied 5
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_EQ(seen.threads.load(), 2 * 3 * 4 * 2 * 2);
  EXPECT_EQ(seen.max_linear.load(), 2u * 3 * 4 * 2 * 2 - 1);
  EXPECT_EQ(seen.arg, 5);
}

TEST_F(CudaTest, LaunchConfigurationErrors) {
  EXPECT_EQ(spcudaLaunchKernel(Idle, 0, 1, 0, 0, {}), cudaErrorInvalidConfiguration);
  EXPECT_EQ(spcudaLaunchKernel(Idle, 1, dim3(1, 0, 1), 0, 0, {}), cudaErrorInvalidConfiguration);
  EXPECT_EQ(spcudaLaunchKernel(Idle, 1, 1025, 0, 0, {}), cudaErrorInvalidConfiguration);
  EXPECT_EQ(spcudaLaunchKernel(Idle, 1, dim3(32, 32, 2), 0, 0, {}), cudaErrorInvalidConfiguration);
  EXPECT_EQ(spcudaLaunchKernel(Idle, dim3(1, 65536), 1, 0, 0, {}), cudaErrorInvalidConfiguration);
  EXPECT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, kForgedStream, {}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(spcudaLaunchEmulatedKernel(1, 1, 0, 0, nullptr, 0, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  // A failed launch still destroys what it was handed.
  static int destroyed = 0;
  auto run = [](void*, const spcudaThreadCoords*) {};
  auto destroy = [](void*) { ++destroyed; };
  EXPECT_EQ(spcudaLaunchEmulatedKernel(0, 1, 0, 0, nullptr, 0, run, nullptr, destroy),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(destroyed, 1);
  // The unsupported real launch says so.
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&Idle), 1, 1, nullptr, 0, 0),
            cudaErrorNotSupported);
}

// ------------------------------------------------------------------ memory

TEST_F(CudaTest, MallocAndFreeErrorCases) {
  EXPECT_EQ(cudaMalloc(nullptr, 4), cudaErrorInvalidValue);
  void* p = reinterpret_cast<void*>(1);
  CUDA_ASSERT_OK(cudaMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMalloc(&p, size_t{2} << 30), cudaErrorMemoryAllocation);
  CUDA_EXPECT_OK(cudaFree(nullptr));
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaMalloc(&p, 4096));
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 8), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaFree(p));
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);

  EXPECT_EQ(cudaMallocAsync(nullptr, 16, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocAsync(&p, 16, kForgedStream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFreeAsync(&on_stack, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocFromPoolAsync(&p, 16, kForgedPool, 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMallocFromPoolAsync(nullptr, 16, kForgedPool, 0), cudaErrorInvalidValue);

  EXPECT_EQ(cudaMallocHost(nullptr, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostAlloc(&p, 16, 0x100), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaHostAlloc(&p, 100, cudaHostAllocPortable | cudaHostAllocMapped));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100);                         // touchable
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // cudaFreeHost's
  CUDA_ASSERT_OK(cudaFreeHost(p));
  EXPECT_EQ(cudaFreeHost(&on_stack), cudaErrorInvalidValue);
  CUDA_EXPECT_OK(cudaFreeHost(nullptr));
  float* typed = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&typed, 4 * sizeof(float)));
  CUDA_ASSERT_OK(cudaFreeHost(typed));
}

TEST_F(CudaTest, CopyAndSetErrorCases) {
  char host[64] = {};
  void* dev = nullptr;
  CUDA_ASSERT_OK(cudaMalloc(&dev, 64));
  EXPECT_EQ(cudaMemcpy(dev, host, 64, static_cast<cudaMemcpyKind>(7)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpyAsync(dev, host, 64, static_cast<cudaMemcpyKind>(5), 0),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(nullptr, host, 64, cudaMemcpyDefault), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dev, host, 64, cudaMemcpyDefault, kForgedStream),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemset(nullptr, 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 4, kForgedStream), cudaErrorInvalidResourceHandle);
  CUDA_EXPECT_OK(cudaMemcpy(dev, host, 0, cudaMemcpyHostToDevice));

  CUDA_ASSERT_OK(cudaMemset(dev, 0x5a, 64));
  CUDA_ASSERT_OK(cudaMemcpy(host, dev, 64, cudaMemcpyDeviceToHost));
  for (char c : host) ASSERT_EQ(c, 0x5a);
  // cudaMemset of pinned host memory is done when it returns.
  char* pinned = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&pinned, 64));
  CUDA_ASSERT_OK(cudaMemset(pinned, 0x33, 64));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(pinned[i], 0x33);
  CUDA_EXPECT_OK(cudaFreeHost(pinned));
  CUDA_EXPECT_OK(cudaFree(dev));
}

TEST_F(CudaTest, PointerAttributes) {
  void* dev = nullptr;
  void* host = nullptr;
  CUDA_ASSERT_OK(cudaMalloc(&dev, 256));
  CUDA_ASSERT_OK(cudaMallocHost(&host, 256));
  cudaPointerAttributes a;
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&a, static_cast<char*>(dev) + 10));
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.hostPointer, nullptr);
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&a, host));
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, host);
  int on_stack = 0;
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&a, &on_stack));
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, dev), cudaErrorInvalidValue);
  CUDA_EXPECT_OK(cudaFree(dev));
  CUDA_EXPECT_OK(cudaFreeHost(host));
}

// ------------------------------------------------------------------- pools

TEST_F(CudaTest, PoolErrorCases) {
  cudaMemPool_t pool;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetMemPool(&pool, -1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceSetMemPool(0, kForgedPool), cudaErrorInvalidResourceHandle);

  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  EXPECT_EQ(cudaMemPoolCreate(nullptr, &props), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolCreate(&pool, nullptr), cudaErrorInvalidValue);
  cudaMemPoolProps bad = props;
  bad.allocType = cudaMemAllocationTypeInvalid;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &bad), cudaErrorInvalidValue);
  bad = props;
  bad.location.id = 3;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &bad), cudaErrorInvalidDevice);
  bad = props;
  bad.location.type = cudaMemLocationTypeInvalid;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &bad), cudaErrorInvalidValue);
  bad = props;
  bad.reserved[3] = 1;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &bad), cudaErrorInvalidValue);
  bad = props;
  bad.handleTypes = cudaMemHandleTypeFabric;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &bad), cudaErrorNotSupported);

  CUDA_ASSERT_OK(cudaMemPoolCreate(&pool, &props));
  int on = 0;
  uint64_t bytes = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, nullptr),
            cudaErrorInvalidValue);
  // streampool's own attributes (0x1000 up) are not CUDA's, nor is anything
  // past CUDA's last.
  for (int attr : {15, 0x1000, 0x1001}) {
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, static_cast<cudaMemPoolAttr>(attr), &on),
              cudaErrorInvalidValue)
        << attr;
  }
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, static_cast<cudaMemPoolAttr>(0), &on),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(kForgedPool, cudaMemPoolAttrReleaseThreshold, &bytes),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &bytes),
            cudaErrorInvalidValue);  // read-only
  CUDA_ASSERT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on));
  EXPECT_EQ(on, 1);
  EXPECT_EQ(cudaMemPoolTrimTo(kForgedPool, 0), cudaErrorInvalidResourceHandle);

  cudaMemAccessDesc desc = {};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = 0;
  desc.flags = static_cast<cudaMemAccessFlags>(2);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, nullptr, 1), cudaErrorInvalidValue);
  cudaMemAccessFlags flags;
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  CUDA_ASSERT_OK(cudaMemPoolGetAccess(&flags, pool, &loc));
  EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);
  EXPECT_EQ(cudaMemPoolGetAccess(nullptr, pool, &loc), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolGetAccess(&flags, pool, nullptr), cudaErrorInvalidValue);
  loc.type = cudaMemLocationTypeHostNuma;
  EXPECT_EQ(cudaMemPoolGetAccess(&flags, pool, &loc), cudaErrorNotSupported);

  int fd = -1;
  // Not exportable: it was made without handle types.
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypeWin32, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolImportFromShareableHandle(nullptr, nullptr,
                                                 cudaMemHandleTypePosixFileDescriptor, 0),
            cudaErrorInvalidValue);
  cudaMemPoolPtrExportData data;
  int on_stack = 0;
  EXPECT_EQ(cudaMemPoolExportPointer(nullptr, &on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolExportPointer(&data, &on_stack), cudaErrorInvalidValue);
  void* p = nullptr;
  EXPECT_EQ(cudaMemPoolImportPointer(&p, pool, nullptr), cudaErrorInvalidValue);

  cudaMemPool_t def;
  CUDA_ASSERT_OK(cudaDeviceGetDefaultMemPool(&def, 0));
  EXPECT_EQ(cudaMemPoolDestroy(def), cudaErrorInvalidValue);  // the default pool
  CUDA_ASSERT_OK(cudaMemPoolDestroy(pool));
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaErrorInvalidResourceHandle);
}

TEST_F(CudaTest, CurrentPoolServesMallocAsyncAndStatisticsAreCudas) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  cudaMemPool_t pool, current;
  CUDA_ASSERT_OK(cudaMemPoolCreate(&pool, &props));
  CUDA_ASSERT_OK(cudaDeviceSetMemPool(0, pool));
  CUDA_ASSERT_OK(cudaDeviceGetMemPool(&current, 0));
  EXPECT_EQ(current, pool);
  cudaStream_t s;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  void* p = nullptr;
  CUDA_ASSERT_OK(cudaMallocAsync(&p, 1 << 20, s));
  uint64_t used = 0, reserved = 0;
  CUDA_ASSERT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  CUDA_ASSERT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  EXPECT_GE(used, uint64_t{1} << 20);
  EXPECT_GE(reserved, used);
  CUDA_ASSERT_OK(cudaFreeAsync(p, s));
  CUDA_ASSERT_OK(cudaStreamSynchronize(s));
  // Release threshold 0 (CUDA's default): the synchronize gave it back.
  CUDA_ASSERT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  EXPECT_EQ(reserved, 0u);
  CUDA_EXPECT_OK(cudaStreamDestroy(s));
  CUDA_EXPECT_OK(cudaMemPoolDestroy(pool));
}

TEST_F(CudaTest, NotSupportedFunctionsSaySo) {
  void* p = nullptr;
  EXPECT_EQ(cudaMemPrefetchAsync(p, 64, 0, 0), cudaErrorNotSupported);
  cudaIpcMemHandle_t h;
  EXPECT_EQ(cudaIpcGetMemHandle(&h, p), cudaErrorNotSupported);
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, 0), cudaErrorNotSupported);
  EXPECT_EQ(cudaIpcCloseMemHandle(p), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
}

// ---------------------------------------------------- the implicit runtime

TEST_F(CudaTest, ResetDestroysEverythingAndRereadsTheEnvironment) {
  cudaStream_t s;
  CUDA_ASSERT_OK(cudaStreamCreate(&s));
  void* p = nullptr;
  CUDA_ASSERT_OK(cudaMalloc(&p, 4096));
  CUDA_ASSERT_OK(cudaDeviceReset());
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);

  setenv("STREAMPOOL_CUDA_DEVICES", "3", 1);
  setenv("STREAMPOOL_CUDA_CAPACITY", "64M", 1);
  setenv("STREAMPOOL_CUDA_KERNEL_NS", "5000", 1);
  CUDA_ASSERT_OK(cudaDeviceReset());
  int count = 0;
  CUDA_ASSERT_OK(cudaGetDeviceCount(&count));
  EXPECT_EQ(count, 3);
  CUDA_ASSERT_OK(cudaSetDevice(2));
  size_t free = 0, total = 0;
  CUDA_ASSERT_OK(cudaMemGetInfo(&free, &total));
  EXPECT_EQ(total, size_t{64} << 20);
  int can = 0;
  CUDA_ASSERT_OK(cudaDeviceCanAccessPeer(&can, 2, 0));
  EXPECT_EQ(can, 1);
  CUDA_EXPECT_OK(cudaDeviceEnablePeerAccess(0, 0));
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 1), cudaErrorInvalidValue);
  CUDA_EXPECT_OK(cudaDeviceDisablePeerAccess(0));
  EXPECT_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
  cudaEvent_t a, b;
  CUDA_ASSERT_OK(cudaEventCreate(&a));
  CUDA_ASSERT_OK(cudaEventCreate(&b));
  CUDA_ASSERT_OK(cudaEventRecord(a, 0));
  ASSERT_EQ(spcudaLaunchKernel(Idle, 1, 1, 0, 0, {}), cudaSuccess);
  CUDA_ASSERT_OK(cudaEventRecord(b, 0));
  CUDA_ASSERT_OK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_ASSERT_OK(cudaEventElapsedTime(&ms, a, b));
  EXPECT_FLOAT_EQ(ms, 0.005f);

  // Fewer devices after a reset: the thread's device 2 is no longer valid.
  setenv("STREAMPOOL_CUDA_DEVICES", "1", 1);
  CUDA_ASSERT_OK(cudaDeviceReset());
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorInvalidDevice);
  CUDA_EXPECT_OK(cudaSetDevice(0));
  unsetenv("STREAMPOOL_CUDA_DEVICES");
  unsetenv("STREAMPOOL_CUDA_CAPACITY");
  unsetenv("STREAMPOOL_CUDA_KERNEL_NS");
}

TEST_F(CudaTest, MalformedEnvironmentFallsBackWithAMessage) {
  setenv("STREAMPOOL_CUDA_CAPACITY", "lots", 1);
  setenv("STREAMPOOL_CUDA_EXECUTOR", "gpu", 1);
  CUDA_ASSERT_OK(cudaDeviceReset());
  ::testing::internal::CaptureStderr();
  size_t free = 0, total = 0;
  const cudaError_t e = cudaMemGetInfo(&free, &total);
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("STREAMPOOL_CUDA_CAPACITY");
  unsetenv("STREAMPOOL_CUDA_EXECUTOR");
  ASSERT_EQ(e, cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 30);
  EXPECT_THAT(err, HasSubstr("STREAMPOOL_CUDA_CAPACITY='lots'"));
  EXPECT_THAT(err, HasSubstr("STREAMPOOL_CUDA_EXECUTOR='gpu'"));
}

// The threads executor: kernels run on the stream's worker thread and see
// their own coordinates there.
TEST_F(CudaTest, ThreadsExecutorRunsKernelsOnWorkers) {
  setenv("STREAMPOOL_CUDA_EXECUTOR", "threads", 1);
  setenv("STREAMPOOL_CUDA_KERNEL_NS", "0", 1);
  CUDA_ASSERT_OK(cudaDeviceReset());
  constexpr int n = 4096;
  int* counts = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&counts, sizeof(int)));
  *counts = 0;
  cudaStream_t s1, s2;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  auto count = [](int* c) { atomicAdd(c, 1); };
  for (cudaStream_t s : {s1, s2}) {
    ASSERT_EQ(spcudaLaunchKernel(count, n / 256, 256, 0, s, {{counts, sizeof(int), 1}}, counts),
              cudaSuccess);
  }
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_EQ(*counts, 2 * n);
  CUDA_EXPECT_OK(cudaStreamDestroy(s1));
  CUDA_EXPECT_OK(cudaStreamDestroy(s2));
  CUDA_EXPECT_OK(cudaFreeHost(counts));
  unsetenv("STREAMPOOL_CUDA_EXECUTOR");
  unsetenv("STREAMPOOL_CUDA_KERNEL_NS");
}

}  // namespace
