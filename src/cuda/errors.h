// CUDA's error codes: their names and descriptions, and the translation of
// streampool's errors (spError_t, absl::Status) into them.
#ifndef STREAMPOOL_SRC_CUDA_ERRORS_H_
#define STREAMPOOL_SRC_CUDA_ERRORS_H_

#include "absl/status/status.h"
#include "streampool/cuda/driver_types.h"
#include "streampool/streampool.h"

namespace streampool::internal::cuda {

// spError_t's values are CUDA's numbers for the same conditions; a value
// outside the enum is cudaErrorUnknown.
cudaError_t FromSp(spError_t e);
// The runtime's status codes, mapped as include/streampool/runtime.h maps
// them onto spError_t.
cudaError_t FromStatus(const absl::Status& status);

// "cudaErrorInvalidValue", or nullptr for a value not in the enum.
const char* ErrorName(cudaError_t e);
// A sentence, or nullptr for a value not in the enum.
const char* ErrorDescription(cudaError_t e);

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_ERRORS_H_
