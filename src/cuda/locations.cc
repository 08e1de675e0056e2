// The conversions of locations.h.
#include "src/cuda/locations.h"

#include "src/compat/face.h"

namespace streampool::internal::cuda {

cudaError_t ToSpLocation(const cudaMemLocation& in, spMemLocation* out) {
  switch (static_cast<int>(compat::Raw(in.type))) {
    case cudaMemLocationTypeDevice:
      *out = spMemLocation{spMemLocationTypeDevice, in.id};
      return cudaSuccess;
    case cudaMemLocationTypeHost:
      *out = spMemLocation{spMemLocationTypeHost, 0};
      return cudaSuccess;
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent:
      return cudaErrorNotSupported;
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t ToSpAccessDescs(const cudaMemAccessDesc* descs, size_t count,
                            std::vector<spMemAccessDesc>* out) {
  if (descs == nullptr && count != 0) return cudaErrorInvalidValue;
  out->resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (cudaError_t e = ToSpLocation(descs[i].location, &(*out)[i].location); e != cudaSuccess) {
      return e;
    }
    switch (static_cast<int>(compat::Raw(descs[i].flags))) {
      case cudaMemAccessFlagsProtNone:
      case cudaMemAccessFlagsProtRead:
      case cudaMemAccessFlagsProtReadWrite:
        (*out)[i].flags = static_cast<spMemAccessFlags>(descs[i].flags);
        break;
      default:
        return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

}  // namespace streampool::internal::cuda
