/**
 * \file
 * streampool C API.
 *
 * Stream-ordered memory pools with the semantics of cudaMallocAsync /
 * cudaFreeAsync / cudaMemPool_t, over a deterministic stream/event simulator.
 * Every handle is an opaque, generation-tagged id: a destroyed or foreign
 * handle is detected and answered with spErrorInvalidResourceHandle, never
 * dereferenced. Every call is thread-safe. A call that fails changes nothing,
 * except that a failed allocation counts one failedAllocCount.
 *
 * Host functions enqueued with spLaunchHostFunc must not call sp* functions:
 * such calls return spErrorNotSupported.
 */
#ifndef STREAMPOOL_STREAMPOOL_H_
#define STREAMPOOL_STREAMPOOL_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SP_API
#else
/** Marks a C API function: exported from a shared libstreampool (default
 * visibility; everything else in the library is hidden). */
#define SP_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
/** Every entry point is noexcept in C++: no exception ever crosses the C API
 * (the library turns them into spError_t values), and the definitions must
 * match these declarations, so one that is not noexcept fails to compile. */
#define SP_NOEXCEPT noexcept
#else
#define SP_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

/** What every sp* call returns. The values are CUDA's (cudaError_t) for the
 * same conditions. */
typedef enum spError {
  spSuccess = 0,                  /**< the call did what it says */
  spErrorInvalidValue = 1,        /**< a bad argument (null out-pointer, bad size, ...) */
  spErrorMemoryAllocation = 2,    /**< out of memory (pool maxSize, device capacity, upstream) */
  spErrorInsufficientDriver = 35, /**< spExecutorCuda: no usable CUDA driver (libcuda.so.1
                                     missing, too old, or failing to initialize) */
  spErrorNoDevice = 100,          /**< spExecutorCuda: the driver sees no CUDA device */
  spErrorInvalidDevice = 101,     /**< a device index out of range */
  spErrorPeerAccessUnsupported = 217,       /**< a pool or pointer of another device */
  spErrorInvalidResourceHandle = 400,       /**< a destroyed, foreign or wrong-kind handle */
  spErrorNotReady = 600,                    /**< a query: work still pending */
  spErrorHostMemoryAlreadyRegistered = 712, /**< spHostRegister: bytes of the range are
                                               registered already */
  spErrorHostMemoryNotRegistered = 713,     /**< no registered host range there */
  spErrorIllegalState = 401,                /**< a capture begun on a stream already capturing */
  spErrorNotSupported = 801, /**< a feature not implemented, or an sp* call from a host function */
  spErrorStreamCaptureUnsupported =
      900,                               /**< not permitted while the stream (or, by the capture
                                            mode, the thread) captures; the capture is invalidated */
  spErrorStreamCaptureInvalidated = 901, /**< the capture was invalidated by an earlier error */
  spErrorStreamCaptureMerge = 902,       /**< would merge two independent captures */
  spErrorStreamCaptureUnmatched = 903,   /**< the capture was not begun on this stream */
  spErrorStreamCaptureUnjoined = 904,    /**< a stream forked into the capture was not joined
                                            back into its origin */
  spErrorStreamCaptureIsolation = 905,   /**< a dependency would cross the capture's boundary */
  spErrorStreamCaptureImplicit = 906,    /**< the legacy stream would depend on a capture */
  spErrorCapturedEvent = 907,            /**< a query or synchronize of an event recorded in a
                                            capture */
  spErrorStreamCaptureWrongThread = 908, /**< a Global or ThreadLocal capture ended on another
                                            thread */
  spErrorGraphExecUpdateFailure = 910,   /**< spGraphExecUpdate: the graph differs in a way an
                                            update cannot carry; nothing changed */
  spErrorUnknown = 999 /**< an internal failure of no other kind; nothing changed */
} spError_t;

/** The enumerator's name, e.g. "spErrorInvalidValue"; "spErrorUnknown" for a
 * value that is not an spError. */
SP_API const char* spGetErrorName(spError_t e) SP_NOEXCEPT;
/** A one-sentence description of the error. */
SP_API const char* spGetErrorString(spError_t e) SP_NOEXCEPT;

/* ----------------------------------------------------------------- handles */

/** A runtime: simulated devices with their streams, events and pools. */
typedef struct spRuntime_st* spRuntime_t;
/** A stream of one runtime's device (cudaStream_t). */
typedef struct spStream_st* spStream_t;
/** An event of one runtime (cudaEvent_t). */
typedef struct spEvent_st* spEvent_t;
/** A memory pool of one runtime (cudaMemPool_t). */
typedef struct spMemPool_st* spMemPool_t;

/* ----------------------------------------------------------------- runtime */

/** What memory Device pools and spMalloc get from the system. */
typedef enum spBacking {
  /** Real, touchable memory (anonymous mmap). */
  spBackingHost = 0,
  /** Address space reserved (PROT_NONE), never touched: replays workloads
   * larger than the machine's memory. */
  spBackingAddressOnly = 1
} spBacking;

/** How a runtime's streams run. */
typedef enum spExecutorKind {
  /** Deterministic virtual time (the default). */
  spExecutorSimulator = 0,
  /** A worker thread per stream: kernels sleep their duration, host functions
   * and copies run on the stream's worker, synchronize calls block. */
  spExecutorThreads = 1,
  /** The machine's CUDA devices: streams are CUstreams, events CUevents,
   * device pools map device memory with the driver's VMM API. The driver is
   * loaded at run time; without one spRuntimeCreate returns
   * spErrorInsufficientDriver, without a device spErrorNoDevice. deviceCount
   * 0 means every visible device, deviceCapacity 0 the device's total
   * memory (a smaller value caps what the pools may map); backing, apiCallNs
   * and copyBytesPerUs must keep their defaults. */
  spExecutorCuda = 2
} spExecutorKind;

/** A runtime's configuration; spRuntimeConfigInit fills the defaults. */
/** What destroying a runtime does with allocations never freed (pool and
 * synchronous ones). The environment variable STREAMPOOL_LEAK_CHECK=report|1
 * (0: off) sets it for every runtime of the process, the CUDA and AscendCL
 * faces' included (their own STREAMPOOL_CUDA_LEAK_CHECK and
 * STREAMPOOL_ACL_LEAK_CHECK set it for their implicit runtime). */
typedef enum spLeakCheck {
  spLeakCheckOff = 0,    /**< nothing */
  spLeakCheckReport = 1, /**< lists them on stderr: pointer, size, pool, stream, device, sequence */
  spLeakCheckFail = 2    /**< lists them, then ends the process with exit status 1 */
} spLeakCheck;

/** A runtime's configuration (streampool::RuntimeConfig in C++); spRuntimeConfigInit fills
 * the defaults. */
typedef struct spRuntimeConfig {
  int deviceCount;         /**< simulated devices, default 1 */
  uint64_t deviceCapacity; /**< bytes of memory per device, default 1 GiB */
  spBacking backing;       /**< default spBackingHost */
  uint64_t apiCallNs;      /**< virtual host time charged per API call, default 0 */
  uint64_t copyBytesPerUs; /**< bandwidth of async copies and fills, default 1000000 */
  spExecutorKind executor; /**< how streams run, default spExecutorSimulator; added after
                              the fields above, so zero-initialized configs keep the default */
  int oomReclaimOff;       /**< 1 turns off the out-of-memory reclaim (before an allocation
                              fails, the pools of its device release what they hold READY and
                              it is tried again); default 0, on */
  spLeakCheck leakCheck;   /**< what spRuntimeDestroy does with allocations never freed;
                              default spLeakCheckOff */
} spRuntimeConfig;

/** Fills the defaults. */
SP_API void spRuntimeConfigInit(spRuntimeConfig* cfg) SP_NOEXCEPT;
/** cfg NULL = defaults. deviceCount must be in [1, 64], deviceCapacity and
 * copyBytesPerUs non-zero (spExecutorCuda: deviceCount 0 = every visible
 * device and at most that many, deviceCapacity 0 = the device's memory). */
