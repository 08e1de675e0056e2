// spaclLaunchEmulatedKernel, behind the spaclLaunchKernel template of
// spacl.h, and the interop accessors. An Ascend C launch has one dimension,
// blockDim: the core's grid is {blockDim, 1, 1} blocks of one thread.
#include <cstdint>

#include "src/acl/call.h"
#include "streampool/acl/spacl.h"

using streampool::internal::acl::AclFace;
namespace compat = streampool::internal::compat;

namespace {

// Ascend C's limit on blockDim.
constexpr uint32_t kMaxBlockDim = 65535;

using RunFn = void (*)(void* ctx, uint32_t block_idx, uint32_t block_dim);

void RunBlock(RunFn run, void* ctx, const compat::KernelCoords& k) {
  run(ctx, k.block_idx.x, k.grid.x);
}

}  // namespace

extern "C" {

aclError spaclLaunchEmulatedKernel(uint32_t blockDim, aclrtStream stream, const spAccess* accesses,
                                   size_t accessCount, RunFn run, void* ctx,
                                   void (*destroy)(void* ctx)) noexcept {
  const aclError shape =
      blockDim == 0 || blockDim > kMaxBlockDim ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS;
  return compat::LaunchKernel(
      compat::KernelLaunch<AclFace>{stream, compat::Dim3{blockDim, 1, 1}, compat::Dim3{1, 1, 1},
                                    shape, accesses, accessCount},
      compat::FaceKernel<RunFn>{run, ctx, destroy, &RunBlock});
}

aclError spaclGetRuntime(spRuntime_t* runtime) noexcept {
  return compat::GetRuntime<AclFace>(runtime);
}

aclError spaclGetStream(spStream_t* out, aclrtStream stream) noexcept {
  return compat::GetStream<AclFace>(out, stream);
}

}  // extern "C"
