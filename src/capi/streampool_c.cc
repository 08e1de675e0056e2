// The C API: argument checks, handle decoding, and status -> spError_t. All
// semantics live in the runtime's parts, reached through RuntimeImpl::Run (or
// its entry points beside it); this file only translates.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/capi/c_entry.h"
#include "src/pool/pool_attrs.h"
#include "src/runtime/guard.h"
#include "src/runtime/handles.h"
#include "src/runtime/process.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/streampool.h"

namespace streampool::internal {

spError_t CurrentExceptionToError() noexcept { return ToError(StatusFromCurrentException()); }

}  // namespace streampool::internal

namespace {

// spMemPoolStats and PoolStats hold the fields of src/pool/pool_stats.def in
// its order (PoolStats also the C++-only ones): the layouts programs built
// against the installed headers read. Every field is 8 bytes wide, so its
// place in the table fixes its offset.
enum CStatIndex {
#define SP_POOL_STAT(c_name, cxx_name, ...) kC_##c_name,
#include "src/pool/pool_stats.def"
  kCStatCount
};
enum CxxStatIndex {
#define SP_POOL_STAT(c_name, cxx_name, ...) kCxx_##cxx_name,
#define SP_POOL_STAT_CXX(cxx_name, type, ...) kCxx_##cxx_name,
#include "src/pool/pool_stats.def"
  kCxxStatCount
};
#define SP_STAT_AT(Struct, field, type, index)                                               \
  static_assert(                                                                             \
      std::is_same_v<decltype(Struct::field), type> && offsetof(Struct, field) == (index)*8, \
      #Struct "::" #field                                                                    \
              " is not of the type or in the place that the table "                          \
              "(src/pool/pool_stats.def) gives it");
#define SP_POOL_STAT(c_name, cxx_name, ...)                 \
  SP_STAT_AT(spMemPoolStats, c_name, uint64_t, kC_##c_name) \
  SP_STAT_AT(streampool::PoolStats, cxx_name, uint64_t, kCxx_##cxx_name)
#define SP_POOL_STAT_CXX(cxx_name, type, ...) \
  SP_STAT_AT(streampool::PoolStats, cxx_name, type, kCxx_##cxx_name)
#include "src/pool/pool_stats.def"
#undef SP_STAT_AT
static_assert(sizeof(spMemPoolStats) == kCStatCount * 8 &&
                  sizeof(streampool::PoolStats) == kCxxStatCount * 8,
              "a statistics struct has a field that src/pool/pool_stats.def does not list");

}  // namespace

using streampool::AllocInfo;
using streampool::PoolProps;
using streampool::internal::Allocator;
using streampool::internal::AttrKind;
using streampool::internal::Entry;
using streampool::internal::Events;
using streampool::internal::FindPoolAttr;
using streampool::internal::InHostCallback;
using streampool::internal::IpcService;
using streampool::internal::IsRuntimeHandle;
using streampool::internal::Observation;
using streampool::internal::PoolAttrInfo;
using streampool::internal::Pools;
using streampool::internal::Process;
using streampool::internal::RunOn;
using streampool::internal::RuntimeImpl;
using streampool::internal::RuntimeOwning;
using streampool::internal::SetHandle;
using streampool::internal::Streams;
using streampool::internal::ToError;
using streampool::internal::ToHandle;
using streampool::internal::Value;
using streampool::internal::Work;

extern "C" {

const char* spGetErrorName(spError_t e) noexcept {
  switch (e) {
    case spSuccess:
      return "spSuccess";
    case spErrorInvalidValue:
      return "spErrorInvalidValue";
    case spErrorMemoryAllocation:
      return "spErrorMemoryAllocation";
    case spErrorInsufficientDriver:
      return "spErrorInsufficientDriver";
    case spErrorNoDevice:
      return "spErrorNoDevice";
    case spErrorInvalidDevice:
      return "spErrorInvalidDevice";
    case spErrorPeerAccessUnsupported:
      return "spErrorPeerAccessUnsupported";
    case spErrorInvalidResourceHandle:
      return "spErrorInvalidResourceHandle";
    case spErrorNotReady:
      return "spErrorNotReady";
    case spErrorHostMemoryAlreadyRegistered:
      return "spErrorHostMemoryAlreadyRegistered";
    case spErrorHostMemoryNotRegistered:
      return "spErrorHostMemoryNotRegistered";
    case spErrorNotSupported:
      return "spErrorNotSupported";
    case spErrorIllegalState:
      return "spErrorIllegalState";
    case spErrorStreamCaptureUnsupported:
      return "spErrorStreamCaptureUnsupported";
    case spErrorStreamCaptureInvalidated:
      return "spErrorStreamCaptureInvalidated";
    case spErrorStreamCaptureMerge:
      return "spErrorStreamCaptureMerge";
    case spErrorStreamCaptureUnmatched:
      return "spErrorStreamCaptureUnmatched";
    case spErrorStreamCaptureUnjoined:
      return "spErrorStreamCaptureUnjoined";
    case spErrorStreamCaptureIsolation:
      return "spErrorStreamCaptureIsolation";
    case spErrorStreamCaptureImplicit:
      return "spErrorStreamCaptureImplicit";
    case spErrorCapturedEvent:
      return "spErrorCapturedEvent";
    case spErrorStreamCaptureWrongThread:
      return "spErrorStreamCaptureWrongThread";
    case spErrorGraphExecUpdateFailure:
      return "spErrorGraphExecUpdateFailure";
    case spErrorUnknown:
      return "spErrorUnknown";
  }
  return "spErrorUnknown";
}

const char* spGetErrorString(spError_t e) noexcept {
  switch (e) {
    case spSuccess:
      return "no error";
    case spErrorInvalidValue:
      return "an argument is NULL, out of range, or not a value this call accepts";
    case spErrorMemoryAllocation:
      return "the pool, device or upstream could not provide the memory requested";
    case spErrorInsufficientDriver:
      return "no usable CUDA driver: libcuda.so.1 is missing, too old or failed to initialize";
    case spErrorNoDevice:
      return "the CUDA driver sees no device";
    case spErrorInvalidDevice:
      return "the device index is out of range for this runtime";
    case spErrorPeerAccessUnsupported:
      return "the device cannot access memory of the peer device";
    case spErrorInvalidResourceHandle:
      return "the handle is NULL, destroyed, or belongs to another runtime";
    case spErrorNotReady:
      return "the work queried has not completed yet";
    case spErrorHostMemoryAlreadyRegistered:
      return "part of the host memory range is registered already";
    case spErrorHostMemoryNotRegistered:
      return "the pointer is not in (or, to unregister, does not start) a registered host range";
    case spErrorNotSupported:
      return "the operation is not supported here";
    case spErrorIllegalState:
      return "a capture begun on a stream that already captures";
    case spErrorStreamCaptureUnsupported:
      return "not permitted while the stream, or by the capture mode the thread, captures; the "
             "capture is invalidated";
    case spErrorStreamCaptureInvalidated:
      return "the capture was invalidated by an earlier error";
    case spErrorStreamCaptureMerge:
      return "the wait would merge two independent captures";
    case spErrorStreamCaptureUnmatched:
      return "the capture was not begun on this stream";
    case spErrorStreamCaptureUnjoined:
      return "a stream that joined the capture was not joined back into its origin";
    case spErrorStreamCaptureIsolation:
      return "a dependency would cross the capture's boundary";
    case spErrorStreamCaptureImplicit:
      return "the legacy stream would depend on a capture";
    case spErrorCapturedEvent:
      return "a query or synchronize of an event recorded in a capture";
    case spErrorStreamCaptureWrongThread:
      return "the capture must end on the thread that began it";
    case spErrorGraphExecUpdateFailure:
      return "the graph differs from the executable graph in a way an update cannot carry";
    case spErrorUnknown:
      return "an internal failure; the call changed nothing";
  }
  return "unknown error code";
}

void spRuntimeConfigInit(spRuntimeConfig* cfg) noexcept {
  if (cfg == nullptr) return;
  const streampool::RuntimeConfig d;
  cfg->deviceCount = d.device_count;
  cfg->deviceCapacity = d.device_capacity;
  cfg->backing = spBackingHost;
  cfg->apiCallNs = d.api_call_ns;
  cfg->copyBytesPerUs = d.copy_bytes_per_us;
  cfg->executor = spExecutorSimulator;
  cfg->oomReclaimOff = d.oom_reclaim ? 0 : 1;
  cfg->leakCheck = static_cast<spLeakCheck>(static_cast<int>(d.leak_check));
}

spError_t spRuntimeCreate(spRuntime_t* rt, const spRuntimeConfig* cfg) noexcept {
  return Entry([&]() -> spError_t {
    if (InHostCallback()) return spErrorNotSupported;
    if (rt == nullptr) return spErrorInvalidValue;
    streampool::RuntimeConfig c;
    if (cfg != nullptr) {
      const int backing = streampool::internal::EnumInt(cfg->backing);
      if (backing != spBackingHost && backing != spBackingAddressOnly) return spErrorInvalidValue;
      c.device_count = cfg->deviceCount;
      c.device_capacity = cfg->deviceCapacity;
      c.backing = static_cast<streampool::Backing>(backing);
      const int executor = streampool::internal::EnumInt(cfg->executor);
      if (executor != spExecutorSimulator && executor != spExecutorThreads &&
          executor != spExecutorCuda)
        return spErrorInvalidValue;
      c.executor = static_cast<streampool::ExecutorKind>(executor);
      c.api_call_ns = cfg->apiCallNs;
      c.copy_bytes_per_us = cfg->copyBytesPerUs;
      if (cfg->oomReclaimOff != 0 && cfg->oomReclaimOff != 1) return spErrorInvalidValue;
      c.oom_reclaim = cfg->oomReclaimOff == 0;
      const int leak = streampool::internal::EnumInt(cfg->leakCheck);
      if (leak != spLeakCheckOff && leak != spLeakCheckReport && leak != spLeakCheckFail) {
        return spErrorInvalidValue;
      }
      c.leak_check = static_cast<streampool::LeakCheck>(leak);
    }
    auto r = RuntimeImpl::Create(c, Process::Default());
    if (!r.ok()) return ToError(r.status());
    *rt = ToHandle<spRuntime_t>((*r)->handle());
    return spSuccess;
  });
}

spError_t spRuntimeDestroy(spRuntime_t rt) noexcept {
  return Entry(
      [&]() -> spError_t { return ToError(RuntimeImpl::Destroy(Process::Default(), Value(rt))); });
}

// ---------------------------------------------------------------- streams

spError_t spStreamCreate(spStream_t* s, spRuntime_t rt, int device, unsigned flags) noexcept {
  return Entry([&]() -> spError_t {
    if (InHostCallback()) return spErrorNotSupported;
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (s == nullptr) return spErrorInvalidValue;
    if (flags != spStreamDefault && flags != spStreamNonBlocking) return spErrorInvalidValue;
    return SetHandle(r.Run<&Streams::CreateStream>(device, flags == spStreamNonBlocking), s);
  });
}

spError_t spStreamDestroy(spStream_t s) noexcept {
  return RunOn<&Streams::DestroyStream>(s, Value(s));
}

spError_t spStreamGetNative(spStream_t s, void** native) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (native == nullptr) return spErrorInvalidValue;
    absl::StatusOr<void*> got = r.Run<&Streams::NativeStream>(Value(s));
    if (!got.ok()) return ToError(got.status());
    *native = *got;
    return spSuccess;
  });
}

spError_t spStreamCreateFromNative(spStream_t* s, spRuntime_t rt, int device,
                                   void* native) noexcept {
  return Entry([&]() -> spError_t {
    if (InHostCallback()) return spErrorNotSupported;
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (s == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Streams::CreateStreamFromNative>(device, native), s);
  });
}

spError_t spStreamGetLegacy(spStream_t* s, spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (s == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Streams::LegacyStream>(device), s);
  });
}

