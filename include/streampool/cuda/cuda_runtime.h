/*
 * `#include <cuda_runtime.h>` for host code built against streampool
 * (README "CUDA programs"): the runtime API (cuda_runtime_api.h),
 * CUDA's C++ conveniences (typed allocation templates, the pool and flags
 * overloads), and kernels emulated on the host.
 *
 * Kernels. There is no device compiler: a __global__ function is a host
 * function, and the launch `kernel<<<grid, block, sharedMem, stream>>>(args...)`
 * is written
 *
 *   spcudaLaunchKernel(kernel, grid, block, sharedMem, stream,
 *                      {{ptr, bytes, 1}, ...}, args...);
 *
 * where the braces list the byte ranges the kernel reads ({p, n, 0}) and
 * writes ({p, n, 1}) for the stream-order checker. The arguments are copied at
 * the call, as CUDA copies them; the kernel runs in stream order, once for
 * every (blockIdx, threadIdx) of the grid, one thread after another, lasting
 * STREAMPOOL_CUDA_KERNEL_NS of virtual time. A kernel template is launched
 * through a generic lambda: [](auto... a) { myKernel<float>(a...); }. The
 * body must not call the CUDA API, and cannot wait for the other threads of
 * its block (no __syncthreads, no __shared__).
 *
 * A kernel node (cudaGraphAddKernelNode) names its kernel by address and its
 * arguments by untyped pointers, so the kernel must be registered first:
 * spcudaRegisterKernel(kernel) records, for the process, how to copy its
 * arguments (by its parameter types) and run it. spcudaRegisterKernel(kernel,
 * body) runs body instead, with the same arguments: for a kernel whose work
 * is time alone (a device clock spin), which STREAMPOOL_CUDA_KERNEL_NS models.
 */
#ifndef STREAMPOOL_CUDA_CUDA_RUNTIME_H_
#define STREAMPOOL_CUDA_CUDA_RUNTIME_H_
/* CUDA's own include guard, which programs test to know the header is in. */
#ifndef __CUDA_RUNTIME_H__
#define __CUDA_RUNTIME_H__
#endif

#include "cuda_runtime_api.h"
/* spAccess: the checker's access record. */
#include "../streampool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One emulated thread's place, as spcudaLaunchKernel's body receives it. */
typedef struct spcudaThreadCoords {
  uint3 gridDim;
  uint3 blockDim;
  uint3 blockIdx;
  uint3 threadIdx;
} spcudaThreadCoords;

/* The type-erased launch behind spcudaLaunchKernel: run(ctx, coords) once per
 * thread, then destroy(ctx) once (also when the launch fails). Zero extents
 * or a block over 1024 threads: cudaErrorInvalidConfiguration. */
SPCUDA_API cudaError_t spcudaLaunchEmulatedKernel(
    dim3 grid, dim3 block, size_t sharedMem, cudaStream_t stream, const spAccess* accesses,
    size_t accessCount, void (*run)(void* ctx, const spcudaThreadCoords* coords), void* ctx,
    void (*destroy)(void* ctx)) SPCUDA_NOEXCEPT;

/* How a kernel node runs a kernel it knows by address: copy(func,
 * kernelParams) makes a context holding the kernel and a copy of the `arity`
 * arguments kernelParams points at (NULL: no memory), run(ctx, coords) runs
 * one thread, destroy(ctx) frees the context. spcudaRegisterKernel fills it
 * in. */
typedef struct spcudaKernelInvoker {
  size_t arity;
  void* (*copy)(const void* func, void** kernelParams);
  void (*run)(void* ctx, const spcudaThreadCoords* coords);
  void (*destroy)(void* ctx);
} spcudaKernelInvoker;

/* Records, for the process, how to run func in a kernel node (a later record
 * for the same func replaces it). The invoker is copied. */
SPCUDA_API cudaError_t
spcudaRegisterKernelInvoker(const void* func, const spcudaKernelInvoker* invoker) SPCUDA_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */

#include <atomic>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

/* The built-in variables, per host thread: the thread running a kernel body
 * sees the coordinates of the emulated thread it is running. */
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
inline constexpr int warpSize = 32;

namespace spcuda_internal {

template <class Kernel, class... Args>
struct Launch {
  Kernel kernel;
  std::tuple<Args...> args;

  static void Run(void* ctx, const spcudaThreadCoords* c) {
    auto* self = static_cast<Launch*>(ctx);
    threadIdx = c->threadIdx;
    blockIdx = c->blockIdx;
    blockDim = dim3(c->blockDim);
    gridDim = dim3(c->gridDim);
    std::apply(self->kernel, self->args);
  }
  static void Destroy(void* ctx) { delete static_cast<Launch*>(ctx); }
};

}  // namespace spcuda_internal

