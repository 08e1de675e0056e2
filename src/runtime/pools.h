// Pools: creating pools of each allocation type (the variant table of
// src/pool/pool_config.h picks rule, upstream and budget), destroying them,
// the device's default and current pools, attributes, trimming, statistics,
// and multi-device access (the peer matrix and each pool's access rights,
// CUDA guide F.10).
#ifndef STREAMPOOL_SRC_RUNTIME_POOLS_H_
#define STREAMPOOL_SRC_RUNTIME_POOLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class Pools {
 public:
  explicit Pools(RuntimeCore& core);
  Pools(const Pools&) = delete;
  Pools& operator=(const Pools&) = delete;

  // custom_upstream null: the one the pool's type implies.
  absl::StatusOr<uint64_t> CreatePool(const PoolProps& props,
                                      std::shared_ptr<PhysicalMemory> custom_upstream);
  // A pool over the caller's upstream (Runtime::CreatePool(props, upstream)):
  // null is kInvalidArgument, never the type's own upstream, since it is
  // what NewCallbackMemory and NewVmmCallbackMemory return when a function
  // is missing.
  absl::StatusOr<uint64_t> CreatePoolOver(const PoolProps& props,
                                          std::shared_ptr<PhysicalMemory> upstream);
  absl::Status DestroyPool(uint64_t pool);
  absl::Status SetHugePageBudget(int device, uint64_t bytes);
  absl::StatusOr<uint64_t> DefaultPool(int device);
  absl::StatusOr<uint64_t> CurrentPool(int device);
  absl::Status SetCurrentPool(int device, uint64_t pool);
  absl::Status SetPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value);
  absl::StatusOr<uint64_t> GetPoolAttribute(uint64_t pool, PoolAttr attr);
  absl::Status TrimTo(uint64_t pool, uint64_t min_bytes_to_keep);
  absl::StatusOr<PoolStats> GetPoolStats(uint64_t pool);
  absl::Status CheckPoolInvariants(uint64_t pool);
  // Every segment and block of the pool, with its statistics.
  absl::StatusOr<PoolSnapshot> Snapshot(uint64_t pool);
  absl::Status SetPeerAccessible(int device, int peer, bool accessible);
  absl::StatusOr<bool> CanAccessPeer(int device, int peer);
  absl::Status SetPoolAccess(uint64_t pool, absl::Span<const MemAccessDesc> descs);
  absl::StatusOr<MemAccessFlags> GetPoolAccess(uint64_t pool, MemLocation location);

 private:
  // A pool's block as the public API names it.
  SnapshotBlock ToSnapshotBlock(const MemPool::BlockView& v) const;

  RuntimeCore& c_;
  // peers_[d] bit p: device d may access memory resident on device p.
  std::vector<uint64_t> peers_;
  // A CUDA runtime's device pools: each pool's own device memory, whose
  // access grants are the driver's (cuMemSetAccess).
  absl::flat_hash_map<uint64_t, PhysicalMemory*> native_memory_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_POOLS_H_
