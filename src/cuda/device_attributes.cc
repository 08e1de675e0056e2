#include "src/cuda/device_attributes.h"

#include <cstdio>

#include "src/compat/face.h"

namespace streampool::internal::cuda {

namespace {

int HandleTypes(const compat::CompatConfig& config) {
  // Exportable pools live in a memfd, which address-only backing has not.
  return config.backing == Backing::kHost ? cudaMemHandleTypePosixFileDescriptor
                                          : cudaMemHandleTypeNone;
}

}  // namespace

cudaError_t DeviceAttribute(const compat::CompatConfig& config, int device, cudaDeviceAttr attr,
                            int* value) {
  switch (static_cast<int>(compat::Raw(attr))) {
    case cudaDevAttrMaxThreadsPerBlock:
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrMaxBlockDimZ:
      *value = 64;
      return cudaSuccess;
    case cudaDevAttrMaxGridDimX:
      *value = 2147483647;
      return cudaSuccess;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ:
      *value = 65535;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = 48 * 1024;
      return cudaSuccess;
    case cudaDevAttrTotalConstantMemory:
      *value = 64 * 1024;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMaxPitch:
      *value = 2147483647;
      return cudaSuccess;
    case cudaDevAttrMaxRegistersPerBlock:
      *value = 65536;
      return cudaSuccess;
    case cudaDevAttrClockRate:
      *value = 1410000;  // kHz
      return cudaSuccess;
    case cudaDevAttrTextureAlignment:
      *value = 512;
      return cudaSuccess;
    case cudaDevAttrGpuOverlap:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrMemoryPoolsSupported:
      *value = 1;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 108;
      return cudaSuccess;
    case cudaDevAttrKernelExecTimeout:
    case cudaDevAttrIntegrated:
    case cudaDevAttrEccEnabled:
    case cudaDevAttrPciDeviceId:
    case cudaDevAttrPciDomainId:
    // No managed memory (cudaMallocManaged is not supported).
    case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentManagedAccess:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrComputeMode:
      *value = cudaComputeModeDefault;
      return cudaSuccess;
    case cudaDevAttrPciBusId:
      *value = device;
      return cudaSuccess;
    case cudaDevAttrMemoryClockRate:
      *value = 1215000;  // kHz
      return cudaSuccess;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 5120;
      return cudaSuccess;
    case cudaDevAttrL2CacheSize:
      *value = 40 * 1024 * 1024;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = 164 * 1024;
      return cudaSuccess;
    case cudaDevAttrMaxRegistersPerMultiprocessor:
      *value = 65536;
      return cudaSuccess;
    case cudaDevAttrMaxBlocksPerMultiprocessor:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrAsyncEngineCount:
      *value = 2;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 8;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMemoryPoolSupportedHandleTypes:
      *value = HandleTypes(config);
      return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

void DeviceProperties(const compat::CompatConfig& config, int device, cudaDeviceProp* prop) {
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "streampool simulated device %d", device);
  prop->totalGlobalMem = config.device_capacity;
  // Every int field from the attribute it mirrors, so the two never disagree.
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    DeviceAttribute(config, device, a, &v);
    return v;
  };
  prop->sharedMemPerBlock = attr(cudaDevAttrMaxSharedMemoryPerBlock);
  prop->regsPerBlock = attr(cudaDevAttrMaxRegistersPerBlock);
  prop->warpSize = attr(cudaDevAttrWarpSize);
  prop->memPitch = attr(cudaDevAttrMaxPitch);
  prop->maxThreadsPerBlock = attr(cudaDevAttrMaxThreadsPerBlock);
  prop->maxThreadsDim[0] = attr(cudaDevAttrMaxBlockDimX);
  prop->maxThreadsDim[1] = attr(cudaDevAttrMaxBlockDimY);
  prop->maxThreadsDim[2] = attr(cudaDevAttrMaxBlockDimZ);
  prop->maxGridSize[0] = attr(cudaDevAttrMaxGridDimX);
  prop->maxGridSize[1] = attr(cudaDevAttrMaxGridDimY);
  prop->maxGridSize[2] = attr(cudaDevAttrMaxGridDimZ);
  prop->clockRate = attr(cudaDevAttrClockRate);
  prop->totalConstMem = attr(cudaDevAttrTotalConstantMemory);
  prop->major = attr(cudaDevAttrComputeCapabilityMajor);
  prop->minor = attr(cudaDevAttrComputeCapabilityMinor);
  prop->textureAlignment = attr(cudaDevAttrTextureAlignment);
  prop->deviceOverlap = attr(cudaDevAttrGpuOverlap);
  prop->multiProcessorCount = attr(cudaDevAttrMultiProcessorCount);
  prop->kernelExecTimeoutEnabled = attr(cudaDevAttrKernelExecTimeout);
  prop->integrated = attr(cudaDevAttrIntegrated);
  prop->canMapHostMemory = attr(cudaDevAttrCanMapHostMemory);
  prop->computeMode = attr(cudaDevAttrComputeMode);
  prop->concurrentKernels = attr(cudaDevAttrConcurrentKernels);
  prop->ECCEnabled = attr(cudaDevAttrEccEnabled);
  prop->pciBusID = attr(cudaDevAttrPciBusId);
  prop->pciDeviceID = attr(cudaDevAttrPciDeviceId);
  prop->pciDomainID = attr(cudaDevAttrPciDomainId);
  prop->asyncEngineCount = attr(cudaDevAttrAsyncEngineCount);
  prop->unifiedAddressing = attr(cudaDevAttrUnifiedAddressing);
  prop->memoryClockRate = attr(cudaDevAttrMemoryClockRate);
  prop->memoryBusWidth = attr(cudaDevAttrGlobalMemoryBusWidth);
  prop->l2CacheSize = attr(cudaDevAttrL2CacheSize);
  prop->maxThreadsPerMultiProcessor = attr(cudaDevAttrMaxThreadsPerMultiProcessor);
  prop->sharedMemPerMultiprocessor =
      static_cast<size_t>(attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  prop->regsPerMultiprocessor = attr(cudaDevAttrMaxRegistersPerMultiprocessor);
  prop->managedMemory = attr(cudaDevAttrManagedMemory);
  prop->isMultiGpuBoard = 0;
  prop->concurrentManagedAccess = attr(cudaDevAttrConcurrentManagedAccess);
  prop->memoryPoolsSupported = attr(cudaDevAttrMemoryPoolsSupported);
  prop->memoryPoolSupportedHandleTypes =
      static_cast<unsigned>(attr(cudaDevAttrMemoryPoolSupportedHandleTypes));
}

}  // namespace streampool::internal::cuda
