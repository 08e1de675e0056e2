// The acl* functions of include/streampool/acl/ over the sp* API. Each
// validates its arguments first, as CANN's acl layer does (a null pointer or
// out-of-range value is ACL_ERROR_INVALID_PARAM there), then answers what the
// runtime refuses with CANN's runtime codes (src/acl/call.h); a failed call
// changes nothing.
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <type_traits>

#include "src/acl/call.h"
#include "src/acl/context.h"
#include "src/acl/memory.h"
#include "src/acl/vmm.h"
#include "streampool/acl/acl/acl.h"
#include "streampool/acl/acl/ops/acl_dvpp.h"
#include "streampool/streampool.h"

using streampool::PagePolicy;
using streampool::internal::acl::AclContext;
using streampool::internal::acl::AclFace;
using streampool::internal::acl::Api;
using streampool::internal::acl::Call;
using streampool::internal::acl::FromSp;
using streampool::internal::acl::FromStatus;
using streampool::internal::acl::SyncKind;
using streampool::internal::acl::WithRuntime;
namespace acl = streampool::internal::acl;
namespace vmm = streampool::internal::acl::vmm;

namespace {

spStream_t SpStream(aclrtStream s) { return reinterpret_cast<spStream_t>(s); }
spEvent_t SpEvent(aclrtEvent e) { return reinterpret_cast<spEvent_t>(e); }
spMemPool_t SpPool(aclrtMemPool p) { return reinterpret_cast<spMemPool_t>(p); }

std::atomic<bool> initialized{false};

using streampool::internal::compat::Raw;

// The page policy an aclrtMalloc policy asks for. The low byte is the policy
// (the P2P variants are the same pages: every simulated device is a peer);
// the bandwidth bits choose nothing here. 1 GiB pages and read-only mappings
// are not simulated.
aclError ToPagePolicy(aclrtMemMallocPolicy policy, PagePolicy* out) {
  const auto bits = static_cast<uint32_t>(Raw(policy));
  constexpr uint32_t kBandwidth = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH;
  if ((bits & ACL_MEM_ACCESS_USER_SPACE_READONLY) != 0) return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  if ((bits & ~(kBandwidth | 0xFFu)) != 0) return ACL_ERROR_INVALID_PARAM;
  switch (bits & 0xFFu) {
    case ACL_MEM_MALLOC_HUGE_FIRST:
    case ACL_MEM_MALLOC_HUGE_FIRST_P2P:
      *out = PagePolicy::kHugeFirst;
      return ACL_SUCCESS;
    case ACL_MEM_MALLOC_HUGE_ONLY:
    case ACL_MEM_MALLOC_HUGE_ONLY_P2P:
      *out = PagePolicy::kHugeOnly;
      return ACL_SUCCESS;
    case ACL_MEM_MALLOC_NORMAL_ONLY:
    case ACL_MEM_MALLOC_NORMAL_ONLY_P2P:
      *out = PagePolicy::kNormalOnly;
      return ACL_SUCCESS;
    case ACL_MEM_MALLOC_HUGE1G_ONLY:
    case ACL_MEM_MALLOC_HUGE1G_ONLY_P2P:
      return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    default:
      return ACL_ERROR_INVALID_PARAM;
  }
}

aclError Malloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy, SyncKind kind) {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
    PagePolicy pages = PagePolicy::kHugeFirst;
    if (aclError e = ToPagePolicy(policy, &pages); e != ACL_SUCCESS) return e;
    return acl::SyncMalloc(call, kind, pages, size, devPtr);
  });
}

bool ValidCopyKind(const aclrtMemcpyKind& kind) {
  const auto k = Raw(kind);
  return k >= ACL_MEMCPY_HOST_TO_HOST && k <= ACL_MEMCPY_INTER_DEVICE_TO_DEVICE;
}

// The checks aclrtMemcpy and aclrtMemcpyAsync share.
aclError CheckCopy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  if (dst == nullptr || src == nullptr || !ValidCopyKind(kind)) return ACL_ERROR_INVALID_PARAM;
  if (count > destMax) return ACL_ERROR_INVALID_PARAM;
  return ACL_SUCCESS;
}

