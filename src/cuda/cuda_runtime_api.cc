// The cuda* functions of include/streampool/cuda/cuda_runtime_api.h over the
// sp* API. Each checks what CUDA checks before anything changes, so a failed
// call changes nothing, and answers with CUDA's code.
#include "streampool/cuda/cuda_runtime_api.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "src/cuda/call.h"
#include "src/cuda/device_attributes.h"
#include "src/cuda/errors.h"
#include "src/cuda/locations.h"
#include "streampool/streampool.h"

using streampool::internal::cuda::Api;
using streampool::internal::cuda::Call;
using streampool::internal::cuda::CudaContext;
using streampool::internal::cuda::CudaFace;
using streampool::internal::cuda::FromSp;
using streampool::internal::cuda::FromStatus;
using streampool::internal::cuda::ToSpAccessDescs;
using streampool::internal::cuda::ToSpLocation;
using streampool::internal::cuda::WithRuntime;

namespace {

spStream_t Sp(cudaStream_t s) { return reinterpret_cast<spStream_t>(s); }
spEvent_t Sp(cudaEvent_t e) { return reinterpret_cast<spEvent_t>(e); }
spMemPool_t Sp(cudaMemPool_t p) { return reinterpret_cast<spMemPool_t>(p); }

bool IsSpecialStream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

constexpr unsigned kHostAllocFlags =
    cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
constexpr unsigned kEventFlags =
    cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;

// CUDA's pool attributes have the same numbers and value types in the sp*
// API (int or enum for the switches and the placement, cuuint64_t for byte
// counts). The sp-only attributes from 0x1000 up are not CUDA's.
using streampool::internal::compat::Raw;

bool IsCudaPoolAttr(int attr) {
  return attr >= cudaMemPoolReuseFollowEventDependencies &&
         attr <= cudaMemPoolAttrHwDecompressEnabled;
}

cudaError_t NotSupported() { return streampool::internal::compat::NotSupported<CudaFace>(); }

uint64_t Handle(cudaMemPool_t p) { return reinterpret_cast<uintptr_t>(p); }
cudaMemPool_t CudaPool(uint64_t p) { return reinterpret_cast<cudaMemPool_t>(uintptr_t{p}); }

// The memory-location calls (cudaMemGetDefaultMemPool and its kin) take a
// location and an allocation type. Their documented codes are only
// cudaErrorInvalidValue and cudaErrorNotSupported, so a device ordinal out of
// range is an invalid value here, not cudaErrorInvalidDevice. Managed pools
// and NUMA nodes are CUDA's but not streampool's: not supported.
cudaError_t CheckPoolLocation(Call& call, const cudaMemLocation& location,
                              cudaMemAllocationType type) {
  const int raw_type = static_cast<int>(Raw(type));
  if (raw_type == cudaMemAllocationTypeManaged) return cudaErrorNotSupported;
  if (raw_type != cudaMemAllocationTypePinned) return cudaErrorInvalidValue;
  spMemLocation sp;
  if (cudaError_t e = ToSpLocation(location, &sp); e != cudaSuccess) return e;
  if (sp.type == spMemLocationTypeDevice && (sp.id < 0 || sp.id >= call.rt().device_count())) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The host's default pinned pool, made on first request: the sp* runtime has
// default pools for devices only.
cudaError_t HostDefaultPool(Call& call, uint64_t* out) {
  if (uint64_t kept = call.rt().host_default_pool(); kept != 0) {
    *out = kept;
    return cudaSuccess;
  }
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypePinnedHost;
  spMemPool_t made = nullptr;
  if (cudaError_t e = FromSp(spMemPoolCreate(&made, call.c(), &props)); e != cudaSuccess) {
    return e;
  }
  int off = 0;  // CUDA's serving order, as every pool of the face
  spMemPoolSetAttribute(made, spMemPoolAttrWaitBeforeGrowth, &off);
  const uint64_t mine = reinterpret_cast<uintptr_t>(made);
  *out = call.rt().KeepHostDefaultPool(mine);
  // Another thread's pool was kept first: this one is nobody's.
  if (*out != mine) spMemPoolDestroy(made);
  return cudaSuccess;
}

// cudaMemGetDefaultMemPool (current false) and cudaMemGetMemPool (true).
cudaError_t LocationPool(Call& call, cudaMemPool_t* memPool, const cudaMemLocation* location,
                         cudaMemAllocationType type, bool current) {
  if (memPool == nullptr || location == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = CheckPoolLocation(call, *location, type); e != cudaSuccess) return e;
  auto* out = reinterpret_cast<spMemPool_t*>(memPool);
  if (location->type == cudaMemLocationTypeDevice) {
    return FromSp(current ? spDeviceGetMemPool(out, call.c(), location->id)
                          : spDeviceGetDefaultMemPool(out, call.c(), location->id));
  }
  uint64_t pool = current ? call.rt().host_current_pool() : 0;
  if (pool == 0) {
    if (cudaError_t e = HostDefaultPool(call, &pool); e != cudaSuccess) return e;
  }
  *memPool = CudaPool(pool);
  return cudaSuccess;
}

// Whether `pool` is a pinned host pool (not a device's, not an unknown
// handle, which is cudaErrorInvalidValue as cudaMemSetMemPool documents).
cudaError_t CheckHostPool(cudaMemPool_t pool) {
  int type = 0;
  if (spMemPoolGetAttribute(Sp(pool), spMemPoolAttrAllocationType, &type) != spSuccess ||
      type != spMemAllocationTypePinnedHost) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The model behind the occupancy calls: a kernel's registers and static
// shared memory are unknown (there is no device code), so an SM's resident
// blocks are limited by its threads (in whole warps), its block slots and the
// dynamic shared memory each block asks for.
struct SmLimits {
  int threads_per_sm = 0;
  int threads_per_block = 0;
  int blocks_per_sm = 0;
  int smem_per_sm = 0;
  int smem_per_block = 0;
};

SmLimits LimitsOf(Call& call, int device) {
  const auto& config = call.rt().config();
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    streampool::internal::cuda::DeviceAttribute(config, device, a, &v);
    return v;
  };
  return {attr(cudaDevAttrMaxThreadsPerMultiProcessor), attr(cudaDevAttrMaxThreadsPerBlock),
          attr(cudaDevAttrMaxBlocksPerMultiprocessor),
          attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor),
          attr(cudaDevAttrMaxSharedMemoryPerBlock)};
}

int ActiveBlocks(const SmLimits& sm, int block_size, size_t dynamic_smem) {
  if (block_size > sm.threads_per_block || dynamic_smem > size_t(sm.smem_per_block)) return 0;
  const int warp_threads = (block_size + 31) / 32 * 32;
  int blocks = std::min(sm.blocks_per_sm, sm.threads_per_sm / warp_threads);
  if (dynamic_smem > 0) {
    blocks = std::min<int>(blocks, static_cast<int>(size_t(sm.smem_per_sm) / dynamic_smem));
  }
  return blocks;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ errors

cudaError_t cudaGetLastError(void) noexcept {
  return streampool::internal::compat::LastError<CudaFace>(/*clear=*/true);
}

cudaError_t cudaPeekAtLastError(void) noexcept {
  return streampool::internal::compat::LastError<CudaFace>(/*clear=*/false);
}

const char* cudaGetErrorName(cudaError_t error) noexcept {
  const char* name = streampool::internal::cuda::ErrorName(error);
  return name != nullptr ? name : "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) noexcept {
  const char* text = streampool::internal::cuda::ErrorDescription(error);
  return text != nullptr ? text : "unrecognized error code";
}

cudaError_t cudaDriverGetVersion(int* driverVersion) noexcept {
  return Api([&] {
    if (driverVersion == nullptr) return cudaErrorInvalidValue;
    *driverVersion = CUDART_VERSION;
    return cudaSuccess;
  });
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) noexcept {
  return Api([&] {
    if (runtimeVersion == nullptr) return cudaErrorInvalidValue;
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
  });
}

// ----------------------------------------------------------------- devices

cudaError_t cudaSetDevice(int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (cudaError_t e = call.CheckDevice(device); e != cudaSuccess) return e;
    call.thread().device = device;
    return cudaSuccess;
  });
}

