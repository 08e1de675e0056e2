/*
 * streampool's additions to its AscendCL subset (README "AscendCL
 * programs"): kernels emulated on the host, and the streampool objects behind
 * the acl names.
 *
 * Kernels. There is no device compiler: an Ascend C kernel is a host
 * function, and the launch `kernel<<<blockDim, l2ctrl, stream>>>(args...)` is
 * written
 *
 *   spaclLaunchKernel(kernel, blockDim, stream, {{ptr, bytes, 1}, ...}, args...);
 *
 * where the braces list the byte ranges the kernel reads ({p, n, 0}) and
 * writes ({p, n, 1}) for the stream-order checker. The arguments are copied at
 * the call; the kernel runs in stream order once per block, GetBlockIdx()
 * telling which, lasting STREAMPOOL_ACL_KERNEL_NS of virtual time. The body
 * must not call acl* functions.
 *
 * aclrtEvent and aclrtMemPool hold the same numbers as spEvent_t and
 * spMemPool_t; an aclrtStream does too, but for NULL (the current device's
 * default stream), which spaclGetStream resolves.
 */
#ifndef STREAMPOOL_ACL_SPACL_H_
#define STREAMPOOL_ACL_SPACL_H_

#include "../streampool.h"
#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The type-erased launch behind spaclLaunchKernel: run(ctx, i, blockDim) for
 * every block i, then destroy(ctx) once (also when the launch fails).
 * blockDim 0 or over 65535: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError spaclLaunchEmulatedKernel(
    uint32_t blockDim, aclrtStream stream, const spAccess* accesses, size_t accessCount,
    void (*run)(void* ctx, uint32_t blockIdx, uint32_t blockDim), void* ctx,
    void (*destroy)(void* ctx)) SPACL_NOEXCEPT;

/* The implicit runtime, created if it does not exist yet. Valid until
 * aclFinalize, the last aclrtResetDevice, or exit; do not spRuntimeDestroy it. */
ACL_FUNC_VISIBILITY aclError spaclGetRuntime(spRuntime_t* runtime) SPACL_NOEXCEPT;
/* The streampool stream `stream` stands for on the calling thread. */
ACL_FUNC_VISIBILITY aclError spaclGetStream(spStream_t* out, aclrtStream stream) SPACL_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */

#include <new>
#include <tuple>
#include <utility>
#include <vector>

/* Ascend C's qualifiers are nothing on the host. */
#ifndef __global__
#define __global__
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef GM_ADDR
#define GM_ADDR uint8_t*
#endif

namespace spacl_internal {

inline thread_local uint32_t block_idx = 0;
inline thread_local uint32_t block_num = 1;

template <class Kernel, class... Args>
struct Launch {
  Kernel kernel;
  std::tuple<Args...> args;

  static void Run(void* ctx, uint32_t idx, uint32_t num) {
    auto* self = static_cast<Launch*>(ctx);
    block_idx = idx;
    block_num = num;
    std::apply(self->kernel, self->args);
  }
  static void Destroy(void* ctx) { delete static_cast<Launch*>(ctx); }
};

}  // namespace spacl_internal

/* Inside a kernel body: the block being run, and how many there are. */
inline int64_t GetBlockIdx() { return spacl_internal::block_idx; }
inline int64_t GetBlockNum() { return spacl_internal::block_num; }

/* Stands for kernel<<<blockDim, l2ctrl, stream>>>(args...) (see above). */
template <class Kernel, class... Args>
aclError spaclLaunchKernel(Kernel kernel, uint32_t blockDim, aclrtStream stream,
                           std::vector<spAccess> accesses, Args... args) {
  using L = spacl_internal::Launch<Kernel, Args...>;
  L* launch = new (std::nothrow) L{kernel, std::tuple<Args...>(std::move(args)...)};
  if (launch == nullptr) return ACL_ERROR_BAD_ALLOC;
  return spaclLaunchEmulatedKernel(blockDim, stream, accesses.data(), accesses.size(), &L::Run,
                                   launch, &L::Destroy);
}

#endif /* __cplusplus */

#endif /* STREAMPOOL_ACL_SPACL_H_ */
