#include "src/acl/call.h"

namespace streampool::internal::acl {

compat::Context& AclContext() {
  // Leaked: threads exiting after static destruction still find it.
  static compat::Context* context = new compat::Context("STREAMPOOL_ACL_");
  return *context;
}

aclError FromSp(spError_t e) {
  switch (e) {
    case spSuccess:
      return ACL_SUCCESS;
    case spErrorInvalidValue:
    case spErrorInvalidResourceHandle:
    case spErrorPeerAccessUnsupported:
      return ACL_ERROR_RT_PARAM_INVALID;
    case spErrorMemoryAllocation:
      return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case spErrorInvalidDevice:
      return ACL_ERROR_RT_INVALID_DEVICEID;
    case spErrorNotReady:
      return ACL_ERROR_RT_STREAM_NOT_COMPLETE;
    case spErrorNotSupported:
      return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    default:
      return ACL_ERROR_RT_INTERNAL_ERROR;
  }
}

aclError FromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return ACL_SUCCESS;
    case absl::StatusCode::kInvalidArgument:
      return FromSp(spErrorInvalidValue);
    case absl::StatusCode::kResourceExhausted:
      return FromSp(spErrorMemoryAllocation);
    case absl::StatusCode::kOutOfRange:
      return FromSp(spErrorInvalidDevice);
    case absl::StatusCode::kPermissionDenied:
      return FromSp(spErrorPeerAccessUnsupported);
    case absl::StatusCode::kNotFound:
      return FromSp(spErrorInvalidResourceHandle);
    case absl::StatusCode::kUnavailable:
      return FromSp(spErrorNotReady);
    case absl::StatusCode::kUnimplemented:
      return FromSp(spErrorNotSupported);
    default:
      return FromSp(spErrorUnknown);
  }
}

aclError Record(aclError e) noexcept {
  if (e == ACL_SUCCESS) return e;
  try {
    AclContext().Thread().last_error = e;
  } catch (...) {
    // No memory for the thread's state: the code still reaches the caller.
  }
  return e;
}

aclError Call::Begin() {
  absl::StatusOr<std::shared_ptr<compat::ProcessRuntime>> rt = AclContext().Acquire();
  if (!rt.ok()) {
    return rt.status().code() == absl::StatusCode::kFailedPrecondition
               ? ACL_ERROR_UNINITIALIZE
               : ACL_ERROR_RT_DEV_SETUP_ERROR;
  }
  rt_ = *std::move(rt);
  thread_ = &AclContext().Thread();
  if (rt_->fault() != compat::Fault::kNone) return ACL_ERROR_RT_AICORE_EXCEPTION;
  return ACL_SUCCESS;
}

aclError Call::CheckDevice(int device) const {
  return device >= 0 && device < rt_->device_count() ? ACL_SUCCESS : ACL_ERROR_RT_INVALID_DEVICEID;
}

aclError Call::Device(int* device) const {
  *device = thread_->device;
  return CheckDevice(*device);
}

aclError Call::Stream(aclrtStream stream, spStream_t* out) const {
  if (stream != nullptr) {
    *out = reinterpret_cast<spStream_t>(stream);
    return ACL_SUCCESS;
  }
  int device = 0;
  if (aclError e = Device(&device); e != ACL_SUCCESS) return e;
  // CANN's default stream belongs to the device's context, one per process:
  // the device's legacy stream. Every stream aclrtCreateStream makes is
  // non-blocking, so it orders nothing but its own work.
  return FromSp(spStreamGetLegacy(out, c(), device));
}

}  // namespace streampool::internal::acl
