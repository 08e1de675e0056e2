/*
 * The few CUDA driver API names that stream-ordered allocation code written
 * against the runtime API borrows (the CUDA guide's snippets use them), for
 * streampool's CUDA compatibility layer. No driver API function is
 * provided.
 */
#ifndef STREAMPOOL_CUDA_CUDA_H_
#define STREAMPOOL_CUDA_CUDA_H_

#include <stdint.h>

#include "driver_types.h"

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

/* The driver's names for the runtime's cudaMemAllocationHandleType values. */
#define CU_MEM_HANDLE_TYPE_NONE cudaMemHandleTypeNone
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR cudaMemHandleTypePosixFileDescriptor

#endif /* STREAMPOOL_CUDA_CUDA_H_ */
