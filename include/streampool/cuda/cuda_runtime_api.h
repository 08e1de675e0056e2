/*
 * The CUDA runtime API subset of streampool's CUDA compatibility layer
 * (README "CUDA programs"): CUDA's functions with CUDA's
 * signatures and error codes, implemented over the sp* API on an implicit
 * process runtime that the first call creates from the STREAMPOOL_CUDA_*
 * environment variables. C-callable; link with streampool::cudart
 * (pkg-config streampool-cudart).
 *
 * As in CUDA: the current device and the last error are per host thread;
 * stream 0 and cudaStreamLegacy are the current device's legacy stream,
 * cudaStreamPerThread the calling thread's own blocking stream on it. Every
 * failing call except a query's cudaErrorNotReady becomes the thread's last
 * error. Functions CUDA has that streampool cannot honour are declared and
 * return cudaErrorNotSupported.
 */
#ifndef STREAMPOOL_CUDA_CUDA_RUNTIME_API_H_
#define STREAMPOOL_CUDA_CUDA_RUNTIME_API_H_
/* CUDA's own include guard, which programs test to know the header is in. */
#ifndef __CUDA_RUNTIME_API_H__
#define __CUDA_RUNTIME_API_H__
#endif

#include <stddef.h>

#include "driver_types.h"

/* The CUDA version whose API this mirrors, for programs that test it. */
#define CUDART_VERSION 12040

/* A default argument in C++, as CUDA's headers give some parameters. */
#ifdef __cplusplus
#define __dv(v) = v
#else
#define __dv(v)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

/* The thread's last error, which is reset to cudaSuccess; after an emulated
 * kernel threw, cudaErrorLaunchFailure every time until cudaDeviceReset. */
SPCUDA_API cudaError_t cudaGetLastError(void) SPCUDA_NOEXCEPT;
/* The thread's last error, left as it is. */
SPCUDA_API cudaError_t cudaPeekAtLastError(void) SPCUDA_NOEXCEPT;
/* "cudaErrorInvalidValue" ...; "unrecognized error code" for other values. */
SPCUDA_API const char* cudaGetErrorName(cudaError_t error) SPCUDA_NOEXCEPT;
/* A one-sentence description; "unrecognized error code" for other values. */
SPCUDA_API const char* cudaGetErrorString(cudaError_t error) SPCUDA_NOEXCEPT;

/* The CUDA version the layer mirrors (CUDART_VERSION). */
SPCUDA_API cudaError_t cudaDriverGetVersion(int* driverVersion) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) SPCUDA_NOEXCEPT;

/* ----------------------------------------------------------------- devices */

SPCUDA_API cudaError_t cudaSetDevice(int device) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGetDevice(int* device) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGetDeviceCount(int* count) SPCUDA_NOEXCEPT;
/* Waits for every stream of the current device (a synchronize action). */
SPCUDA_API cudaError_t cudaDeviceSynchronize(void) SPCUDA_NOEXCEPT;
/* Destroys the implicit runtime, every device's (streampool has one runtime
 * for all devices): streams, events, pools and allocations. The next call
 * creates a new one from the environment. */
SPCUDA_API cudaError_t cudaDeviceReset(void) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr,
                                              int device) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop,
                                               int device) SPCUDA_NOEXCEPT;
/* Streams carry no priority: the range is [0, 0] and any priority is taken. */
SPCUDA_API cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority,
                                                        int* greatestPriority) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device,
                                               int peerDevice) SPCUDA_NOEXCEPT;
/* Bookkeeping only, as the guide (F.10) says pools ignore it: pool access is
 * cudaMemPoolSetAccess's. */
SPCUDA_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice,
                                                  unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) SPCUDA_NOEXCEPT;
/* total: the device's capacity; free: what its pools and cudaMalloc have not
 * taken from it. */
SPCUDA_API cudaError_t cudaMemGetInfo(size_t* free, size_t* total) SPCUDA_NOEXCEPT;

/* ----------------------------------------------------------------- streams */

SPCUDA_API cudaError_t cudaStreamCreate(cudaStream_t* pStream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream,
                                                 unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags,
                                                    int priority) SPCUDA_NOEXCEPT;
/* Always 0: streams have no priority, and the range is [0, 0]. */
SPCUDA_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamQuery(cudaStream_t stream) SPCUDA_NOEXCEPT;
/* flags: cudaEventWaitDefault or cudaEventWaitExternal. */
SPCUDA_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                           unsigned int flags __dv(0)) SPCUDA_NOEXCEPT;
/* fn must not call the CUDA API (as in CUDA). */
SPCUDA_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                                          void* userData) SPCUDA_NOEXCEPT;

