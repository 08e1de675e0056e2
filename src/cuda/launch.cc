// spcudaLaunchEmulatedKernel, behind the spcudaLaunchKernel template of
// cuda_runtime.h, and the interop accessors of streampool/cuda/interop.h.
#include <cstdint>
#include <vector>

#include "src/compat/kernel.h"
#include "src/cuda/call.h"
#include "streampool/cuda/cuda_runtime.h"
#include "streampool/cuda/interop.h"

using streampool::internal::cuda::Api;
using streampool::internal::cuda::Call;
using streampool::internal::cuda::FromStatus;
using streampool::internal::cuda::ToId;
using streampool::internal::cuda::WithRuntime;
namespace compat = streampool::internal::compat;

namespace {

// The face's body, adapted to the core's coordinates.
struct FaceBody {
  void (*run)(void* ctx, const spcudaThreadCoords* coords);
  void* ctx;
  void (*destroy)(void* ctx);
};

void RunFaceBody(void* p, const compat::KernelCoords& k) {
  const auto* body = static_cast<const FaceBody*>(p);
  const spcudaThreadCoords coords{uint3{k.grid.x, k.grid.y, k.grid.z},
                                  uint3{k.block.x, k.block.y, k.block.z},
                                  uint3{k.block_idx.x, k.block_idx.y, k.block_idx.z},
                                  uint3{k.thread_idx.x, k.thread_idx.y, k.thread_idx.z}};
  body->run(body->ctx, &coords);
}

void DestroyFaceBody(void* p) {
  auto* body = static_cast<FaceBody*>(p);
  if (body->destroy != nullptr) body->destroy(body->ctx);
  delete body;
}

// CUDA's launch limits (the device attributes report the same).
cudaError_t CheckConfiguration(dim3 grid, dim3 block) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0) {
    return cudaErrorInvalidConfiguration;
  }
  if (block.x > 1024 || block.y > 1024 || block.z > 64 ||
      uint64_t{block.x} * block.y * block.z > 1024) {
    return cudaErrorInvalidConfiguration;
  }
  if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    return cudaErrorInvalidConfiguration;
  }
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t spcudaLaunchEmulatedKernel(dim3 grid, dim3 block, size_t sharedMem, cudaStream_t stream,
                                       const spAccess* accesses, size_t accessCount,
                                       void (*run)(void* ctx, const spcudaThreadCoords* coords),
                                       void* ctx, void (*destroy)(void* ctx)) noexcept {
  // The launch owns ctx from here on, whatever happens.
  FaceBody* body = nullptr;
  try {
    body = new FaceBody{run, ctx, destroy};
  } catch (...) {
    if (destroy != nullptr) destroy(ctx);
    return Api([] { return cudaErrorMemoryAllocation; });
  }
  compat::KernelBody core{&RunFaceBody, body, &DestroyFaceBody};
  bool handed_over = false;
  const cudaError_t e = WithRuntime([&](Call& call) {
    if (run == nullptr || (accesses == nullptr && accessCount != 0)) return cudaErrorInvalidValue;
    if (cudaError_t err = CheckConfiguration(grid, block); err != cudaSuccess) return err;
    spStream_t s = nullptr;
    if (cudaError_t err = call.Stream(stream, &s); err != cudaSuccess) return err;
    std::vector<streampool::Access> acc(accessCount);
    for (size_t i = 0; i < accessCount; ++i) {
      acc[i] = streampool::Access{accesses[i].ptr, accesses[i].size, accesses[i].write != 0};
    }
    handed_over = true;
    return FromStatus(
        compat::LaunchEmulatedKernel(call.rt(), ToId(s), compat::Dim3{grid.x, grid.y, grid.z},
                                     compat::Dim3{block.x, block.y, block.z}, acc, core));
  });
  if (!handed_over) DestroyFaceBody(body);
  return e;
}

cudaError_t spcudaGetRuntime(spRuntime_t* runtime) noexcept {
  return WithRuntime([&](Call& call) {
    if (runtime == nullptr) return cudaErrorInvalidValue;
    *runtime = call.c();
    return cudaSuccess;
  });
}

cudaError_t spcudaGetStream(spStream_t* out, cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    if (out == nullptr) return cudaErrorInvalidValue;
    return call.Stream(stream, out);
  });
}

}  // extern "C"
