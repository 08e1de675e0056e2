// How an acl* entry point runs: the face kit (src/compat/face.h) with CANN's
// codes. STREAMPOOL_ACL_* configure the implicit runtime; every failing call
// becomes the thread's last error (aclrtGetLastError).
#ifndef STREAMPOOL_SRC_ACL_CALL_H_
#define STREAMPOOL_SRC_ACL_CALL_H_

#include "src/compat/face.h"
#include "streampool/acl/acl/acl_base.h"
#include "streampool/streampool.h"

namespace streampool::internal::acl {

struct AclFace {
  using Error = aclError;
  using Stream = aclrtStream;

  static constexpr char kEnvPrefix[] = "STREAMPOOL_ACL_";
  static constexpr Error kSuccess = ACL_SUCCESS;
  // CANN's runtime answers bad handles and values with
  // ACL_ERROR_RT_PARAM_INVALID, a bad device with ACL_ERROR_RT_INVALID_DEVICEID,
  // no memory with ACL_ERROR_RT_MEMORY_ALLOCATION. (Argument checks of the acl
  // layer itself are ACL_ERROR_INVALID_PARAM, which no sp* error becomes.)
  static constexpr compat::SpErrorCode<Error> kSpErrors[] = {
      {spSuccess, ACL_SUCCESS},
      {spErrorInvalidValue, ACL_ERROR_RT_PARAM_INVALID},
      {spErrorInvalidResourceHandle, ACL_ERROR_RT_PARAM_INVALID},
      {spErrorPeerAccessUnsupported, ACL_ERROR_RT_PARAM_INVALID},
      {spErrorMemoryAllocation, ACL_ERROR_RT_MEMORY_ALLOCATION},
      {spErrorInvalidDevice, ACL_ERROR_RT_INVALID_DEVICEID},
      {spErrorNotReady, ACL_ERROR_RT_STREAM_NOT_COMPLETE},
      {spErrorHostMemoryAlreadyRegistered, ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED},
      {spErrorHostMemoryNotRegistered, ACL_ERROR_HOST_MEMORY_NOT_REGISTERED},
      {spErrorNotSupported, ACL_ERROR_RT_FEATURE_NOT_SUPPORT},
      {spErrorUnknown, ACL_ERROR_RT_INTERNAL_ERROR},
  };
  static constexpr Error kInternal = ACL_ERROR_RT_INTERNAL_ERROR;
  static constexpr Error kOutOfHostMemory = ACL_ERROR_BAD_ALLOC;
  static constexpr Error kNotErrors[] = {ACL_SUCCESS};
  static constexpr Error kUnloading = ACL_ERROR_UNINITIALIZE;
  static constexpr Error kInitFailed = ACL_ERROR_RT_DEV_SETUP_ERROR;
  static constexpr Error kKernelFault = ACL_ERROR_RT_AICORE_EXCEPTION;
  static constexpr Error kInvalidDevice = ACL_ERROR_RT_INVALID_DEVICEID;
  static constexpr Error kInvalidArgument = ACL_ERROR_INVALID_PARAM;

  // NULL is CANN's default stream, which belongs to the device's context, one
  // per process: the current device's legacy stream. Every stream
  // aclrtCreateStream makes is non-blocking, so it orders nothing but its own
  // work.
  static compat::DefaultStream Classify(aclrtStream stream) {
    return stream == nullptr ? compat::DefaultStream::kLegacy : compat::DefaultStream::kNone;
  }
};
static_assert(compat::FaceTraits<AclFace>);

// The kit under the names the face's code uses.
using Call = compat::Call<AclFace>;
inline constexpr compat::GuardedCall<AclFace> Api{};
inline constexpr compat::RuntimeCall<AclFace> WithRuntime{};
inline constexpr compat::SpErrorMap<AclFace> FromSp{};
inline constexpr compat::StatusMap<AclFace> FromStatus{};
inline compat::Context& AclContext() { return compat::FaceContext<AclFace>(); }

}  // namespace streampool::internal::acl

#endif  // STREAMPOOL_SRC_ACL_CALL_H_