spError_t spStreamSynchronize(spStream_t s) noexcept {
  return RunOn<&Streams::StreamSynchronize>(s, Value(s));
}

spError_t spStreamQuery(spStream_t s) noexcept { return RunOn<&Streams::StreamQuery>(s, Value(s)); }

spError_t spStreamWaitEvent(spStream_t s, spEvent_t e) noexcept {
  return RunOn<&Events::StreamWaitEvent>(s, Value(s), Value(e));
}

spError_t spStreamWaitEventWithFlags(spStream_t s, spEvent_t e, unsigned flags) noexcept {
  if (flags == spEventWaitDefault) return spStreamWaitEvent(s, e);
  if (flags != spEventWaitExternal) return spErrorInvalidValue;
  return RunOn<&Events::StreamWaitEventExternal>(s, Value(s), Value(e));
}

// ----------------------------------------------------------------- events

spError_t spEventCreate(spEvent_t* e, spRuntime_t rt) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (e == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Events::CreateEvent>(0u), e);
  });
}

spError_t spEventCreateWithFlags(spEvent_t* e, spRuntime_t rt, unsigned flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (e == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Events::CreateEvent>(flags), e);
  });
}

spError_t spEventDestroy(spEvent_t e) noexcept { return RunOn<&Events::DestroyEvent>(e, Value(e)); }