cudaError_t cudaGetDevice(int* device) noexcept {
  return Api([&] {
    if (device == nullptr) return cudaErrorInvalidValue;
    *device = CudaContext().Thread().device;
    return cudaSuccess;
  });
}

cudaError_t cudaGetDeviceCount(int* count) noexcept {
  return streampool::internal::compat::GetDeviceCount<CudaFace>(count);
}

cudaError_t cudaDeviceSynchronize(void) noexcept {
  return streampool::internal::compat::SynchronizeDevice<CudaFace>();
}

cudaError_t cudaDeviceReset(void) noexcept {
  return Api([] {
    CudaContext().Reset();
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (value == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = call.CheckDevice(device); e != cudaSuccess) return e;
    return streampool::internal::cuda::DeviceAttribute(call.rt().config(), device, attr, value);
  });
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (prop == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = call.CheckDevice(device); e != cudaSuccess) return e;
    streampool::internal::cuda::DeviceProperties(call.rt().config(), device, prop);
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) noexcept {
  return Api([&] {
    if (leastPriority != nullptr) *leastPriority = 0;
    if (greatestPriority != nullptr) *greatestPriority = 0;
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) noexcept {
  return WithRuntime([&](Call& call) {
    if (canAccessPeer == nullptr) return cudaErrorInvalidValue;
    return FromSp(spDeviceCanAccessPeer(canAccessPeer, call.c(), device, peerDevice));
  });
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (flags != 0) return cudaErrorInvalidValue;
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    if (cudaError_t e = call.CheckDevice(peerDevice); e != cudaSuccess) return e;
    if (peerDevice == device) return cudaErrorInvalidDevice;
    int can = 0;
    if (cudaError_t e = FromSp(spDeviceCanAccessPeer(&can, call.c(), device, peerDevice));
        e != cudaSuccess) {
      return e;
    }
    if (can == 0) return cudaErrorPeerAccessUnsupported;
    if (call.rt().SetPeerEnabled(device, peerDevice, true)) {
      return cudaErrorPeerAccessAlreadyEnabled;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) noexcept {
  return WithRuntime([&](Call& call) {
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    if (cudaError_t e = call.CheckDevice(peerDevice); e != cudaSuccess) return e;
    if (!call.rt().SetPeerEnabled(device, peerDevice, false)) {
      return cudaErrorPeerAccessNotEnabled;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) noexcept {
  return WithRuntime([&](Call& call) {
    if (free == nullptr || total == nullptr) return cudaErrorInvalidValue;
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    absl::StatusOr<streampool::DeviceMemInfo> info = call.rt().cpp().MemGetInfo(device);
    if (!info.ok()) return FromStatus(info.status());
    *free = info->free;
    *total = info->total;
    return cudaSuccess;
  });
}

// ----------------------------------------------------------------- streams

cudaError_t cudaStreamCreate(cudaStream_t* pStream) noexcept {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (pStream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0) {
      return cudaErrorInvalidValue;
    }
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    spStream_t s = nullptr;
    if (cudaError_t e = FromSp(spStreamCreate(&s, call.c(), device, flags)); e != cudaSuccess) {
      return e;
    }
    *pStream = reinterpret_cast<cudaStream_t>(s);
    return cudaSuccess;
  });
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags,
                                         int priority) noexcept {
  // Streams have no priority; CUDA clamps any value into the range, which
  // is [0, 0] here.
  return cudaStreamCreateWithFlags(pStream, flags);
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) noexcept {
  return WithRuntime([&](Call& call) {
    if (priority == nullptr) return cudaErrorInvalidValue;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(hStream, &s); e != cudaSuccess) return e;
    // Asking for the native stream looks the handle up and changes nothing;
    // on a simulated device a known stream has none to give.
    absl::StatusOr<void*> native =
        call.rt().cpp().NativeStream(streampool::StreamId{reinterpret_cast<uintptr_t>(s)});
    if (!native.ok() && !absl::IsUnimplemented(native.status())) {
      return FromStatus(native.status());
    }
    *priority = 0;  // every stream has the one priority of the range [0, 0]
    return cudaSuccess;
  });
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    // The default streams are not the program's to destroy.
    if (IsSpecialStream(stream)) return cudaErrorInvalidResourceHandle;
    return FromSp(spStreamDestroy(Sp(stream)));
  });
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) noexcept {
  return streampool::internal::compat::SynchronizeStream<CudaFace>(stream);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spStreamQuery(s));
  });
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (flags != cudaEventWaitDefault && flags != cudaEventWaitExternal) {
      return cudaErrorInvalidValue;
    }
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spStreamWaitEventWithFlags(s, Sp(event), flags));
  });
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) noexcept {
  return streampool::internal::compat::LaunchHostFunc<CudaFace>(stream, fn, userData);
}