bool IsPoolAttr(const aclrtMemPoolAttr& attr) {
  const auto a = Raw(attr);
  return a >= ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
         a <= ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH;
}
bool IsMemAttr(const aclrtMemAttr& attr) {
  const auto a = Raw(attr);
  return a >= ACL_DDR_MEM && a <= ACL_MEM_P2P_HUGE1G;
}

aclError NotSupported() { return streampool::internal::compat::NotSupported<AclFace>(); }

}  // namespace

extern "C" {

// -------------------------------------------------------- init and devices

aclError aclInit(const char* configPath) noexcept {
  return Api([&] {
    if (configPath != nullptr && configPath[0] != '\0') {
      struct stat st;
      if (stat(configPath, &st) != 0 || !S_ISREG(st.st_mode)) return ACL_ERROR_INVALID_FILE;
    }
    bool expected = false;
    if (!initialized.compare_exchange_strong(expected, true)) return ACL_ERROR_REPEAT_INITIALIZE;
    return ACL_SUCCESS;
  });
}

aclError aclFinalize(void) noexcept {
  return Api([] {
    bool expected = true;
    if (!initialized.compare_exchange_strong(expected, false)) return ACL_ERROR_REPEAT_FINALIZE;
    acl::ForgetDevices();
    acl::ForgetContexts();
    AclContext().Reset();
    return ACL_SUCCESS;
  });
}

aclError aclrtSetDevice(int32_t deviceId) noexcept {
  return WithRuntime([&](Call& call) {
    if (aclError e = call.CheckDevice(deviceId); e != ACL_SUCCESS) return e;
    call.thread().device = deviceId;
    call.thread().device_set = true;
    acl::RetainDevice(deviceId);
    return ACL_SUCCESS;
  });
}

aclError aclrtResetDevice(int32_t deviceId) noexcept {
  bool last = false;
  // Not WithRuntime: a reset is what clears a failed kernel's fault.
  const aclError e = Api([&] {
    Call call;
    const aclError begun = call.Begin();
    if (begun != ACL_SUCCESS && begun != ACL_ERROR_RT_AICORE_EXCEPTION) return begun;
    if (aclError err = call.CheckDevice(deviceId); err != ACL_SUCCESS) return err;
    if (!acl::ReleaseDevice(deviceId, &last)) return ACL_SUCCESS;
    if (begun != ACL_SUCCESS) return ACL_SUCCESS;  // nothing left to wait for
    return FromSp(spDeviceSynchronize(call.c(), deviceId));
  });
  // Outside the call, which holds a reference to the runtime.
  if (last) {
    Api([] {
      AclContext().Reset();
      return ACL_SUCCESS;
    });
  }
  return e;
}

aclError aclrtGetDevice(int32_t* deviceId) noexcept {
  return Api([&] {
    if (deviceId == nullptr) return ACL_ERROR_INVALID_PARAM;
    const streampool::internal::compat::ThreadState& t = AclContext().Thread();
    if (!t.device_set) return ACL_ERROR_RT_CONTEXT_NULL;
    *deviceId = t.device;
    return ACL_SUCCESS;
  });
}

aclError aclrtGetDeviceCount(uint32_t* count) noexcept {
  return streampool::internal::compat::GetDeviceCount<AclFace>(count);
}

aclError aclrtSynchronizeDevice(void) noexcept {
  return streampool::internal::compat::SynchronizeDevice<AclFace>();
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) noexcept {
  return WithRuntime([&](Call& call) {
    if (free == nullptr || total == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (!IsMemAttr(attr)) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (aclError e = call.Device(&device); e != ACL_SUCCESS) return e;
    absl::StatusOr<streampool::DeviceMemInfo> info = call.rt().cpp().MemGetInfo(device);
    if (!info.ok()) return FromStatus(info.status());
    // One kind of memory per simulated device, whatever attr names; physical
    // memory of the VMM functions is this layer's own count.
    const uint64_t physical = vmm::PhysicalBytes(device);
    *free = info->free > physical ? info->free - physical : 0;
    *total = info->total;
    return ACL_SUCCESS;
  });
}

// ---------------------------------------------------------------- contexts

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) noexcept {
  return WithRuntime([&](Call& call) {
    if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (aclError e = call.CheckDevice(deviceId); e != ACL_SUCCESS) return e;
    aclrtContext made = acl::NewContext(deviceId);
    acl::CurrentContext() = made;
    call.thread().device = deviceId;
    call.thread().device_set = true;
    *context = made;
    return ACL_SUCCESS;
  });
}

aclError aclrtDestroyContext(aclrtContext context) noexcept {
  return Api([&] {
    if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
    return acl::DestroyContext(context);
  });
}

aclError aclrtSetCurrentContext(aclrtContext context) noexcept {
  return WithRuntime([&](Call& call) {
    if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (!acl::ContextDevice(context, &device)) return ACL_ERROR_RT_PARAM_INVALID;
    acl::CurrentContext() = context;
    call.thread().device = device;
    call.thread().device_set = true;
    return ACL_SUCCESS;
  });
}

aclError aclrtGetCurrentContext(aclrtContext* context) noexcept {
  return Api([&] {
    if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (aclrtContext current = acl::CurrentContext();
        current != nullptr && acl::ContextDevice(current, &device)) {
      *context = current;
      return ACL_SUCCESS;
    }
    // A thread that only set a device works in that device's default context.
    const streampool::internal::compat::ThreadState& t = AclContext().Thread();
    if (!t.device_set) return ACL_ERROR_RT_CONTEXT_NULL;
    *context = acl::DefaultContext(t.device);
    return ACL_SUCCESS;
  });
}

// ------------------------------------------------------ streams and events

aclError aclrtCreateStream(aclrtStream* stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (aclError e = call.Device(&device); e != ACL_SUCCESS) return e;
    spStream_t s = nullptr;
    // Ascend streams do not synchronize with the default stream.
    if (aclError e = FromSp(spStreamCreate(&s, call.c(), device, spStreamNonBlocking));
        e != ACL_SUCCESS) {
      return e;
    }
    *stream = s;
    return ACL_SUCCESS;
  });
}

