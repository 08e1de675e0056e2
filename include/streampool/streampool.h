/*
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
#define SP_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

typedef enum spError {
  spSuccess = 0,
  spErrorInvalidValue = 1,
  spErrorMemoryAllocation = 2,
  spErrorInvalidDevice = 101,
  spErrorPeerAccessUnsupported = 217,
  spErrorInvalidResourceHandle = 400,
  spErrorNotReady = 600,
  spErrorNotSupported = 801
} spError_t;

/* The enumerator's name, e.g. "spErrorInvalidValue"; "spErrorUnknown" for a
 * value that is not an spError. */
SP_API const char* spGetErrorName(spError_t e);
/* A one-sentence description of the error. */
SP_API const char* spGetErrorString(spError_t e);

/* ----------------------------------------------------------------- handles */

typedef struct spRuntime_st* spRuntime_t;
typedef struct spStream_st* spStream_t;
typedef struct spEvent_st* spEvent_t;
typedef struct spMemPool_st* spMemPool_t;

/* ----------------------------------------------------------------- runtime */

typedef enum spBacking {
  /* Real, touchable memory (anonymous mmap). */
  spBackingHost = 0,
  /* Address space reserved (PROT_NONE), never touched: replays workloads
   * larger than the machine's memory. */
  spBackingAddressOnly = 1
} spBacking;

typedef enum spExecutorKind {
  /* Deterministic virtual time (the default). */
  spExecutorSimulator = 0,
  /* A worker thread per stream: kernels sleep their duration, host functions
   * and copies run on the stream's worker, synchronize calls block. */
  spExecutorThreads = 1
} spExecutorKind;

typedef struct spRuntimeConfig {
  int deviceCount;         /* simulated devices, default 1 */
  uint64_t deviceCapacity; /* bytes of memory per device, default 1 GiB */
  spBacking backing;       /* default spBackingHost */
  uint64_t apiCallNs;      /* virtual host time charged per API call, default 0 */
  uint64_t copyBytesPerUs; /* bandwidth of async copies and fills, default 1000000 */
  spExecutorKind executor; /* how streams run, default spExecutorSimulator; added after
                              the fields above, so zero-initialized configs keep the default */
} spRuntimeConfig;

/* Fills the defaults. */
SP_API void spRuntimeConfigInit(spRuntimeConfig* cfg);
/* cfg NULL = defaults. deviceCount must be in [1, 64], deviceCapacity and
 * copyBytesPerUs non-zero. */
SP_API spError_t spRuntimeCreate(spRuntime_t* rt, const spRuntimeConfig* cfg);
/* Frees everything the runtime owns: streams, events, pools, allocations. */
SP_API spError_t spRuntimeDestroy(spRuntime_t rt);

/* ----------------------------------------------------------------- streams */

enum { spStreamDefault = 0, spStreamNonBlocking = 1 };

SP_API spError_t spStreamCreate(spStream_t* s, spRuntime_t rt, int device, unsigned flags);
/* Work already enqueued still completes and frees enqueued on the stream stay
 * valid; the handle is invalid at once. The legacy stream cannot be destroyed. */
SP_API spError_t spStreamDestroy(spStream_t s);
/* The device's legacy default (null) stream. */
SP_API spError_t spStreamGetLegacy(spStream_t* s, spRuntime_t rt, int device);
SP_API spError_t spStreamSynchronize(spStream_t s);
/* spSuccess when all its work has completed, else spErrorNotReady. */
SP_API spError_t spStreamQuery(spStream_t s);
/* Later work on s waits for the event's latest record; a never-recorded event
 * is a no-op. */
SP_API spError_t spStreamWaitEvent(spStream_t s, spEvent_t e);

/* ------------------------------------------------------------------ events */

SP_API spError_t spEventCreate(spEvent_t* e, spRuntime_t rt);
SP_API spError_t spEventDestroy(spEvent_t e);
SP_API spError_t spEventRecord(spEvent_t e, spStream_t s);
/* On a never-recorded event: spSuccess. */
SP_API spError_t spEventSynchronize(spEvent_t e);
/* spSuccess when the latest record completed (or never recorded), else
 * spErrorNotReady. */
SP_API spError_t spEventQuery(spEvent_t e);
SP_API spError_t spDeviceSynchronize(spRuntime_t rt, int device);

/* -------------------------------------------------------------------- work */