// ------------------------------------------------------------------ events

cudaError_t cudaEventCreate(cudaEvent_t* event) noexcept {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (event == nullptr || (flags & ~kEventFlags) != 0) return cudaErrorInvalidValue;
    spEvent_t e = nullptr;
    const unsigned sp_flags = flags & ~unsigned{cudaEventBlockingSync};
    if (cudaError_t err = FromSp(spEventCreateWithFlags(&e, call.c(), sp_flags));
        err != cudaSuccess) {
      return err;
    }
    *event = reinterpret_cast<cudaEvent_t>(e);
    return cudaSuccess;
  });
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spEventRecord(Sp(event), s));
  });
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                     unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (flags != cudaEventRecordDefault && flags != cudaEventRecordExternal) {
      return cudaErrorInvalidValue;
    }
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spEventRecordWithFlags(Sp(event), s, flags));
  });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spEventSynchronize(Sp(event))); });
}

cudaError_t cudaEventQuery(cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spEventQuery(Sp(event))); });
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) noexcept {
  return WithRuntime([&](Call&) {
    if (ms == nullptr) return cudaErrorInvalidValue;
    return FromSp(spEventElapsedTime(ms, Sp(start), Sp(end)));
  });
}

cudaError_t cudaEventDestroy(cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spEventDestroy(Sp(event))); });
}