namespace spcuda_internal {

// The invoker of a kernel whose parameters are Params, running Body: the
// kernel itself (a function pointer, recovered from the node's address) or a
// captureless lambda standing in for it.
template <class Body, class... Params>
struct Invoker {
  using L = Launch<Body, std::decay_t<Params>...>;

  static Body BodyOf(const void* func) {
    if constexpr (std::is_pointer_v<Body>) {
      return reinterpret_cast<Body>(const_cast<void*>(func));
    } else {
      return Body{};
    }
  }
  template <size_t... I>
  static void* CopyArgs(const void* func, void** params, std::index_sequence<I...>) {
    return new (std::nothrow)
        L{BodyOf(func),
          std::tuple<std::decay_t<Params>...>(*static_cast<std::decay_t<Params>*>(params[I])...)};
  }
  static void* Copy(const void* func, void** params) {
    return CopyArgs(func, params, std::index_sequence_for<Params...>{});
  }
  static constexpr spcudaKernelInvoker kInvoker{sizeof...(Params), &Copy, &L::Run, &L::Destroy};
};

}  // namespace spcuda_internal

/* Makes kernel usable in cudaGraphAddKernelNode (see the file comment). */
template <class... Params>
cudaError_t spcudaRegisterKernel(void (*kernel)(Params...)) {
  using I = spcuda_internal::Invoker<void (*)(Params...), Params...>;
  return spcudaRegisterKernelInvoker((const void*)kernel,  // NOLINT(readability/casting)
                                     &I::kInvoker);
}
/* As above, running body(args...) (a captureless lambda) for kernel. */
template <class... Params, class Body>
cudaError_t spcudaRegisterKernel(void (*kernel)(Params...), Body) {
  static_assert(std::is_default_constructible_v<Body>, "body must be a captureless lambda");
  using I = spcuda_internal::Invoker<Body, Params...>;
  return spcudaRegisterKernelInvoker((const void*)kernel,  // NOLINT(readability/casting)
                                     &I::kInvoker);
}

/* cudaGraphInstantiate with CUDA 11's error node and log (CUDA's C++
 * overload): neither is written. */
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                               cudaGraphNode_t* pErrorNode, char* pLogBuffer,
                                               size_t bufferSize) noexcept {
  (void)pErrorNode;
  (void)pLogBuffer;
  (void)bufferSize;
  return ::cudaGraphInstantiate(pGraphExec, graph, 0);
}

/* Stands for kernel<<<grid, block, sharedMem, stream>>>(args...) (see the
 * file comment); returns what cudaGetLastError would after the launch. */
template <class Kernel, class... Args>
cudaError_t spcudaLaunchKernel(Kernel kernel, dim3 grid, dim3 block, size_t sharedMem,
                               cudaStream_t stream, std::vector<spAccess> accesses, Args... args) {
  using L = spcuda_internal::Launch<Kernel, Args...>;
  L* launch = new (std::nothrow) L{kernel, std::tuple<Args...>(std::move(args)...)};
  if (launch == nullptr) return cudaErrorMemoryAllocation;
  return spcudaLaunchEmulatedKernel(grid, block, sharedMem, stream, accesses.data(),
                                    accesses.size(), &L::Run, launch, &L::Destroy);
}

/* cudaEventCreate with flags (CUDA's C++ overload). */
static inline cudaError_t cudaEventCreate(cudaEvent_t* event, unsigned int flags) noexcept {
  return ::cudaEventCreateWithFlags(event, flags);
}
/* cudaMallocHost with flags (CUDA's C++ overload). */
static inline cudaError_t cudaMallocHost(void** ptr, size_t size, unsigned int flags) noexcept {
  return ::cudaHostAlloc(ptr, size, flags);
}
/* cudaMallocAsync from a pool (CUDA's C++ overload of cudaMallocFromPoolAsync). */
static inline cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                          cudaStream_t stream) noexcept {
  return ::cudaMallocFromPoolAsync(ptr, size, memPool, stream);
}

