#include "src/pool/pool_config.h"

namespace streampool::internal {
namespace {

constexpr PoolVariantConfig kVariants[] = {
    {AllocationType::kDevice, "Device", SizeRule{SizeRule::Kind::kRound, 256},
     UpstreamKind::kRuntime, true, 0},
    {AllocationType::kPinnedHost, "PinnedHost", SizeRule{SizeRule::Kind::kRound, 64},
     UpstreamKind::kRuntime, false, 0},
    {AllocationType::kHugePage, "HugePage", SizeRule{SizeRule::Kind::kRound, 256},
     UpstreamKind::kHugePage, true, 0},
    {AllocationType::kDvpp, "Dvpp", SizeRule{SizeRule::Kind::kDvpp, 128}, UpstreamKind::kDvpp, true,
     kDvppReservationBytes},
};

}  // namespace

const PoolVariantConfig* VariantConfig(AllocationType type) {
  for (const PoolVariantConfig& v : kVariants) {
    if (v.type == type) return &v;
  }
  return nullptr;
}

SizeRule RuleOf(const PoolProps& props) {
  // 64: aclrtMalloc's blocks start 64-B aligned. aclrtMallocAlign32 rounds
  // the length to 32 only, but the next block must still start at 64.
  if (props.acl_rounding) {
    return props.acl_align32 ? SizeRule{SizeRule::Kind::kRound, 64}
                             : SizeRule{SizeRule::Kind::kAcl, 64};
  }
  const PoolVariantConfig* v = VariantConfig(props.alloc_type);
  return v != nullptr ? v->rule : SizeRule{};
}

}  // namespace streampool::internal
