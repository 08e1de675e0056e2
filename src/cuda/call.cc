#include "src/cuda/call.h"

namespace streampool::internal::cuda {

compat::Context& CudaContext() {
  // Leaked: threads exiting after static destruction still find it.
  static compat::Context* context = new compat::Context("STREAMPOOL_CUDA_");
  return *context;
}

cudaError_t Record(cudaError_t e) noexcept {
  if (e == cudaSuccess || e == cudaErrorNotReady) return e;
  try {
    CudaContext().Thread().last_error = e;
  } catch (...) {
    // No memory for the thread's state: the code still reaches the caller.
  }
  return e;
}

cudaError_t Call::Begin() {
  absl::StatusOr<std::shared_ptr<compat::ProcessRuntime>> rt = CudaContext().Acquire();
  if (!rt.ok()) {
    return rt.status().code() == absl::StatusCode::kFailedPrecondition
               ? cudaErrorCudartUnloading
               : cudaErrorInitializationError;
  }
  rt_ = *std::move(rt);
  thread_ = &CudaContext().Thread();
  if (rt_->fault() != compat::Fault::kNone) return cudaErrorLaunchFailure;
  return cudaSuccess;
}

cudaError_t Call::CheckDevice(int device) const {
  return device >= 0 && device < rt_->device_count() ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t Call::Device(int* device) const {
  *device = thread_->device;
  return CheckDevice(*device);
}

cudaError_t Call::Stream(cudaStream_t stream, spStream_t* out) const {
  if (stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread) {
    *out = reinterpret_cast<spStream_t>(stream);
    return cudaSuccess;
  }
  int device = 0;
  if (cudaError_t e = Device(&device); e != cudaSuccess) return e;
  if (stream == cudaStreamPerThread) {
    absl::StatusOr<StreamId> s = CudaContext().PerThreadStream(*rt_, device);
    if (!s.ok()) return FromStatus(s.status());
    *out = s->c();
    return cudaSuccess;
  }
  return FromSp(spStreamGetLegacy(out, c(), device));
}

}  // namespace streampool::internal::cuda
