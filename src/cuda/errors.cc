#include "src/cuda/errors.h"

#include <cstddef>

namespace streampool::internal::cuda {

namespace {

// One row of a table of codes: the runtime's (cudaError_t) or the driver's
// (CUresult).
template <class Code>
struct CodeInfo {
  Code code;
  const char* name;
  const char* description;
};
using ErrorInfo = CodeInfo<cudaError_t>;
using DriverErrorInfo = CodeInfo<CUresult>;

// Descriptions in our own words; they say what the error means here.
constexpr ErrorInfo kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "an argument is out of its valid range"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation",
     "not enough memory: the pool's limit, the device's capacity or the host ran out"},
    {cudaErrorInitializationError, "cudaErrorInitializationError",
     "the implicit runtime could not be created"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading",
     "the process is exiting and the runtime is gone"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "the launch's grid or block extents are not valid"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "a pitch is not valid"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "a symbol is not valid"},
    {cudaErrorInvalidHostPointer, "cudaErrorInvalidHostPointer", "a host pointer is not valid"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer",
     "a device pointer is not valid"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "the copy's direction is not a cudaMemcpyKind"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "the driver is too old"},
    {cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration",
     "a launch without a configuration"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
     "the function is not a kernel"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no device is available"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "no such device, or not a valid one here"},
    {cudaErrorStartupFailure, "cudaErrorStartupFailure", "the runtime failed to start"},
    {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage", "the kernel image is not valid"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "the device has no context"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
     "the devices cannot access each other's memory"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "a stream, event or pool handle is destroyed, foreign or of the wrong kind"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation is not valid in this state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "a symbol was not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "work is still pending (not an error)"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "a kernel accessed an illegal address"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too few resources for the launch"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "a kernel ran too long"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled",
     "peer access was already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access was not enabled"},
    {cudaErrorSetOnActiveProcess, "cudaErrorSetOnActiveProcess",
     "the setting cannot change once the runtime is active"},
    {cudaErrorContextIsDestroyed, "cudaErrorContextIsDestroyed", "the context is destroyed"},
    {cudaErrorAssert, "cudaErrorAssert", "a kernel assertion failed"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "the host memory is already registered"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "the host memory is not registered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure",
     "an emulated kernel failed (threw); the runtime is unusable until cudaDeviceReset"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "the operation is not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported",
     "streampool does not support this function or feature"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "not permitted while the stream (or, by the capture mode, the thread) captures; the capture "
     "is invalidated"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "the capture was invalidated by an earlier error"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "the operation would merge two independent captures"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "the capture was not begun on this stream"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined",
     "a stream forked into the capture was not joined back into its origin"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "a dependency would cross the capture's boundary"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "the legacy stream would depend on a capture"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "the event was recorded in a capture and cannot be queried or waited for"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "a Global or ThreadLocal capture was ended on another thread"},
    {cudaErrorGraphExecUpdateFailure, "cudaErrorGraphExecUpdateFailure",
     "the graph differs from the executable graph's in a way an update cannot carry"},
    {cudaErrorUnknown, "cudaErrorUnknown", "an internal error of no other kind"},
};

// The driver's codes (include/streampool/cuda/cuda.h), in the same words
// where the runtime's code of the same number means the same.

constexpr DriverErrorInfo kDriverErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "an argument is out of its valid range"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
     "not enough memory: the pool's limit, the device's capacity or the host ran out"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "the driver is not initialized: neither cuInit nor a runtime call came first, or the "
     "implicit runtime could not be created"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED",
     "the process is exiting and the runtime is gone"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no device is available"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "no such device, or not a valid one here"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "the context is not valid"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "the devices cannot access each other's memory"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "a stream, event or pool handle is destroyed, foreign or of the wrong kind"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "a named symbol was not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "work is still pending (not an error)"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "a kernel accessed an illegal address"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "an emulated kernel failed (threw); the runtime is unusable until cudaDeviceReset"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "streampool does not support this function or feature"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "an internal error of no other kind"},
};

template <class Code, size_t N>
const CodeInfo<Code>* Find(const CodeInfo<Code> (&table)[N], Code e) {
  for (const CodeInfo<Code>& info : table) {
    if (info.code == e) return &info;
  }
  return nullptr;
}

const ErrorInfo* Find(cudaError_t e) { return Find(kErrors, e); }
const DriverErrorInfo* Find(CUresult e) { return Find(kDriverErrors, e); }

}  // namespace

const char* ErrorName(cudaError_t e) {
  const ErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->name;
}

const char* ErrorDescription(cudaError_t e) {
  const ErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->description;
}

const char* DriverErrorName(CUresult e) {
  const DriverErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->name;
}

const char* DriverErrorDescription(CUresult e) {
  const DriverErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->description;
}

}  // namespace streampool::internal::cuda
