// AscendCL contexts: a context names a device. Each device has a default
// context, made when a thread first asks for the current context after
// aclrtSetDevice; aclrtCreateContext makes others. Handles are checked
// against the live set, so a destroyed or made-up one is an error, never a
// dereference. Process-wide, like the implicit runtime; aclFinalize forgets
// them all.
#ifndef STREAMPOOL_SRC_ACL_CONTEXT_H_
#define STREAMPOOL_SRC_ACL_CONTEXT_H_

#include <cstdint>

#include "streampool/acl/acl/acl.h"

namespace streampool::internal::acl {

// A new context for `device` (already checked), made current on the calling
// thread by the caller.
aclrtContext NewContext(int device);
// Whether `context` is live; its device if so.
bool ContextDevice(aclrtContext context, int* device);
// The device's default context, made on first use.
aclrtContext DefaultContext(int device);
// Destroys a context aclrtCreateContext made. ACL_ERROR_RT_PARAM_INVALID for
// one that is not live, ACL_ERROR_INVALID_PARAM for a default context (it
// lives as long as the device is set).
aclError DestroyContext(aclrtContext context);
// The calling thread's current context, or null.
aclrtContext& CurrentContext();
// Destroys every context (aclFinalize).
void ForgetContexts();

}  // namespace streampool::internal::acl

#endif  // STREAMPOOL_SRC_ACL_CONTEXT_H_