// ------------------------------------------------------------------ memory

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return cudaErrorInvalidValue;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(hStream, &s); e != cudaSuccess) return e;
    return FromSp(spMallocAsync(devPtr, size, s));
  });
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(hStream, &s); e != cudaSuccess) return e;
    return FromSp(spFreeAsync(devPtr, s));
  });
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spMallocFromPoolAsync(ptr, size, Sp(memPool), s));
  });
}

cudaError_t cudaMalloc(void** devPtr, size_t size) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return cudaErrorInvalidValue;
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    if (size == 0) {
      *devPtr = nullptr;
      return cudaSuccess;
    }
    return FromSp(spMalloc(devPtr, size, call.c(), device));
  });
}

cudaError_t cudaFree(void* devPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return cudaSuccess;
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, devPtr) != spSuccess || a.base != devPtr) {
      return cudaErrorInvalidValue;
    }
    // Pinned host memory is cudaFreeHost's, but for managed memory.
    if (a.device < 0 && a.pool == nullptr) {
      if (!call.rt().TakeManaged(devPtr)) return cudaErrorInvalidValue;
      if (cudaError_t e = FromSp(spFreeHost(call.c(), devPtr)); e != cudaSuccess) {
        call.rt().AddManaged(devPtr);
        return e;
      }
      return cudaSuccess;
    }
    if (a.pool == nullptr) {
      // cudaMalloc memory: CUDA's cudaFree waits for the device first.
      if (cudaError_t e = FromSp(spDeviceSynchronize(call.c(), a.device)); e != cudaSuccess) {
        return e;
      }
    }
    return FromSp(spFree(call.c(), devPtr));
  });
}

