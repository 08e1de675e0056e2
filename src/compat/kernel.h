// Emulated kernels: a face's launch helper (spcudaLaunchKernel) hands over a
// type-erased body, and this runs it for every (block, thread) of the grid on
// the host, in stream order, as one kernel op of the runtime that declares the
// launch's accesses to the stream-order checker.
//
// The body runs through Runtime::LaunchWork: on the stream's worker thread
// with the threads executor, on the host thread that observes the kernel
// complete with the simulator. Either way it must not call the API. The
// threads of a block run one after the other, so a kernel that waits for its
// other threads (__syncthreads) cannot be emulated.
#ifndef STREAMPOOL_SRC_COMPAT_KERNEL_H_
#define STREAMPOOL_SRC_COMPAT_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/compat/context.h"
#include "src/compat/export.h"
#include "streampool/runtime.h"

namespace streampool::internal::compat {

// A grid or block extent, or an index into one.
struct Dim3 {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;
};

// Where one emulated thread is.
struct KernelCoords {
  Dim3 grid;
  Dim3 block;
  Dim3 block_idx;
  Dim3 thread_idx;
};

// A kernel's body with its copied arguments, owned by the launch: `run` is
// called once per thread, `destroy` once when the kernel has run or the launch
// failed. `run` may throw; the runtime then holds Fault::kKernelFailed.
struct KernelBody {
  void (*run)(void* ctx, const KernelCoords& coords) = nullptr;
  void* ctx = nullptr;
  void (*destroy)(void* ctx) = nullptr;
};

// Enqueues the kernel on `stream`, lasting the runtime's kernel_ns. The
// grid's and block's extents must be non-zero (kInvalidArgument); `body` is
// destroyed even when the launch fails.
STREAMPOOL_COMPAT_EXPORT absl::Status LaunchEmulatedKernel(ProcessRuntime& runtime, StreamId stream,
                                                           Dim3 grid, Dim3 block,
                                                           absl::Span<const Access> accesses,
                                                           KernelBody body);

// The same kernel as a graph's kernel node runs it: the C API's node body
// (spKernelNodeParams fn, userData, destroy), which the node's copies share
// and the last one destroys. `body` belongs to the result from the call on,
// and is destroyed even when the call fails.
struct NodeBody {
  void (*fn)(void* user_data) = nullptr;
  void* user_data = nullptr;
  void (*destroy)(void* user_data) = nullptr;
};
STREAMPOOL_COMPAT_EXPORT absl::StatusOr<NodeBody> KernelNodeBody(ProcessRuntime& runtime, Dim3 grid,
                                                                 Dim3 block, KernelBody body);

// A launch's access list as the faces receive it (the C API's spAccess).
STREAMPOOL_COMPAT_EXPORT std::vector<Access> AccessesFromC(const spAccess* accesses, size_t count);

}  // namespace streampool::internal::compat

#endif  // STREAMPOOL_SRC_COMPAT_KERNEL_H_
