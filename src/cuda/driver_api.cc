// The cu* functions of include/streampool/cuda/cuda.h: the driver's device
// queries and error strings, over the runtime the cuda* functions use. They
// share the runtime's checks (src/cuda/device_attributes.h) and answer with
// the driver's codes, which have the runtime's numbers.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "src/cuda/call.h"
#include "src/cuda/device_attributes.h"
#include "src/cuda/errors.h"
#include "streampool/cuda/cuda.h"
#include "streampool/cuda/cuda_runtime_api.h"

using streampool::internal::cuda::Call;
using streampool::internal::cuda::CudaContext;

namespace {

// The runtime's codes a driver call can meet, and the driver's of the same
// number (CUDA numbers the two alike), so that a cast is the translation.
static_assert(CUDA_ERROR_INVALID_VALUE == static_cast<int>(cudaErrorInvalidValue));
static_assert(CUDA_ERROR_OUT_OF_MEMORY == static_cast<int>(cudaErrorMemoryAllocation));
static_assert(CUDA_ERROR_NOT_INITIALIZED == static_cast<int>(cudaErrorInitializationError));
static_assert(CUDA_ERROR_DEINITIALIZED == static_cast<int>(cudaErrorCudartUnloading));
static_assert(CUDA_ERROR_INVALID_DEVICE == static_cast<int>(cudaErrorInvalidDevice));
static_assert(CUDA_ERROR_LAUNCH_FAILED == static_cast<int>(cudaErrorLaunchFailure));
static_assert(CUDA_ERROR_UNKNOWN == static_cast<int>(cudaErrorUnknown));
// And the attributes: the driver's enum names the runtime's numbers.
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE == static_cast<int>(cudaDevAttrComputeMode));
static_assert(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES ==
              static_cast<int>(cudaDevAttrMemoryPoolSupportedHandleTypes));
static_assert(CU_COMPUTEMODE_PROHIBITED == static_cast<int>(cudaComputeModeProhibited));

// CUDA's driver is initialized by cuInit or by the runtime's first call, and
// stays so until the process exits (also across cudaDeviceReset).
std::atomic<bool> driver_initialized{false};

CUresult ToDriver(cudaError_t e) { return static_cast<CUresult>(e); }

// Runs `body(call)` with the runtime, as a cuda* call does, but the result
// does not become the thread's last error: the driver API has none. Unless
// `initializes` (cuInit), a call before the driver is initialized is
// CUDA_ERROR_NOT_INITIALIZED.
template <class Body>
CUresult DriverCall(bool initializes, Body&& body) noexcept {
  try {
    if (!initializes && !driver_initialized.load(std::memory_order_acquire) &&
        CudaContext().Current() == nullptr) {
      return CUDA_ERROR_NOT_INITIALIZED;
    }
    Call call;
    if (const cudaError_t e = call.Begin(); e != cudaSuccess) return ToDriver(e);
    driver_initialized.store(true, std::memory_order_release);
    return ToDriver(body(call));
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

// cuGetErrorName and cuGetErrorString: `lookup` is one of the tables'.
CUresult ErrorText(CUresult error, const char** pStr, const char* (*lookup)(CUresult)) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = lookup(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

}  // namespace

CUresult cuInit(unsigned int Flags) noexcept {
  return DriverCall(/*initializes=*/true,
                    [&](Call&) { return Flags == 0 ? cudaSuccess : cudaErrorInvalidValue; });
}

CUresult cuDriverGetVersion(int* driverVersion) noexcept {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDART_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) noexcept {
  return DriverCall(false, [&](Call& call) {
    if (count == nullptr) return cudaErrorInvalidValue;
    *count = call.rt().device_count();
    return cudaSuccess;
  });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) noexcept {
  return DriverCall(false, [&](Call& call) {
    if (device == nullptr) return cudaErrorInvalidValue;
    if (const cudaError_t e = call.CheckDevice(ordinal); e != cudaSuccess) return e;
    *device = ordinal;
    return cudaSuccess;
  });
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) noexcept {
  return DriverCall(false, [&](Call& call) {
    if (name == nullptr || len <= 0) return cudaErrorInvalidValue;
    if (const cudaError_t e = call.CheckDevice(dev); e != cudaSuccess) return e;
    cudaDeviceProp prop;
    streampool::internal::cuda::DeviceProperties(call.rt().config(), dev, &prop);
    const size_t n = std::min(std::strlen(prop.name), static_cast<size_t>(len) - 1);
    std::memcpy(name, prop.name, n);
    name[n] = '\0';
    return cudaSuccess;
  });
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) noexcept {
  return DriverCall(false, [&](Call& call) {
    if (pi == nullptr) return cudaErrorInvalidValue;
    if (const cudaError_t e = call.CheckDevice(dev); e != cudaSuccess) return e;
    const auto raw = streampool::internal::compat::Raw(attrib);
    return streampool::internal::cuda::DeviceAttribute(call.rt().config(), dev,
                                                       static_cast<cudaDeviceAttr>(raw), pi);
  });
}

CUresult cuGetErrorName(CUresult error, const char** pStr) noexcept {
  return ErrorText(error, pStr, &streampool::internal::cuda::DriverErrorName);
}

CUresult cuGetErrorString(CUresult error, const char** pStr) noexcept {
  return ErrorText(error, pStr, &streampool::internal::cuda::DriverErrorDescription);
}