aclError aclrtDestroyStream(aclrtStream stream) noexcept {
  return WithRuntime([&](Call&) {
    if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spStreamDestroy(SpStream(stream)));
  });
}

aclError aclrtSynchronizeStream(aclrtStream stream) noexcept {
  return streampool::internal::compat::SynchronizeStream<AclFace>(stream);
}

aclError aclrtCreateEvent(aclrtEvent* event) noexcept {
  return WithRuntime([&](Call& call) {
    if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
    spEvent_t e = nullptr;
    if (aclError err = FromSp(spEventCreate(&e, call.c())); err != ACL_SUCCESS) return err;
    *event = e;
    return ACL_SUCCESS;
  });
}

aclError aclrtDestroyEvent(aclrtEvent event) noexcept {
  return WithRuntime([&](Call&) {
    if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spEventDestroy(SpEvent(event)));
  });
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(stream, &s); e != ACL_SUCCESS) return e;
    return FromSp(spEventRecord(SpEvent(event), s));
  });
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) noexcept {
  return WithRuntime([&](Call& call) {
    if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(stream, &s); e != ACL_SUCCESS) return e;
    return FromSp(spStreamWaitEvent(s, SpEvent(event)));
  });
}

aclError aclrtSynchronizeEvent(aclrtEvent event) noexcept {
  return WithRuntime([&](Call&) {
    if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spEventSynchronize(SpEvent(event)));
  });
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) noexcept {
  return WithRuntime([&](Call&) {
    if (event == nullptr || status == nullptr) return ACL_ERROR_INVALID_PARAM;
    const spError_t e = spEventQuery(SpEvent(event));
    if (e != spSuccess && e != spErrorNotReady) return FromSp(e);
    *status =
        e == spSuccess ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
  });
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) noexcept {
  return WithRuntime([&](Call&) {
    if (ms == nullptr || startEvent == nullptr || endEvent == nullptr) {
      return ACL_ERROR_INVALID_PARAM;
    }
    const spError_t e = spEventElapsedTime(ms, SpEvent(startEvent), SpEvent(endEvent));
    if (e == spErrorNotReady) return ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    return FromSp(e);
  });
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) noexcept {
  return streampool::internal::compat::LaunchHostFunc<AclFace>(stream, fn, args);
}

