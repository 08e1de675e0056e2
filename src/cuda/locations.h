// CUDA's memory locations and access descriptors in the sp* API's terms,
// shared by the pool calls and the graph allocation nodes.
#ifndef STREAMPOOL_SRC_CUDA_LOCATIONS_H_
#define STREAMPOOL_SRC_CUDA_LOCATIONS_H_

#include <cstddef>
#include <vector>

#include "streampool/cuda/driver_types.h"
#include "streampool/streampool.h"

namespace streampool::internal::cuda {

// NUMA nodes are CUDA's but not streampool's: cudaErrorNotSupported; an
// unknown type is cudaErrorInvalidValue.
cudaError_t ToSpLocation(const cudaMemLocation& in, spMemLocation* out);
// count descriptors (descs may be NULL only when count is 0).
cudaError_t ToSpAccessDescs(const cudaMemAccessDesc* descs, size_t count,
                            std::vector<spMemAccessDesc>* out);

}  // namespace streampool::internal::cuda

#endif  // STREAMPOOL_SRC_CUDA_LOCATIONS_H_