spError_t spEventRecord(spEvent_t e, spStream_t s) noexcept {
  return RunOn<&Events::RecordEvent>(e, Value(e), Value(s));
}

spError_t spEventRecordWithFlags(spEvent_t e, spStream_t s, unsigned flags) noexcept {
  if (flags == spEventRecordDefault) return spEventRecord(e, s);
  if (flags != spEventRecordExternal) return spErrorInvalidValue;
  return RunOn<&Events::RecordEventExternal>(e, Value(e), Value(s));
}

spError_t spEventSynchronize(spEvent_t e) noexcept {
  return RunOn<&Events::EventSynchronize>(e, Value(e));
}

spError_t spEventQuery(spEvent_t e) noexcept { return RunOn<&Events::EventQuery>(e, Value(e)); }

spError_t spDeviceSynchronize(spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Streams::DeviceSynchronize>(device));
  });
}

spError_t spEventElapsedTime(float* ms, spEvent_t start, spEvent_t end) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, start);
    if (ms == nullptr) return spErrorInvalidValue;
    auto v = r.Run<&Events::EventElapsedMs>(Value(start), Value(end));
    if (!v.ok()) return ToError(v.status());
    *ms = *v;
    return spSuccess;
  });
}

// ------------------------------------------------------------------- work

spError_t spLaunchKernel(spStream_t s, uint64_t durationNs, const spAccess* accesses,
                         size_t count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (count != 0 && accesses == nullptr) return spErrorInvalidValue;
    absl::InlinedVector<streampool::Access, 4> acc(count);  // kernels name few ranges
    for (size_t i = 0; i < count; ++i) {
      acc[i] = streampool::Access{accesses[i].ptr, accesses[i].size, accesses[i].write != 0};
    }
    return ToError(r.Run<&Work::LaunchKernel>(Value(s), durationNs, acc));
  });
}