typedef struct spAccess {
  const void* ptr;
  size_t size;
  int write;
} spAccess;

/* A kernel of durationNs virtual ns that reads/writes the declared ranges. */
SP_API spError_t spLaunchKernel(spStream_t s, uint64_t durationNs, const spAccess* accesses,
                                size_t count);
/* fn(userData) runs on the host once the host observes the op complete, in
 * (completion time, enqueue order). */
SP_API spError_t spLaunchHostFunc(spStream_t s, void (*fn)(void*), void* userData);
/* The host spends ns of virtual time. */
SP_API spError_t spHostAdvance(spRuntime_t rt, uint64_t ns);
SP_API spError_t spHostNow(spRuntime_t rt, uint64_t* ns);
/* Lasts bytes / copyBytesPerUs microseconds; with Host backing the bytes
 * really move, no later than the synchronize or query that observes it. */
SP_API spError_t spMemcpyAsync(void* dst, const void* src, size_t bytes, spStream_t s);
SP_API spError_t spMemsetAsync(void* dst, int value, size_t bytes, spStream_t s);
/* Virtual milliseconds between two completed records (spErrorNotReady while
 * either is incomplete, spErrorInvalidResourceHandle if never recorded). */
SP_API spError_t spEventElapsedTime(float* ms, spEvent_t start, spEvent_t end);

/* ------------------------------------------------------------------- pools */

typedef enum spMemAllocationType {
  spMemAllocationTypeDevice = 1,
  spMemAllocationTypePinnedHost = 2,
  spMemAllocationTypeHugePage = 3,
  spMemAllocationTypeDvpp = 4
} spMemAllocationType;

typedef enum spPagePolicy {
  spPageHugeFirst = 0,
  spPageHugeOnly = 1,
  spPageNormalOnly = 2
} spPagePolicy;

typedef struct spMemPoolProps {
  spMemAllocationType allocType; /* Device unless a variant is wanted */
  int device;                    /* location */
  size_t maxSize;                /* 0 = the device's capacity */
  spPagePolicy pagePolicy;       /* HugePage and Dvpp pools */
  unsigned handleTypes;          /* 0 = not exportable */
} spMemPoolProps;

typedef enum spMemPoolAttr {
  spMemPoolReuseFollowEventDependencies = 1,
  spMemPoolReuseAllowOpportunistic = 2,
  spMemPoolReuseAllowInternalDependencies = 3,
  spMemPoolAttrReleaseThreshold = 4,
  spMemPoolAttrReservedMemCurrent = 5,
  spMemPoolAttrReservedMemHigh = 6,
  spMemPoolAttrUsedMemCurrent = 7,
  spMemPoolAttrUsedMemHigh = 8
} spMemPoolAttr;

/* From the current pool of the stream's device. size 0: spSuccess, *ptr NULL. */
SP_API spError_t spMallocAsync(void** ptr, size_t size, spStream_t s);
SP_API spError_t spMallocFromPoolAsync(void** ptr, size_t size, spMemPool_t pool, spStream_t s);
/* Any stream, any device; also frees spMalloc memory. NULL: a no-op. */
SP_API spError_t spFreeAsync(void* ptr, spStream_t s);
/* Synchronous, straight from the device's upstream. */
SP_API spError_t spMalloc(void** ptr, size_t size, spRuntime_t rt, int device);
/* Synchronous free of either kind; the caller promises all access is complete. */
SP_API spError_t spFree(spRuntime_t rt, void* ptr);

SP_API spError_t spMemPoolCreate(spMemPool_t* pool, spRuntime_t rt, const spMemPoolProps* props);

/* An upstream made of user functions, so a pool can sit on aclrtMalloc,
 * cudaMalloc or cuMemCreate. map returns `bytes` (a multiple of 2 MiB) of
 * memory aligned to at least 256 B, or NULL on failure (the allocation then
 * fails with spErrorMemoryAllocation and nothing changes); unmap takes back
 * exactly what map returned. The functions run under the runtime's lock and
 * must not call sp* functions. */
typedef struct spUpstream {
  void* (*map)(size_t bytes, void* user);
  void (*unmap)(void* base, size_t bytes, void* user);
  void* user;
  int touchable; /* non-zero: the host may read and write the memory */
} spUpstream;
SP_API spError_t spMemPoolCreateWithUpstream(spMemPool_t* pool, spRuntime_t rt,
                                             const spMemPoolProps* props,
                                             const spUpstream* upstream);

