// spaclLaunchEmulatedKernel, behind the spaclLaunchKernel template of
// spacl.h, and the interop accessors. An Ascend C launch has one dimension,
// blockDim: the core's grid is {blockDim, 1, 1} blocks of one thread.
#include <cstdint>
#include <vector>

#include "src/acl/call.h"
#include "src/compat/kernel.h"
#include "streampool/acl/spacl.h"

using streampool::internal::acl::Api;
using streampool::internal::acl::Call;
using streampool::internal::acl::FromStatus;
using streampool::internal::acl::ToId;
using streampool::internal::acl::WithRuntime;
namespace compat = streampool::internal::compat;

namespace {

// Ascend C's limit on blockDim.
constexpr uint32_t kMaxBlockDim = 65535;

struct FaceBody {
  void (*run)(void* ctx, uint32_t block_idx, uint32_t block_dim);
  void* ctx;
  void (*destroy)(void* ctx);
};

void RunFaceBody(void* p, const compat::KernelCoords& k) {
  const auto* body = static_cast<const FaceBody*>(p);
  body->run(body->ctx, k.block_idx.x, k.grid.x);
}

void DestroyFaceBody(void* p) {
  auto* body = static_cast<FaceBody*>(p);
  if (body->destroy != nullptr) body->destroy(body->ctx);
  delete body;
}

}  // namespace

extern "C" {

aclError spaclLaunchEmulatedKernel(uint32_t blockDim, aclrtStream stream, const spAccess* accesses,
                                   size_t accessCount,
                                   void (*run)(void* ctx, uint32_t blockIdx, uint32_t blockDim),
                                   void* ctx, void (*destroy)(void* ctx)) noexcept {
  // The launch owns ctx from here on, whatever happens.
  FaceBody* body = nullptr;
  try {
    body = new FaceBody{run, ctx, destroy};
  } catch (...) {
    if (destroy != nullptr) destroy(ctx);
    return Api([] { return ACL_ERROR_BAD_ALLOC; });
  }
  compat::KernelBody core{&RunFaceBody, body, &DestroyFaceBody};
  bool handed_over = false;
  const aclError e = WithRuntime([&](Call& call) {
    if (run == nullptr || (accesses == nullptr && accessCount != 0)) {
      return ACL_ERROR_INVALID_PARAM;
    }
    if (blockDim == 0 || blockDim > kMaxBlockDim) return ACL_ERROR_INVALID_PARAM;
    spStream_t s = nullptr;
    if (aclError err = call.Stream(stream, &s); err != ACL_SUCCESS) return err;
    std::vector<streampool::Access> acc(accessCount);
    for (size_t i = 0; i < accessCount; ++i) {
      acc[i] = streampool::Access{accesses[i].ptr, accesses[i].size, accesses[i].write != 0};
    }
    handed_over = true;
    return FromStatus(compat::LaunchEmulatedKernel(call.rt(), ToId(s), compat::Dim3{blockDim, 1, 1},
                                                   compat::Dim3{1, 1, 1}, acc, core));
  });
  if (!handed_over) DestroyFaceBody(body);
  return e;
}

aclError spaclGetRuntime(spRuntime_t* runtime) noexcept {
  return WithRuntime([&](Call& call) {
    if (runtime == nullptr) return ACL_ERROR_INVALID_PARAM;
    *runtime = call.c();
    return ACL_SUCCESS;
  });
}

aclError spaclGetStream(spStream_t* out, aclrtStream stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (out == nullptr) return ACL_ERROR_INVALID_PARAM;
    return call.Stream(stream, out);
  });
}

}  // extern "C"
