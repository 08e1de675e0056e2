/*
 * The AscendCL runtime subset streampool implements (README "AscendCL
 * programs"): init and devices, streams and events, host functions,
 * aclrtMalloc and its kin, copies and fills, virtual memory. CANN 9.x's
 * names, prototypes, enumerator values and error codes; only the
 * enumerators a program of this subset passes or receives.
 *
 * Devices are simulated: their count, capacity and how streams run come
 * from STREAMPOOL_ACL_* environment variables. Every call is thread-safe.
 */
#ifndef STREAMPOOL_ACL_ACL_RT_H_
#define STREAMPOOL_ACL_ACL_RT_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclrtEventRecordedStatus {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
} aclrtEventRecordedStatus;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
  ACL_MEMCPY_DEFAULT,
  ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
  ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
  ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

/* Page kinds of aclrtMalloc; the low byte is the policy, the high bits
 * optional memory-type flags. */
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST,
  ACL_MEM_MALLOC_HUGE_ONLY,
  ACL_MEM_MALLOC_NORMAL_ONLY,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
  ACL_MEM_MALLOC_HUGE1G_ONLY,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
  ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
  ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
  ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,
} aclrtMemMallocPolicy;

typedef enum aclrtMemAttr {
  ACL_DDR_MEM,
  ACL_HBM_MEM,
  ACL_DDR_MEM_HUGE,
  ACL_DDR_MEM_NORMAL,
  ACL_HBM_MEM_HUGE,
  ACL_HBM_MEM_NORMAL,
  ACL_DDR_MEM_P2P_HUGE,
  ACL_DDR_MEM_P2P_NORMAL,
  ACL_HBM_MEM_P2P_HUGE,
  ACL_HBM_MEM_P2P_NORMAL,
  ACL_HBM_MEM_HUGE1G,
  ACL_HBM_MEM_P2P_HUGE1G,
  ACL_MEM_NORMAL,
  ACL_MEM_HUGE,
  ACL_MEM_HUGE1G,
  ACL_MEM_P2P_NORMAL,
  ACL_MEM_P2P_HUGE,
  ACL_MEM_P2P_HUGE1G,
} aclrtMemAttr;

typedef enum aclrtMemLocationType {
  ACL_MEM_LOCATION_TYPE_HOST = 0,
  ACL_MEM_LOCATION_TYPE_DEVICE,
  ACL_MEM_LOCATION_TYPE_UNREGISTERED,
  ACL_MEM_LOCATION_TYPE_MANAGED,
  ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id;
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
  ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
  ACL_MEM_HANDLE_TYPE_NONE = 0,
  ACL_MEM_HANDLE_TYPE_POSIX = 2,
} aclrtMemHandleType;

typedef struct aclrtPhysicalMemProp {
  aclrtMemHandleType handleType;
  aclrtMemAllocationType allocationType;
  aclrtMemAttr memAttr;
  aclrtMemLocation location;
  uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
  ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
  ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
  ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
} aclrtMemGranularityOptions;

typedef enum {
  ACL_HOST_REGISTER_MAPPED = 0,
  ACL_HOST_REGISTER_IOMEMORY = 0x04,
  ACL_HOST_REGISTER_READONLY = 0x08
} aclrtHostRegisterType;

typedef enum aclrtLastErrLevel {
  ACL_RT_THREAD_LEVEL = 0,
} aclrtLastErrLevel;

typedef void* aclrtDrvMemHandle;
typedef void (*aclrtHostFunc)(void* args);

/* ------------------------------------------------------- init and devices */

/* configPath: NULL, or a file that must exist (its contents are not read). */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath) SPACL_NOEXCEPT;
/* Destroys every stream, event, pool and allocation of the process. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free,
                                             size_t* total) SPACL_NOEXCEPT;

/* ---------------------------------------------------------------- contexts */

/* A context names a device: creating one makes it the calling thread's
 * current context (and its device the current device), as CANN does. It is
 * valid on every thread until destroyed, or until aclFinalize. A thread that
 * only called aclrtSetDevice is in the device's default context, which
 * aclrtDestroyContext refuses (ACL_ERROR_INVALID_PARAM). A destroyed or
 * unknown context is ACL_ERROR_RT_PARAM_INVALID. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context,
                                                int32_t deviceId) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context) SPACL_NOEXCEPT;
/* ACL_ERROR_RT_CONTEXT_NULL until the thread has a context. */
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context) SPACL_NOEXCEPT;

