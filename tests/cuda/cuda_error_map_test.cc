// What the CUDA face answers for each failure of the runtime beneath it
// (src/cuda/call.h, the kit's tables): spError_t's values are CUDA's numbers,
// a status reads as the C API reads it, and what neither lists has a code
// chosen here: an spError_t outside the enum is cudaErrorUnknown, a status
// code ToCError does not list cudaErrorInvalidValue (as spErrorInvalidValue
// is in the C API). Exceptions escaping a call are cudaErrorMemoryAllocation
// (std::bad_alloc) or cudaErrorUnknown, and become the thread's last error.
#include <cuda_runtime.h>

#include <new>
#include <stdexcept>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "src/cuda/call.h"

namespace streampool::internal::cuda {
namespace {

TEST(CudaErrorMapTest, SpErrorsAreCudasNumbers) {
  EXPECT_EQ(FromSp(spSuccess), cudaSuccess);
  EXPECT_EQ(FromSp(spErrorInvalidValue), cudaErrorInvalidValue);
  EXPECT_EQ(FromSp(spErrorMemoryAllocation), cudaErrorMemoryAllocation);
  EXPECT_EQ(FromSp(spErrorInvalidDevice), cudaErrorInvalidDevice);
  EXPECT_EQ(FromSp(spErrorPeerAccessUnsupported), cudaErrorPeerAccessUnsupported);
  EXPECT_EQ(FromSp(spErrorInvalidResourceHandle), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(FromSp(spErrorNotReady), cudaErrorNotReady);
  EXPECT_EQ(FromSp(spErrorNotSupported), cudaErrorNotSupported);
  EXPECT_EQ(FromSp(spErrorUnknown), cudaErrorUnknown);
  for (const auto& row : CudaFace::kSpErrors) {
    EXPECT_EQ(static_cast<int>(row.face), static_cast<int>(row.sp)) << "same number";
  }
  EXPECT_EQ(FromSp(static_cast<spError_t>(3)), cudaErrorUnknown);
  EXPECT_EQ(FromSp(static_cast<spError_t>(12345)), cudaErrorUnknown);
}

TEST(CudaErrorMapTest, StatusesReadAsTheCApiReadsThem) {
  EXPECT_EQ(FromStatus(absl::OkStatus()), cudaSuccess);
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("")), cudaErrorInvalidValue);
  EXPECT_EQ(FromStatus(absl::ResourceExhaustedError("")), cudaErrorMemoryAllocation);
  EXPECT_EQ(FromStatus(absl::OutOfRangeError("")), cudaErrorInvalidDevice);
  EXPECT_EQ(FromStatus(absl::PermissionDeniedError("")), cudaErrorPeerAccessUnsupported);
  EXPECT_EQ(FromStatus(absl::NotFoundError("")), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(FromStatus(absl::UnavailableError("")), cudaErrorNotReady);
  EXPECT_EQ(FromStatus(absl::UnimplementedError("")), cudaErrorNotSupported);
  EXPECT_EQ(FromStatus(absl::InternalError("")), cudaErrorUnknown);
  EXPECT_EQ(FromStatus(absl::AlreadyExistsError("")), cudaErrorHostMemoryAlreadyRegistered);
}

TEST(CudaErrorMapTest, UnlistedStatusCodesAreInvalidValue) {
  for (const absl::Status& s :
       {absl::FailedPreconditionError(""), absl::AbortedError(""), absl::CancelledError(""),
        absl::DataLossError(""), absl::DeadlineExceededError(""), absl::UnauthenticatedError(""),
        absl::UnknownError("")}) {
    EXPECT_EQ(FromStatus(s), cudaErrorInvalidValue) << s;
  }
}

TEST(CudaErrorMapTest, EscapingExceptionsAreCodesAndTheLastError) {
  cudaGetLastError();
  EXPECT_EQ(Api([]() -> cudaError_t { throw std::bad_alloc(); }), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(Api([]() -> cudaError_t { throw std::logic_error("x"); }), cudaErrorUnknown);
  EXPECT_EQ(cudaGetLastError(), cudaErrorUnknown);
  EXPECT_EQ(Api([] { return cudaErrorNotReady; }), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace streampool::internal::cuda