SP_API spError_t spRuntimeCreate(spRuntime_t* rt, const spRuntimeConfig* cfg) SP_NOEXCEPT;
/** Frees everything the runtime owns: streams, events, pools, allocations. */
SP_API spError_t spRuntimeDestroy(spRuntime_t rt) SP_NOEXCEPT;

/** An embedder's out-of-memory handler: called when an allocation from `pool`
 * of `size` bytes still finds no memory after the runtime's reclaim, with no
 * library lock held. It may call the API (free, trim, synchronize); a
 * non-zero return asks for one more try (and the handler is called again if
 * that fails too), zero lets the allocation fail with spErrorMemoryAllocation. */
typedef int (*spOomHandler)(void* user, spMemPool_t pool, size_t size);
/** Sets the runtime's out-of-memory handler; fn NULL removes it. */
SP_API spError_t spRuntimeSetOomHandler(spRuntime_t rt, spOomHandler fn, void* user) SP_NOEXCEPT;

/* ----------------------------------------------------------------- streams */

/** Flags of spStreamCreate. */
enum {
  spStreamDefault = 0,    /**< a blocking stream: ordered with the legacy stream */
  spStreamNonBlocking = 1 /**< not ordered with the legacy stream */
};

/** A new stream on `device` of `rt`; flags: spStreamDefault or
 * spStreamNonBlocking. */
SP_API spError_t spStreamCreate(spStream_t* s, spRuntime_t rt, int device,
                                unsigned flags) SP_NOEXCEPT;
/** Work already enqueued still completes and frees enqueued on the stream stay
 * valid; the handle is invalid at once. The legacy stream cannot be destroyed. */
SP_API spError_t spStreamDestroy(spStream_t s) SP_NOEXCEPT;
/** The device's legacy default (null) stream. */
SP_API spError_t spStreamGetLegacy(spStream_t* s, spRuntime_t rt, int device) SP_NOEXCEPT;
/** The native stream behind `s`: the CUstream of a spExecutorCuda runtime
 * (NULL for a device's legacy stream, which is CUDA's legacy default stream),
 * the embedder's stream of a StreamAdapter runtime. A simulator or threads
 * runtime: spErrorNotSupported. */
SP_API spError_t spStreamGetNative(spStream_t s, void** native) SP_NOEXCEPT;
/** A stream of `rt` on `device` over a native stream the caller made (a
 * CUstream of the device's primary context for spExecutorCuda; the
 * embedder's stream for a StreamAdapter runtime). streampool never destroys
 * the native stream: spStreamDestroy ends streampool's use of it, and the
 * caller destroys it only after that. NULL native on a CUDA runtime is the
 * device's legacy stream (returned as spStreamGetLegacy's handle). A simulator
 * or threads runtime: spErrorNotSupported. */
SP_API spError_t spStreamCreateFromNative(spStream_t* s, spRuntime_t rt, int device,
                                          void* native) SP_NOEXCEPT;
/** Waits until all work enqueued on s has completed (the simulator advances
 * host time to it), then makes the frees it proves complete reusable in every
 * pool and applies the pools' release thresholds. */
SP_API spError_t spStreamSynchronize(spStream_t s) SP_NOEXCEPT;
/** spSuccess when all its work has completed, else spErrorNotReady. */
SP_API spError_t spStreamQuery(spStream_t s) SP_NOEXCEPT;
/** Later work on s waits for the event's latest record; a never-recorded event
 * is a no-op. */
SP_API spError_t spStreamWaitEvent(spStream_t s, spEvent_t e) SP_NOEXCEPT;
/** Flags of spStreamWaitEventWithFlags (CUDA's cudaEventWaitDefault,
 * cudaEventWaitExternal). */
enum { spEventWaitDefault = 0, spEventWaitExternal = 1 };
/** spStreamWaitEvent; on a capturing stream spEventWaitExternal makes an event
 * wait node, which waits at each launch for e's latest record then (inside
 * the graph or not) instead of joining a capture. Other bits:
 * spErrorInvalidValue. */
SP_API spError_t spStreamWaitEventWithFlags(spStream_t s, spEvent_t e, unsigned flags) SP_NOEXCEPT;
/** Waits until all work on every stream of `device` has completed; a
 * synchronize action like spStreamSynchronize. */
SP_API spError_t spDeviceSynchronize(spRuntime_t rt, int device) SP_NOEXCEPT;

/* ------------------------------------------------------------------ events */

/** A new event of `rt`, never recorded. */
SP_API spError_t spEventCreate(spEvent_t* e, spRuntime_t rt) SP_NOEXCEPT;

/** Event flags. spEventInterprocess needs spEventDisableTiming (as in CUDA);
 * spEventElapsedTime on an event without timing is
 * spErrorInvalidResourceHandle. */
enum { spEventDefault = 0, spEventDisableTiming = 2, spEventInterprocess = 4 };
/** A new event of `rt` with `flags` (spEventDisableTiming, spEventInterprocess);
 * other bits: spErrorInvalidValue. */
SP_API spError_t spEventCreateWithFlags(spEvent_t* e, spRuntime_t rt, unsigned flags) SP_NOEXCEPT;
/** Destroys the event; waits already enqueued on it keep their meaning. */
SP_API spError_t spEventDestroy(spEvent_t e) SP_NOEXCEPT;
/** Captures the work enqueued on s so far; replaces an earlier record. */
SP_API spError_t spEventRecord(spEvent_t e, spStream_t s) SP_NOEXCEPT;
/** Flags of spEventRecordWithFlags (CUDA's cudaEventRecordDefault,
 * cudaEventRecordExternal). */
enum { spEventRecordDefault = 0, spEventRecordExternal = 1 };
/** spEventRecord; on a capturing stream spEventRecordExternal makes an event
 * record node instead, which records e at each launch (e keeps its last
 * record until then, so no stream joins the capture by it). Other bits:
 * spErrorInvalidValue. */
SP_API spError_t spEventRecordWithFlags(spEvent_t e, spStream_t s, unsigned flags) SP_NOEXCEPT;
/** Waits until the event's latest record has completed; a synchronize action
 * like spStreamSynchronize. On a never-recorded event: spSuccess. */
SP_API spError_t spEventSynchronize(spEvent_t e) SP_NOEXCEPT;
/** spSuccess when the latest record completed (or never recorded), else
 * spErrorNotReady. */
SP_API spError_t spEventQuery(spEvent_t e) SP_NOEXCEPT;
/** Virtual milliseconds between two completed records (spErrorNotReady while
 * either is incomplete, spErrorInvalidResourceHandle if never recorded,
 * spErrorInvalidValue if either is at UINT64_MAX, past representable time). */
SP_API spError_t spEventElapsedTime(float* ms, spEvent_t start, spEvent_t end) SP_NOEXCEPT;

/* -------------------------------------------------------------------- work */

/** A byte range a kernel reads or writes, for the stream-order checker. */
typedef struct spAccess {
  const void* ptr; /**< first byte */
  size_t size;     /**< bytes */
  int write;       /**< non-zero: written (else read) */
} spAccess;

/** A kernel of durationNs virtual ns that reads/writes the declared ranges.
 * spExecutorCuda: a device kernel spinning durationNs of GPU time; a
 * StreamAdapter runtime: nothing runs (the embedder launches its own), the
 * accesses are declared to the checker. */
SP_API spError_t spLaunchKernel(spStream_t s, uint64_t durationNs, const spAccess* accesses,
                                size_t count) SP_NOEXCEPT;
/** fn(userData) runs on the host once the host observes the op complete, in
 * (completion time, enqueue order); spExecutorCuda: cuLaunchHostFunc, on the
 * driver's thread when the stream reaches it. */
SP_API spError_t spLaunchHostFunc(spStream_t s, void (*fn)(void*), void* userData) SP_NOEXCEPT;
/** The host spends ns of virtual time (real executors and adapters: the
 * thread sleeps); spErrorInvalidValue, and no time spent, if host time would
 * reach UINT64_MAX (README: virtual time saturates). */
SP_API spError_t spHostAdvance(spRuntime_t rt, uint64_t ns) SP_NOEXCEPT;
/** Host time now in ns: virtual with the simulator, steady-clock with threads. */
SP_API spError_t spHostNow(spRuntime_t rt, uint64_t* ns) SP_NOEXCEPT;

