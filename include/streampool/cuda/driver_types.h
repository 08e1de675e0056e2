/*
 * CUDA runtime types for streampool's CUDA compatibility layer:
 * handles, enumerations and structures with CUDA's names and enumerator
 * values, so that a program's own code compiles unchanged against them.
 * Source compatible, not binary compatible: the structures carry the fields
 * programs use, in CUDA's types, not necessarily CUDA's layout.
 *
 * Handles (cudaStream_t, cudaEvent_t, cudaMemPool_t) hold the same numbers as
 * the streampool C API's handles (spStream_t, spEvent_t, spMemPool_t), so a
 * program may pass one to the other with a cast (see interop.h).
 */
#ifndef STREAMPOOL_CUDA_DRIVER_TYPES_H_
#define STREAMPOOL_CUDA_DRIVER_TYPES_H_
/* CUDA's own include guard, which programs test to know the header is in. */
#ifndef __DRIVER_TYPES_H__
#define __DRIVER_TYPES_H__
#endif

#include <stddef.h>
#include <stdint.h>

#include "host_defines.h"
#include "vector_types.h"

/* ------------------------------------------------------------------ errors */

/* The values are CUDA's. streampool returns only some of them; the others are
 * here so that programs that name them compile. */
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorCudartUnloading = 4,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidSymbol = 13,
  cudaErrorInvalidHostPointer = 16,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorMissingConfiguration = 52,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorStartupFailure = 127,
  cudaErrorInvalidKernelImage = 200,
  cudaErrorDeviceUninitialized = 201,
  cudaErrorPeerAccessUnsupported = 217,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorSymbolNotFound = 500,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchTimeout = 702,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorSetOnActiveProcess = 708,
  cudaErrorContextIsDestroyed = 709,
  cudaErrorAssert = 710,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotPermitted = 800,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureMerge = 902,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorCapturedEvent = 907,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorGraphExecUpdateFailure = 910,
  cudaErrorUnknown = 999
};
/* CUDA's alias for a bad handle. */
#define cudaErrorInvalidHandle cudaErrorInvalidResourceHandle
typedef enum cudaError cudaError_t;

/* ----------------------------------------------------------------- handles */

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;

/* The current device's legacy default stream (as stream 0). */
#define cudaStreamLegacy ((cudaStream_t)0x1)
/* The calling host thread's own default stream on the current device. */
#define cudaStreamPerThread ((cudaStream_t)0x2)

/* Stream flags. */
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01

/* Event flags. cudaEventBlockingSync is accepted and changes nothing: a
 * simulated wait never spins. */
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04

/* cudaEventRecordWithFlags / cudaStreamWaitEvent flags: in a capture, an
 * event record or wait node (docs/graphs.md). */
#define cudaEventRecordDefault 0x00
#define cudaEventRecordExternal 0x01
#define cudaEventWaitDefault 0x00
#define cudaEventWaitExternal 0x01

/* cudaHostAlloc / cudaMallocHost flags. Pinned host memory is usable from
 * every device, so all of them are accepted and mean the same. */
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04

/* cudaHostRegister flags: the host and every device share one address space,
 * so the device pointer is the host pointer whatever the flags; ReadOnly
 * makes the checker report kernel writes. */
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterIoMemory 0x04
#define cudaHostRegisterReadOnly 0x08

/* cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags flags. There is no
 * cache to configure, so both mean the same. */
#define cudaOccupancyDefault 0x00
#define cudaOccupancyDisableCachingOverride 0x01

/* cudaMallocManaged flags. */
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaMemAttachSingle 0x04

#define cudaCpuDeviceId ((int)-1)
#define cudaInvalidDeviceId ((int)-2)

#define CUDA_IPC_HANDLE_SIZE 64

/* A host function enqueued with cudaLaunchHostFunc. */
typedef void(CUDART_CB* cudaHostFn_t)(void* userData);

/* ------------------------------------------------------------------ memory */

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};

/* What cudaPointerGetAttributes tells about a pointer. */
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

/* ----------------------------------------------------------------- devices */

enum cudaComputeMode {
  cudaComputeModeDefault = 0,
  cudaComputeModeExclusive = 1,
  cudaComputeModeProhibited = 2,
  cudaComputeModeExclusiveProcess = 3
};

