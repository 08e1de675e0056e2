// The CUDA executor's driver side: the machine's CUDA devices through the
// driver API, loaded at run time (dlopen("libcuda.so.1"), entry points from
// cuGetProcAddress), so nothing links against libcuda and a machine without
// a driver builds, loads and runs everything else. One CudaDriver serves a
// runtime: it is the StreamAdapter of its AdapterExecutor (streams are
// CUstreams, markers CUevents), the NativeWork that launches kernels, copies,
// fills and host functions, and the source of its upstreams (device memory
// through the VMM API, page-locked host memory).
#ifndef STREAMPOOL_SRC_EXEC_CUDA_EXECUTOR_H_
#define STREAMPOOL_SRC_EXEC_CUDA_EXECUTOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "src/exec/native_work.h"
#include "streampool/physical_memory.h"
#include "streampool/stream_adapter.h"

namespace streampool::internal {

class CudaDriver : public StreamAdapter, public NativeWork {
 public:
  using NativeStream = StreamAdapter::NativeStream;
  using Marker = StreamAdapter::Marker;

  // Loads the driver and opens `device_count` devices (0: every visible one)
  // with their primary contexts. Errors carry the C API's codes as payload
  // (kCErrorPayload): spErrorInsufficientDriver (no library, too old, failing
  // to initialize), spErrorNoDevice, spErrorInvalidDevice (more devices asked
  // for than there are). Nothing stays loaded or retained on an error.
  static absl::StatusOr<std::shared_ptr<CudaDriver>> Open(int device_count);

  virtual int device_count() const = 0;
  virtual uint64_t total_memory(int device) const = 0;
  // Bytes the driver reports free on the device now (cuMemGetInfo).
  virtual absl::StatusOr<uint64_t> free_memory(int device) = 0;

  // Device memory of `device`: chunks from cuMemAlloc, and (where the device
  // supports virtual memory management at a granularity dividing 2 MiB)
  // reservations mapped granule by granule with cuMemCreate and cuMemMap.
  virtual std::unique_ptr<PhysicalMemory> NewDeviceMemory(int device) = 0;
  // Page-locked host memory (cuMemHostAlloc, portable to every context).
  virtual std::unique_ptr<PhysicalMemory> NewPinnedHostMemory() = 0;
  // Lets `peer` read and write `device`'s memory mapped by `memory` (one of
  // this driver's NewDeviceMemory), now and at every later map.
  virtual absl::Status GrantAccess(PhysicalMemory& memory, int peer) = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_EXEC_CUDA_EXECUTOR_H_