/* ---------------------------------------------------- streams and events */

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream,
                                                  aclrtEvent event) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus* status) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent,
                                                   aclrtEvent endEvent) SPACL_NOEXCEPT;
/* fn(args) runs in stream order; it must not call acl* functions. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn,
                                                 void* args) SPACL_NOEXCEPT;

/* ------------------------------------------------------------------ memory */

ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size,
                                         aclrtMemMallocPolicy policy) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMallocAlign32(void** devPtr, size_t size,
                                                aclrtMemMallocPolicy policy) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMallocCached(void** devPtr, size_t size,
                                               aclrtMemMallocPolicy policy) SPACL_NOEXCEPT;
/* At once, without synchronizing: the caller promises no work still uses it. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr) SPACL_NOEXCEPT;
/* Waits for the device's work first. */
ACL_FUNC_VISIBILITY aclError aclrtFreeWithDevSync(void* devPtr) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value,
                                         size_t count) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream) SPACL_NOEXCEPT;

/* ---------------------------------------------------------- virtual memory */

ACL_FUNC_VISIBILITY aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                              aclrtMemGranularityOptions option,
                                                              size_t* granularity) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                                    void* expectPtr, uint64_t flags) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtReleaseMemAddress(void* virPtr) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                                                 const aclrtPhysicalMemProp* prop,
                                                 uint64_t flags) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtFreePhysical(aclrtDrvMemHandle handle) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMapMem(void* virPtr, size_t size, size_t offset,
                                         aclrtDrvMemHandle handle, uint64_t flags) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtUnmapMem(void* virPtr) SPACL_NOEXCEPT;

/* ------------------------------------------------------------------ errors */

/* The calling thread's last error, cleared (Get) or kept (Peek). */
ACL_FUNC_VISIBILITY aclError aclrtGetLastError(aclrtLastErrLevel level) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtPeekAtLastError(aclrtLastErrLevel level) SPACL_NOEXCEPT;

/* ------------------------------------------------- host memory registration */

/* Makes [ptr, ptr + size) of host memory device-accessible: kernels and
 * copies may use *devPtr (the same address: one address space). ptr must be
 * 4 KiB aligned. Registering bytes already registered is
 * ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED; NULL or size 0 is
 * ACL_ERROR_INVALID_PARAM. MAPPED and IOMEMORY are accepted alike; READONLY is
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT, as in CANN. */
ACL_FUNC_VISIBILITY aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type,
                                               void** devPtr) SPACL_NOEXCEPT;
/* ptr: the start of a registered range; else
 * ACL_ERROR_HOST_MEMORY_NOT_REGISTERED. */
ACL_FUNC_VISIBILITY aclError aclrtHostUnregister(void* ptr) SPACL_NOEXCEPT;
/* The device address of any byte of a registered range; flag must be 0. An
 * unregistered pointer is ACL_ERROR_HOST_MEMORY_NOT_REGISTERED. */
ACL_FUNC_VISIBILITY aclError aclrtHostGetDevicePointer(void* pHost, void** pDevice,
                                                       uint32_t flag) SPACL_NOEXCEPT;
/* The same registration named after a context, as some AscendCL programs
 * call it, with the rules above but for the alignment (any host address).
 * A NULL context is ACL_ERROR_INVALID_PARAM, a destroyed or unknown one
 * ACL_ERROR_RT_PARAM_INVALID. Registration is the process's: every context
 * and device sees the range. */
ACL_FUNC_VISIBILITY aclError aclrtRegisterMemory(void* hostPtr, size_t size,
                                                 aclrtContext context) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtGetMemDeviceAddress(void** devPtr, void* hostPtr,
                                                      aclrtContext context) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtUnregisterMemory(void* hostPtr,
                                                   aclrtContext context) SPACL_NOEXCEPT;

/* ------------------------------ CANN has them; ACL_ERROR_RT_FEATURE_NOT_SUPPORT */

ACL_FUNC_VISIBILITY aclError aclrtMemcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch,
                                           size_t width, size_t height,
                                           aclrtMemcpyKind kind) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemcpy2dAsync(void* dst, size_t dpitch, const void* src,
                                                size_t spitch, size_t width, size_t height,
                                                aclrtMemcpyKind kind,
                                                aclrtStream stream) SPACL_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_ACL_ACL_RT_H_ */