// ------------------------------------------------------------------ memory

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) noexcept {
  return Malloc(devPtr, size, policy, SyncKind::kMalloc);
}

aclError aclrtMallocAlign32(void** devPtr, size_t size, aclrtMemMallocPolicy policy) noexcept {
  return Malloc(devPtr, size, policy, SyncKind::kAlign32);
}

// Cacheable memory is ordinary memory on a simulated device.
aclError aclrtMallocCached(void** devPtr, size_t size, aclrtMemMallocPolicy policy) noexcept {
  return Malloc(devPtr, size, policy, SyncKind::kMalloc);
}

aclError aclrtFree(void* devPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return acl::SyncFree(call, /*dvpp=*/false, devPtr);
  });
}

aclError aclrtFreeWithDevSync(void* devPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, devPtr) != spSuccess || a.device < 0) {
      return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (aclError e = FromSp(spDeviceSynchronize(call.c(), a.device)); e != ACL_SUCCESS) return e;
    return acl::SyncFree(call, /*dvpp=*/false, devPtr);
  });
}

aclError aclrtMallocHost(void** hostPtr, size_t size) noexcept {
  return WithRuntime([&](Call& call) {
    if (hostPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spMallocHost(hostPtr, size, call.c()));
  });
}

aclError aclrtFreeHost(void* hostPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (hostPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spFreeHost(call.c(), hostPtr));
  });
}

aclError acldvppMalloc(void** devPtr, size_t size) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
    return acl::SyncMalloc(call, SyncKind::kDvpp, PagePolicy::kHugeFirst, size, devPtr);
  });
}

aclError acldvppFree(void* devPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return acl::SyncFree(call, /*dvpp=*/true, devPtr);
  });
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) noexcept {
  return WithRuntime([&](Call& call) {
    if (aclError e = CheckCopy(dst, destMax, src, count, kind); e != ACL_SUCCESS) return e;
    if (count == 0) return ACL_SUCCESS;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(nullptr, &s); e != ACL_SUCCESS) return e;
    if (aclError e = FromSp(spMemcpyAsync(dst, src, count, s)); e != ACL_SUCCESS) return e;
    return FromSp(spStreamSynchronize(s));
  });
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (aclError e = CheckCopy(dst, destMax, src, count, kind); e != ACL_SUCCESS) return e;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(stream, &s); e != ACL_SUCCESS) return e;
    if (count == 0) return ACL_SUCCESS;
    return FromSp(spMemcpyAsync(dst, src, count, s));
  });
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || count > maxCount) return ACL_ERROR_INVALID_PARAM;
    if (count == 0) return ACL_SUCCESS;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(nullptr, &s); e != ACL_SUCCESS) return e;
    if (aclError e = FromSp(spMemsetAsync(devPtr, value, count, s)); e != ACL_SUCCESS) return e;
    return FromSp(spStreamSynchronize(s));
  });
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || count > maxCount) return ACL_ERROR_INVALID_PARAM;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(stream, &s); e != ACL_SUCCESS) return e;
    if (count == 0) return ACL_SUCCESS;
    return FromSp(spMemsetAsync(devPtr, value, count, s));
  });
}

// ------------------------------------------------------------------- pools