spError_t spLaunchHostFunc(spStream_t s, void (*fn)(void*), void* userData) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (fn == nullptr) return spErrorInvalidValue;
    return ToError(r.Run<&Work::LaunchHostFunc>(Value(s), [fn, userData]() { fn(userData); }));
  });
}

spError_t spHostAdvance(spRuntime_t rt, uint64_t ns) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Work::HostAdvance>(ns));
  });
}

spError_t spRuntimeStartRecording(spRuntime_t rt, const char* path) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    if (path == nullptr || *path == '\0') return spErrorInvalidValue;
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Observation::StartRecording>(std::string(path)));
  });
}

spError_t spRuntimeSetOomHandler(spRuntime_t rt, spOomHandler fn, void* user) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    std::function<bool(uint64_t, uint64_t)> handler;
    if (fn != nullptr) {
      handler = [fn, user](uint64_t pool, uint64_t size) {
        return fn(user, ToHandle<spMemPool_t>(pool), static_cast<size_t>(size)) != 0;
      };
    }
    r.Run<&Observation::SetOomHandler>(std::move(handler));
    return spSuccess;
  });
}

spError_t spRuntimeStopRecording(spRuntime_t rt) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Observation::StopRecording>());
  });
}

spError_t spHostNow(spRuntime_t rt, uint64_t* ns) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (ns == nullptr) return spErrorInvalidValue;
    *ns = r.HostNow();
    return spSuccess;
  });
}

spError_t spMemcpyAsync(void* dst, const void* src, size_t bytes, spStream_t s) noexcept {
  return RunOn<&Work::MemcpyAsync>(s, dst, src, bytes, Value(s));
}

spError_t spMemsetAsync(void* dst, int value, size_t bytes, spStream_t s) noexcept {
  return RunOn<&Work::MemsetAsync>(s, dst, value, bytes, Value(s));
}

// ----------------------------------------------------------------- memory

spError_t spMallocAsync(void** ptr, size_t size, spStream_t s) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (ptr == nullptr) return spErrorInvalidValue;
    // The fast tier, inline here; a miss changed nothing.
    if (void* p = r.AllocateFast(size, 0, Value(s))) {
      *ptr = p;
      return spSuccess;
    }
    auto a = r.AllocateSlow(size, 0, Value(s));
    *ptr = a.ok() ? a->ptr : nullptr;
    return ToError(a.status());
  });
}

spError_t spMallocFromPoolAsync(void** ptr, size_t size, spMemPool_t pool, spStream_t s) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (ptr == nullptr) return spErrorInvalidValue;
    if (pool == nullptr) return spErrorInvalidValue;
    if (void* p = r.AllocateFast(size, Value(pool), Value(s))) {
      *ptr = p;
      return spSuccess;
    }
    auto a = r.AllocateSlow(size, Value(pool), Value(s));
    *ptr = a.ok() ? a->ptr : nullptr;
    return ToError(a.status());
  });
}

