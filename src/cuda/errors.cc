#include "src/cuda/errors.h"

namespace streampool::internal::cuda {

namespace {

struct ErrorInfo {
  cudaError_t code;
  const char* name;
  const char* description;
};

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
    {cudaErrorUnknown, "cudaErrorUnknown", "an internal error of no other kind"},
};

const ErrorInfo* Find(cudaError_t e) {
  for (const ErrorInfo& info : kErrors) {
    if (info.code == e) return &info;
  }
  return nullptr;
}

}  // namespace

const char* ErrorName(cudaError_t e) {
  const ErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->name;
}

const char* ErrorDescription(cudaError_t e) {
  const ErrorInfo* info = Find(e);
  return info == nullptr ? nullptr : info->description;
}

}  // namespace streampool::internal::cuda
