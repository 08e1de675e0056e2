// How a cuda* entry point runs: the face kit (src/compat/face.h) with CUDA's
// codes. STREAMPOOL_CUDA_* configure the implicit runtime; every failing call
// but a query's cudaErrorNotReady becomes the thread's last error.
#ifndef STREAMPOOL_SRC_CUDA_CALL_H_
#define STREAMPOOL_SRC_CUDA_CALL_H_

#include "src/compat/face.h"
#include "streampool/cuda/driver_types.h"
#include "streampool/streampool.h"

namespace streampool::internal::cuda {

struct CudaFace {
  using Error = cudaError_t;
  using Stream = cudaStream_t;

  static constexpr char kEnvPrefix[] = "STREAMPOOL_CUDA_";
  static constexpr Error kSuccess = cudaSuccess;
  // spError_t's values are CUDA's numbers for the same conditions.
  static constexpr compat::SpErrorCode<Error> kSpErrors[] = {
      {spSuccess, cudaSuccess},
      {spErrorInvalidValue, cudaErrorInvalidValue},
      {spErrorMemoryAllocation, cudaErrorMemoryAllocation},
      {spErrorInvalidDevice, cudaErrorInvalidDevice},
      {spErrorPeerAccessUnsupported, cudaErrorPeerAccessUnsupported},
      {spErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle},
      {spErrorNotReady, cudaErrorNotReady},
      {spErrorHostMemoryAlreadyRegistered, cudaErrorHostMemoryAlreadyRegistered},
      {spErrorHostMemoryNotRegistered, cudaErrorHostMemoryNotRegistered},
      {spErrorNotSupported, cudaErrorNotSupported},
      {spErrorIllegalState, cudaErrorIllegalState},
      {spErrorStreamCaptureUnsupported, cudaErrorStreamCaptureUnsupported},
      {spErrorStreamCaptureInvalidated, cudaErrorStreamCaptureInvalidated},
      {spErrorStreamCaptureMerge, cudaErrorStreamCaptureMerge},
      {spErrorStreamCaptureUnmatched, cudaErrorStreamCaptureUnmatched},
      {spErrorStreamCaptureUnjoined, cudaErrorStreamCaptureUnjoined},
      {spErrorStreamCaptureIsolation, cudaErrorStreamCaptureIsolation},
      {spErrorStreamCaptureImplicit, cudaErrorStreamCaptureImplicit},
      {spErrorCapturedEvent, cudaErrorCapturedEvent},
      {spErrorStreamCaptureWrongThread, cudaErrorStreamCaptureWrongThread},
      {spErrorGraphExecUpdateFailure, cudaErrorGraphExecUpdateFailure},
      {spErrorUnknown, cudaErrorUnknown},
  };
  static constexpr Error kInternal = cudaErrorUnknown;
  static constexpr Error kOutOfHostMemory = cudaErrorMemoryAllocation;
  // CUDA does not count a query's "not ready" as an error.
  static constexpr Error kNotErrors[] = {cudaSuccess, cudaErrorNotReady};
  static constexpr Error kUnloading = cudaErrorCudartUnloading;
  static constexpr Error kInitFailed = cudaErrorInitializationError;
  static constexpr Error kKernelFault = cudaErrorLaunchFailure;
  static constexpr Error kInvalidDevice = cudaErrorInvalidDevice;
  static constexpr Error kInvalidArgument = cudaErrorInvalidValue;

  // 0 and cudaStreamLegacy are the current device's legacy stream,
  // cudaStreamPerThread its per-thread one.
  static compat::DefaultStream Classify(cudaStream_t stream) {
    if (stream == nullptr || stream == cudaStreamLegacy) return compat::DefaultStream::kLegacy;
    if (stream == cudaStreamPerThread) return compat::DefaultStream::kPerThread;
    return compat::DefaultStream::kNone;
  }
};
static_assert(compat::FaceTraits<CudaFace>);

// The kit under the names the face's code uses.
using Call = compat::Call<CudaFace>;
inline constexpr compat::GuardedCall<CudaFace> Api{};
inline constexpr compat::RuntimeCall<CudaFace> WithRuntime{};
inline constexpr compat::SpErrorMap<CudaFace> FromSp{};
inline constexpr compat::StatusMap<CudaFace> FromStatus{};
inline compat::Context& CudaContext() { return compat::FaceContext<CudaFace>(); }

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_CALL_H_