spError_t spFreeAsync(void* ptr, spStream_t s) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (r.FreeFast(ptr, Value(s))) return spSuccess;
    return ToError(r.FreeSlow(ptr, Value(s)));
  });
}

spError_t spMemRecordUse(void* ptr, spStream_t stream) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, stream);
    return ToError(r.Run<&Allocator::RecordUse>(ptr, Value(stream)));
  });
}

spError_t spMalloc(void** ptr, size_t size, spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (ptr == nullptr) return spErrorInvalidValue;
    auto p = r.Run<&Allocator::Malloc>(size, device);
    *ptr = p.ok() ? *p : nullptr;
    return ToError(p.status());
  });
}

spError_t spFree(spRuntime_t rt, void* ptr) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Allocator::Free>(ptr));
  });
}

spError_t spMallocHost(void** ptr, size_t size, spRuntime_t rt) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (ptr == nullptr) return spErrorInvalidValue;
    auto p = r.Run<&Allocator::MallocHost>(size);
    *ptr = p.ok() ? *p : nullptr;
    return ToError(p.status());
  });
}

spError_t spFreeHost(spRuntime_t rt, void* ptr) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Allocator::FreeHost>(ptr));
  });
}

spError_t spHostRegister(spRuntime_t rt, void* ptr, size_t size, unsigned int flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Allocator::HostRegister>(ptr, size, flags).status());
  });
}

spError_t spHostUnregister(spRuntime_t rt, void* ptr) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (ptr == nullptr) return spErrorInvalidValue;
    return ToError(r.Run<&Allocator::HostUnregister>(ptr));
  });
}

spError_t spHostGetDevicePointer(spRuntime_t rt, void** devPtr, void* hostPtr) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (devPtr == nullptr || hostPtr == nullptr) return spErrorInvalidValue;
    absl::StatusOr<void*> d = r.Run<&Allocator::HostDevicePointer>(hostPtr);
    if (!d.ok()) return ToError(d.status());
    *devPtr = *d;
    return spSuccess;
  });
}

spError_t spPointerGetAttributes(spPointerAttributes* attr, const void* ptr) noexcept {
  return Entry([&]() -> spError_t {
    if (InHostCallback()) return spErrorNotSupported;
    if (attr == nullptr || ptr == nullptr) return spErrorInvalidValue;
    std::shared_ptr<RuntimeImpl> rt = RuntimeOwning(ptr);
    if (rt == nullptr) return spErrorInvalidValue;
    auto a = rt->Run<&Allocator::GetPointerAttributes>(ptr);
    if (!a.ok()) return ToError(a.status());
    attr->device = a->device;
    attr->pool = a->pool.value == 0 ? nullptr : ToHandle<spMemPool_t>(a->pool.value);
    attr->base = a->base;
    attr->size = a->size;
    return spSuccess;
  });
}

// ------------------------------------------------------------------ pools

spError_t spMemPoolCreate(spMemPool_t* pool, spRuntime_t rt, const spMemPoolProps* props) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr || props == nullptr) return spErrorInvalidValue;
    PoolProps p;
    if (!streampool::internal::ToPoolProps(*props, &p)) return spErrorInvalidValue;
    return SetHandle(r.Run<&Pools::CreatePool>(p, nullptr), pool);
  });
}

spError_t spMemPoolCreateWithUpstream(spMemPool_t* pool, spRuntime_t rt,
                                      const spMemPoolProps* props,
                                      const spUpstream* upstream) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr || props == nullptr || upstream == nullptr || upstream->map == nullptr ||
        upstream->unmap == nullptr) {
      return spErrorInvalidValue;
    }
    PoolProps p;
    if (!streampool::internal::ToPoolProps(*props, &p)) return spErrorInvalidValue;
    const spUpstream u = *upstream;
    streampool::UpstreamCallbacks cb;
    cb.map = [u](uint64_t bytes) { return u.map(bytes, u.user); };
    cb.unmap = [u](void* base, uint64_t bytes) { u.unmap(base, bytes, u.user); };
    cb.touchable = u.touchable != 0;
    return SetHandle(r.Run<&Pools::CreatePool>(p, streampool::NewCallbackMemory(std::move(cb))),
                     pool);
  });
}

