/*
 * The DVPP (media) memory functions of CANN's acl/ops/acl_dvpp.h: memory in
 * the process's 16 GiB DVPP window, huge pages first, blocks of
 * ALIGN_UP(ALIGN_UP(len, 32) + 32, 128) bytes starting 128-B aligned. It is
 * device memory like aclrtMalloc's, so it can feed inference directly.
 */
#ifndef STREAMPOOL_ACL_OPS_ACL_DVPP_H_
#define STREAMPOOL_ACL_OPS_ACL_DVPP_H_

#include "../acl_base.h"
#include "../acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclError acldvppMalloc(void** devPtr, size_t size) SPACL_NOEXCEPT;
ACL_FUNC_VISIBILITY aclError acldvppFree(void* devPtr) SPACL_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_ACL_OPS_ACL_DVPP_H_ */