/* ------------------------------------------------------------------ events */

/* C++ adds cudaEventCreate(event, flags) (cuda_runtime.h). */
SPCUDA_API cudaError_t cudaEventCreate(cudaEvent_t* event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event,
                                                unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventRecord(cudaEvent_t event,
                                       cudaStream_t stream __dv(0)) SPCUDA_NOEXCEPT;
/* flags: cudaEventRecordDefault or cudaEventRecordExternal. */
SPCUDA_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream __dv(0),
                                                unsigned int flags __dv(0)) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventSynchronize(cudaEvent_t event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventQuery(cudaEvent_t event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                            cudaEvent_t end) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaEventDestroy(cudaEvent_t event) SPCUDA_NOEXCEPT;

/* ------------------------------------------------------------------ memory */

SPCUDA_API cudaError_t cudaMallocAsync(void** devPtr, size_t size,
                                       cudaStream_t hStream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                               cudaStream_t stream) SPCUDA_NOEXCEPT;
/* On the current device, straight from its upstream. */
SPCUDA_API cudaError_t cudaMalloc(void** devPtr, size_t size) SPCUDA_NOEXCEPT;
/* cudaMalloc memory: after the pointer's device has finished its work (CUDA
 * synchronizes too); pool memory: at once, the caller promising its accesses
 * are complete (guide F.3). NULL: a no-op. */
SPCUDA_API cudaError_t cudaFree(void* devPtr) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMallocHost(void** ptr, size_t size) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) SPCUDA_NOEXCEPT;
/* Makes malloc'd (or any host) memory device-accessible; see spHostRegister.
 * cudaMallocHost memory is pinned already: cudaErrorHostMemoryAlreadyRegistered. */
SPCUDA_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) SPCUDA_NOEXCEPT;
/* ptr: the pointer given to cudaHostRegister. */
SPCUDA_API cudaError_t cudaHostUnregister(void* ptr) SPCUDA_NOEXCEPT;
/* flags must be 0. The device pointer of registered or cudaMallocHost memory:
 * the host pointer itself. */
SPCUDA_API cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost,
                                                unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaFreeHost(void* ptr) SPCUDA_NOEXCEPT;
/* Managed memory is pinned host memory here, which the host and every device
 * reach; cudaFree frees it. flags: cudaMemAttachGlobal or cudaMemAttachHost
 * (the same here). */
SPCUDA_API cudaError_t cudaMallocManaged(
    void** devPtr, size_t size, unsigned int flags __dv(cudaMemAttachGlobal)) SPCUDA_NOEXCEPT;
/* On the current device's legacy stream, then waits for it (a synchronize
 * action, which may release pool memory past its threshold). */
SPCUDA_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                                  enum cudaMemcpyKind kind) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                       enum cudaMemcpyKind kind,
                                       cudaStream_t stream __dv(0)) SPCUDA_NOEXCEPT;
/* On the current device's legacy stream; waits for it only when devPtr is
 * pinned host memory, as CUDA. */
SPCUDA_API cudaError_t cudaMemset(void* devPtr, int value, size_t count) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count,
                                       cudaStream_t stream __dv(0)) SPCUDA_NOEXCEPT;
/* Memory streampool does not know is cudaMemoryTypeUnregistered (success). */
SPCUDA_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes,
                                                const void* ptr) SPCUDA_NOEXCEPT;

/* --------------------------------------------------------------- occupancy */

/* Blocks of blockSize threads that fit on one multiprocessor of the current
 * device. There is no device code to inspect, so a kernel is taken to use no
 * registers and no static shared memory: the limits are the SM's threads (in
 * whole warps), its block slots and dynamicSMemSize per block. 0 when one
 * block exceeds the device's per-block limits. */
SPCUDA_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize) SPCUDA_NOEXCEPT;
/* flags: cudaOccupancyDefault or cudaOccupancyDisableCachingOverride. */
SPCUDA_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize,
    unsigned int flags) SPCUDA_NOEXCEPT;

/* ------------------------------------------------------------------- pools */

SPCUDA_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool,
                                                   int device) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) SPCUDA_NOEXCEPT;
/* The memory-location forms (CUDA 13). location: a device (the same pools as
 * cudaDeviceGetDefaultMemPool / GetMemPool / SetMemPool) or
 * cudaMemLocationTypeHost, whose default is a pinned host pool made on first
 * request; type cudaMemAllocationTypePinned. Managed pools and NUMA locations:
 * cudaErrorNotSupported; a device ordinal out of range or a pool not of that
 * location: cudaErrorInvalidValue (the codes CUDA documents for these). */