spError_t spMemPoolCreateWithVmmUpstream(spMemPool_t* pool, spRuntime_t rt,
                                         const spMemPoolProps* props,
                                         const spUpstreamVmm* up) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr || props == nullptr || up == nullptr || up->reserve == nullptr ||
        up->map == nullptr || up->unmap == nullptr || up->release == nullptr) {
      return spErrorInvalidValue;
    }
    PoolProps p;
    if (!streampool::internal::ToPoolProps(*props, &p)) return spErrorInvalidValue;
    if (p.growth == streampool::PoolGrowth::kChunked) return spErrorNotSupported;
    const spUpstreamVmm u = *up;
    streampool::VmmCallbacks cb;
    cb.reserve = [u](uint64_t bytes, uint64_t alignment) {
      return u.reserve(bytes, alignment, u.user);
    };
    cb.map = [u](void* addr, uint64_t bytes) { return u.map(addr, bytes, u.user) == 0; };
    cb.unmap = [u](void* addr, uint64_t bytes) { u.unmap(addr, bytes, u.user); };
    cb.release = [u](void* addr, uint64_t bytes) { u.release(addr, bytes, u.user); };
    cb.touchable = u.touchable != 0;
    return SetHandle(r.Run<&Pools::CreatePool>(p, streampool::NewVmmCallbackMemory(std::move(cb))),
                     pool);
  });
}

spError_t spDeviceSetHugePageBudget(spRuntime_t rt, int device, uint64_t bytes) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Pools::SetHugePageBudget>(device, bytes));
  });
}

spError_t spMemPoolDestroy(spMemPool_t pool) noexcept {
  return RunOn<&Pools::DestroyPool>(pool, Value(pool));
}

spError_t spDeviceGetDefaultMemPool(spMemPool_t* pool, spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Pools::DefaultPool>(device), pool);
  });
}

spError_t spDeviceSetMemPool(spRuntime_t rt, int device, spMemPool_t pool) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Pools::SetCurrentPool>(device, Value(pool)));
  });
}

spError_t spDeviceGetMemPool(spMemPool_t* pool, spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Pools::CurrentPool>(device), pool);
  });
}

spError_t spMemPoolSetAttribute(spMemPool_t pool, spMemPoolAttr attr_in, void* value) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    const PoolAttrInfo* a = FindPoolAttr(streampool::internal::EnumInt(attr_in));
    if (value == nullptr || a == nullptr) return spErrorInvalidValue;
    // CUDA's reuse switches take any non-zero value as on; streampool's own
    // take exactly 0 or 1.
    const int on = a->kind == AttrKind::kU64 ? 0 : *static_cast<int*>(value);
    if (a->kind == AttrKind::kStrictSwitch && on != 0 && on != 1) return spErrorInvalidValue;
    const uint64_t v = a->kind == AttrKind::kU64 ? *static_cast<uint64_t*>(value) : on != 0;
    return ToError(r.Run<&Pools::SetPoolAttribute>(Value(pool), a->attr, v));
  });
}

spError_t spMemPoolGetAttribute(spMemPool_t pool, spMemPoolAttr attr_in, void* value) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    const PoolAttrInfo* a = FindPoolAttr(streampool::internal::EnumInt(attr_in));
    if (value == nullptr || a == nullptr) return spErrorInvalidValue;
    auto v = r.Run<&Pools::GetPoolAttribute>(Value(pool), a->attr);
    if (!v.ok()) return ToError(v.status());
    if (a->kind == AttrKind::kU64) {
      *static_cast<uint64_t*>(value) = *v;
    } else {
      *static_cast<int*>(value) = static_cast<int>(static_cast<int64_t>(*v));
    }
    return spSuccess;
  });
}

spError_t spMemPoolTrimTo(spMemPool_t pool, size_t minBytesToKeep) noexcept {
  return RunOn<&Pools::TrimTo>(pool, Value(pool), minBytesToKeep);
}

spError_t spMemPoolGetStats(spMemPool_t pool, spMemPoolStats* stats) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    if (stats == nullptr) return spErrorInvalidValue;
    auto s = r.Run<&Pools::GetPoolStats>(Value(pool));
    if (!s.ok()) return ToError(s.status());
#define SP_POOL_STAT(c_name, cxx_name, ...) stats->c_name = s->cxx_name;
#include "src/pool/pool_stats.def"
    return spSuccess;
  });
}