cudaError_t cudaMallocHost(void** ptr, size_t size) noexcept {
  return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (pHost == nullptr || (flags & ~kHostAllocFlags) != 0) return cudaErrorInvalidValue;
    return FromSp(spMallocHost(pHost, size, call.c()));
  });
}

cudaError_t cudaFreeHost(void* ptr) noexcept {
  return WithRuntime([&](Call& call) { return FromSp(spFreeHost(call.c(), ptr)); });
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || size == 0 ||
        (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)) {
      return cudaErrorInvalidValue;
    }
    if (cudaError_t e = FromSp(spMallocHost(devPtr, size, call.c())); e != cudaSuccess) return e;
    call.rt().AddManaged(*devPtr);
    return cudaSuccess;
  });
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr || size == 0) return cudaErrorInvalidValue;
    // Pinned memory of the runtime counts as registered, as CUDA's does.
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, ptr) == spSuccess && a.device < 0) {
      return cudaErrorHostMemoryAlreadyRegistered;
    }
    return FromSp(spHostRegister(call.c(), ptr, size, flags));
  });
}

cudaError_t cudaHostUnregister(void* ptr) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    return FromSp(spHostUnregister(call.c(), ptr));
  });
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (pDevice == nullptr || pHost == nullptr || flags != 0) return cudaErrorInvalidValue;
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, pHost) == spSuccess && a.device < 0) {
      *pDevice = pHost;
      return cudaSuccess;
    }
    // Neither pinned nor registered: CUDA answers cudaErrorInvalidValue.
    void* dev = nullptr;
    if (spHostGetDevicePointer(call.c(), &dev, pHost) != spSuccess) return cudaErrorInvalidValue;
    *pDevice = dev;
    return cudaSuccess;
  });
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) noexcept {
  return WithRuntime([&](Call& call) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
      return cudaErrorInvalidMemcpyDirection;
    }
    if (count == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
    spStream_t legacy = nullptr;
    if (cudaError_t e = call.Stream(nullptr, &legacy); e != cudaSuccess) return e;
    if (cudaError_t e = FromSp(spMemcpyAsync(dst, src, count, legacy)); e != cudaSuccess) {
      return e;
    }
    return FromSp(spStreamSynchronize(legacy));
  });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
      return cudaErrorInvalidMemcpyDirection;
    }
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    if (count == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
    return FromSp(spMemcpyAsync(dst, src, count, s));
  });
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) noexcept {
  return WithRuntime([&](Call& call) {
    if (count == 0) return cudaSuccess;
    if (devPtr == nullptr) return cudaErrorInvalidValue;
    spStream_t legacy = nullptr;
    if (cudaError_t e = call.Stream(nullptr, &legacy); e != cudaSuccess) return e;
    if (cudaError_t e = FromSp(spMemsetAsync(devPtr, value, count, legacy)); e != cudaSuccess) {
      return e;
    }
    // Asynchronous for device memory; the host may read pinned host memory
    // right after, so CUDA waits for those.
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, devPtr) == spSuccess && a.device >= 0) return cudaSuccess;
    return FromSp(spStreamSynchronize(legacy));
  });
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    if (count == 0) return cudaSuccess;
    if (devPtr == nullptr) return cudaErrorInvalidValue;
    return FromSp(spMemsetAsync(devPtr, value, count, s));
  });
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) noexcept {
  return WithRuntime([&](Call& call) {
    if (attributes == nullptr) return cudaErrorInvalidValue;
    spPointerAttributes a{};
    void* p = const_cast<void*>(ptr);
    void* registered = nullptr;
    if (ptr != nullptr && spPointerGetAttributes(&a, ptr) != spSuccess &&
        spHostGetDevicePointer(call.c(), &registered, p) == spSuccess) {
      *attributes = cudaPointerAttributes{cudaMemoryTypeHost, cudaCpuDeviceId, registered, p};
    } else if (ptr == nullptr || spPointerGetAttributes(&a, ptr) != spSuccess) {
      *attributes =
          cudaPointerAttributes{cudaMemoryTypeUnregistered, cudaInvalidDeviceId, nullptr, nullptr};
    } else if (a.device < 0) {
      *attributes = cudaPointerAttributes{cudaMemoryTypeHost, cudaCpuDeviceId, p, p};
    } else {
      *attributes = cudaPointerAttributes{cudaMemoryTypeDevice, a.device, p, nullptr};
    }
    return cudaSuccess;
  });
}