/** Lasts bytes / copyBytesPerUs microseconds; with Host backing the bytes
 * really move, no later than the synchronize or query that observes it.
 * spExecutorCuda: cuMemcpyAsync (any direction, unified addressing). */
SP_API spError_t spMemcpyAsync(void* dst, const void* src, size_t bytes, spStream_t s) SP_NOEXCEPT;
/** Sets bytes of dst to (unsigned char)value, in stream order; timed and
 * moved like spMemcpyAsync (spExecutorCuda: cuMemsetD8Async). */
SP_API spError_t spMemsetAsync(void* dst, int value, size_t bytes, spStream_t s) SP_NOEXCEPT;

/* --------------------------------------------------------------- recording */

/** Writes the runtime's history from now on to the file at path, as a
 * streampool trace v1 (streams, events, kernels, copies, synchronizes,
 * queries, host time, pools with their settings, and every allocation with
 * the rule, chunk and offset it got); streampool-replay replays it, and at
 * the recorded settings reproduces every decision of a recording begun with
 * the runtime. spErrorInvalidValue for a NULL or empty path, a file that
 * cannot be created, or a runtime already recording. */
SP_API spError_t spRuntimeStartRecording(spRuntime_t rt, const char* path) SP_NOEXCEPT;
/** Completes the file (spRuntimeDestroy does too). spErrorInvalidValue when
 * the runtime is not recording; spErrorUnknown when writing the file failed
 * (the recording has ended all the same). */
SP_API spError_t spRuntimeStopRecording(spRuntime_t rt) SP_NOEXCEPT;

/* ----------------------------------- pool types, properties and attributes */

/** What memory a pool hands out (see spMemPoolProps and the README's pool
 * variant table). */
typedef enum spMemAllocationType {
  spMemAllocationTypeDevice = 1,
  spMemAllocationTypePinnedHost = 2,
  spMemAllocationTypeHugePage = 3,
  spMemAllocationTypeDvpp = 4
} spMemAllocationType;

/** Which pages back HugePage and Dvpp pools (ACL_MEM_MALLOC_HUGE_FIRST /
 * HUGE_ONLY / NORMAL_ONLY). */
typedef enum spPagePolicy {
  spPageHugeFirst = 0,
  spPageHugeOnly = 1,
  spPageNormalOnly = 2
} spPagePolicy;

/** How a pool grows (spMemPoolProps.growth; docs/design.md "Block lifecycle"). */
typedef enum spPoolGrowth {
  /** Expandable where the upstream can reserve address space, else chunked. */
  spPoolGrowthDefault = 0,
  /** Each growth maps its own ALIGN_UP(size, 2 MiB) chunk; chunks are the unit
   * of release and blocks never span them (CUDA-like chunk behaviour). */
  spPoolGrowthChunked = 1,
  /** A reserved address range mapped in 2 MiB granules: free blocks coalesce
   * across growths, release unmaps whole granules (spErrorNotSupported over
   * an upstream that cannot reserve). */
  spPoolGrowthExpandable = 2
} spPoolGrowth;

/** The properties of a pool made by spMemPoolCreate (cudaMemPoolProps). */
typedef struct spMemPoolProps {
  spMemAllocationType allocType; /**< Device unless a variant is wanted */
  int device;                    /**< location */
  size_t maxSize;                /**< 0 = the device's capacity */
  spPagePolicy pagePolicy;       /**< HugePage and Dvpp pools */
  unsigned handleTypes;          /**< 0 = not exportable */
  int growth;                    /**< an spPoolGrowth; 0 = spPoolGrowthDefault */
} spMemPoolProps;

/** Pool attributes, as cudaMemPoolAttr (spMemPoolSetAttribute /
 * spMemPoolGetAttribute). 1-14 are CUDA 13's cudaMemPoolAttr values (the CUDA
 * runtime API reference, "Stream Ordered Memory Allocator", and CUDA 13.3's
 * driver_types.h); streampool's own attributes start at 0x1000 so that CUDA's
 * later ones never meet them. */
typedef enum spMemPoolAttr {
  spMemPoolReuseFollowEventDependencies = 1,
  spMemPoolReuseAllowOpportunistic = 2,
  spMemPoolReuseAllowInternalDependencies = 3,
  spMemPoolAttrReleaseThreshold = 4,
  spMemPoolAttrReservedMemCurrent = 5,
  spMemPoolAttrReservedMemHigh = 6,
  spMemPoolAttrUsedMemCurrent = 7,
  spMemPoolAttrUsedMemHigh = 8,
  /** int, read-only: the pool's spMemAllocationType */
  spMemPoolAttrAllocationType = 9,
  /** int, read-only: the handle types the pool can be exported as (an
   * imported pool: 0, it cannot be exported again) */
  spMemPoolAttrExportHandleTypes = 10,
  /** int, read-only: the pool's device; -1 for a pinned host pool */
  spMemPoolAttrLocationId = 11,
  /** int, read-only: an spMemLocationType (a pinned host pool: Host) */
  spMemPoolAttrLocationType = 12,
  /** uint64_t, read-only: the maxSize the pool was made with; 0 = no limit of
   * its own (the device's capacity bounds it); an imported pool: 0 */
  spMemPoolAttrMaxPoolSize = 13,
  /** int, read-only: always 0 (no pool uses hardware decompression) */
  spMemPoolAttrHwDecompressEnabled = 14,
  /** int, read-only: spPoolGrowthChunked or spPoolGrowthExpandable */
  spMemPoolAttrGrowth = 0x1000,
  /** int, exactly 0 or 1 (default 1): per-stream front caches on or off. Off,
   * every allocation takes the central exact best fit; turning them off
   * flushes what they hold into the central index. */
  spMemPoolAttrFrontCache = 0x1001,
  /** int, exactly 0 or 1 (default 1): with spMemPoolReuseAllowInternalDependencies
   * on, serve an allocation from another stream's pending free before growing
   * when the wait this inserts delays nothing (the free completes, as far as the
   * executor can tell, before the stream reaches the allocation anyway). 0 keeps
   * CUDA's order: growth before any wait. */
  spMemPoolAttrWaitBeforeGrowth = 0x1002,
  /** uint64_t (default UINT64_MAX, no limit): with
   * spMemPoolReuseAllowInternalDependencies on, an allocation whose growth would
   * take the reserved bytes past this waits for other streams' pending frees
   * first, when they can serve it. 0 waits before every growth. */
  spMemPoolAttrSoftReservedLimit = 0x1003
} spMemPoolAttr;

/* -------------------------------------------------------------- allocation */

/** From the current pool of the stream's device. size 0: spSuccess, *ptr NULL. */
SP_API spError_t spMallocAsync(void** ptr, size_t size, spStream_t s) SP_NOEXCEPT;
/** From `pool`, in stream order of s (the pool may be of another device than
 * s only if it is a pinned host pool). size 0: spSuccess, *ptr NULL. */
SP_API spError_t spMallocFromPoolAsync(void** ptr, size_t size, spMemPool_t pool,
                                       spStream_t s) SP_NOEXCEPT;
/** Any stream, any device; also frees spMalloc memory. NULL: a no-op. */
SP_API spError_t spFreeAsync(void* ptr, spStream_t s) SP_NOEXCEPT;
/** Marks the live stream-ordered allocation at ptr (its start) as used by
 * `stream` besides the stream that will free it, in the spirit of PyTorch's
 * record_stream. Its spFreeAsync is then ordered after `stream`'s work
 * enqueued up to the free, as well as after the freeing stream: the pool
 * records `stream`'s position at the free and reuses the bytes on no stream
 * before both are complete (a synchronize proves it, or, with
 * spMemPoolAttrReuseAllowOpportunistic, both are observed complete). The
 * freeing stream waits for nothing. Several streams may be marked; marking
 * the freeing stream itself changes nothing. ptr not the start of a live
 * pool allocation (spMalloc memory included), or NULL: spErrorInvalidValue. */