aclError aclrtMemPoolCreate(aclrtMemPool* memPool, const aclrtMemPoolProps* poolProps) noexcept {
  return WithRuntime([&](Call& call) {
    if (memPool == nullptr || poolProps == nullptr) return ACL_ERROR_INVALID_PARAM;
    const aclrtMemPoolProps& in = *poolProps;
    if (Raw(in.allocType) != ACL_MEM_ALLOCATION_TYPE_PINNED) return ACL_ERROR_INVALID_PARAM;
    if (Raw(in.location.type) != ACL_MEM_LOCATION_TYPE_DEVICE) return ACL_ERROR_INVALID_PARAM;
    for (unsigned char byte : in.reserved) {
      if (byte != 0) return ACL_ERROR_INVALID_PARAM;
    }
    // Shareable pools need CANN's export functions, which this layer lacks.
    if (Raw(in.handleType) == ACL_MEM_HANDLE_TYPE_POSIX) return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    if (Raw(in.handleType) != ACL_MEM_HANDLE_TYPE_NONE) return ACL_ERROR_RT_PARAM_INVALID;
    if (in.location.id > static_cast<uint32_t>(INT32_MAX)) return ACL_ERROR_RT_INVALID_DEVICEID;
    const int device = static_cast<int>(in.location.id);
    if (aclError e = call.CheckDevice(device); e != ACL_SUCCESS) return e;
    streampool::PoolProps props;
    props.device = device;
    props.max_size = in.maxSize;
    // The pool's blocks follow aclrtMalloc's rule, so memory from it can be
    // carved as CANN's documentation carves aclrtMalloc memory.
    props.acl_rounding = true;
    props.wait_before_growth = false;  // CANN's serving order, as every pool of the face
    absl::StatusOr<streampool::PoolId> pool = call.rt().cpp().CreatePool(props);
    if (!pool.ok()) return FromStatus(pool.status());
    *memPool = pool->c();
    return ACL_SUCCESS;
  });
}

aclError aclrtMemPoolDestroy(const aclrtMemPool memPool) noexcept {
  return WithRuntime([&](Call&) {
    if (memPool == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spMemPoolDestroy(SpPool(memPool)));
  });
}

aclError aclrtMemPoolSetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr, void* value) noexcept {
  return WithRuntime([&](Call&) {
    if (memPool == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (value == nullptr || !IsPoolAttr(attr)) return ACL_ERROR_RT_PARAM_INVALID;
    const auto sp_attr = static_cast<spMemPoolAttr>(attr);
    if (Raw(attr) <= ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
      uint32_t v = 0;
      std::memcpy(&v, value, sizeof v);
      if (v > 1) return ACL_ERROR_RT_PARAM_INVALID;
      int sp_value = static_cast<int>(v);
      return FromSp(spMemPoolSetAttribute(SpPool(memPool), sp_attr, &sp_value));
    }
    uint64_t v = 0;
    std::memcpy(&v, value, sizeof v);
    return FromSp(spMemPoolSetAttribute(SpPool(memPool), sp_attr, &v));
  });
}

aclError aclrtMemPoolGetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr, void* value) noexcept {
  return WithRuntime([&](Call&) {
    if (memPool == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (value == nullptr || !IsPoolAttr(attr)) return ACL_ERROR_RT_PARAM_INVALID;
    const auto sp_attr = static_cast<spMemPoolAttr>(attr);
    if (Raw(attr) <= ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
      int sp_value = 0;
      if (aclError e = FromSp(spMemPoolGetAttribute(SpPool(memPool), sp_attr, &sp_value));
          e != ACL_SUCCESS) {
        return e;
      }
      const auto v = static_cast<uint32_t>(sp_value);
      std::memcpy(value, &v, sizeof v);
      return ACL_SUCCESS;
    }
    uint64_t v = 0;
    if (aclError e = FromSp(spMemPoolGetAttribute(SpPool(memPool), sp_attr, &v));
        e != ACL_SUCCESS) {
      return e;
    }
    std::memcpy(value, &v, sizeof v);
    return ACL_SUCCESS;
  });
}

aclError aclrtMemPoolMallocAsync(void** ptr, size_t size, aclrtMemPool memPool,
                                 aclrtStream stream) noexcept {
  return WithRuntime([&](Call&) {
    if (ptr == nullptr || memPool == nullptr || stream == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (size == 0) return ACL_SUCCESS;
    return FromSp(spMallocFromPoolAsync(ptr, size, SpPool(memPool), SpStream(stream)));
  });
}

aclError aclrtMemPoolFreeAsync(void* ptr, aclrtStream stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr) return ACL_ERROR_INVALID_PARAM;
    spStream_t s = nullptr;
    if (aclError e = call.Stream(stream, &s); e != ACL_SUCCESS) return e;
    // Only memory of pools the program made: aclrtMalloc's and acldvppMalloc's
    // come from this layer's own pools and have their own frees.
    spPointerAttributes a{};
    if (spPointerGetAttributes(&a, ptr) != spSuccess || a.base != ptr || a.pool == nullptr ||
        acl::IsSynchronousPool(call.rt(),
                               streampool::PoolId{reinterpret_cast<uintptr_t>(a.pool)})) {
      return ACL_ERROR_RT_PARAM_INVALID;
    }
    return FromSp(spFreeAsync(ptr, s));
  });
}