/* Huge-page bytes a device may hold across its HugePage and Dvpp pools;
 * reservations beyond it fall back as their page policy allows (HugeOnly
 * fails). Unlimited by default; an Atlas-like setting is a quarter of the
 * device's memory. */
SP_API spError_t spDeviceSetHugePageBudget(spRuntime_t rt, int device, uint64_t bytes);
/* A default pool: spErrorInvalidValue. Destroying a current pool makes the
 * device's default pool current. Live allocations stay valid and their memory
 * goes back as they are freed (at spRuntimeDestroy at the latest). */
SP_API spError_t spMemPoolDestroy(spMemPool_t pool);
SP_API spError_t spDeviceGetDefaultMemPool(spMemPool_t* pool, spRuntime_t rt, int device);
SP_API spError_t spDeviceSetMemPool(spRuntime_t rt, int device, spMemPool_t pool);
SP_API spError_t spDeviceGetMemPool(spMemPool_t* pool, spRuntime_t rt, int device);
/* value: int* for attributes 1-3, uint64_t* for 4-8. */
SP_API spError_t spMemPoolSetAttribute(spMemPool_t pool, spMemPoolAttr attr, void* value);
SP_API spError_t spMemPoolGetAttribute(spMemPool_t pool, spMemPoolAttr attr, void* value);
/* Releases wholly free, synchronized chunks while more than minBytesToKeep
 * stays reserved. */
SP_API spError_t spMemPoolTrimTo(spMemPool_t pool, size_t minBytesToKeep);

typedef struct spMemPoolStats {
  uint64_t reservedBytes, reservedHigh, usedBytes, usedHigh;
  uint64_t allocCount, freeCount, failedAllocCount;
  uint64_t reuseSameStream, reuseEventDependency, reuseOpportunistic, reuseAfterSync,
      reuseInternalDependency;
  uint64_t waitsInserted, upstreamMaps, upstreamUnmaps;
  uint64_t hugePageBytes, transparentHugePageBytes, normalPageBytes; /* how reserved memory is backed */
  uint64_t largestFreeBlock;
} spMemPoolStats;

SP_API spError_t spMemPoolGetStats(spMemPool_t pool, spMemPoolStats* stats);

typedef struct spPointerAttributes {
  int device;       /* the pool's device, or -1 for pinned host memory */
  spMemPool_t pool; /* NULL for spMalloc memory */
  void* base;       /* start of the allocation containing ptr */
  size_t size;      /* its requested size */
} spPointerAttributes;

/* Any byte of a live allocation; else spErrorInvalidValue. */
SP_API spError_t spPointerGetAttributes(spPointerAttributes* attr, const void* ptr);

/* --------------------------------------------------- stream-order checker */

/* The simulator's checker watches kernels' declared accesses (and copies and
 * fills of runtime memory) and the pool's decisions. Off unless enabled here,
 * by RuntimeConfig::check_stream_order in C++, or for every runtime by the
 * environment variable STREAMPOOL_CHECK_STREAM_ORDER=1 (=fatal: abort at the
 * first report). */
typedef enum spCheckKind {
  spCheckOutOfBounds = 1,         /* access outside any allocation */
  spCheckUseAfterFree = 2,        /* access issued after the free, or a free not
                                     ordered after an earlier access */
  spCheckUseBeforeReady = 3,      /* access not ordered after the allocation */
  spCheckOverlappingLifetimes = 4 /* pool self-check: bytes reused while in use */
} spCheckKind;

typedef struct spCheckReport {
  spCheckKind kind;
  spStream_t stream;      /* the offending op's stream (NULL once destroyed) */
  uint64_t opIndex;       /* its position in the stream, 1 = first op */
  const void* ptr;
  size_t size;
  spStream_t otherStream; /* the other op involved (allocation or free), or NULL */
  uint64_t otherOpIndex;
  char message[256];      /* both ops, addresses and sizes in words */
} spCheckReport;

SP_API spError_t spCheckerEnable(spRuntime_t rt, int enable);
/* Copies up to `capacity` reports (oldest first) and sets *count to how many
 * there are in all. reports may be NULL when capacity is 0. */
SP_API spError_t spCheckerGetReports(spRuntime_t rt, spCheckReport* reports, size_t capacity,
                                     size_t* count);
SP_API spError_t spCheckerClearReports(spRuntime_t rt);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_STREAMPOOL_H_ */