SP_API spError_t spMemRecordUse(void* ptr, spStream_t stream) SP_NOEXCEPT;
/** Synchronous, straight from the device's upstream. */
SP_API spError_t spMalloc(void** ptr, size_t size, spRuntime_t rt, int device) SP_NOEXCEPT;
/** Synchronous free of spMalloc memory or of a pool allocation; the caller
 * promises all access is complete. Not for spMallocHost memory. */
SP_API spError_t spFree(spRuntime_t rt, void* ptr) SP_NOEXCEPT;
/** Synchronous pinned host memory (cudaMallocHost, aclrtMallocHost): the
 * host's own pages, touchable whatever the runtime's backing, 64-B aligned,
 * usable from every device's streams; spPointerGetAttributes reports device
 * -1 and a NULL pool. Counted against no device. size 0: spSuccess, *ptr NULL. */
SP_API spError_t spMallocHost(void** ptr, size_t size, spRuntime_t rt) SP_NOEXCEPT;
/** Frees spMallocHost memory at once; the caller promises all access is
 * complete. NULL: a no-op. Any other pointer: spErrorInvalidValue. */
SP_API spError_t spFreeHost(spRuntime_t rt, void* ptr) SP_NOEXCEPT;

/* ------------------------------------------------ host memory registration */

/** How registered host memory may be used (cudaHostRegister's flags, same
 * values). Portable, Mapped and IoMemory change nothing here: every device of
 * the runtime shares one address space with the host, so registered memory is
 * mapped for all of them at the address it has on the host. */
typedef enum spHostRegisterFlags {
  spHostRegisterDefault = 0,  /**< read and write, for every device */
  spHostRegisterPortable = 1, /**< for every device (always so here) */
  spHostRegisterMapped = 2,   /**< a device address exists (always so here) */
  spHostRegisterIoMemory = 4, /**< I/O memory: accepted like any host memory */
  spHostRegisterReadOnly = 8  /**< kernels may only read it: the checker reports a write
                                 (spCheckNoAccess) */
} spHostRegisterFlags;

/** Makes [ptr, ptr + size) of host memory device-accessible: kernels may
 * name it in their accesses, and copies and fills may use it as any host
 * memory. The memory stays the caller's: the runtime neither maps nor frees
 * it, and the caller keeps it alive until spHostUnregister. Host memory the
 * runtime does not manage, or a part of spMallocHost memory, may be
 * registered; device memory may not (spErrorInvalidValue). NULL, size 0, a
 * range that wraps, or flags beyond spHostRegisterFlags: spErrorInvalidValue.
 * A range sharing a byte with a registered one:
 * spErrorHostMemoryAlreadyRegistered. Freeing spMallocHost memory that holds
 * a registered range ends the registration; the checker reports it
 * (spCheckFreeWhileRegistered). */
SP_API spError_t spHostRegister(spRuntime_t rt, void* ptr, size_t size,
                                unsigned int flags) SP_NOEXCEPT;
/** Ends the registration that starts at ptr (the pointer given to
 * spHostRegister); the caller promises no work still uses it. Any other
 * pointer: spErrorHostMemoryNotRegistered; NULL: spErrorInvalidValue. */
SP_API spError_t spHostUnregister(spRuntime_t rt, void* ptr) SP_NOEXCEPT;
/** The device address of hostPtr, any byte of a registered range: hostPtr
 * itself (one address space). Unregistered: spErrorHostMemoryNotRegistered. */
SP_API spError_t spHostGetDevicePointer(spRuntime_t rt, void** devPtr, void* hostPtr) SP_NOEXCEPT;

/* ------------------------------------------------------------------- pools */

/** A new pool with `props` over the upstream its type implies. */
SP_API spError_t spMemPoolCreate(spMemPool_t* pool, spRuntime_t rt,
                                 const spMemPoolProps* props) SP_NOEXCEPT;

/** An upstream made of user functions, so a pool can sit on aclrtMalloc,
 * cudaMalloc or cuMemCreate. map returns `bytes` (a multiple of 2 MiB) of
 * memory aligned to at least 256 B, or NULL on failure (the allocation then
 * fails with spErrorMemoryAllocation and nothing changes); unmap takes back
 * exactly what map returned. The functions run under the runtime's lock and
 * must not call sp* functions. */
typedef struct spUpstream {
  void* (*map)(size_t bytes, void* user);              /**< maps bytes, or returns NULL */
  void (*unmap)(void* base, size_t bytes, void* user); /**< takes back what map returned */
  void* user;                                          /**< passed to both functions */
  int touchable; /**< non-zero: the host may read and write the memory */
} spUpstream;
/** spMemPoolCreate over the caller's upstream (see spUpstream). */
SP_API spError_t spMemPoolCreateWithUpstream(spMemPool_t* pool, spRuntime_t rt,
                                             const spMemPoolProps* props,
                                             const spUpstream* upstream) SP_NOEXCEPT;

/** A reserve-then-map upstream (the VMM pattern: cuMemAddressReserve +
 * cuMemCreate + cuMemMap, aclrtReserveMemAddress + aclrtMallocPhysical +
 * aclrtMapMem), behind an expandable pool. reserve returns an address range of
 * `bytes` (a multiple of 2 MiB) aligned to `alignment`, with no memory behind
 * it, or NULL; map backs [addr, addr + bytes), 2 MiB granules inside a
 * reservation, and returns 0 on success (on failure nothing of the range may
 * stay mapped); unmap takes back any 2 MiB-aligned part of what map backed;
 * release gives back a whole reservation once nothing in it is mapped. The
 * functions run under the runtime's lock and must not call sp* functions. */
typedef struct spUpstreamVmm {
  void* (*reserve)(size_t bytes, size_t alignment, void* user); /**< address range, no memory */
  int (*map)(void* addr, size_t bytes, void* user);             /**< 0 on success */
  void (*unmap)(void* addr, size_t bytes, void* user);          /**< part of what map backed */
  void (*release)(void* addr, size_t bytes, void* user);        /**< the whole reservation */
  void* user;                                                   /**< passed to every function */
  int touchable; /**< non-zero: the host may read and write mapped memory */
} spUpstreamVmm;
/** spMemPoolCreate over the caller's reserve-then-map upstream: the pool is
 * expandable (props->growth spPoolGrowthChunked: spErrorNotSupported). */
SP_API spError_t spMemPoolCreateWithVmmUpstream(spMemPool_t* pool, spRuntime_t rt,
                                                const spMemPoolProps* props,
                                                const spUpstreamVmm* up) SP_NOEXCEPT;

/** Huge-page bytes a device may hold across its HugePage and Dvpp pools;
 * reservations beyond it fall back as their page policy allows (HugeOnly
 * fails). Unlimited by default; an Atlas-like setting is a quarter of the
 * device's memory. */
SP_API spError_t spDeviceSetHugePageBudget(spRuntime_t rt, int device, uint64_t bytes) SP_NOEXCEPT;
/** A default pool: spErrorInvalidValue. Destroying a current pool makes the
 * device's default pool current. Live allocations stay valid and their memory
 * goes back as they are freed (at spRuntimeDestroy at the latest). */
SP_API spError_t spMemPoolDestroy(spMemPool_t pool) SP_NOEXCEPT;
/** The device's default pool (a Device pool made with the runtime). */
SP_API spError_t spDeviceGetDefaultMemPool(spMemPool_t* pool, spRuntime_t rt,
                                           int device) SP_NOEXCEPT;
/** Makes `pool` (of that device) the one spMallocAsync uses on the device. */
SP_API spError_t spDeviceSetMemPool(spRuntime_t rt, int device, spMemPool_t pool) SP_NOEXCEPT;
/** The device's current pool. */
SP_API spError_t spDeviceGetMemPool(spMemPool_t* pool, spRuntime_t rt, int device) SP_NOEXCEPT;
/** Sets an attribute; value: int* for attributes 1-3, spMemPoolAttrFrontCache and
 * spMemPoolAttrWaitBeforeGrowth, uint64_t* for 4-8 and spMemPoolAttrSoftReservedLimit. The Current
 * attributes, 9-14 and spMemPoolAttrGrowth are read-only (spErrorInvalidValue); a High one is reset
 * by setting 0. */
SP_API spError_t spMemPoolSetAttribute(spMemPool_t pool, spMemPoolAttr attr,
                                       void* value) SP_NOEXCEPT;
