// How an acl* entry point runs: against the AscendCL face's implicit
// runtime (the compat core's, configured by STREAMPOOL_ACL_*), with no
// exception crossing it, and with its error recorded as the calling thread's
// last error (aclrtGetLastError).
#ifndef STREAMPOOL_SRC_ACL_CALL_H_
#define STREAMPOOL_SRC_ACL_CALL_H_

#include <memory>
#include <new>

#include "absl/status/status.h"
#include "src/compat/context.h"
#include "streampool/acl/acl/acl_base.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::internal::acl {

// The AscendCL face's context: STREAMPOOL_ACL_* configure its runtime.
compat::Context& AclContext();

// The runtime layer's code for an sp* error: CANN's runtime answers bad
// handles and values with ACL_ERROR_RT_PARAM_INVALID, a bad device with
// ACL_ERROR_RT_INVALID_DEVICEID, no memory with ACL_ERROR_RT_MEMORY_ALLOCATION.
aclError FromSp(spError_t e);
// The runtime's status codes, mapped as runtime.h maps them onto spError_t.
aclError FromStatus(const absl::Status& status);

// Makes `e` the thread's last error unless it is a success.
aclError Record(aclError e) noexcept;

// Runs `body` (returning aclError), turning exceptions into codes and
// recording the result.
template <class Body>
aclError Api(Body&& body) noexcept {
  aclError e;
  try {
    e = body();
  } catch (const std::bad_alloc&) {
    e = ACL_ERROR_BAD_ALLOC;
  } catch (...) {
    e = ACL_ERROR_RT_INTERNAL_ERROR;
  }
  return Record(e);
}

// A call that needs the runtime: it holds a reference to it for the call's
// duration, so a concurrent aclFinalize destroys it only afterwards.
class Call {
 public:
  // Acquires (creating if needed) the runtime. ACL_ERROR_UNINITIALIZE at
  // exit, ACL_ERROR_RT_DEV_SETUP_ERROR if it cannot be made,
  // ACL_ERROR_RT_AICORE_EXCEPTION while a failed kernel poisons it.
  aclError Begin();

  compat::ProcessRuntime& rt() const { return *rt_; }
  spRuntime_t c() const { return rt_->c(); }
  compat::ThreadState& thread() const { return *thread_; }
  // The thread's current device (0 until aclrtSetDevice), which may be out of
  // range after a reset with fewer devices.
  aclError Device(int* device) const;
  aclError CheckDevice(int device) const;
  // What `stream` stands for: NULL is the current device's default stream.
  aclError Stream(aclrtStream stream, spStream_t* out) const;

 private:
  std::shared_ptr<compat::ProcessRuntime> rt_;
  compat::ThreadState* thread_ = nullptr;
};

// Runs `body(call)` with a begun Call (see Api); a kernel that failed while
// the call ran turns its result into ACL_ERROR_RT_AICORE_EXCEPTION.
template <class Body>
aclError WithRuntime(Body&& body) noexcept {
  return Api([&]() -> aclError {
    Call call;
    if (aclError e = call.Begin(); e != ACL_SUCCESS) return e;
    const aclError e = body(call);
    if (call.rt().fault() != compat::Fault::kNone) return ACL_ERROR_RT_AICORE_EXCEPTION;
    return e;
  });
}

inline StreamId ToId(spStream_t s) { return StreamId{reinterpret_cast<uintptr_t>(s)}; }

}  // namespace streampool::internal::acl

#endif  // STREAMPOOL_SRC_ACL_CALL_H_
