// No exception leaves the library's API. Inside, a few things can throw —
// std::bad_alloc from a container, std::system_error when no thread can be
// started — and every entry point (C and C++) turns that into an error value:
// resource exhaustion is ResourceExhausted (spErrorMemoryAllocation),
// anything else Internal (spErrorUnknown).
#ifndef STREAMPOOL_SRC_RUNTIME_GUARD_H_
#define STREAMPOOL_SRC_RUNTIME_GUARD_H_

#include "absl/status/status.h"

namespace streampool::internal {

// Call only from a catch block: the status of the exception being handled.
absl::Status StatusFromCurrentException() noexcept;

// Runs f, returning its Status or StatusOr, or the status of whatever it threw.
template <typename F>
auto Guarded(F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    return StatusFromCurrentException();
  }
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_GUARD_H_