/** Reads an attribute into value: uint64_t* for 4-8, 13 and
 * spMemPoolAttrSoftReservedLimit, int* for the others
 * (the switches read 0 or 1). */
SP_API spError_t spMemPoolGetAttribute(spMemPool_t pool, spMemPoolAttr attr,
                                       void* value) SP_NOEXCEPT;
/** Applies the release rule with bound minBytesToKeep: unmaps whole granules
 * inside READY blocks (chunked pools: wholly free chunks), largest free range
 * first, while more than minBytesToKeep stays reserved, never going below it. */
SP_API spError_t spMemPoolTrimTo(spMemPool_t pool, size_t minBytesToKeep) SP_NOEXCEPT;

/* ------------------------------ statistics, snapshots and live allocations */

/** A pool's statistics (streampool::PoolStats in C++). */
typedef struct spMemPoolStats {
  uint64_t reservedBytes;           /**< bytes mapped from the upstream now */
  uint64_t reservedHigh;            /**< watermark of reservedBytes */
  uint64_t usedBytes;               /**< rule sizes of live allocations */
  uint64_t usedHigh;                /**< watermark of usedBytes */
  uint64_t allocCount;              /**< successful non-zero allocations */
  uint64_t freeCount;               /**< accepted frees (NULL excluded) */
  uint64_t failedAllocCount;        /**< failed allocations */
  uint64_t reuseSameStream;         /**< allocations served by the stream's own pending free */
  uint64_t reuseEventDependency;    /**< ... by a free the stream is ordered after (rule 2) */
  uint64_t reuseOpportunistic;      /**< ... by a free observed complete (rule 3) */
  uint64_t reuseAfterSync;          /**< ... by a READY block holding bytes used before */
  uint64_t reuseInternalDependency; /**< ... by a free after an inserted wait (rule 5) */
  uint64_t waitsInserted;           /**< waits rule 5 inserted */
  uint64_t upstreamMaps;   /**< upstream maps: chunks, or runs of granules one growth mapped */
  uint64_t upstreamUnmaps; /**< upstream unmaps: chunks, or runs of granules one release unmapped */
  uint64_t hugePageBytes;  /**< reserved bytes on explicit huge pages */
  uint64_t transparentHugePageBytes; /**< reserved bytes on transparent huge pages */
  uint64_t normalPageBytes;          /**< reserved bytes on normal pages (or unknown) */
  uint64_t largestFreeBlock;         /**< the largest READY or PENDING block (one spanning unmapped
                                         granules counts by its mapped low end) */
  uint64_t requestedBytes;           /**< bytes the live allocations asked for, before rounding */
  uint64_t requestedHigh;     /**< watermark of requestedBytes (see PoolStats::requested_high) */
  uint64_t oomCount;          /**< allocations that failed for lack of memory, after the handling */
  uint64_t reclaims;          /**< times the out-of-memory handling released this pool's memory */
  uint64_t reclaimedBytes;    /**< the bytes those released */
  uint64_t oomRetries;        /**< allocations tried again after the out-of-memory handling */
  uint64_t segments;          /**< reservations or chunks held now */
  uint64_t segmentsHigh;      /**< watermark of segments */
  uint64_t waitsBeforeGrowth; /**< of waitsInserted, those before growing: a wait that delayed
                                 nothing, or any once growth would pass the soft reserved limit */
  uint64_t joinedReuses;      /**< allocations served by joining several free blocks after a wait
                                 on each other stream they were pending on (also counted in
                                 reuseInternalDependency) */
} spMemPoolStats;

/** Copies the pool's statistics into *stats. */
SP_API spError_t spMemPoolGetStats(spMemPool_t pool, spMemPoolStats* stats) SP_NOEXCEPT;

/** A block's state in a snapshot. */
typedef enum spBlockState {
  spBlockStateLive = 1,    /**< handed out and not freed */
  spBlockStatePending = 2, /**< freed on `stream` at `freePoint`: reusable there at once, on other
                              streams only under the reuse policies */
  spBlockStateReady = 3,   /**< reusable by any stream */
  spBlockStateCached = 4,  /**< freed, held by the freeing stream's front cache (PENDING to the
                              other streams) */
  spBlockStateAwaitingUses = 5 /**< freed on `stream` at `freePoint` while other streams used it
                                  (spMemRecordUse): reusable by none until the free and those
                                  uses are complete */
} spBlockState;

/** One reservation (expandable growth) or chunk (chunked growth) of a snapshot. */
typedef struct spMemPoolSnapshotSegment {
  void* address;      /**< start of its address range */
  size_t size;        /**< bytes of the range */
  size_t mappedBytes; /**< bytes of it backed by memory (== size for a chunk) */
  int expandable;     /**< 1: a reservation mapped granule by granule */
  size_t firstBlock;  /**< its blocks are blocks[firstBlock, firstBlock + blockCount) */
  size_t blockCount;  /**< they tile the range in address order */
} spMemPoolSnapshotSegment;

/** One block of a snapshot. */
typedef struct spMemPoolSnapshotBlock {
  void* address;        /**< start of the block */
  size_t size;          /**< its bytes (the pool's rule size for allocations) */
  size_t requested;     /**< Live and Cached: the size the allocation asked for; else 0 */
  spBlockState state;   /**< see spBlockState */
  spStream_t stream;    /**< Live: the allocating stream; Pending, Cached and AwaitingUses: the
                           freeing stream;
                           Ready, or a stream destroyed since: NULL */
  uint64_t freePoint;   /**< Pending, Cached and AwaitingUses: the freeing stream's position at
                           the free */
  uint64_t allocSeq;    /**< Live and Cached: the allocating stream's position at the allocation
                           (each stream-ordered call on a stream takes the next, from 1) */
  size_t unmappedBytes; /**< Ready, expandable segments: its size when its bytes are not mapped
                           (a free range spanning unmapped granules shows as one block per
                           mapped or unmapped run), else 0 */
} spMemPoolSnapshotBlock;

/** Every segment of the pool with its blocks, at one moment. Sets
 * *segmentCount and *blockCount to what the pool holds, and copies both
 * arrays only when both fit (*segmentCount <= segmentCapacity and *blockCount
 * <= blockCapacity); otherwise copies nothing. Call with capacities 0 (and
 * NULL arrays) to size them; the pool may change before the next call, so
 * compare the counts with the capacities after it. A NULL count, or a NULL
 * array with a non-zero capacity: spErrorInvalidValue. An imported pool has
 * no segments of its own. Blocks another thread moves through a front cache
 * meanwhile show as on either side of that move. */
SP_API spError_t spMemPoolSnapshot(spMemPool_t pool, spMemPoolSnapshotSegment* segments,
                                   size_t segmentCapacity, size_t* segmentCount,
                                   spMemPoolSnapshotBlock* blocks, size_t blockCapacity,
                                   size_t* blockCount) SP_NOEXCEPT;

/** One allocation handed out and not freed. */
typedef struct spLiveAllocation {
  void* ptr;         /**< its start */
  size_t size;       /**< the size asked for */
  size_t blockSize;  /**< the bytes it occupies (the pool's rule size, or whole pages) */
  spStream_t stream; /**< the allocating stream; NULL for spMalloc and spMallocHost, or when
                        destroyed since */
  spMemPool_t pool;  /**< its pool; NULL for spMalloc and spMallocHost */
  int device;        /**< the device, or -1 for pinned host memory */
  uint64_t seq;      /**< pool allocations: the allocating stream's position at the allocation;
                        spMalloc and spMallocHost: the runtime's count of them, from 1 */
} spLiveAllocation;

/** Copies up to `capacity` live allocations (the pools', destroyed pools'
 * included, by pool and address, then spMalloc's and spMallocHost's by
 * address) and sets *count to how many there are in all. allocs may be NULL
 * when capacity is 0. */
SP_API spError_t spRuntimeGetLiveAllocations(spRuntime_t rt, spLiveAllocation* allocs,
                                             size_t capacity, size_t* count) SP_NOEXCEPT;

/* ------------------------------------------------------ pointer attributes */