spError_t spMemPoolSnapshot(spMemPool_t pool, spMemPoolSnapshotSegment* segments,
                            size_t segmentCapacity, size_t* segmentCount,
                            spMemPoolSnapshotBlock* blocks, size_t blockCapacity,
                            size_t* blockCount) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    if (segmentCount == nullptr || blockCount == nullptr ||
        (segments == nullptr && segmentCapacity != 0) ||
        (blocks == nullptr && blockCapacity != 0)) {
      return spErrorInvalidValue;
    }
    auto snap = r.Run<&Pools::Snapshot>(Value(pool));
    if (!snap.ok()) return ToError(snap.status());
    size_t nblocks = 0;
    for (const streampool::SnapshotSegment& seg : snap->segments) nblocks += seg.blocks.size();
    *segmentCount = snap->segments.size();
    *blockCount = nblocks;
    if (snap->segments.size() > segmentCapacity || nblocks > blockCapacity) return spSuccess;
    size_t at = 0;
    for (size_t i = 0; i < snap->segments.size(); ++i) {
      const streampool::SnapshotSegment& seg = snap->segments[i];
      spMemPoolSnapshotSegment& o = segments[i];
      o.address = reinterpret_cast<void*>(static_cast<uintptr_t>(seg.address));
      o.size = seg.size;
      o.mappedBytes = seg.mapped_bytes;
      o.expandable = seg.expandable ? 1 : 0;
      o.firstBlock = at;
      o.blockCount = seg.blocks.size();
      for (const streampool::SnapshotBlock& b : seg.blocks) {
        spMemPoolSnapshotBlock& ob = blocks[at++];
        ob.address = reinterpret_cast<void*>(static_cast<uintptr_t>(b.address));
        ob.size = b.size;
        ob.requested = b.requested;
        ob.state = static_cast<spBlockState>(static_cast<int>(b.state));
        ob.stream = b.stream.value == 0 ? nullptr : ToHandle<spStream_t>(b.stream.value);
        ob.freePoint = b.free_point;
        ob.allocSeq = b.alloc_seq;
        ob.unmappedBytes = b.unmapped_bytes;
      }
    }
    return spSuccess;
  });
}

spError_t spRuntimeGetLiveAllocations(spRuntime_t rt, spLiveAllocation* allocs, size_t capacity,
                                      size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (count == nullptr || (allocs == nullptr && capacity != 0)) return spErrorInvalidValue;
    auto live = r.Run<&Allocator::LiveAllocations>();
    if (!live.ok()) return ToError(live.status());
    *count = live->size();
    for (size_t i = 0; i < live->size() && i < capacity; ++i) {
      const streampool::LiveAllocation& a = (*live)[i];
      spLiveAllocation& o = allocs[i];
      o.ptr = a.ptr;
      o.size = a.size;
      o.blockSize = a.block_size;
      o.stream = a.stream.value == 0 ? nullptr : ToHandle<spStream_t>(a.stream.value);
      o.pool = a.pool.value == 0 ? nullptr : ToHandle<spMemPool_t>(a.pool.value);
      o.device = a.device;
      o.seq = a.seq;
    }
    return spSuccess;
  });
}

// -------------------------------------------------- multi-device access

spError_t spRuntimeSetPeerAccessible(spRuntime_t rt, int device, int peerDevice,
                                     int accessible) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Pools::SetPeerAccessible>(device, peerDevice, accessible != 0));
  });
}

spError_t spDeviceCanAccessPeer(int* canAccess, spRuntime_t rt, int device,
                                int peerDevice) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (canAccess == nullptr) return spErrorInvalidValue;
    auto v = r.Run<&Pools::CanAccessPeer>(device, peerDevice);
    if (!v.ok()) return ToError(v.status());
    *canAccess = *v ? 1 : 0;
    return spSuccess;
  });
}

spError_t spMemPoolSetAccess(spMemPool_t pool, const spMemAccessDesc* descs,
                             size_t count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    if (count != 0 && descs == nullptr) return spErrorInvalidValue;
    std::vector<streampool::MemAccessDesc> d(count);
    for (size_t i = 0; i < count; ++i) {
      // Read as ints: the library range-checks them (an enum class over int
      // holds any int).
      d[i].location.type = static_cast<streampool::MemLocationType>(
          streampool::internal::EnumInt(descs[i].location.type));
      d[i].location.id = descs[i].location.id;
      d[i].flags =
          static_cast<streampool::MemAccessFlags>(streampool::internal::EnumInt(descs[i].flags));
    }
    return ToError(r.Run<&Pools::SetPoolAccess>(Value(pool), d));
  });
}

spError_t spMemPoolGetAccess(spMemAccessFlags* flags, spMemPool_t pool,
                             const spMemLocation* location) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    if (flags == nullptr || location == nullptr) return spErrorInvalidValue;
    streampool::MemLocation loc;
    loc.type =
        static_cast<streampool::MemLocationType>(streampool::internal::EnumInt(location->type));
    loc.id = location->id;
    auto v = r.Run<&Pools::GetPoolAccess>(Value(pool), loc);
    if (!v.ok()) return ToError(v.status());
    *flags = static_cast<spMemAccessFlags>(static_cast<int>(*v));
    return spSuccess;
  });
}

