// spcudaLaunchEmulatedKernel, behind the spcudaLaunchKernel template of
// cuda_runtime.h, and the interop accessors of streampool/cuda/interop.h.
#include "src/cuda/launch.h"

#include <cstdint>

#include "src/cuda/call.h"
#include "streampool/cuda/cuda_runtime.h"
#include "streampool/cuda/interop.h"

using streampool::internal::cuda::CheckConfiguration;
using streampool::internal::cuda::CudaFace;
using streampool::internal::cuda::RunFn;
using streampool::internal::cuda::RunThread;
namespace compat = streampool::internal::compat;

namespace streampool::internal::cuda {

void RunThread(RunFn run, void* ctx, const compat::KernelCoords& k) {
  const spcudaThreadCoords coords{uint3{k.grid.x, k.grid.y, k.grid.z},
                                  uint3{k.block.x, k.block.y, k.block.z},
                                  uint3{k.block_idx.x, k.block_idx.y, k.block_idx.z},
                                  uint3{k.thread_idx.x, k.thread_idx.y, k.thread_idx.z}};
  run(ctx, &coords);
}

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

}  // namespace streampool::internal::cuda

extern "C" {

cudaError_t spcudaLaunchEmulatedKernel(dim3 grid, dim3 block, size_t sharedMem, cudaStream_t stream,
                                       const spAccess* accesses, size_t accessCount, RunFn run,
                                       void* ctx, void (*destroy)(void* ctx)) noexcept {
  return compat::LaunchKernel(
      compat::KernelLaunch<CudaFace>{stream, compat::Dim3{grid.x, grid.y, grid.z},
                                     compat::Dim3{block.x, block.y, block.z},
                                     CheckConfiguration(grid, block), accesses, accessCount},
      compat::FaceKernel<RunFn>{run, ctx, destroy, &RunThread});
}

cudaError_t spcudaGetRuntime(spRuntime_t* runtime) noexcept {
  return compat::GetRuntime<CudaFace>(runtime);
}

cudaError_t spcudaGetStream(spStream_t* out, cudaStream_t stream) noexcept {
  return compat::GetStream<CudaFace>(out, stream);
}

}  // extern "C"