/* The attributes cudaDeviceGetAttribute answers; any other value is
 * cudaErrorInvalidValue. */
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxBlockDimX = 2,
  cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4,
  cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMaxGridDimY = 6,
  cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrTotalConstantMemory = 9,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMaxPitch = 11,
  cudaDevAttrMaxRegistersPerBlock = 12,
  cudaDevAttrClockRate = 13,
  cudaDevAttrTextureAlignment = 14,
  cudaDevAttrGpuOverlap = 15,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrKernelExecTimeout = 17,
  cudaDevAttrIntegrated = 18,
  cudaDevAttrCanMapHostMemory = 19,
  cudaDevAttrComputeMode = 20,
  cudaDevAttrConcurrentKernels = 31,
  cudaDevAttrEccEnabled = 32,
  cudaDevAttrPciBusId = 33,
  cudaDevAttrPciDeviceId = 34,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrAsyncEngineCount = 40,
  cudaDevAttrUnifiedAddressing = 41,
  cudaDevAttrPciDomainId = 50,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82,
  cudaDevAttrManagedMemory = 83,
  cudaDevAttrConcurrentManagedAccess = 89,
  cudaDevAttrMaxBlocksPerMultiprocessor = 106,
  cudaDevAttrMemoryPoolsSupported = 115,
  cudaDevAttrMemoryPoolSupportedHandleTypes = 119
};

/* A device's properties (cudaGetDeviceProperties): CUDA's field names and
 * types for the fields programs commonly read; a simulated device reports
 * plausible values and its configured capacity as totalGlobalMem. */
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int concurrentManagedAccess;
  int memoryPoolsSupported;
  unsigned int memoryPoolSupportedHandleTypes;
};

/* ------------------------------------------------------------------- pools */

enum cudaMemPoolAttr {
  cudaMemPoolReuseFollowEventDependencies = 0x1,   /* int */
  cudaMemPoolReuseAllowOpportunistic = 0x2,        /* int */
  cudaMemPoolReuseAllowInternalDependencies = 0x3, /* int */
  cudaMemPoolAttrReleaseThreshold = 0x4,           /* cuuint64_t (uint64_t) */
  cudaMemPoolAttrReservedMemCurrent = 0x5,         /* uint64_t, read-only */
  cudaMemPoolAttrReservedMemHigh = 0x6,            /* uint64_t, reset by setting 0 */
  cudaMemPoolAttrUsedMemCurrent = 0x7,             /* uint64_t, read-only */
  cudaMemPoolAttrUsedMemHigh = 0x8,                /* uint64_t, reset by setting 0 */
  /* Read-only, also on imported and default pools; the values follow CUDA
   * 13's cudaMemPoolAttr (CUDA runtime API reference, "Stream Ordered Memory
   * Allocator"; CUDA 13.3 driver_types.h). */
  cudaMemPoolAttrAllocationType = 0x9,     /* enum cudaMemAllocationType */
  cudaMemPoolAttrExportHandleTypes = 0xA,  /* enum cudaMemAllocationHandleType */
  cudaMemPoolAttrLocationId = 0xB,         /* int; cudaCpuDeviceId for a host pool */
  cudaMemPoolAttrLocationType = 0xC,       /* enum cudaMemLocationType */
  cudaMemPoolAttrMaxPoolSize = 0xD,        /* cuuint64_t; 0 = no maximum */
  cudaMemPoolAttrHwDecompressEnabled = 0xE /* int; always 0 here */
};

enum cudaMemLocationType {
  cudaMemLocationTypeInvalid = 0,
  cudaMemLocationTypeNone = 0, /* a managed pool's "no preferred location" */
  cudaMemLocationTypeDevice = 1,
  cudaMemLocationTypeHost = 2,
  cudaMemLocationTypeHostNuma = 3,
  cudaMemLocationTypeHostNumaCurrent = 4,
  cudaMemLocationTypeInvisible = 5 /* CUDA 13: an imported pool's device not visible here */
};

struct cudaMemLocation {
  enum cudaMemLocationType type;
  int id;
};

enum cudaMemAccessFlags {
  cudaMemAccessFlagsProtNone = 0,
  cudaMemAccessFlagsProtRead = 1,
  cudaMemAccessFlagsProtReadWrite = 3
};

struct cudaMemAccessDesc {
  struct cudaMemLocation location;
  enum cudaMemAccessFlags flags;
};

enum cudaMemAllocationType {
  cudaMemAllocationTypeInvalid = 0x0,
  cudaMemAllocationTypePinned = 0x1,
  cudaMemAllocationTypeManaged = 0x2, /* cudaErrorNotSupported wherever it is passed */
  cudaMemAllocationTypeMax = 0x7FFFFFFF
};

enum cudaMemAllocationHandleType {
  cudaMemHandleTypeNone = 0x0,
  cudaMemHandleTypePosixFileDescriptor = 0x1,
  cudaMemHandleTypeWin32 = 0x2,
  cudaMemHandleTypeWin32Kmt = 0x4,
  cudaMemHandleTypeFabric = 0x8
};