aclError aclrtMemPoolTrimTo(aclrtMemPool memPool, size_t minBytesToKeep) noexcept {
  return WithRuntime([&](Call&) {
    if (memPool == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spMemPoolTrimTo(SpPool(memPool), minBytesToKeep));
  });
}

// ---------------------------------------------------------- virtual memory

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                          aclrtMemGranularityOptions option,
                                          size_t* granularity) noexcept {
  return Api([&] {
    if (prop == nullptr || granularity == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (Raw(option) != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM &&
        Raw(option) != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
      return ACL_ERROR_INVALID_PARAM;
    }
    *granularity = vmm::kGranularity;
    return ACL_SUCCESS;
  });
}

aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment, void* expectPtr,
                                uint64_t flags) noexcept {
  return Api([&] {
    // alignment is reserved (0); flags picks huge (1) or normal (0) pages.
    if (virPtr == nullptr || size == 0 || alignment != 0 || flags > 1) {
      return ACL_ERROR_INVALID_PARAM;
    }
    // A caller-chosen address is an experimental CANN feature.
    if (expectPtr != nullptr) return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    if (size % vmm::kGranularity != 0) return ACL_ERROR_RT_PARAM_INVALID;
    return vmm::Reserve(size, virPtr);
  });
}

aclError aclrtReleaseMemAddress(void* virPtr) noexcept {
  return Api([&] {
    if (virPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return vmm::Release(virPtr);
  });
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                             const aclrtPhysicalMemProp* prop, uint64_t flags) noexcept {
  // No runtime call: an expandable pool's upstream calls this under the
  // runtime's lock. The configuration alone gives the devices and capacity.
  return Api([&] {
    if (handle == nullptr || prop == nullptr || size == 0 || flags != 0) {
      return ACL_ERROR_INVALID_PARAM;
    }
    if (Raw(prop->allocationType) != ACL_MEM_ALLOCATION_TYPE_PINNED ||
        Raw(prop->location.type) != ACL_MEM_LOCATION_TYPE_DEVICE || !IsMemAttr(prop->memAttr) ||
        prop->reserve != 0) {
      return ACL_ERROR_INVALID_PARAM;
    }
    if (Raw(prop->handleType) != ACL_MEM_HANDLE_TYPE_NONE) return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    if (size % vmm::kGranularity != 0) return ACL_ERROR_RT_PARAM_INVALID;
    Call call;
    if (aclError e = call.Begin(); e != ACL_SUCCESS) return e;
    if (prop->location.id > static_cast<uint32_t>(INT32_MAX)) return ACL_ERROR_RT_INVALID_DEVICEID;
    const int device = static_cast<int>(prop->location.id);
    if (aclError e = call.CheckDevice(device); e != ACL_SUCCESS) return e;
    return vmm::MallocPhysical(device, size, call.rt().config().device_capacity, handle);
  });
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) noexcept {
  return Api([&] {
    if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
    return vmm::FreePhysical(handle);
  });
}

aclError aclrtMapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags) noexcept {
  return Api([&] {
    // offset and flags are reserved (0): a handle maps whole.
    if (virPtr == nullptr || handle == nullptr || size == 0 || offset != 0 || flags != 0) {
      return ACL_ERROR_INVALID_PARAM;
    }
    return vmm::Map(virPtr, size, handle);
  });
}

