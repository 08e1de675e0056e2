// What a simulated device reports to cudaDeviceGetAttribute and
// cudaGetDeviceProperties: an Ampere-class GPU (compute capability 8.0) with
// the configured capacity, supporting memory pools and, where pools can be
// exported (host backing), POSIX file descriptor handles. Plausible numbers,
// so that programs that size their launches from them behave; nothing in the
// simulation depends on them.
#ifndef STREAMPOOL_SRC_CUDA_DEVICE_ATTRIBUTES_H_
#define STREAMPOOL_SRC_CUDA_DEVICE_ATTRIBUTES_H_

#include "src/compat/env_config.h"
#include "streampool/cuda/driver_types.h"

namespace streampool::internal::cuda {

// cudaErrorInvalidValue for an attribute not in cudaDeviceAttr.
cudaError_t DeviceAttribute(const compat::CompatConfig& config, int device, cudaDeviceAttr attr,
                            int* value);
// Fills every field of *prop.
void DeviceProperties(const compat::CompatConfig& config, int device, cudaDeviceProp* prop);

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_DEVICE_ATTRIBUTES_H_
