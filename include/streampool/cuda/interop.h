/*
 * Between streampool's CUDA compatibility layer and the streampool API:
 * the implicit runtime behind the cuda* functions, to read pool
 * statistics (spMemPoolGetStats) or the stream-order checker's reports
 * (spCheckerGetReports), or to use any sp* function beside CUDA's.
 *
 * cudaEvent_t and cudaMemPool_t hold the same numbers as spEvent_t and
 * spMemPool_t: cast one to the other. A cudaStream_t does too, except the
 * special streams (0, cudaStreamLegacy, cudaStreamPerThread), which
 * spcudaGetStream resolves for the calling thread.
 */
#ifndef STREAMPOOL_CUDA_INTEROP_H_
#define STREAMPOOL_CUDA_INTEROP_H_

#include "../streampool.h"
#include "driver_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The implicit runtime, created if it does not exist yet. Valid until
 * cudaDeviceReset or exit; do not spRuntimeDestroy it. */
SPCUDA_API cudaError_t spcudaGetRuntime(spRuntime_t* runtime) SPCUDA_NOEXCEPT;
/* The streampool stream `stream` stands for on the calling thread (the
 * current device's legacy or per-thread stream for the special values). */
SPCUDA_API cudaError_t spcudaGetStream(spStream_t* out, cudaStream_t stream) SPCUDA_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_CUDA_INTEROP_H_ */
