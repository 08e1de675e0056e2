// aclrtMalloc, aclrtMallocAlign32, aclrtMallocCached and acldvppMalloc: the
// synchronous allocators of AscendCL over streampool's pool variants.
//
// Each (device, kind) gets a pool made on first use: HugePage pools under
// the ACL size rules for aclrtMalloc's page policies, a Dvpp pool for
// acldvppMalloc. A synchronous allocation is a stream-ordered one on a
// stream of this layer's own that never runs work, proven complete at once,
// so any stream may use the memory right away (the stream-order checker
// agrees); a free is the runtime's immediate Free followed by a trim, so the
// memory goes back to the device as CANN's aclrtFree gives it back.
#ifndef STREAMPOOL_SRC_ACL_MEMORY_H_
#define STREAMPOOL_SRC_ACL_MEMORY_H_

#include <cstdint>

#include "src/acl/call.h"
#include "streampool/pool_props.h"

namespace streampool::internal::acl {

// Which synchronous allocator.
enum class SyncKind {
  kMalloc,   // aclrtMalloc, aclrtMallocCached: ALIGN_UP(ALIGN_UP(len, 32) + 32, 64)
  kAlign32,  // aclrtMallocAlign32: ALIGN_UP(len, 64)
  kDvpp,     // acldvppMalloc: ALIGN_UP(ALIGN_UP(len, 32) + 32, 128)
};

// `size` bytes on the calling thread's current device.
aclError SyncMalloc(Call& call, SyncKind kind, PagePolicy policy, uint64_t size, void** out);
// Frees what SyncMalloc returned: DVPP memory if `dvpp`, else aclrtMalloc's;
// anything else is ACL_ERROR_RT_PARAM_INVALID.
aclError SyncFree(Call& call, bool dvpp, void* ptr);

// Whether `pool` is one of the pools the synchronous allocators made: its
// memory is freed with aclrtFree or acldvppFree, never stream-ordered.
bool IsSynchronousPool(compat::ProcessRuntime& rt, PoolId pool);

// Per-device aclrtSetDevice references: the runtime is reset when the last
// one is dropped (streampool cannot reset one device alone). Forget drops
// every count, for aclFinalize.
void RetainDevice(int device);
// False when the device held no reference.
bool ReleaseDevice(int device, bool* last);
void ForgetDevices();

}  // namespace streampool::internal::acl

#endif  // STREAMPOOL_SRC_ACL_MEMORY_H_
