// The pool variants (docs/design.md, "Pool variants"), one row per allocation
// type: how requests become blocks, where blocks start, where memory comes
// from and what it counts against. The one place these facts live: the
// runtime builds pools from it, PoolResource derives its alignment from it,
// and the tests' expectations are checked against the same docs/design.md table.
//
//   type        size rule                                  block start  memory
//   Device      ALIGN_UP(len, 256)                         256 B        runtime's upstream, device
//                                                                       budget
//   PinnedHost  ALIGN_UP(len, 64) (aclrtMallocHost's)      64 B         runtime's upstream, host
//                                                                       (maxSize only)
//   HugePage    ALIGN_UP(len, 256)                         256 B        huge pages by page policy,
//                                                                       device budget
//   Dvpp        ALIGN_UP(ALIGN_UP(len, 32) + 32, 128)      128 B        the process's 16 GiB DVPP
//                                                                       window
//
// PoolProps::acl_rounding (Device and HugePage only) replaces the size rule
// with aclrtMalloc's, ALIGN_UP(ALIGN_UP(len, 32) + 32, 64) in blocks that
// start 64-B aligned (CANN's rule for carving a large block: m =
// ALIGN_UP(len, 32) + 32, start ALIGN_UP(m, 64)); with acl_align32 as well,
// aclrtMallocAlign32's, which drops the 32 extra bytes: ALIGN_UP(len, 64).
// Every variant maps memory in 2 MiB granules (Chunk::kGranule).
#ifndef STREAMPOOL_SRC_POOL_POOL_CONFIG_H_
#define STREAMPOOL_SRC_POOL_POOL_CONFIG_H_

#include <cstdint>

#include "src/pool/mem_pool.h"
#include "streampool/pool_props.h"

namespace streampool::internal {

// Where a variant's memory comes from.
enum class UpstreamKind {
  kRuntime,   // the runtime's own upstream (host mmap or address-only)
  kHugePage,  // huge pages first, by the pool's page policy
  kDvpp,      // the process-wide DVPP window (huge pages first)
};

struct PoolVariantConfig {
  AllocationType type;
  const char* name;
  SizeRule rule;
  UpstreamKind upstream;
  // Counted against its device's capacity (pinned host memory is not).
  bool device_memory;
  // Bytes of each reservation (0: the pool's maxSize or the device's
  // capacity): DVPP address space is scarce, a sixteenth of the window each.
  uint64_t reservation_bytes;
};

// A sixteenth of the DVPP window (DvppWindow::kSize is in the memory layer,
// which the pool layer does not see; the runtime asserts that they agree).
inline constexpr uint64_t kDvppReservationBytes = (uint64_t{16} << 30) / 16;

// The row of a valid allocation type (1..4); null otherwise.
const PoolVariantConfig* VariantConfig(AllocationType type);

// The size rule a pool with these props uses: its variant's, or an ACL rule
// where props.acl_rounding asks for it (callers check that it applies).
SizeRule RuleOf(const PoolProps& props);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_POOL_CONFIG_H_
