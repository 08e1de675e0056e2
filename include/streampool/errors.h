/// \file
/// How the C++ API's errors map onto the C API's. Errors are absl::Status
/// values whose codes map one to one onto spError_t:
///
/// | absl::StatusCode   | spError_t                    |
/// |--------------------|------------------------------|
/// | kInvalidArgument   | spErrorInvalidValue          |
/// | kResourceExhausted | spErrorMemoryAllocation      |
/// | kOutOfRange        | spErrorInvalidDevice         |
/// | kPermissionDenied  | spErrorPeerAccessUnsupported |
/// | kNotFound          | spErrorInvalidResourceHandle |
/// | kUnavailable       | spErrorNotReady              |
/// | kUnimplemented     | spErrorNotSupported          |
/// | kAlreadyExists     | spErrorHostMemoryAlreadyRegistered |
///
/// One exception: a host pointer that is not registered is kNotFound with
/// a payload that makes it spErrorHostMemoryNotRegistered (ToCError).
#ifndef STREAMPOOL_ERRORS_H_
#define STREAMPOOL_ERRORS_H_

#include "absl/status/status.h"
#include "streampool/export.h"
#include "streampool/streampool.h"

namespace streampool {

/// The C API's error for a status this API returned — what the sp* function
/// of the same name returns for the same failure: kInvalidArgument is
/// spErrorInvalidValue, kResourceExhausted spErrorMemoryAllocation,
/// kOutOfRange spErrorInvalidDevice, kPermissionDenied
/// spErrorPeerAccessUnsupported, kNotFound spErrorInvalidResourceHandle,
/// kUnavailable spErrorNotReady, kUnimplemented spErrorNotSupported, kInternal
/// spErrorUnknown, kAlreadyExists spErrorHostMemoryAlreadyRegistered; any
/// other code spErrorInvalidValue; OK spSuccess. A status carrying the
/// kCErrorPayload payload (the error's decimal value) is that error.
STREAMPOOL_EXPORT spError_t ToCError(const absl::Status& status);
/// The payload URL of a status whose C error is not its code's.
inline constexpr char kCErrorPayload[] = "streampool/spError";

}  // namespace streampool

#endif  // STREAMPOOL_ERRORS_H_
