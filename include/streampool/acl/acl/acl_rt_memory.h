/*
 * AscendCL's stream-ordered memory pools (CANN 9.x acl/acl_rt_memory.h, an
 * experimental or reserved API there), served by streampool's pools on every
 * simulated device. Allocations follow aclrtMalloc's size rule.
 */
#ifndef STREAMPOOL_ACL_ACL_RT_MEMORY_H_
#define STREAMPOOL_ACL_ACL_RT_MEMORY_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void* aclrtMemPool;

/* Values 1-3 are uint32_t switches (0 or 1), 4-8 uint64_t byte counts; 5 and
 * 7 are read-only, 6 and 8 are reset by setting 0. */
typedef enum aclrtMemPoolAttr {
  ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES = 0x1,
  ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC = 0x2,
  ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 0x3,
  ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD = 0x4,
  ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT = 0x5,
  ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH = 0x6,
  ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT = 0x7,
  ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH = 0x8
} aclrtMemPoolAttr;

/* allocType must be ACL_MEM_ALLOCATION_TYPE_PINNED, location.type
 * ACL_MEM_LOCATION_TYPE_DEVICE, reserved all zero; maxSize 0 is the
 * device's capacity. */
typedef struct {
  aclrtMemAllocationType allocType;
  aclrtMemHandleType handleType;
  aclrtMemLocation location;
  size_t maxSize;
  unsigned char reserved[32];
} aclrtMemPoolProps;

ACL_FUNC_VISIBILITY aclError aclrtMemPoolCreate(aclrtMemPool* memPool,
                                                const aclrtMemPoolProps* poolProps) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemPoolDestroy(const aclrtMemPool memPool) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemPoolSetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr,
                                                 void* value) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemPoolGetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr,
                                                 void* value) SPACL_NOEXCEPT;
/* size 0 succeeds and leaves *ptr as it was, as CANN's does. */
ACL_FUNC_VISIBILITY aclError aclrtMemPoolMallocAsync(void** ptr, size_t size, aclrtMemPool memPool,
                                                     aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemPoolFreeAsync(void* ptr, aclrtStream stream) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError aclrtMemPoolTrimTo(aclrtMemPool memPool,
                                                size_t minBytesToKeep) SPACL_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_ACL_ACL_RT_MEMORY_H_ */
