// How a cuda* entry point runs: against the CUDA face's implicit runtime,
// with no exception crossing it, and with its error recorded as the calling
// thread's last error.
#ifndef STREAMPOOL_SRC_CUDA_CALL_H_
#define STREAMPOOL_SRC_CUDA_CALL_H_

#include <memory>
#include <new>

#include "src/compat/context.h"
#include "src/cuda/errors.h"
#include "streampool/cuda/driver_types.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::internal::cuda {

// The CUDA face's context: STREAMPOOL_CUDA_* configure its runtime.
compat::Context& CudaContext();

// Makes `e` the thread's last error unless it is a success or a query's
// "not ready", which CUDA does not count as errors.
cudaError_t Record(cudaError_t e) noexcept;

// Runs `body` (returning cudaError_t), turning exceptions into codes and
// recording the result.
template <class Body>
cudaError_t Api(Body&& body) noexcept {
  cudaError_t e;
  try {
    e = body();
  } catch (const std::bad_alloc&) {
    e = cudaErrorMemoryAllocation;
  } catch (...) {
    e = cudaErrorUnknown;
  }
  return Record(e);
}

// A call that needs the runtime: it holds a reference to it for the call's
// duration, so a concurrent cudaDeviceReset destroys it only afterwards.
class Call {
 public:
  // Acquires (creating if needed) the runtime. cudaErrorCudartUnloading at
  // exit, cudaErrorInitializationError if it cannot be made,
  // cudaErrorLaunchFailure while a failed kernel poisons it.
  cudaError_t Begin();

  compat::ProcessRuntime& rt() const { return *rt_; }
  spRuntime_t c() const { return rt_->c(); }
  compat::ThreadState& thread() const { return *thread_; }
  // The thread's current device, which may be out of range after a reset
  // with fewer devices (cudaErrorInvalidDevice).
  cudaError_t Device(int* device) const;
  cudaError_t CheckDevice(int device) const;
  // What `stream` stands for on this thread: 0 and cudaStreamLegacy the
  // current device's legacy stream, cudaStreamPerThread its per-thread one.
  cudaError_t Stream(cudaStream_t stream, spStream_t* out) const;

 private:
  std::shared_ptr<compat::ProcessRuntime> rt_;
  compat::ThreadState* thread_ = nullptr;
};

// Runs `body(call)` with a begun Call (see Api); a kernel that failed while
// the call ran turns its result into cudaErrorLaunchFailure.
template <class Body>
cudaError_t WithRuntime(Body&& body) noexcept {
  return Api([&]() -> cudaError_t {
    Call call;
    if (cudaError_t e = call.Begin(); e != cudaSuccess) return e;
    const cudaError_t e = body(call);
    if (call.rt().fault() != compat::Fault::kNone) return cudaErrorLaunchFailure;
    return e;
  });
}

inline StreamId ToId(spStream_t s) { return StreamId{reinterpret_cast<uintptr_t>(s)}; }

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_CALL_H_
