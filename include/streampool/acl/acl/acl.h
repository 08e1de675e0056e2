/*
 * `#include "acl/acl.h"` for AscendCL programs built against streampool
 * (README "AscendCL programs"): the runtime subset and the stream-ordered
 * pools. As with CANN, the DVPP allocator is acl/ops/acl_dvpp.h's.
 */
#ifndef STREAMPOOL_ACL_ACL_H_
#define STREAMPOOL_ACL_ACL_H_

#include "acl_base.h"
#include "acl_rt.h"
#include "acl_rt_memory.h"

#endif /* STREAMPOOL_ACL_ACL_H_ */