/** What spPointerGetAttributes tells about a pointer. */
typedef struct spPointerAttributes {
  int device;       /**< the pool's device, or -1 for pinned host memory */
  spMemPool_t pool; /**< NULL for spMalloc memory */
  void* base;       /**< start of the allocation containing ptr */
  size_t size;      /**< its requested size */
} spPointerAttributes;

/** Any byte of a live allocation; else spErrorInvalidValue. */
SP_API spError_t spPointerGetAttributes(spPointerAttributes* attr, const void* ptr) SP_NOEXCEPT;

/* ----------------------------------- multi-device access (CUDA guide F.10) */

/** Where memory is accessed from: a device (id) or the host (id ignored). */
typedef enum spMemLocationType {
  spMemLocationTypeDevice = 1,
  spMemLocationTypeHost = 2
} spMemLocationType;
/** A place memory is accessed from. */
typedef struct spMemLocation {
  spMemLocationType type; /**< device or host */
  int id;                 /**< the device index (ignored for the host) */
} spMemLocation;
/** The access a location has to a pool's allocations. */
typedef enum spMemAccessFlags {
  spMemAccessFlagsProtNone = 0,
  spMemAccessFlagsProtRead = 1,
  spMemAccessFlagsProtReadWrite = 3
} spMemAccessFlags;
/** One grant of spMemPoolSetAccess. */
typedef struct spMemAccessDesc {
  spMemLocation location; /**< who is granted */
  spMemAccessFlags flags; /**< what it may do */
} spMemAccessDesc;

/** Whether `device` may access memory resident on `peerDevice` (directional).
 * Default: all pairs peer. A device is not its own peer: device ==
 * peerDevice is spErrorInvalidDevice here, and spDeviceCanAccessPeer answers
 * 0 for it, as CUDA does. Changing the matrix affects later
 * spMemPoolSetAccess calls only; access already granted stays. */
SP_API spError_t spRuntimeSetPeerAccessible(spRuntime_t rt, int device, int peerDevice,
                                            int accessible)
    SP_NOEXCEPT; /* default: all pairs peer */
/** *canAccess = 1 when `device` may access memory resident on `peerDevice`. */
SP_API spError_t spDeviceCanAccessPeer(int* canAccess, spRuntime_t rt, int device,
                                       int peerDevice) SP_NOEXCEPT;
/** Which devices may access every allocation of the pool, past and future.
 * The resident device always has read-write access (lowering it:
 * spErrorInvalidValue); granting a device that cannot access the resident
 * device (spDeviceCanAccessPeer) is spErrorInvalidDevice; other devices start
 * with no access. Pinned host pools are accessible from every device and the
 * host, read-write, and cannot be lowered; device pools refuse host
 * locations. All descriptors are checked before any applies. The
 * stream-order checker reports kernels that break these grants
 * (spCheckNoAccess). */
SP_API spError_t spMemPoolSetAccess(spMemPool_t pool, const spMemAccessDesc* descs,
                                    size_t count) SP_NOEXCEPT;
/** The access `location` has: ReadWrite for the resident device, ProtNone for
 * a device never granted. */
SP_API spError_t spMemPoolGetAccess(spMemAccessFlags* flags, spMemPool_t pool,
                                    const spMemLocation* location) SP_NOEXCEPT;

/* --------------------------------------------- IPC pools (CUDA guide F.11) */

/** spMemPoolProps.handleTypes = spMemHandleTypePosixFileDescriptor makes a pool
 * exportable: its chunks live in one memfd, so another process that receives
 * the fd maps the same pages. Device and PinnedHost pools can be exportable,
 * in Host-backed runtimes (AddressOnly: spErrorNotSupported). Exportable pools
 * never release memory to the system while they live (TrimTo is a no-op,
 * the release threshold is ignored). Other handleTypes bits are
 * spErrorInvalidValue. */
enum { spMemHandleTypeNone = 0, spMemHandleTypePosixFileDescriptor = 1 };
/** An allocation of an exportable pool, as another process imports it. */
typedef struct spMemPoolPtrExportData {
  unsigned char reserved[64]; /**< opaque: copy it to the importing process as is */
} spMemPoolPtrExportData;
/** handle: int* receiving a new fd (close-on-exec), which the caller owns.
 * Non-exportable or imported pool, wrong handle type, non-zero flags:
 * spErrorInvalidValue. */
SP_API spError_t spMemPoolExportToShareableHandle(void* handle, spMemPool_t pool, int handleType,
                                                  unsigned flags)
    SP_NOEXCEPT; /* handle: int* receiving a new fd */
/** handle: the fd, passed as (void*)(intptr_t)fd; the caller keeps owning it
 * (the pool holds its own duplicate) and may close it at once. An fd that is
 * not an exported pool: spErrorInvalidValue. Imported pools cannot allocate
 * (spMallocFromPoolAsync, spDeviceSetMemPool: spErrorInvalidValue), are
 * accessible from their resident device only until spMemPoolSetAccess, and
 * their statistics cover this process's imports only. */
SP_API spError_t spMemPoolImportFromShareableHandle(spMemPool_t* pool, spRuntime_t rt, void* handle,
                                                    int handleType, unsigned flags)
    SP_NOEXCEPT; /* handle: the fd, passed as (void*)(intptr_t)fd */
/** ptr: the start of a live allocation of an exportable pool. */
SP_API spError_t spMemPoolExportPointer(spMemPoolPtrExportData* data, void* ptr) SP_NOEXCEPT;
/** Maps the allocation `data` names into this process (does not wait for it
 * to be ready: order accesses after the exporter's allocation, e.g. with an
 * interprocess event). Free it here (spFreeAsync or spFree) before the
 * exporter frees it; freeing it here does not free the exporter's
 * allocation. Importing a block that is already imported and not freed:
 * spErrorInvalidValue. */
SP_API spError_t spMemPoolImportPointer(void** ptr, spMemPool_t importedPool,
                                        spMemPoolPtrExportData* data) SP_NOEXCEPT;

/** Interprocess events live in shared memory. Record works in every process
 * that has the event; query and synchronize see the latest record made by any
 * process. With spExecutorThreads a stream may also wait for another
 * process's record. The simulator marks its own records complete when its
 * host observes them (at once if already complete at record) and supports
 * query and synchronize (blocking in real time for another process); a
 * simulated stream waiting for another process's record that is not yet
 * complete is spErrorNotSupported. A handle can be opened while the creating
 * event lives. */
typedef struct spIpcEventHandle {
  unsigned char reserved[64]; /**< opaque: copy it to the opening process as is */
} spIpcEventHandle;
/** e created without spEventInterprocess: spErrorInvalidResourceHandle. */
SP_API spError_t spIpcGetEventHandle(spIpcEventHandle* handle, spEvent_t e) SP_NOEXCEPT;
/** A handle that names no live interprocess event: spErrorInvalidValue. */
SP_API spError_t spIpcOpenEventHandle(spEvent_t* e, spRuntime_t rt,
                                      spIpcEventHandle handle) SP_NOEXCEPT;

/* ---------------------------------------------------- stream-order checker */

/** The simulator's checker watches kernels' declared accesses (and copies and
 * fills of runtime memory) and the pool's decisions. Off unless enabled here,
 * by RuntimeConfig::check_stream_order in C++, or for every runtime by the
 * environment variable STREAMPOOL_CHECK_STREAM_ORDER=1 (=fatal: abort at the
 * first report). */
typedef enum spCheckKind {
  spCheckOutOfBounds = 1,          /**< access outside any allocation */
  spCheckUseAfterFree = 2,         /**< access issued after the free, or a free not
                                      ordered after an earlier access */
  spCheckUseBeforeReady = 3,       /**< access not ordered after the allocation */
  spCheckOverlappingLifetimes = 4, /**< pool self-check: bytes reused while in use */
  spCheckNoAccess = 5,             /**< a kernel on a device its allocation's pool has not
                                      granted access (or granted read only, for a write;
                                      or a write to read-only registered host memory) */
  spCheckFreeWhileRegistered = 6   /**< spFreeHost of memory holding a registered range */
} spCheckKind;