SPCUDA_API cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool,
                                                struct cudaMemLocation* location,
                                                enum cudaMemAllocationType type) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, struct cudaMemLocation* location,
                                         enum cudaMemAllocationType type) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemSetMemPool(struct cudaMemLocation* location,
                                         enum cudaMemAllocationType type,
                                         cudaMemPool_t memPool) SPCUDA_NOEXCEPT;
/* allocType cudaMemAllocationTypePinned on a device (a device pool) or on
 * cudaMemLocationTypeHost (a pinned host pool); handleTypes None or
 * PosixFileDescriptor. */
SPCUDA_API cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool,
                                         const struct cudaMemPoolProps* poolProps) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) SPCUDA_NOEXCEPT;
/* value: uint64_t* (cuuint64_t) for the byte counts and cudaMemPoolAttrMaxPoolSize,
 * int* (or the enum) for the others. Attributes 9-14 are read-only. */
SPCUDA_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                               void* value) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                               void* value) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool,
                                         size_t minBytesToKeep) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool,
                                            const struct cudaMemAccessDesc* descList,
                                            size_t count) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                            struct cudaMemLocation* location) SPCUDA_NOEXCEPT;
/* shareableHandle: int* receiving a new fd, which the caller owns. */
SPCUDA_API cudaError_t cudaMemPoolExportToShareableHandle(
    void* shareableHandle, cudaMemPool_t memPool, enum cudaMemAllocationHandleType handleType,
    unsigned int flags) SPCUDA_NOEXCEPT;
/* shareableHandle: the fd, as (void*)(intptr_t)fd; the caller keeps it. */
SPCUDA_API cudaError_t cudaMemPoolImportFromShareableHandle(
    cudaMemPool_t* memPool, void* shareableHandle, enum cudaMemAllocationHandleType handleType,
    unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData* exportData,
                                                void* ptr) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPoolImportPointer(
    void** ptr, cudaMemPool_t memPool, struct cudaMemPoolPtrExportData* exportData) SPCUDA_NOEXCEPT;

/* -------------------------------------------------------------- IPC events */

SPCUDA_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle,
                                             cudaEvent_t event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event,
                                              cudaIpcEventHandle_t handle) SPCUDA_NOEXCEPT;

/* ------------------------------------------------------------------ graphs */

/* Graphs over the sp* API's (docs/graphs.md), with CUDA 13's prototypes:
 * edge data, where a call takes it, may be NULL or all-zero default edges
 * (anything else: cudaErrorNotSupported). Capturing the legacy stream
 * (0, cudaStreamLegacy) is cudaErrorStreamCaptureUnsupported. */
SPCUDA_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                              enum cudaStreamCaptureMode mode) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamBeginCaptureToGraph(
    cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
    const cudaGraphEdgeData* dependencyData, size_t numDependencies,
    enum cudaStreamCaptureMode mode) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamEndCapture(cudaStream_t stream,
                                            cudaGraph_t* pGraph) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaStreamIsCapturing(
    cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) SPCUDA_NOEXCEPT;
/* The dependencies are valid until the thread's next call on the stream;
 * edgeData_out, when given, is NULL (every edge is a default one). */
SPCUDA_API cudaError_t
cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                         unsigned long long* id_out __dv(0), cudaGraph_t* graph_out __dv(0),
                         const cudaGraphNode_t** dependencies_out __dv(0),
                         const cudaGraphEdgeData** edgeData_out __dv(0),
                         size_t* numDependencies_out __dv(0)) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode)
    SPCUDA_NOEXCEPT;

SPCUDA_API cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) SPCUDA_NOEXCEPT;
/* cudaErrorNotSupported for a graph with memory nodes. */
SPCUDA_API cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone,
                                      cudaGraph_t originalGraph) SPCUDA_NOEXCEPT;

/* An unregistered func is cudaErrorInvalidDeviceFunction; the arguments are
 * copied when the node is made. The kernel lasts STREAMPOOL_CUDA_KERNEL_NS
 * and declares no accesses to the stream-order checker. */
SPCUDA_API cudaError_t cudaGraphAddKernelNode(
    cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
    size_t numDependencies, const struct cudaKernelNodeParams* pNodeParams) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                const cudaGraphNode_t* pDependencies,
                                                size_t numDependencies, void* dst, const void* src,
                                                size_t count,
                                                enum cudaMemcpyKind kind) SPCUDA_NOEXCEPT;