// --------------------------------------------------------------- occupancy

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (numBlocks == nullptr || blockSize <= 0) return cudaErrorInvalidValue;
    if ((flags & ~unsigned{cudaOccupancyDisableCachingOverride}) != 0) {
      return cudaErrorInvalidValue;
    }
    // Any host function is a kernel here; only a null one cannot be.
    if (func == nullptr) return cudaErrorInvalidDeviceFunction;
    int device = 0;
    if (cudaError_t e = call.Device(&device); e != cudaSuccess) return e;
    *numBlocks = ActiveBlocks(LimitsOf(call, device), blockSize, dynamicSMemSize);
    return cudaSuccess;
  });
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                          int blockSize,
                                                          size_t dynamicSMemSize) noexcept {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

// ------------------------------------------------------------------- pools

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (memPool == nullptr) return cudaErrorInvalidValue;
    return FromSp(
        spDeviceGetDefaultMemPool(reinterpret_cast<spMemPool_t*>(memPool), call.c(), device));
  });
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (memPool == nullptr) return cudaErrorInvalidValue;
    return FromSp(spDeviceGetMemPool(reinterpret_cast<spMemPool_t*>(memPool), call.c(), device));
  });
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) noexcept {
  return WithRuntime(
      [&](Call& call) { return FromSp(spDeviceSetMemPool(call.c(), device, Sp(memPool))); });
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* poolProps) noexcept {
  return WithRuntime([&](Call& call) {
    if (memPool == nullptr || poolProps == nullptr) return cudaErrorInvalidValue;
    const cudaMemPoolProps& in = *poolProps;
    if (in.allocType != cudaMemAllocationTypePinned) return cudaErrorInvalidValue;
    for (unsigned char byte : in.reserved) {
      if (byte != 0) return cudaErrorInvalidValue;
    }
    // A hardware-decompression pool is not something a simulator has.
    if (in.usage != 0) return cudaErrorNotSupported;
    spMemPoolProps props{};
    props.maxSize = in.maxSize;
    switch (static_cast<unsigned>(in.handleTypes)) {
      case cudaMemHandleTypeNone:
        props.handleTypes = spMemHandleTypeNone;
        break;
      case cudaMemHandleTypePosixFileDescriptor:
        props.handleTypes = spMemHandleTypePosixFileDescriptor;
        break;
      default:
        // Windows and fabric handles: CUDA's types, not this platform's.
        return (in.handleTypes & ~0xFu) == 0 ? cudaErrorNotSupported : cudaErrorInvalidValue;
    }
    switch (in.location.type) {
      case cudaMemLocationTypeDevice:
        props.allocType = spMemAllocationTypeDevice;
        props.device = in.location.id;
        if (cudaError_t e = call.CheckDevice(in.location.id); e != cudaSuccess) return e;
        break;
      case cudaMemLocationTypeHost:
        props.allocType = spMemAllocationTypePinnedHost;
        break;
      case cudaMemLocationTypeHostNuma:
      case cudaMemLocationTypeHostNumaCurrent:
        return cudaErrorNotSupported;
      default:
        return cudaErrorInvalidValue;
    }
    spMemPool_t made = nullptr;
    if (cudaError_t e = FromSp(spMemPoolCreate(&made, call.c(), &props)); e != cudaSuccess) {
      return e;
    }
    // CUDA's serving order, growth before any wait, as the face's default
    // pools keep it.
    int off = 0;
    spMemPoolSetAttribute(made, spMemPoolAttrWaitBeforeGrowth, &off);
    *memPool = reinterpret_cast<cudaMemPool_t>(made);
    return cudaSuccess;
  });
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) noexcept {
  return WithRuntime([&](Call& call) {
    // The host's default pool is a default pool, which cannot be destroyed.
    const uint64_t pool = Handle(memPool);
    if (pool != 0 && pool == call.rt().host_default_pool()) return cudaErrorInvalidValue;
    if (cudaError_t e = FromSp(spMemPoolDestroy(Sp(memPool))); e != cudaSuccess) return e;
    // As for a device: destroying the current pool makes the default current.
    if (pool == call.rt().host_current_pool()) call.rt().set_host_current_pool(0);
    return cudaSuccess;
  });
}

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                                     cudaMemAllocationType type) noexcept {
  return WithRuntime(
      [&](Call& call) { return LocationPool(call, memPool, location, type, /*current=*/false); });
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                              cudaMemAllocationType type) noexcept {
  return WithRuntime(
      [&](Call& call) { return LocationPool(call, memPool, location, type, /*current=*/true); });
}

