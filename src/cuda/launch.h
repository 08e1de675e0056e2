// What every launch of an emulated kernel checks, a stream launch's and a
// kernel node's alike.
#ifndef STREAMPOOL_SRC_CUDA_LAUNCH_H_
#define STREAMPOOL_SRC_CUDA_LAUNCH_H_

#include "src/compat/kernel.h"
#include "streampool/cuda/cuda_runtime.h"

namespace streampool::internal::cuda {

// A kernel as cuda_runtime.h's templates hand it over, and one emulated
// thread of it in their terms.
using RunFn = void (*)(void* ctx, const spcudaThreadCoords* coords);
void RunThread(RunFn run, void* ctx, const compat::KernelCoords& k);

// CUDA's launch limits (the device attributes report the same):
// cudaErrorInvalidConfiguration outside them.
cudaError_t CheckConfiguration(dim3 grid, dim3 block);

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_LAUNCH_H_