/* The properties of a pool made by cudaMemPoolCreate. reserved must be zero. */
struct cudaMemPoolProps {
  enum cudaMemAllocationType allocType;
  enum cudaMemAllocationHandleType handleTypes;
  struct cudaMemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};

/* An allocation of an exportable pool, as another process imports it. */
struct cudaMemPoolPtrExportData {
  unsigned char reserved[64];
};

/* An interprocess event, as another process opens it. */
typedef struct cudaIpcEventHandle_st {
  char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcEventHandle_t;

/* ------------------------------------------------------------------ graphs */

/* Graphs hold the same numbers as the sp* API's (spGraph_t, spGraphNode_t,
 * spGraphExec_t). */
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphNode_st* cudaGraphNode_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};

/* The kinds of nodes; streampool makes none of the external-semaphore or
 * conditional kinds. */
enum cudaGraphNodeType {
  cudaGraphNodeTypeKernel = 0x00,
  cudaGraphNodeTypeMemcpy = 0x01,
  cudaGraphNodeTypeMemset = 0x02,
  cudaGraphNodeTypeHost = 0x03,
  cudaGraphNodeTypeGraph = 0x04,
  cudaGraphNodeTypeEmpty = 0x05,
  cudaGraphNodeTypeWaitEvent = 0x06,
  cudaGraphNodeTypeEventRecord = 0x07,
  cudaGraphNodeTypeExtSemaphoreSignal = 0x08,
  cudaGraphNodeTypeExtSemaphoreWait = 0x09,
  cudaGraphNodeTypeMemAlloc = 0x0a,
  cudaGraphNodeTypeMemFree = 0x0b,
  cudaGraphNodeTypeConditional = 0x0d,
  cudaGraphNodeTypeCount
};

/* A kernel node: func must be registered (spcudaRegisterKernel, in
 * cuda_runtime.h), which tells how to copy the arguments kernelParams points
 * at; extra is not supported. */
struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim;
  dim3 blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};

/* A memset node: height rows of width elements of elementSize (1, 2 or 4)
 * bytes, pitch bytes apart. */
struct cudaMemsetParams {
  void* dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  size_t width;
  size_t height;
};

struct cudaHostNodeParams {
  cudaHostFn_t fn;
  void* userData;
};

/* An allocation node: poolProps must be pinned memory on a device; dptr is
 * set when the node is made. */
struct cudaMemAllocNodeParams {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  void* dptr;
};

/* An edge's ports and type. Only the default edge (all zero) is supported. */
typedef struct cudaGraphEdgeData_st {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
} cudaGraphEdgeData;

/* cudaGraphInstantiate's flags. */
enum cudaGraphInstantiateFlags {
  cudaGraphInstantiateFlagAutoFreeOnLaunch = 1,
  cudaGraphInstantiateFlagUpload = 2,
  cudaGraphInstantiateFlagDeviceLaunch = 4,
  cudaGraphInstantiateFlagUseNodePriority = 8
};

enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0x0,
  cudaGraphExecUpdateError = 0x1,
  cudaGraphExecUpdateErrorTopologyChanged = 0x2,
  cudaGraphExecUpdateErrorNodeTypeChanged = 0x3,
  cudaGraphExecUpdateErrorFunctionChanged = 0x4,
  cudaGraphExecUpdateErrorParametersChanged = 0x5,
  cudaGraphExecUpdateErrorNotSupported = 0x6,
  cudaGraphExecUpdateErrorUnsupportedFunctionChange = 0x7,
  cudaGraphExecUpdateErrorAttributesChanged = 0x8
};

/* Why cudaGraphExecUpdate refused. errorNode and errorFromNode are always
 * NULL here. */
typedef struct cudaGraphExecUpdateResultInfo_st {
  enum cudaGraphExecUpdateResult result;
  cudaGraphNode_t errorNode;
  cudaGraphNode_t errorFromNode;
} cudaGraphExecUpdateResultInfo;

/* A device's graph memory: used backs graph allocations, reserved is all the
 * device holds for graphs (cuuint64_t values). */
enum cudaGraphMemAttributeType {
  cudaGraphMemAttrUsedMemCurrent = 0x0,
  cudaGraphMemAttrUsedMemHigh = 0x1,
  cudaGraphMemAttrReservedMemCurrent = 0x2,
  cudaGraphMemAttrReservedMemHigh = 0x3
};

#endif /* STREAMPOOL_CUDA_DRIVER_TYPES_H_ */
