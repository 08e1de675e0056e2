// The pool variants the stream-ordered conformance suite runs over (the CUDA
// guide scenarios in scenarios_test.cc, the reuse-policy matrix in
// policy_matrix_test.cc): every allocation type of docs/design.md "Pool variants"
// on both backings, each with chunked and with expandable growth (docs/design.md
// "Block lifecycle"). Each variant states its own size rule here, from the
// design table, so the suites derive their expected used and reserved bytes
// instead of hard-coding the device pool's 256-B numbers.
#ifndef STREAMPOOL_TESTS_POOL_CONFORMANCE_VARIANTS_H_
#define STREAMPOOL_TESTS_POOL_CONFORMANCE_VARIANTS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace streampool_test {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
// Chunked growth maps ALIGN_UP(rule size, 2 MiB) per chunk, whatever the
// variant; expandable growth maps 2 MiB granules, so the first growth of an
// empty pool maps the same bytes.
inline constexpr uint64_t kChunk = 2 * kMiB;
inline constexpr uint64_t kGranule = 2 * kMiB;

// ALIGN_UP(v, k) = ((v - 1) / k + 1) * k, for v >= 1.
constexpr uint64_t AlignUp(uint64_t v, uint64_t k) { return ((v - 1) / k + 1) * k; }

struct PoolVariant {
  spMemAllocationType type;
  spBacking backing;
  // spPoolGrowthChunked or spPoolGrowthExpandable, never the default: every
  // built-in upstream can reserve, so the default is expandable, and a
  // variant names what it runs.
  spPoolGrowth growth;
  // The per-stream front caches on (the default) or off (the central exact
  // best fit for every allocation): every suite must hold either way.
  bool front_cache = true;

  // Applies what props cannot say to a new pool: the front-cache switch,
  // and CUDA's order of search (growth before any wait), which the suite
  // pins (wait_before_growth_test.cc tests the other order).
  void Configure(spMemPool_t pool) const {
    int on = front_cache ? 1 : 0;
    spMemPoolSetAttribute(pool, spMemPoolAttrFrontCache, &on);
    int off = 0;
    spMemPoolSetAttribute(pool, spMemPoolAttrWaitBeforeGrowth, &off);
  }

  // A pool of this variant on device 0 (pinned pools ignore the device).
  // HugePage and Dvpp pools take huge pages first (HugeFirst); HugeOnly and
  // NormalOnly are variants_test.cc's business.
  spMemPoolProps Props(uint64_t max_size) const {
    spMemPoolProps props = {};
    props.allocType = type;
    props.device = 0;
    props.maxSize = max_size;
    props.pagePolicy = spPageHugeFirst;
    props.growth = growth;
    return props;
  }

  bool Expandable() const { return growth == spPoolGrowthExpandable; }

  // The bytes a request of len >= 1 occupies in its pool (docs/design.md's table).
  uint64_t RuleSize(uint64_t len) const {
    switch (type) {
      case spMemAllocationTypeDevice:
      case spMemAllocationTypeHugePage:
        return AlignUp(len, 256);
      case spMemAllocationTypePinnedHost:
        return AlignUp(len, 64);  // aclrtMallocHost's alignment
      case spMemAllocationTypeDvpp:
        return AlignUp(AlignUp(len, 32) + 32, 128);
    }
    return 0;
  }

  // What a request of len maps when it grows an empty pool: its chunk, or
  // the granules it covers at the bottom of a fresh reservation.
  uint64_t ChunkSize(uint64_t len) const { return AlignUp(RuleSize(len), kChunk); }

  // The largest request occupying exactly `bytes` (which must be a possible
  // rule size): a scenario that wants "a whole 2 MiB chunk" or "the rest of
  // the chunk" asks for this length. For Dvpp it is 32 bytes less than the
  // block, since every DVPP block carries 32 bytes beyond ALIGN_UP(len, 32).
  uint64_t LenOccupying(uint64_t bytes) const {
    return type == spMemAllocationTypeDvpp ? bytes - 32 : bytes;
  }

  // Pinned host pools cannot be a device's current pool (spDeviceSetMemPool
  // rejects them), so spMallocAsync never reaches them.
  bool CanBeCurrent() const { return type != spMemAllocationTypePinnedHost; }

  // Device, HugePage and Dvpp pools count against the device's capacity;
  // pinned host memory is not the device's and is bounded by maxSize only.
  bool BoundedByDeviceCapacity() const { return type != spMemAllocationTypePinnedHost; }

  // "Dvpp_Host_Expandable": a readable test-name suffix.
  std::string Name() const {
    std::string name;
    switch (type) {
      case spMemAllocationTypeDevice:
        name = "Device";
        break;
      case spMemAllocationTypePinnedHost:
        name = "PinnedHost";
        break;
      case spMemAllocationTypeHugePage:
        name = "HugePage";
        break;
      case spMemAllocationTypeDvpp:
        name = "Dvpp";
        break;
    }
    name += backing == spBackingHost ? "_Host" : "_AddressOnly";
    return name + (Expandable() ? "_Expandable" : "_Chunked") + (front_cache ? "" : "_NoCache");
  }
};

inline void PrintTo(const PoolVariant& v, std::ostream* os) { *os << v.Name(); }

// Every allocation type on both backings with both growth modes, each with
// the front caches on and off. With Host
// backing, HugePage and Dvpp memory is prefaulted when mapped, which is why
// the suites keep their pools to a few MiB.
inline std::vector<PoolVariant> AllPoolVariants() {
  std::vector<PoolVariant> all;
  for (spMemAllocationType type : {spMemAllocationTypeDevice, spMemAllocationTypePinnedHost,
                                   spMemAllocationTypeHugePage, spMemAllocationTypeDvpp}) {
    for (spBacking backing : {spBackingHost, spBackingAddressOnly}) {
      for (spPoolGrowth growth : {spPoolGrowthChunked, spPoolGrowthExpandable}) {
        for (bool cache : {true, false}) all.push_back({type, backing, growth, cache});
      }
    }
  }
  return all;
}

inline std::string VariantName(const ::testing::TestParamInfo<PoolVariant>& info) {
  return info.param.Name();
}

}  // namespace streampool_test

#endif  // STREAMPOOL_TESTS_POOL_CONFORMANCE_VARIANTS_H_