cudaError_t cudaMemSetMemPool(cudaMemLocation* location, cudaMemAllocationType type,
                              cudaMemPool_t memPool) noexcept {
  return WithRuntime([&](Call& call) {
    if (location == nullptr || memPool == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = CheckPoolLocation(call, *location, type); e != cudaSuccess) return e;
    // A device location is cudaDeviceSetMemPool, as CUDA documents; the pool
    // must live on that device.
    if (location->type == cudaMemLocationTypeDevice) {
      return FromSp(spDeviceSetMemPool(call.c(), location->id, Sp(memPool)));
    }
    if (cudaError_t e = CheckHostPool(memPool); e != cudaSuccess) return e;
    call.rt().set_host_current_pool(Handle(memPool));
    return cudaSuccess;
  });
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr,
                                    void* value) noexcept {
  return WithRuntime([&](Call&) {
    const int raw = static_cast<int>(Raw(attr));
    if (value == nullptr || !IsCudaPoolAttr(raw)) return cudaErrorInvalidValue;
    return FromSp(spMemPoolSetAttribute(Sp(memPool), static_cast<spMemPoolAttr>(raw), value));
  });
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr,
                                    void* value) noexcept {
  return WithRuntime([&](Call&) {
    const int raw = static_cast<int>(Raw(attr));
    if (value == nullptr || !IsCudaPoolAttr(raw)) return cudaErrorInvalidValue;
    if (cudaError_t e =
            FromSp(spMemPoolGetAttribute(Sp(memPool), static_cast<spMemPoolAttr>(raw), value));
        e != cudaSuccess) {
      return e;
    }
    // Every pool the face makes is CUDA's "pinned" kind, on a device or on
    // the host; the sp* type tells device and host apart, which CUDA says
    // with the location type instead.
    if (attr == cudaMemPoolAttrAllocationType) {
      *static_cast<cudaMemAllocationType*>(value) = cudaMemAllocationTypePinned;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spMemPoolTrimTo(Sp(memPool), minBytesToKeep)); });
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descList,
                                 size_t count) noexcept {
  return WithRuntime([&](Call&) {
    std::vector<spMemAccessDesc> descs;
    if (cudaError_t e = ToSpAccessDescs(descList, count, &descs); e != cudaSuccess) return e;
    return FromSp(spMemPoolSetAccess(Sp(memPool), descs.data(), count));
  });
}

cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                 cudaMemLocation* location) noexcept {
  return WithRuntime([&](Call&) {
    if (flags == nullptr || location == nullptr) return cudaErrorInvalidValue;
    spMemLocation loc{};
    if (cudaError_t e = ToSpLocation(*location, &loc); e != cudaSuccess) return e;
    spMemAccessFlags sp_flags = spMemAccessFlagsProtNone;
    if (cudaError_t e = FromSp(spMemPoolGetAccess(&sp_flags, Sp(memPool), &loc));
        e != cudaSuccess) {
      return e;
    }
    *flags = static_cast<cudaMemAccessFlags>(sp_flags);
    return cudaSuccess;
  });
}

