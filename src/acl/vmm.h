// AscendCL's virtual memory functions over the simulated device: address
// ranges reserved PROT_NONE, physical memory as memfds, mapping with
// MAP_FIXED. Process-wide, independent of the implicit runtime: an
// expandable pool whose upstream calls these functions keeps working while
// the runtime that owns the pool is destroyed (its unmaps and releases need
// no runtime), and the upstream's calls run under the runtime's lock, so
// nothing here may call the runtime.
//
// CANN's rules are enforced, each with its error: sizes are multiples of the
// 2 MiB granularity, a mapping is a whole physical allocation placed on
// unmapped address space inside one reservation, aclrtUnmapMem takes the
// address a mapping starts at, physical memory is freed only once unmapped,
// and a reservation is released only with nothing mapped in it.
#ifndef STREAMPOOL_SRC_ACL_VMM_H_
#define STREAMPOOL_SRC_ACL_VMM_H_

#include <cstddef>
#include <cstdint>

#include "streampool/acl/acl/acl_base.h"

namespace streampool::internal::acl::vmm {

// CANN's physical granularity on current devices.
inline constexpr size_t kGranularity = size_t{2} << 20;

aclError Reserve(size_t size, void** out);
aclError Release(void* base);
// `capacity`: the device's bytes, which physical memory of that device may
// not exceed in all.
aclError MallocPhysical(int device, size_t size, uint64_t capacity, void** handle);
aclError FreePhysical(void* handle);
aclError Map(void* addr, size_t size, void* handle);
aclError Unmap(void* addr);

// Physical bytes allocated on `device` now.
uint64_t PhysicalBytes(int device);

}  // namespace streampool::internal::acl::vmm

#endif  // STREAMPOOL_SRC_ACL_VMM_H_