/* The sp* memset node sets one run of bytes: rows must be contiguous (height
 * 1, or pitch == width * elementSize), and an element of 2 or 4 bytes must
 * repeat one byte; anything else is cudaErrorNotSupported. */
SPCUDA_API cudaError_t cudaGraphAddMemsetNode(
    cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
    size_t numDependencies, const struct cudaMemsetParams* pMemsetParams) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddHostNode(
    cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
    size_t numDependencies, const struct cudaHostNodeParams* pNodeParams) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                   const cudaGraphNode_t* pDependencies,
                                                   size_t numDependencies,
                                                   cudaEvent_t event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t* pDependencies,
                                                 size_t numDependencies,
                                                 cudaEvent_t event) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                             const cudaGraphNode_t* pDependencies,
                                             size_t numDependencies) SPCUDA_NOEXCEPT;
/* cudaErrorNotSupported for a child with memory nodes. */
SPCUDA_API cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                  const cudaGraphNode_t* pDependencies,
                                                  size_t numDependencies,
                                                  cudaGraph_t childGraph) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddMemAllocNode(
    cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
    size_t numDependencies, struct cudaMemAllocNodeParams* nodeParams) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t* pDependencies,
                                               size_t numDependencies, void* dptr) SPCUDA_NOEXCEPT;
/* The access descriptors are valid until the thread's next such call. */
SPCUDA_API cudaError_t cudaGraphMemAllocNodeGetParams(
    cudaGraphNode_t node, struct cudaMemAllocNodeParams* params_out) SPCUDA_NOEXCEPT;
/* dptr_out: a void*, to receive the address. */
SPCUDA_API cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node,
                                                     void* dptr_out) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                const cudaGraphNode_t* to,
                                                const cudaGraphEdgeData* edgeData,
                                                size_t numDependencies) SPCUDA_NOEXCEPT;

SPCUDA_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                                         size_t* numNodes) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* pRootNodes,
                                             size_t* pNumRootNodes) SPCUDA_NOEXCEPT;
/* edgeData, when given, receives default edges. */
SPCUDA_API cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from,
                                         cudaGraphNode_t* to, cudaGraphEdgeData* edgeData,
                                         size_t* numEdges) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node,
                                            enum cudaGraphNodeType* pType) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node,
                                                    cudaGraphNode_t* pDependencies,
                                                    cudaGraphEdgeData* edgeData,
                                                    size_t* pNumDependencies) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node,
                                                      cudaGraphNode_t* pDependentNodes,
                                                      cudaGraphEdgeData* edgeData,
                                                      size_t* pNumDependentNodes) SPCUDA_NOEXCEPT;

/* Flags: cudaGraphInstantiateFlagAutoFreeOnLaunch and ...Upload (which has
 * nothing to upload); DeviceLaunch and UseNodePriority are not supported. */
SPCUDA_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                            unsigned long long flags __dv(0)) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                     unsigned long long flags __dv(0))
    SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec,
                                       cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec,
                                       cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                           cudaGraphExecUpdateResultInfo* resultInfo)
    SPCUDA_NOEXCEPT;

SPCUDA_API cudaError_t cudaDeviceGraphMemTrim(int device) SPCUDA_NOEXCEPT;
/* value: a cuuint64_t (uint64_t). */
SPCUDA_API cudaError_t cudaDeviceGetGraphMemAttribute(int device,
                                                      enum cudaGraphMemAttributeType attr,
                                                      void* value) SPCUDA_NOEXCEPT;
/* Only the high watermarks, and only to 0. */
SPCUDA_API cudaError_t cudaDeviceSetGraphMemAttribute(int device,
                                                      enum cudaGraphMemAttributeType attr,
                                                      void* value) SPCUDA_NOEXCEPT;

/* ------------------------------------ declared, always cudaErrorNotSupported */

typedef struct cudaIpcMemHandle_st {
  char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;

/* Kernels are host code here: launch them with spcudaLaunchKernel
 * (cuda_runtime.h), which knows their argument types. */
SPCUDA_API cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                        size_t sharedMem, cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, int dstDevice,
                                            cudaStream_t stream) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle,
                                           void* devPtr) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle,
                                            unsigned int flags) SPCUDA_NOEXCEPT;
SPCUDA_API cudaError_t cudaIpcCloseMemHandle(void* devPtr) SPCUDA_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_CUDA_CUDA_RUNTIME_API_H_ */