/** One finding of the stream-order checker. */
typedef struct spCheckReport {
  spCheckKind kind;       /**< what went wrong */
  spStream_t stream;      /**< the offending op's stream (NULL once destroyed) */
  uint64_t opIndex;       /**< its position in the stream, 1 = first op */
  const void* ptr;        /**< the accessed (or allocated) range's start */
  size_t size;            /**< its bytes */
  spStream_t otherStream; /**< the other op involved (allocation or free), or NULL */
  uint64_t otherOpIndex;  /**< its position in otherStream */
  char message[256];      /**< both ops, addresses and sizes in words */
} spCheckReport;

/** Turns the checker on (enable non-zero) or off for rt; reports are kept. */
SP_API spError_t spCheckerEnable(spRuntime_t rt, int enable) SP_NOEXCEPT;
/** Copies up to `capacity` reports (oldest first) and sets *count to how many
 * there are in all. reports may be NULL when capacity is 0. */
SP_API spError_t spCheckerGetReports(spRuntime_t rt, spCheckReport* reports, size_t capacity,
                                     size_t* count) SP_NOEXCEPT;
/** Forgets every report collected so far. */
SP_API spError_t spCheckerClearReports(spRuntime_t rt) SP_NOEXCEPT;

/* ------------------------------------------------------------------ graphs */
/* CUDA graphs (docs/graphs.md): work captured from streams or built node by
 * node, instantiated, launched on a stream as one op. Graph memory (memory
 * allocation and free nodes) comes from each device's graph memory, apart
 * from the pools. Graphs, like CUDA's, are not for concurrent use from
 * several threads. */

/** A graph: nodes and their dependencies (spGraphCreate, spStreamEndCapture). */
typedef struct spGraph_st* spGraph_t;
/** A node of a graph, valid while its graph lives. */
typedef struct spGraphNode_st* spGraphNode_t;
/** An executable graph (spGraphInstantiate), launched with spGraphLaunch. */
typedef struct spGraphExec_st* spGraphExec_t;

/** What a capture forbids the threads that take part (CUDA's values). */
typedef enum spStreamCaptureMode {
  spStreamCaptureModeGlobal = 0,      /**< unsafe calls fail on this thread, and on every thread
                                         while any Global capture is open */
  spStreamCaptureModeThreadLocal = 1, /**< unsafe calls fail on the capturing thread only */
  spStreamCaptureModeRelaxed = 2      /**< no unsafe call is refused */
} spStreamCaptureMode;
/** Whether a stream captures. */
typedef enum spStreamCaptureStatus {
  spStreamCaptureStatusNone = 0,
  spStreamCaptureStatusActive = 1,
  spStreamCaptureStatusInvalidated = 2 /**< captures, but failed: ending it returns 901 */
} spStreamCaptureStatus;

/** Starts capturing s into a new graph: ops enqueued on s become nodes until
 * spStreamEndCapture(s). spErrorIllegalState if s already captures;
 * spErrorStreamCaptureUnsupported for the legacy stream. */
SP_API spError_t spStreamBeginCapture(spStream_t s, spStreamCaptureMode mode) SP_NOEXCEPT;
/** As spStreamBeginCapture, into `graph` after `deps` (nodes of it). */
SP_API spError_t spStreamBeginCaptureToGraph(spStream_t s, spGraph_t graph,
                                             const spGraphNode_t* deps, size_t numDeps,
                                             spStreamCaptureMode mode) SP_NOEXCEPT;
/** Ends the capture begun on s and returns its graph (NULL when it was begun
 * with spStreamBeginCaptureToGraph: the nodes are in that graph).
 * spErrorStreamCaptureUnmatched if s did not begin it, ...Unjoined if a
 * joined stream was not joined back, ...Invalidated (no graph) if it failed,
 * ...WrongThread for a Global or ThreadLocal capture ended elsewhere. */
SP_API spError_t spStreamEndCapture(spStream_t s, spGraph_t* graph) SP_NOEXCEPT;
/** Whether s captures (spStreamGetCaptureInfo's status alone). */
SP_API spError_t spStreamIsCapturing(spStream_t s, spStreamCaptureStatus* status) SP_NOEXCEPT;
/** The capture's status, id (unique per runtime, from 1), graph and the
 * nodes s's next op would depend on (valid until the next call on s); any
 * out-pointer but status may be NULL. */
SP_API spError_t spStreamGetCaptureInfo(spStream_t s, spStreamCaptureStatus* status,
                                        unsigned long long* id, spGraph_t* graph,
                                        const spGraphNode_t** deps, size_t* numDeps) SP_NOEXCEPT;
/** Sets the calling thread's capture interaction mode to *mode and returns
 * the previous one in *mode (a thread starts in Global). */
SP_API spError_t spThreadExchangeStreamCaptureMode(spStreamCaptureMode* mode) SP_NOEXCEPT;

/** A node's kind (CUDA's cudaGraphNodeType values). */
typedef enum spGraphNodeType {
  spGraphNodeTypeKernel = 0,
  spGraphNodeTypeMemcpy = 1,
  spGraphNodeTypeMemset = 2,
  spGraphNodeTypeHost = 3,
  spGraphNodeTypeGraph = 4,
  spGraphNodeTypeEmpty = 5,
  spGraphNodeTypeWaitEvent = 6,
  spGraphNodeTypeEventRecord = 7,
  spGraphNodeTypeMemAlloc = 10,
  spGraphNodeTypeMemFree = 11
} spGraphNodeType;

/** A kernel node: as spLaunchKernel, with an optional body fn(userData) run
 * as the kernel's effect when the node completes (a face's emulated kernel).
 * Copies of the node (clones, executable graphs, launches in flight) share
 * userData; once the last is gone, destroy(userData) runs, so a caller can
 * hand over what the body needs. A failed Add leaves userData the caller's. */
typedef struct spKernelNodeParams {
  uint64_t durationNs;      /**< virtual ns, as spLaunchKernel's */
  const spAccess* accesses; /**< copied when the node is made */
  size_t accessCount;       /**< entries of accesses */
  void (*fn)(void*);        /**< may be NULL */
  void* userData;           /**< fn's argument, shared by the node's copies */
  void (*destroy)(void*);   /**< may be NULL */
} spKernelNodeParams;

/** An allocation node: memory of `poolProps` (its allocType must be Device,
 * its location a device) of bytesize bytes, readable and writable by the
 * devices in accessDescs besides its own. dptr is set when the node is made
 * and stays the allocation's address for the graph's life. */
typedef struct spMemAllocNodeParams {
  spMemPoolProps poolProps;           /**< allocType Device, on `device` */
  const spMemAccessDesc* accessDescs; /**< peers that may access it (may be NULL) */
  size_t accessDescCount;             /**< entries of accessDescs */
  size_t bytesize;                    /**< bytes, not 0 */
  void* dptr;                         /**< out */
} spMemAllocNodeParams;

/** An empty graph of rt; flags must be 0. */
SP_API spError_t spGraphCreate(spGraph_t* graph, spRuntime_t rt, unsigned flags) SP_NOEXCEPT;
/** Destroys the graph; its executable graphs and its allocations' memory
 * live on. spErrorIllegalState while a capture adds to it. */
SP_API spError_t spGraphDestroy(spGraph_t graph) SP_NOEXCEPT;
/** A copy of graph; spErrorNotSupported for a graph with memory nodes. */
SP_API spError_t spGraphClone(spGraph_t* clone, spGraph_t graph) SP_NOEXCEPT;

/* Each Add* makes a node after numDeps dependencies (nodes of the graph, no
 * duplicates), returns it in *node, and copies what it is given. */
/** A kernel node: as spLaunchKernel, with params' optional body. */
SP_API spError_t spGraphAddKernelNode(spGraphNode_t* node, spGraph_t graph,
                                      const spGraphNode_t* deps, size_t numDeps,
                                      const spKernelNodeParams* params) SP_NOEXCEPT;
/** A copy node of bytes from src to dst. */
SP_API spError_t spGraphAddMemcpyNode1D(spGraphNode_t* node, spGraph_t graph,
                                        const spGraphNode_t* deps, size_t numDeps, void* dst,
                                        const void* src, size_t bytes) SP_NOEXCEPT;
