// CUDA's error codes, the runtime's and the driver's: their names and
// descriptions. (What streampool's errors
// are in them is the face's table, src/cuda/call.h.)
#ifndef STREAMPOOL_SRC_CUDA_ERRORS_H_
#define STREAMPOOL_SRC_CUDA_ERRORS_H_

#include "streampool/cuda/cuda.h"
#include "streampool/cuda/driver_types.h"

namespace streampool::internal::cuda {

// "cudaErrorInvalidValue", or nullptr for a value not in the enum.
const char* ErrorName(cudaError_t e);
// A sentence, or nullptr for a value not in the enum.
const char* ErrorDescription(cudaError_t e);

// The driver's: "CUDA_ERROR_INVALID_VALUE" and a sentence, or nullptr for a
// value not in CUresult.
const char* DriverErrorName(CUresult e);
const char* DriverErrorDescription(CUresult e);

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_ERRORS_H_
