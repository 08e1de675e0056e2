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
  if (props.acl_rounding) return SizeRule{SizeRule::Kind::kAcl, 32};
  const PoolVariantConfig* v = VariantConfig(props.alloc_type);
  return v != nullptr ? v->rule : SizeRule{};
}

}  // namespace streampool::internal
