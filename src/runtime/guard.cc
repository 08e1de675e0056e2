#include "src/runtime/guard.h"

#include <new>
#include <stdexcept>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace streampool::internal {

absl::Status StatusFromCurrentException() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of host memory");
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("out of host memory: ", e.what()));
  } catch (const std::system_error& e) {
    const std::error_code c = e.code();
    if (c == std::errc::resource_unavailable_try_again || c == std::errc::not_enough_memory ||
        c == std::errc::too_many_files_open || c == std::errc::too_many_files_open_in_system ||
        c == std::errc::no_space_on_device) {
      return absl::ResourceExhaustedError(absl::StrCat("system resource exhausted: ", e.what()));
    }
    return absl::InternalError(e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  } catch (...) {
    return absl::InternalError("unknown exception");
  }
}

}  // namespace streampool::internal
