/**
 * \file
 * PyTorch's allocator over streampool: the C functions of
 * libstreampool-torch.so, which PyTorch loads as a pluggable allocator
 *
 *     torch.cuda.memory.change_current_allocator(
 *         torch.cuda.memory.CUDAPluggableAllocator(
 *             "libstreampool-torch.so", "streampool_torch_alloc", "streampool_torch_free"))
 *
 * (or streampool.torch.use() from Python), so that every CUDA tensor lives in
 * a streampool pool on the machine's GPUs.
 *
 * The library holds one runtime for the process (spExecutorCuda, every
 * visible device), made at the first allocation (or streampool_torch_init)
 * and never destroyed: PyTorch frees tensors until the process ends. Each
 * device allocates from its current pool: the default pool, or, when growth
 * or max_size is set, a Device pool made with those properties. PyTorch's
 * streams are adopted as they first appear (spStreamCreateFromNative; NULL
 * and cudaStreamLegacy are the device's legacy stream; cudaStreamPerThread,
 * a different stream on each thread, is refused) and kept for the process's
 * life; an adopted CUstream must outlive its last allocation's free.
 *
 * Settings, "key=value" pairs separated by commas:
 *
 *   release_threshold       bytes (digits with an optional K, M or G suffix,
 *                           powers of 1024) or "max"; default "max", as
 *                           PyTorch's cudaMallocAsync backend sets it, so that
 *                           a synchronize never unmaps what the next step
 *                           maps again
 *   follow_event_dependencies, opportunistic, internal_dependencies
 *                           0 or 1: the pools' reuse rules 2, 3 and 5
 *                           (spMemPoolReuse*); default 1
 *   growth                  expandable or chunked (spPoolGrowth); default
 *                           the default pool's (expandable)
 *   max_size                bytes, as release_threshold; 0 (the default) is
 *                           the device's memory
 *
 * They come from streampool_torch_configure or, when it was not called, from
 * the environment variables STREAMPOOL_TORCH_<KEY> (the keys upper-cased:
 * STREAMPOOL_TORCH_RELEASE_THRESHOLD, STREAMPOOL_TORCH_GROWTH, ...), read
 * when the runtime is made. An environment value that does not parse keeps
 * its default, and one line on stderr says so: an unchanged program must not
 * stop over it.
 *
 * Every function is thread-safe and noexcept: nothing throws across them.
 * Those returning int return 0 or an spError_t value; on failure
 * streampool_torch_error_message() says why.
 */
#ifndef STREAMPOOL_TORCH_ALLOCATOR_H_
#define STREAMPOOL_TORCH_ALLOCATOR_H_

#include <stddef.h>
#include <sys/types.h>

#include "streampool/streampool.h"

#if defined(_WIN32)
#define STREAMPOOL_TORCH_API
#else
/** Marks a function of libstreampool-torch: the only symbols it exports. */
#define STREAMPOOL_TORCH_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------- PyTorch's two functions */

/** `size` bytes on `device`, in stream order of `stream` (a CUstream of the
 * device's primary context; NULL: the legacy stream): PyTorch's alloc_fn.
 * NULL for size <= 0 and on any failure: no runtime (no driver or device),
 * a stream that cannot be adopted, out of memory. */
STREAMPOOL_TORCH_API void* streampool_torch_alloc(ssize_t size, int device,
                                                  void* stream) SP_NOEXCEPT;

/** Frees `ptr` in stream order of `stream`, the stream it was allocated on
 * (PyTorch passes it): PyTorch's free_fn. `size` and `device` are PyTorch's
 * record of the allocation; the pool knows both. NULL, a pointer this library
 * did not allocate, or a call once the process has begun to exit (static
 * destructors; the memory goes back with the process): a no-op. */
STREAMPOOL_TORCH_API void streampool_torch_free(void* ptr, ssize_t size, int device,
                                                void* stream) SP_NOEXCEPT;

/** Tensor.record_stream: `ptr`'s free is also ordered after the work
 * `stream` has enqueued by then (spMemRecordUse). NULL, or a pointer that is
 * not the start of a live allocation: a no-op. PyTorch's Python API gives a
 * pluggable allocator no way to install it, so torch's record_stream does not
 * reach it; C++ embedders (CUDAPluggableAllocator::set_record_stream_fn) may
 * install it. */
STREAMPOOL_TORCH_API void streampool_torch_record_stream(void* ptr, void* stream) SP_NOEXCEPT;

/* ---------------------------------------------------------------- settings */

