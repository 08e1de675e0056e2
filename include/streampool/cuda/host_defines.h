/*
 * CUDA's function and variable qualifiers for a host compiler (streampool's
 * CUDA compatibility layer). There is no device compiler: kernels
 * and device functions are ordinary host code, so the qualifiers say nothing
 * more than `inline` where CUDA's imply it.
 */
#ifndef STREAMPOOL_CUDA_HOST_DEFINES_H_
#define STREAMPOOL_CUDA_HOST_DEFINES_H_

#define __host__
#define __device__
#define __global__
#define __constant__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
/* Not __noinline__: the C++ library spells __attribute__((__noinline__)),
 * which such a macro would break. __restrict__ is the host compiler's own. */
#define __cudart_builtin__
#define CUDARTAPI
#define CUDART_CB

/* Exported from libstreampool-cudart (hidden visibility elsewhere). */
#define SPCUDA_API __attribute__((visibility("default")))

#ifdef __cplusplus
/* Every cuda* function is noexcept in C++: no exception crosses it. */
#define SPCUDA_NOEXCEPT noexcept
#else
#define SPCUDA_NOEXCEPT
#endif

#endif /* STREAMPOOL_CUDA_HOST_DEFINES_H_ */