cudaError_t cudaMemPoolExportToShareableHandle(void* shareableHandle, cudaMemPool_t memPool,
                                               cudaMemAllocationHandleType handleType,
                                               unsigned int flags) noexcept {
  return WithRuntime([&](Call&) {
    if (shareableHandle == nullptr) return cudaErrorInvalidValue;
    if (handleType != cudaMemHandleTypePosixFileDescriptor) return cudaErrorInvalidValue;
    return FromSp(spMemPoolExportToShareableHandle(shareableHandle, Sp(memPool),
                                                   spMemHandleTypePosixFileDescriptor, flags));
  });
}

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t* memPool, void* shareableHandle,
                                                 cudaMemAllocationHandleType handleType,
                                                 unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (memPool == nullptr) return cudaErrorInvalidValue;
    if (handleType != cudaMemHandleTypePosixFileDescriptor) return cudaErrorInvalidValue;
    return FromSp(spMemPoolImportFromShareableHandle(reinterpret_cast<spMemPool_t*>(memPool),
                                                     call.c(), shareableHandle,
                                                     spMemHandleTypePosixFileDescriptor, flags));
  });
}

static_assert(sizeof(cudaMemPoolPtrExportData) == sizeof(spMemPoolPtrExportData),
              "export data travels as is between the two APIs");
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(spIpcEventHandle),
              "IPC event handles travel as is between the two APIs");

cudaError_t cudaMemPoolExportPointer(cudaMemPoolPtrExportData* exportData, void* ptr) noexcept {
  return WithRuntime([&](Call&) {
    if (exportData == nullptr) return cudaErrorInvalidValue;
    spMemPoolPtrExportData data{};
    if (cudaError_t e = FromSp(spMemPoolExportPointer(&data, ptr)); e != cudaSuccess) return e;
    std::memcpy(exportData, &data, sizeof data);
    return cudaSuccess;
  });
}

cudaError_t cudaMemPoolImportPointer(void** ptr, cudaMemPool_t memPool,
                                     cudaMemPoolPtrExportData* exportData) noexcept {
  return WithRuntime([&](Call&) {
    if (ptr == nullptr || exportData == nullptr) return cudaErrorInvalidValue;
    spMemPoolPtrExportData data;
    std::memcpy(&data, exportData, sizeof data);
    return FromSp(spMemPoolImportPointer(ptr, Sp(memPool), &data));
  });
}

// -------------------------------------------------------------- IPC events

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) {
    if (handle == nullptr) return cudaErrorInvalidValue;
    spIpcEventHandle h{};
    if (cudaError_t e = FromSp(spIpcGetEventHandle(&h, Sp(event))); e != cudaSuccess) return e;
    std::memcpy(handle, &h, sizeof h);
    return cudaSuccess;
  });
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) noexcept {
  return WithRuntime([&](Call& call) {
    if (event == nullptr) return cudaErrorInvalidValue;
    spIpcEventHandle h;
    std::memcpy(&h, &handle, sizeof h);
    return FromSp(spIpcOpenEventHandle(reinterpret_cast<spEvent_t*>(event), call.c(), h));
  });
}

// ---------------------------------------------------- cudaErrorNotSupported

cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) noexcept {
  return NotSupported();
}
cudaError_t cudaMemPrefetchAsync(const void*, size_t, int, cudaStream_t) noexcept {
  return NotSupported();
}
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t*, void*) noexcept { return NotSupported(); }
cudaError_t cudaIpcOpenMemHandle(void**, cudaIpcMemHandle_t, unsigned int) noexcept {
  return NotSupported();
}
cudaError_t cudaIpcCloseMemHandle(void*) noexcept { return NotSupported(); }

}  // extern "C"