// -------------------------------------------------------------------- IPC

spError_t spMemPoolExportToShareableHandle(void* handle, spMemPool_t pool, int handleType,
                                           unsigned flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, pool);
    if (handle == nullptr || handleType != spMemHandleTypePosixFileDescriptor || flags != 0) {
      return spErrorInvalidValue;
    }
    auto fd = r.Run<&IpcService::ExportPool>(Value(pool));
    if (!fd.ok()) return ToError(fd.status());
    *static_cast<int*>(handle) = *fd;
    return spSuccess;
  });
}

spError_t spMemPoolImportFromShareableHandle(spMemPool_t* pool, spRuntime_t rt, void* handle,
                                             int handleType, unsigned flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (pool == nullptr || handleType != spMemHandleTypePosixFileDescriptor || flags != 0) {
      return spErrorInvalidValue;
    }
    const auto fd = reinterpret_cast<intptr_t>(handle);
    if (fd < 0 || fd > INT32_MAX) return spErrorInvalidValue;
    return SetHandle(r.Run<&IpcService::ImportPool>(static_cast<int>(fd)), pool);
  });
}

spError_t spMemPoolExportPointer(spMemPoolPtrExportData* data, void* ptr) noexcept {
  return Entry([&]() -> spError_t {
    if (InHostCallback()) return spErrorNotSupported;
    if (data == nullptr || ptr == nullptr) return spErrorInvalidValue;
    std::shared_ptr<RuntimeImpl> rt = RuntimeOwning(ptr);
    if (rt == nullptr) return spErrorInvalidValue;
    auto d = rt->Run<&IpcService::ExportPointer>(ptr);
    if (!d.ok()) return ToError(d.status());
    static_assert(sizeof(*data) == sizeof(streampool::internal::PtrExportData));
    std::memcpy(data, &*d, sizeof *data);
    return spSuccess;
  });
}

spError_t spMemPoolImportPointer(void** ptr, spMemPool_t importedPool,
                                 spMemPoolPtrExportData* data) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, importedPool);
    if (ptr == nullptr || data == nullptr) return spErrorInvalidValue;
    streampool::internal::PtrExportData d;
    std::memcpy(static_cast<void*>(&d), data, sizeof d);  // trivially copyable
    auto p = r.Run<&IpcService::ImportPointer>(Value(importedPool), d);
    if (!p.ok()) return ToError(p.status());
    *ptr = *p;
    return spSuccess;
  });
}

spError_t spIpcGetEventHandle(spIpcEventHandle* handle, spEvent_t e) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, e);
    if (handle == nullptr) return spErrorInvalidValue;
    return ToError(r.Run<&Events::GetIpcEventHandle>(Value(e), handle->reserved));
  });
}

spError_t spIpcOpenEventHandle(spEvent_t* e, spRuntime_t rt, spIpcEventHandle handle) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (e == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Events::OpenIpcEvent>(handle.reserved), e);
  });
}

// ------------------------------------------------------------- checker

spError_t spCheckerEnable(spRuntime_t rt, int enable) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    r.Run<&Observation::EnableChecker>(enable != 0, /*fatal=*/false);
    return spSuccess;
  });
}

spError_t spCheckerGetReports(spRuntime_t rt, spCheckReport* reports, size_t capacity,
                              size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (count == nullptr || (reports == nullptr && capacity != 0)) return spErrorInvalidValue;
    const std::vector<streampool::CheckReport> all = r.Run<&Observation::CheckReports>();
    *count = all.size();
    for (size_t i = 0; i < all.size() && i < capacity; ++i) {
      const streampool::CheckReport& a = all[i];
      spCheckReport& o = reports[i];
      o.kind = static_cast<spCheckKind>(static_cast<int>(a.kind));
      o.stream = a.stream.value == 0 ? nullptr : ToHandle<spStream_t>(a.stream.value);
      o.opIndex = a.op_position;
      o.ptr = a.ptr;
      o.size = a.size;
      o.otherStream =
          a.other_stream.value == 0 ? nullptr : ToHandle<spStream_t>(a.other_stream.value);
      o.otherOpIndex = a.other_position;
      std::snprintf(o.message, sizeof o.message, "%s", a.message.c_str());
    }
    return spSuccess;
  });
}

spError_t spCheckerClearReports(spRuntime_t rt) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    r.Run<&Observation::ClearCheckReports>();
    return spSuccess;
  });
}

}  // extern "C"
