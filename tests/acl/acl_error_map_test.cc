// What the AscendCL face answers for each failure of the runtime beneath it
// (src/acl/call.h, the kit's tables): CANN's runtime codes, a status read as
// the C API reads it, and for what neither lists a code chosen here: an
// spError_t outside the enum is ACL_ERROR_RT_INTERNAL_ERROR, a status code
// ToCError does not list ACL_ERROR_RT_PARAM_INVALID (spErrorInvalidValue in
// the C API, so that the face answers a failure alike whichever API it
// called). Exceptions escaping a call are ACL_ERROR_BAD_ALLOC
// (std::bad_alloc) or ACL_ERROR_RT_INTERNAL_ERROR, and become the thread's
// last error, as every failure does, ACL_ERROR_RT_STREAM_NOT_COMPLETE too.
#include <new>
#include <stdexcept>

#include "absl/status/status.h"
#include "acl/acl.h"
#include "gtest/gtest.h"
#include "src/acl/call.h"

namespace streampool::internal::acl {
namespace {

TEST(AclErrorMapTest, SpErrorsAreCannsRuntimeCodes) {
  EXPECT_EQ(FromSp(spSuccess), ACL_SUCCESS);
  EXPECT_EQ(FromSp(spErrorInvalidValue), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromSp(spErrorInvalidResourceHandle), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromSp(spErrorPeerAccessUnsupported), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromSp(spErrorMemoryAllocation), ACL_ERROR_RT_MEMORY_ALLOCATION);
  EXPECT_EQ(FromSp(spErrorInvalidDevice), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(FromSp(spErrorNotReady), ACL_ERROR_RT_STREAM_NOT_COMPLETE);
  EXPECT_EQ(FromSp(spErrorNotSupported), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(FromSp(spErrorUnknown), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(FromSp(static_cast<spError_t>(3)), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(FromSp(static_cast<spError_t>(12345)), ACL_ERROR_RT_INTERNAL_ERROR);
}

TEST(AclErrorMapTest, StatusesReadAsTheCApiReadsThem) {
  EXPECT_EQ(FromStatus(absl::OkStatus()), ACL_SUCCESS);
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("")), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromStatus(absl::ResourceExhaustedError("")), ACL_ERROR_RT_MEMORY_ALLOCATION);
  EXPECT_EQ(FromStatus(absl::OutOfRangeError("")), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(FromStatus(absl::PermissionDeniedError("")), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromStatus(absl::NotFoundError("")), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(FromStatus(absl::UnavailableError("")), ACL_ERROR_RT_STREAM_NOT_COMPLETE);
  EXPECT_EQ(FromStatus(absl::UnimplementedError("")), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(FromStatus(absl::InternalError("")), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(FromStatus(absl::AlreadyExistsError("")), ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
}

TEST(AclErrorMapTest, UnlistedStatusCodesAreParamInvalid) {
  for (const absl::Status& s :
       {absl::FailedPreconditionError(""), absl::AbortedError(""), absl::CancelledError(""),
        absl::DataLossError(""), absl::DeadlineExceededError(""), absl::UnauthenticatedError(""),
        absl::UnknownError("")}) {
    EXPECT_EQ(FromStatus(s), ACL_ERROR_RT_PARAM_INVALID) << s;
  }
}

TEST(AclErrorMapTest, EscapingExceptionsAreCodesAndTheLastError) {
  aclrtGetLastError(ACL_RT_THREAD_LEVEL);
  EXPECT_EQ(Api([]() -> aclError { throw std::bad_alloc(); }), ACL_ERROR_BAD_ALLOC);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_BAD_ALLOC);
  EXPECT_EQ(Api([]() -> aclError { throw std::logic_error("x"); }), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(Api([] { return ACL_ERROR_RT_STREAM_NOT_COMPLETE; }), ACL_ERROR_RT_STREAM_NOT_COMPLETE);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_STREAM_NOT_COMPLETE);
}

}  // namespace
}  // namespace streampool::internal::acl
