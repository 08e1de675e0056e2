/*
 * AscendCL's base types and error codes for programs built against
 * streampool's AscendCL subset (README "AscendCL programs"). The names and
 * values are CANN 9.x's (acl/acl_base.h and acl/error_codes/rt_error_codes.h);
 * only what the subset uses or reports is here.
 */
#ifndef STREAMPOOL_ACL_ACL_BASE_H_
#define STREAMPOOL_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#include "error_codes/rt_error_codes.h"

/* Every acl* function is exported from the shared library whatever the
 * program defines: streampool hides everything else. */
#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
/* No exception crosses an acl* function; the definitions must match. */
#define SPACL_NOEXCEPT noexcept
extern "C" {
#else
#define SPACL_NOEXCEPT
#endif

typedef void* aclrtStream;
typedef void* aclrtEvent;
typedef void* aclrtContext;
typedef int aclError;
typedef uint16_t aclFloat16;

static const int ACL_ERROR_NONE = 0;
static const int ACL_SUCCESS = 0;

/* The acl layer's own checks. */
static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_INVALID_FILE = 100003;
static const int ACL_ERROR_REPEAT_FINALIZE = 100037;

static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003;
static const int ACL_ERROR_RESOURCE_NOT_MATCH = 200004;
static const int ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const int ACL_ERROR_FEATURE_UNSUPPORTED = 200006;

static const int ACL_ERROR_STORAGE_OVER_LIMIT = 300000;

static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;
static const int ACL_ERROR_RT_FAILURE = 500003;
static const int ACL_ERROR_DRV_FAILURE = 500004;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_ACL_ACL_BASE_H_ */