/** A fill node: bytes of dst set to (unsigned char)value. */
SP_API spError_t spGraphAddMemsetNode(spGraphNode_t* node, spGraph_t graph,
                                      const spGraphNode_t* deps, size_t numDeps, void* dst,
                                      int value, size_t bytes) SP_NOEXCEPT;
/** A host function node: fn(userData), as spLaunchHostFunc. */
SP_API spError_t spGraphAddHostNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                    size_t numDeps, void (*fn)(void*), void* userData) SP_NOEXCEPT;
/** A node that records event, as spEventRecord. */
SP_API spError_t spGraphAddEventRecordNode(spGraphNode_t* node, spGraph_t graph,
                                           const spGraphNode_t* deps, size_t numDeps,
                                           spEvent_t event) SP_NOEXCEPT;
/** A node after which the graph waits for event, as spStreamWaitEvent. */
SP_API spError_t spGraphAddEventWaitNode(spGraphNode_t* node, spGraph_t graph,
                                         const spGraphNode_t* deps, size_t numDeps,
                                         spEvent_t event) SP_NOEXCEPT;
/** A node that only orders. */
SP_API spError_t spGraphAddEmptyNode(spGraphNode_t* node, spGraph_t graph,
                                     const spGraphNode_t* deps, size_t numDeps) SP_NOEXCEPT;
/** The child is copied into the node; spErrorNotSupported if it has memory
 * nodes. */
SP_API spError_t spGraphAddChildGraphNode(spGraphNode_t* node, spGraph_t graph,
                                          const spGraphNode_t* deps, size_t numDeps,
                                          spGraph_t child) SP_NOEXCEPT;
/** Sets params->dptr. spErrorInvalidValue for a zero size or props other
 * than device memory; spErrorInvalidDevice for a device out of range. */
SP_API spError_t spGraphAddMemAllocNode(spGraphNode_t* node, spGraph_t graph,
                                        const spGraphNode_t* deps, size_t numDeps,
                                        spMemAllocNodeParams* params) SP_NOEXCEPT;
/** Frees dptr: an allocation of this graph, once (ordered after its
 * allocation node), or a graph allocation made outside it that no free has
 * freed yet; else spErrorInvalidValue. */
SP_API spError_t spGraphAddMemFreeNode(spGraphNode_t* node, spGraph_t graph,
                                       const spGraphNode_t* deps, size_t numDeps,
                                       void* dptr) SP_NOEXCEPT;
/** An allocation node's parameters; accessDescs stays valid until the
 * thread's next call. spErrorInvalidValue for another kind of node. */
SP_API spError_t spGraphMemAllocNodeGetParams(spGraphNode_t node,
                                              spMemAllocNodeParams* params) SP_NOEXCEPT;
/** The address a free node frees; spErrorInvalidValue for another kind. */
SP_API spError_t spGraphMemFreeNodeGetParams(spGraphNode_t node, void** dptr) SP_NOEXCEPT;
/** Adds edges from[i] -> to[i]; spErrorInvalidValue (none added) for a node
 * of another graph, an edge that exists or one that makes a cycle. */
SP_API spError_t spGraphAddDependencies(spGraph_t graph, const spGraphNode_t* from,
                                        const spGraphNode_t* to, size_t count) SP_NOEXCEPT;

/* Queries: each copies up to *count entries (arrays may be NULL to ask the
 * count) and sets *count to how many there are. */
/** The graph's nodes, in the order they were made. */
SP_API spError_t spGraphGetNodes(spGraph_t graph, spGraphNode_t* nodes, size_t* count) SP_NOEXCEPT;
/** The nodes without dependencies. */
SP_API spError_t spGraphGetRootNodes(spGraph_t graph, spGraphNode_t* nodes,
                                     size_t* count) SP_NOEXCEPT;
/** Every edge from[i] -> to[i]; from and to both NULL or both not. */
SP_API spError_t spGraphGetEdges(spGraph_t graph, spGraphNode_t* from, spGraphNode_t* to,
                                 size_t* count) SP_NOEXCEPT;
/** The node's kind. */
SP_API spError_t spGraphNodeGetType(spGraphNode_t node, spGraphNodeType* type) SP_NOEXCEPT;
/** The nodes this node depends on. */
SP_API spError_t spGraphNodeGetDependencies(spGraphNode_t node, spGraphNode_t* deps,
                                            size_t* count) SP_NOEXCEPT;
/** The nodes that depend on this node. */
SP_API spError_t spGraphNodeGetDependentNodes(spGraphNode_t node, spGraphNode_t* dependents,
                                              size_t* count) SP_NOEXCEPT;

/** Instantiate flags (CUDA's values). */
enum {
  spGraphInstantiateFlagAutoFreeOnLaunch = 1, /**< a launch first frees what the previous
                                                 launch allocated and did not free */
  spGraphInstantiateFlagUpload = 2            /**< accepted: nothing needs uploading here */
};
/** An executable graph of graph. A graph with memory nodes has at most one
 * at a time (spErrorInvalidValue for a second). */
SP_API spError_t spGraphInstantiate(spGraphExec_t* exec, spGraph_t graph,
                                    unsigned long long flags) SP_NOEXCEPT;
/** Prepares exec's launch in s's order (nothing to prepare here: it orders
 * like an empty op). */
SP_API spError_t spGraphUpload(spGraphExec_t exec, spStream_t s) SP_NOEXCEPT;
/** Runs exec as one op of s: after s's earlier work and exec's previous
 * launch, and before s's later work. spErrorInvalidValue, and nothing
 * enqueued, if an allocation of its previous launch is not freed and exec was
 * not instantiated with spGraphInstantiateFlagAutoFreeOnLaunch. */
SP_API spError_t spGraphLaunch(spGraphExec_t exec, spStream_t s) SP_NOEXCEPT;
/** Destroys exec; launches already enqueued still run. */
SP_API spError_t spGraphExecDestroy(spGraphExec_t exec) SP_NOEXCEPT;
/** Why spGraphExecUpdate refused (CUDA's cudaGraphExecUpdateResult values). */
typedef enum spGraphExecUpdateResult {
  spGraphExecUpdateSuccess = 0,
  spGraphExecUpdateError = 1,
  spGraphExecUpdateErrorTopologyChanged = 2,
  spGraphExecUpdateErrorNodeTypeChanged = 3,
  spGraphExecUpdateErrorFunctionChanged = 4,
  spGraphExecUpdateErrorParametersChanged = 5,
  spGraphExecUpdateErrorNotSupported = 6
} spGraphExecUpdateResult;
/** Gives exec the parameters of graph's nodes, which must match exec's graph
 * node for node (same topology and kinds); memory nodes cannot change.
 * spErrorGraphExecUpdateFailure, with the reason in *result, otherwise. */
SP_API spError_t spGraphExecUpdate(spGraphExec_t exec, spGraph_t graph,
                                   spGraphExecUpdateResult* result) SP_NOEXCEPT;

/** A device's graph memory figures (CUDA's cudaGraphMemAttributeType
 * values): used is memory backing graph allocations, reserved all the device
 * holds for graphs. */
typedef enum spGraphMemAttributeType {
  spGraphMemAttrUsedMemCurrent = 0,
  spGraphMemAttrUsedMemHigh = 1,
  spGraphMemAttrReservedMemCurrent = 2,
  spGraphMemAttrReservedMemHigh = 3
} spGraphMemAttributeType;
/** Gives back graph memory that no allocation holds and no launch pending or
 * running will use. */
SP_API spError_t spDeviceGraphMemTrim(spRuntime_t rt, int device) SP_NOEXCEPT;
/** A graph memory figure of device, in bytes. */
SP_API spError_t spDeviceGetGraphMemAttribute(spRuntime_t rt, int device,
                                              spGraphMemAttributeType attr,
                                              uint64_t* value) SP_NOEXCEPT;
/** Only the high watermarks can be set, and only to 0 (they restart from the
 * current figure); else spErrorInvalidValue. */
SP_API spError_t spDeviceSetGraphMemAttribute(spRuntime_t rt, int device,
                                              spGraphMemAttributeType attr,
                                              const uint64_t* value) SP_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_STREAMPOOL_H_ */