aclError aclrtUnmapMem(void* virPtr) noexcept {
  return Api([&] {
    if (virPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return vmm::Unmap(virPtr);
  });
}

// ------------------------------------------------------------------ errors

aclError aclrtGetLastError(aclrtLastErrLevel level) noexcept {
  if (Raw(level) != ACL_RT_THREAD_LEVEL) return ACL_ERROR_INVALID_PARAM;
  return streampool::internal::compat::LastError<AclFace>(/*clear=*/true);
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level) noexcept {
  if (Raw(level) != ACL_RT_THREAD_LEVEL) return ACL_ERROR_INVALID_PARAM;
  return streampool::internal::compat::LastError<AclFace>(/*clear=*/false);
}

// ------------------------------------------------ host memory registration

aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type,
                           void** devPtr) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr || devPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
    switch (Raw(type)) {
      case ACL_HOST_REGISTER_MAPPED:
      case ACL_HOST_REGISTER_IOMEMORY:
        break;
      case ACL_HOST_REGISTER_READONLY:  // reserved in CANN
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
      default:
        return ACL_ERROR_INVALID_PARAM;
    }
    // CANN requires the start on a 4 KiB page.
    if (reinterpret_cast<uintptr_t>(ptr) % 4096 != 0) return ACL_ERROR_INVALID_PARAM;
    if (aclError e = FromSp(spHostRegister(call.c(), ptr, size, spHostRegisterDefault));
        e != ACL_SUCCESS) {
      return e;
    }
    *devPtr = ptr;
    return ACL_SUCCESS;
  });
}

aclError aclrtHostUnregister(void* ptr) noexcept {
  return WithRuntime([&](Call& call) {
    if (ptr == nullptr) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spHostUnregister(call.c(), ptr));
  });
}

aclError aclrtHostGetDevicePointer(void* pHost, void** pDevice, uint32_t flag) noexcept {
  return WithRuntime([&](Call& call) {
    if (pHost == nullptr || pDevice == nullptr || flag != 0) return ACL_ERROR_INVALID_PARAM;
    return FromSp(spHostGetDevicePointer(call.c(), pDevice, pHost));
  });
}

aclError aclrtRegisterMemory(void* hostPtr, size_t size, aclrtContext context) noexcept {
  return WithRuntime([&](Call& call) {
    if (hostPtr == nullptr || size == 0 || context == nullptr) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (!acl::ContextDevice(context, &device)) return ACL_ERROR_RT_PARAM_INVALID;
    return FromSp(spHostRegister(call.c(), hostPtr, size, spHostRegisterDefault));
  });
}

aclError aclrtGetMemDeviceAddress(void** devPtr, void* hostPtr, aclrtContext context) noexcept {
  return WithRuntime([&](Call& call) {
    if (devPtr == nullptr || hostPtr == nullptr || context == nullptr) {
      return ACL_ERROR_INVALID_PARAM;
    }
    int device = 0;
    if (!acl::ContextDevice(context, &device)) return ACL_ERROR_RT_PARAM_INVALID;
    return FromSp(spHostGetDevicePointer(call.c(), devPtr, hostPtr));
  });
}

aclError aclrtUnregisterMemory(void* hostPtr, aclrtContext context) noexcept {
  return WithRuntime([&](Call& call) {
    if (hostPtr == nullptr || context == nullptr) return ACL_ERROR_INVALID_PARAM;
    int device = 0;
    if (!acl::ContextDevice(context, &device)) return ACL_ERROR_RT_PARAM_INVALID;
    return FromSp(spHostUnregister(call.c(), hostPtr));
  });
}

// ---------------------------------------- ACL_ERROR_RT_FEATURE_NOT_SUPPORT

aclError aclrtMemcpy2d(void*, size_t, const void*, size_t, size_t, size_t,
                       aclrtMemcpyKind) noexcept {
  return NotSupported();
}
aclError aclrtMemcpy2dAsync(void*, size_t, const void*, size_t, size_t, size_t, aclrtMemcpyKind,
                            aclrtStream) noexcept {
  return NotSupported();
}

}  // extern "C"