/** Replaces the settings (see the file comment) for the runtime still to be
 * made. "" is every default, ignoring the environment; NULL forgets earlier
 * calls, so the environment applies again. All or nothing: an unknown or
 * repeated key, a malformed pair or value: spErrorInvalidValue and nothing
 * changes. A well-formed string (or NULL) once the runtime exists:
 * spErrorNotSupported (the pools are made; settings cannot follow them), and
 * a malformed one spErrorInvalidValue still. A runtime whose creation
 * failed is not made: configuring clears that failure and the next
 * allocation tries again. */
STREAMPOOL_TORCH_API int streampool_torch_configure(const char* settings) SP_NOEXCEPT;

/* ----------------------------------------------------------------- runtime */

/** Makes the runtime now if it does not exist. 0 when it exists; else why it
 * could not be made, remembered until the next streampool_torch_configure:
 * spErrorInsufficientDriver (no usable CUDA driver), spErrorNoDevice, or what
 * making a pool or setting an attribute answered. */
STREAMPOOL_TORCH_API int streampool_torch_init(void) SP_NOEXCEPT;

/** The runtime, or NULL before it is made. Its handle is meaningful to the
 * caller's sp* functions only in a build with a shared libstreampool, which
 * both then load; a static build embeds a copy of libstreampool of its own in
 * this library, whose handles another copy answers with
 * spErrorInvalidResourceHandle. */
STREAMPOOL_TORCH_API spRuntime_t streampool_torch_runtime(void) SP_NOEXCEPT;

/** Why the calling thread's last failing call of this library failed, in one
 * sentence; "" when none did. Valid until the thread's next call. */
STREAMPOOL_TORCH_API const char* streampool_torch_error_message(void) SP_NOEXCEPT;

/* -------------------------------------------------------------- statistics */

/** The statistics of `device`'s current pool (spMemPoolGetStats).
 * Before the runtime exists: spErrorNotReady, or the reason its creation
 * failed; a device it does not have: spErrorInvalidDevice. */
STREAMPOOL_TORCH_API int streampool_torch_get_stats(int device, spMemPoolStats* stats) SP_NOEXCEPT;

/* The JSON documents below all work the same way: *length is set to the
 * text's length (without its terminating NUL), and the text and a NUL are
 * copied into buffer only when capacity > *length; otherwise nothing is
 * copied. Call with capacity 0 (buffer may then be NULL) to size the buffer;
 * the pools may change before the next call, so compare again after it.
 * device -1 is every device. A NULL length: spErrorInvalidValue; before the
 * runtime exists, as streampool_torch_get_stats. Addresses, sizes and stream
 * handles are JSON integers; a stream is its native handle (0: the legacy
 * stream; null: none, as for a READY block). */

/** Statistics: {"devices": [{"device", "streams" (adopted so far),
 * reserved_bytes, reserved_high, used_bytes, used_high, alloc_count,
 * free_count, failed_alloc_count, reuse_same_stream, reuse_event_dependency,
 * reuse_opportunistic, reuse_after_sync, reuse_internal_dependency,
 * fresh_allocs, waits_inserted, upstream_maps, upstream_unmaps,
 * largest_free_block, requested_bytes, requested_high, oom_count, reclaims,
 * reclaimed_bytes, oom_retries, segments, segments_high, "settings":
 * {release_threshold, follow_event_dependencies, opportunistic,
 * internal_dependencies, growth ("expandable" or "chunked"), max_size}}]}:
 * the names of the Python package's Pool.stats(). */
STREAMPOOL_TORCH_API int streampool_torch_stats_json(int device, char* buffer, size_t capacity,
                                                     size_t* length) SP_NOEXCEPT;

/** The current pools' segments and blocks (spMemPoolSnapshot), and each
 * device's graph memory (spDeviceGetGraphMemAttribute):
 * {"devices": [{"device", "pool", "graph_memory": {used, used_high, reserved,
 * reserved_high}, "segments": [{address, size, mapped_bytes,
 * expandable, "blocks": [{address, size, requested, state ("live",
 * "pending", "ready", "cached", "awaiting_uses"), stream, free_point,
 * alloc_seq, unmapped_bytes}]}]}]}: the layout of the Python package's
 * Pool.snapshot(). */
STREAMPOOL_TORCH_API int streampool_torch_snapshot_json(int device, char* buffer, size_t capacity,
                                                        size_t* length) SP_NOEXCEPT;

/** Allocations handed out and not freed (spRuntimeGetLiveAllocations), on
 * `device` or every device: {"count", "bytes" (what they asked for),
 * "allocations": [{ptr, size, block_size, device, stream, seq}]}, by pool and
 * address. */
STREAMPOOL_TORCH_API int streampool_torch_leak_report_json(int device, char* buffer,
                                                           size_t capacity,
                                                           size_t* length) SP_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_TORCH_ALLOCATOR_H_ */