/* Typed pointers, as CUDA's templates. */
template <class T>
static inline cudaError_t cudaMalloc(T** devPtr, size_t size) noexcept {
  return ::cudaMalloc(reinterpret_cast<void**>(devPtr), size);
}
template <class T>
static inline cudaError_t cudaMallocHost(T** ptr, size_t size, unsigned int flags = 0) noexcept {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}
template <class T>
static inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) noexcept {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** ptr, size_t size, cudaStream_t stream) noexcept {
  return ::cudaMallocAsync(reinterpret_cast<void**>(ptr), size, stream);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** ptr, size_t size, cudaMemPool_t memPool,
                                          cudaStream_t stream) noexcept {
  return ::cudaMallocFromPoolAsync(reinterpret_cast<void**>(ptr), size, memPool, stream);
}
template <class T>
static inline cudaError_t cudaMallocFromPoolAsync(T** ptr, size_t size, cudaMemPool_t memPool,
                                                  cudaStream_t stream) noexcept {
  return ::cudaMallocFromPoolAsync(reinterpret_cast<void**>(ptr), size, memPool, stream);
}

namespace spcuda_internal {
// A kernel (a function pointer, or null) as the C calls take it; the cast is
// C's, which turns both into a pointer.
template <class T>
const void* KernelAddress(T func) {
  return (const void*)func;  // NOLINT(readability/casting)
}
}  // namespace spcuda_internal

/* The occupancy calls with a kernel, as CUDA's templates take it. */
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int* numBlocks, T func, int blockSize, size_t dynamicSMemSize) noexcept {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, spcuda_internal::KernelAddress(func), blockSize, dynamicSMemSize,
      cudaOccupancyDefault);
}
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, T func, int blockSize, size_t dynamicSMemSize, unsigned int flags) noexcept {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, spcuda_internal::KernelAddress(func), blockSize, dynamicSMemSize, flags);
}

/* The block size (a whole number of warps, at most blockSizeLimit when that
 * is not 0) that keeps the most threads resident per multiprocessor, the
 * larger one on a tie, and the grid that fills every multiprocessor with it. */
template <class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, T func, size_t dynamicSMemSize = 0, int blockSizeLimit = 0,
    unsigned int flags = cudaOccupancyDefault) noexcept {
  if (minGridSize == nullptr || blockSize == nullptr || blockSizeLimit < 0) {
    return cudaErrorInvalidValue;
  }
  int device = 0;
  int max_threads = 0;
  int sm_count = 0;
  int warp = 0;
  cudaError_t e = ::cudaGetDevice(&device);
  if (e == cudaSuccess)
    e = ::cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, device);
  if (e == cudaSuccess)
    e = ::cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = ::cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, device);
  if (e != cudaSuccess) return e;
  const int limit =
      blockSizeLimit == 0 || blockSizeLimit > max_threads ? max_threads : blockSizeLimit;
  int best_size = 0;
  int best_blocks = 0;
  for (int size = limit >= warp ? limit / warp * warp : limit; size > 0;
       size = size > warp ? size - warp : 0) {
    int blocks = 0;
    e = ::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &blocks, spcuda_internal::KernelAddress(func), size, dynamicSMemSize, flags);
    if (e != cudaSuccess) return e;
    if (blocks * size > best_blocks * best_size) {
      best_size = size;
      best_blocks = blocks;
    }
  }
  *blockSize = best_size;
  *minGridSize = best_blocks * sm_count;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize,
                                                             T func, size_t dynamicSMemSize = 0,
                                                             int blockSizeLimit = 0) noexcept {
  return cudaOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, dynamicSMemSize,
                                                     blockSizeLimit);
}

/* Atomics for kernels whose grid runs on one host thread while other
 * streams' kernels run on others (the threads executor). */
template <class T>
static inline T atomicAdd(T* address, T val) {
  return std::atomic_ref<T>(*address).fetch_add(val);
}
template <class T>
static inline T atomicSub(T* address, T val) {
  return std::atomic_ref<T>(*address).fetch_sub(val);
}
template <class T>
static inline T atomicExch(T* address, T val) {
  return std::atomic_ref<T>(*address).exchange(val);
}
namespace spcuda_internal {
// Stores val if `replace(old, val)`; returns the old value.
template <class T, class Replace>
T AtomicUpdate(T* address, T val, Replace replace) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (replace(old, val) && !a.compare_exchange_weak(old, val)) {
  }
  return old;
}
}  // namespace spcuda_internal
template <class T>
static inline T atomicMax(T* address, T val) {
  return spcuda_internal::AtomicUpdate(address, val, [](T old, T v) { return old < v; });
}
template <class T>
static inline T atomicMin(T* address, T val) {
  return spcuda_internal::AtomicUpdate(address, val, [](T old, T v) { return v < old; });
}
template <class T>
static inline T atomicCAS(T* address, T compare, T val) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, val);
  return compare;
}

#endif /* __cplusplus */

#endif /* STREAMPOOL_CUDA_CUDA_RUNTIME_H_ */
