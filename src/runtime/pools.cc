#include "src/runtime/pools.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/memory/upstreams.h"
#include "src/pool/pool_attrs.h"
#include "src/pool/pool_config.h"
#include "src/util/check.h"

namespace streampool::internal {

using PoolRec = PoolTable::PoolRec;

namespace {

// What the read-only placement attributes (CUDA's 9-14) report: the
// properties a pool was made with, or for an imported pool what the exporter's
// file header says. An imported pool cannot be exported again and has no size
// limit of its own here (CUDA calls its maximum "system dependent").
struct Placement {
  AllocationType type = AllocationType::kDevice;
  int device = 0;  // -1: pinned host
  unsigned handle_types = 0;
  uint64_t max_size = 0;
};

Placement PlacementOf(const MemPool& p) {
  const PoolProps& props = p.props();
  const bool host = props.alloc_type == AllocationType::kPinnedHost;
  return {props.alloc_type, host ? -1 : props.device, props.handle_types, props.max_size};
}

Placement PlacementOf(const ImportedPool& p) {
  return {static_cast<AllocationType>(p.header().alloc_type), p.header().device, 0, 0};
}

// spMemLocationType's values, which are CUDA's.
constexpr uint64_t kLocationDevice = 1;
constexpr uint64_t kLocationHost = 2;

// One attribute switch for MemPool and ImportedPool (which share accessor
// names). An imported pool cannot allocate or release, so its reuse switches
// and threshold mean nothing (CUDA F.11.5); it keeps them so they read back.
// A MemPool's caller holds its central lock (an ImportedPool has none).
template <typename Pool>
absl::Status SetAttribute(Pool& p, PoolAttr attr, uint64_t value) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const PoolAttrInfo* a = FindPoolAttr(static_cast<int>(attr));
  if (a == nullptr) return absl::InvalidArgumentError("unknown pool attribute");
  if (a->access == AttrAccess::kReadOnly) {
    return absl::InvalidArgumentError(absl::StrCat("pool attribute ", a->name, " is read-only"));
  }
  if (a->access == AttrAccess::kResetOnly && value != 0) {
    return absl::InvalidArgumentError("a high watermark can only be reset, by setting 0");
  }
  if (a->kind == AttrKind::kStrictSwitch && value > 1) {
    return absl::InvalidArgumentError(absl::StrCat("the ", a->name, " switch is 0 or 1"));
  }
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      p.set_reuse_follow_event_dependencies(value != 0);
      break;
    case PoolAttr::kReuseAllowOpportunistic:
      p.set_reuse_allow_opportunistic(value != 0);
      break;
    case PoolAttr::kReuseAllowInternalDependencies:
      p.set_reuse_allow_internal_dependencies(value != 0);
      break;
    case PoolAttr::kReleaseThreshold:
      p.set_release_threshold(value);
      break;
    case PoolAttr::kFrontCache:
      p.set_front_cache(value != 0);
      break;
    case PoolAttr::kWaitBeforeGrowth:
      p.set_wait_before_growth(value != 0);
      break;
    case PoolAttr::kSoftReservedLimit:
      p.set_soft_reserved_limit(value);
      break;
    case PoolAttr::kReservedMemHigh:
      p.ResetReservedHigh();
      break;
    case PoolAttr::kUsedMemHigh:
      p.ResetUsedHigh();
      break;
    default:
      SP_CHECK(!"a writable pool attribute (src/pool/pool_attrs.def) without a setter");
  }
  return absl::OkStatus();
}

template <typename Pool>
absl::StatusOr<uint64_t> GetAttribute(const Pool& p, PoolAttr attr) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      return p.reuse_follow_event_dependencies() ? 1 : 0;
    case PoolAttr::kReuseAllowOpportunistic:
      return p.reuse_allow_opportunistic() ? 1 : 0;
    case PoolAttr::kReuseAllowInternalDependencies:
      return p.reuse_allow_internal_dependencies() ? 1 : 0;
    case PoolAttr::kReleaseThreshold:
      return p.release_threshold();
    case PoolAttr::kReservedMemCurrent:
      return p.reserved();
    case PoolAttr::kReservedMemHigh:
      return p.reserved_high();
    case PoolAttr::kUsedMemCurrent:
      return p.used();
    case PoolAttr::kUsedMemHigh:
      return p.used_high();
    case PoolAttr::kGrowth:
      return static_cast<uint64_t>(p.growth());
    case PoolAttr::kFrontCache:
      return p.front_cache() ? 1 : 0;
    case PoolAttr::kWaitBeforeGrowth:
      return p.wait_before_growth() ? 1 : 0;
    case PoolAttr::kSoftReservedLimit:
      return p.soft_reserved_limit();
    case PoolAttr::kAllocationType:
      return static_cast<uint64_t>(PlacementOf(p).type);
    case PoolAttr::kExportHandleTypes:
      return PlacementOf(p).handle_types;
    case PoolAttr::kLocationId:
      // Read back as an int: -1 survives the round trip through uint64_t.
      return static_cast<uint64_t>(static_cast<int64_t>(PlacementOf(p).device));
    case PoolAttr::kLocationType:
      return PlacementOf(p).device < 0 ? kLocationHost : kLocationDevice;
    case PoolAttr::kMaxPoolSize:
      return PlacementOf(p).max_size;
    case PoolAttr::kHwDecompressEnabled:
      return 0;
  }
  return absl::InvalidArgumentError("unknown pool attribute");
}

}  // namespace

Pools::Pools(RuntimeCore& core) : c_(core) {
  // Every pair of devices is peer until the embedder says otherwise.
  peers_.assign(c_.config.device_count, ~uint64_t{0});
}

absl::StatusOr<uint64_t> Pools::CreatePool(const PoolProps& props,
                                           std::shared_ptr<PhysicalMemory> custom_upstream) {
  if (!c_.pools.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's pool handles are used up");
  }
  const int type = static_cast<int>(props.alloc_type);
  if (type < 1 || type > 4) return absl::InvalidArgumentError("unknown allocation type");
  const int policy = static_cast<int>(props.page_policy);
  if (policy < 0 || policy > 2) return absl::InvalidArgumentError("unknown page policy");
  if (props.alloc_type != AllocationType::kPinnedHost) {
    if (absl::Status st = c_.devices.Check(props.device); !st.ok()) return st;
  }
  if ((props.handle_types & ~kHandleTypePosixFileDescriptor) != 0) {
    return absl::InvalidArgumentError("unknown handle type");
  }
  const int growth = static_cast<int>(props.growth);
  if (growth < 0 || growth > 2) return absl::InvalidArgumentError("unknown growth mode");
  const bool exportable = props.handle_types != 0;
  if (c_.cuda != nullptr) {
    // Real device memory: what the simulator emulates with host pages (huge
    // pages, the DVPP window, memfd export) has no CUDA counterpart here.
    if (props.alloc_type == AllocationType::kHugePage ||
        props.alloc_type == AllocationType::kDvpp) {
      return absl::UnimplementedError(absl::StrCat(AllocationTypeName(props.alloc_type),
                                                   " pools are not supported on a CUDA runtime"));
    }
    if (exportable) {
      return absl::UnimplementedError("exportable pools are not supported on a CUDA runtime");
    }
  }
  if (exportable) {
    // An exported pool's memory must be real shared pages another process
    // can map: a memfd, which only Host backing has and which we place
    // ourselves (no huge pages, no DVPP window, no user upstream).
    if (c_.config.backing != Backing::kHost) {
      return absl::UnimplementedError("exportable pools need Host backing");
    }
    if (custom_upstream != nullptr) {
      return absl::UnimplementedError("an exportable pool cannot sit on a caller's upstream");
    }
    if (props.alloc_type != AllocationType::kDevice &&
        props.alloc_type != AllocationType::kPinnedHost) {
      return absl::UnimplementedError("only Device and PinnedHost pools can be exportable");
    }
  }
  const bool custom = custom_upstream != nullptr;
  const bool touchable = c_.config.backing == Backing::kHost;
  const bool pinned = !VariantConfig(props.alloc_type)->device_memory;
  std::shared_ptr<PhysicalMemory> upstream = std::move(custom_upstream);
  bool registered = false;  // already behind the registry (a runtime's own memory)
  PhysicalMemory* native_memory = nullptr;
  // The variant's row of src/pool/pool_config.h: size rule, upstream, budget.
  const PoolVariantConfig& variant = *VariantConfig(props.alloc_type);
  if (props.acl_rounding && variant.rule.kind != SizeRule::Kind::kRound) {
    return absl::InvalidArgumentError("the ACL rounding rule applies to device memory only");
  }
  if (props.acl_rounding && !variant.device_memory) {
    return absl::InvalidArgumentError("the ACL rounding rule applies to device memory only");
  }
  const SizeRule rule = RuleOf(props);
  if (!upstream) {
    switch (variant.upstream) {
      case UpstreamKind::kRuntime:
        // c_.devices.upstream(), below, but where the runtime has real memory.
        if (c_.cuda != nullptr && pinned) {
          upstream = c_.pinned_memory;
          registered = true;
        } else if (c_.cuda != nullptr) {
          // A pool's own: cudaMemPoolSetAccess grants are per pool.
          std::unique_ptr<PhysicalMemory> memory = c_.cuda->NewDeviceMemory(props.device);
          native_memory = memory.get();
          upstream = std::move(memory);
        }
        break;
      case UpstreamKind::kHugePage:
        upstream = NewHugePageUpstream(props.page_policy, touchable,
                                       c_.devices[props.device].huge_budget.get());
        break;
      case UpstreamKind::kDvpp:
        upstream =
            NewDvppUpstream(props.page_policy, touchable,
                            c_.devices[props.device].huge_budget.get(), c_.process.dvpp_window());
        break;
    }
  }
  MemfdMemory* memfd = nullptr;
  if (exportable) {
    absl::StatusOr<std::unique_ptr<MemfdMemory>> m = MemfdMemory::Create(
        pinned ? -1 : props.device, static_cast<int>(props.alloc_type), rule.granule);
    if (!m.ok()) return m.status();
    memfd = m->get();
    upstream = std::shared_ptr<PhysicalMemory>(*std::move(m));
  }
  if (!registered)
    upstream = upstream ? c_.Registering(std::move(upstream)) : c_.devices.upstream();
  if (props.growth == PoolGrowth::kExpandable && !upstream->can_reserve()) {
    return absl::UnimplementedError(
        "expandable growth needs an upstream that can reserve address space");
  }
  // DVPP pools share one 16 GiB window per process: each reservation takes a
  // sixteenth of it, so several pools (and several reservations of one) fit.
  static_assert(kDvppReservationBytes == DvppWindow::kSize / 16);
  const uint64_t reservation = variant.reservation_bytes;
  DeviceBudget* budget = pinned ? &c_.devices.host_budget() : c_.devices[props.device].budget.get();
  const uint64_t limit = pinned ? UINT64_MAX : c_.config.device_capacity;
  const uint64_t max_size = props.max_size == 0 ? limit : std::min<uint64_t>(props.max_size, limit);
  auto pool =
      std::make_unique<MemPool>(props, rule, max_size, std::move(upstream), budget, reservation);
  pool->set_page_map(&c_.index.page_map());
  PoolRec rec;
  if (memfd != nullptr) {
    rec.kind = PoolTable::ExportablePool{std::move(pool), ExportableMemory{memfd}};
  } else {
    rec.kind = PoolTable::LocalPool{std::move(pool)};
  }
  rec.attrs.device = pinned ? -1 : props.device;
  rec.attrs.custom_upstream = custom;
  rec.attrs.access = c_.NewAccessRights(rec.attrs.device, props.alloc_type);
  absl::StatusOr<uint64_t> h = c_.pools.Add(std::move(rec));
  if (!h.ok()) return h.status();
  if (native_memory != nullptr) native_memory_[*h] = native_memory;
  return *h;
}

absl::StatusOr<uint64_t> Pools::CreatePoolOver(const PoolProps& props,
                                               std::shared_ptr<PhysicalMemory> upstream) {
  if (upstream == nullptr) {
    return absl::InvalidArgumentError(
        "the pool's upstream is null (NewCallbackMemory and NewVmmCallbackMemory return null "
        "when a function is missing)");
  }
  return CreatePool(props, std::move(upstream));
}

absl::Status Pools::DestroyPool(uint64_t pool) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->attrs.is_default)
    return absl::InvalidArgumentError("a device's default pool cannot be destroyed");
  native_memory_.erase(pool);
  if ((*rec)->imported() == nullptr) {
    for (int i = 0; i < c_.config.device_count; ++i) {
      if (c_.devices.current_pool(i) == pool) {
        c_.devices.set_current_pool(i, c_.devices[i].default_pool);
      }
    }
  }
  c_.pools.Remove(pool);
  return absl::OkStatus();
}

absl::Status Pools::SetHugePageBudget(int device, uint64_t bytes) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  c_.devices[device].huge_budget->set_limit(bytes);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Pools::DefaultPool(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  return c_.devices[device].default_pool;
}

absl::StatusOr<uint64_t> Pools::CurrentPool(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  return c_.devices.current_pool(device);
}

absl::Status Pools::SetCurrentPool(int device, uint64_t pool) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) {
    return absl::InvalidArgumentError("an imported pool cannot be current (CUDA F.11.5)");
  }
  const PoolProps& props = (*rec)->mem()->props();
  if (props.alloc_type == AllocationType::kPinnedHost || props.device != device) {
    return absl::InvalidArgumentError("pool does not live on this device");
  }
  c_.devices.set_current_pool(device, pool);
  c_.fast.Invalidate();
  return absl::OkStatus();
}

absl::Status Pools::SetPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return SetAttribute(**(*rec)->imported(), attr, value);
  MemPool& mp = *(*rec)->mem();
  MutexLock pool_lock(&mp.central_mu());
  return SetAttribute(mp, attr, value);
}

absl::StatusOr<uint64_t> Pools::GetPoolAttribute(uint64_t pool, PoolAttr attr) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return GetAttribute(**(*rec)->imported(), attr);
  MemPool& mp = *(*rec)->mem();
  MutexLock pool_lock(&mp.central_mu());
  return GetAttribute(mp, attr);
}

absl::Status Pools::TrimTo(uint64_t pool, uint64_t min_bytes_to_keep) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  // IPC pools keep their memory (CUDA F.11.4, F.11.5): TrimTo is a no-op.
  if ((*rec)->imported() != nullptr || (*rec)->exportable() != nullptr) return absl::OkStatus();
  MemPool& mp = *(*rec)->mem();
  MutexLock pool_lock(&mp.central_mu());
  mp.Release(min_bytes_to_keep);
  return absl::OkStatus();
}

absl::StatusOr<PoolStats> Pools::GetPoolStats(uint64_t pool) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return (*(*rec)->imported())->Stats();
  MemPool& mp = *(*rec)->mem();
  MutexLock pool_lock(&mp.central_mu());
  return mp.Stats();
}

absl::Status Pools::CheckPoolInvariants(uint64_t pool) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return absl::OkStatus();  // no blocks of its own
  MemPool& mp = *(*rec)->mem();
  MutexLock pool_lock(&mp.central_mu());
  if (!mp.CheckInvariants()) return absl::InternalError("pool invariants broken");
  return absl::OkStatus();
}

SnapshotBlock Pools::ToSnapshotBlock(const MemPool::BlockView& v) const {
  SnapshotBlock b;
  b.address = v.addr;
  b.size = v.size;
  b.requested = v.requested;
  switch (v.state) {
    case internal::BlockState::kLive:
      b.state = v.cached ? streampool::BlockState::kCached : streampool::BlockState::kLive;
      b.alloc_seq = v.alloc_pos;
      break;
    case internal::BlockState::kPending:
      b.state = streampool::BlockState::kPending;
      break;
    case internal::BlockState::kDeferred:
      b.state = streampool::BlockState::kAwaitingUses;
      break;
    case internal::BlockState::kReady:
      b.state = streampool::BlockState::kReady;
      b.unmapped_bytes = v.unmapped_bytes;
      break;
  }
  if (v.stream != kNoStream) b.stream = StreamId{c_.StreamHandleOf(v.stream)};
  if (b.state == streampool::BlockState::kPending || b.state == streampool::BlockState::kCached ||
      b.state == streampool::BlockState::kAwaitingUses) {
    b.free_point = v.free_pos;
  }
  return b;
}

absl::StatusOr<PoolSnapshot> Pools::Snapshot(uint64_t pool) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  PoolSnapshot out;
  out.pool = PoolId{pool};
  out.device = (*rec)->attrs.device;
  if ((*rec)->imported() != nullptr) {
    out.stats = (*(*rec)->imported())->Stats();
    return out;
  }
  MemPool& mp = *(*rec)->mem();
  std::vector<MemPool::ChunkView> chunks;
  std::vector<MemPool::BlockView> blocks;
  {
    MutexLock pool_lock(&mp.central_mu());
    mp.Snapshot(&chunks, &blocks);
    out.stats = mp.Stats();
  }
  out.segments.reserve(chunks.size());
  for (const MemPool::ChunkView& c : chunks) {
    SnapshotSegment seg;
    seg.address = c.base;
    seg.size = c.size;
    seg.mapped_bytes = c.mapped_bytes;
    seg.expandable = c.expandable;
    seg.blocks.reserve(c.block_count);
    for (size_t i = c.first_block; i < c.first_block + c.block_count; ++i) {
      seg.blocks.push_back(ToSnapshotBlock(blocks[i]));
    }
    out.segments.push_back(std::move(seg));
  }
  return out;
}

absl::Status Pools::SetPeerAccessible(int device, int peer, bool accessible) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (absl::Status st = c_.devices.Check(peer); !st.ok()) return st;
  if (device == peer) return absl::OutOfRangeError("a device is not its own peer");
  if (accessible) {
    peers_[device] |= uint64_t{1} << peer;
  } else {
    peers_[device] &= ~(uint64_t{1} << peer);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Pools::CanAccessPeer(int device, int peer) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (absl::Status st = c_.devices.Check(peer); !st.ok()) return st;
  // CUDA answers 0 for a device and itself; so do we.
  return device != peer && (peers_[device] >> peer & 1) != 0;
}

absl::Status Pools::SetPoolAccess(uint64_t pool, absl::Span<const MemAccessDesc> descs) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  const PoolRec& p = **rec;
  // Every descriptor is checked before any applies: a failed call changes
  // nothing.
  for (const MemAccessDesc& d : descs) {
    const int flags = static_cast<int>(d.flags);
    if (flags != 0 && flags != 1 && flags != 3) {
      return absl::InvalidArgumentError("unknown access flags");
    }
    if (d.location.type == MemLocationType::kHost) {
      if (p.attrs.access != nullptr) {
        return absl::InvalidArgumentError("host access to a device pool is not modelled");
      }
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("pinned host memory is always read-write");
      }
      continue;
    }
    if (d.location.type != MemLocationType::kDevice) {
      return absl::InvalidArgumentError("unknown location type");
    }
    if (absl::Status st = c_.devices.Check(d.location.id); !st.ok()) return st;
    if (p.attrs.access == nullptr) {
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("pinned host memory is every device's, read-write");
      }
      continue;
    }
    if (d.location.id == p.attrs.device) {
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("the resident device's access cannot be lowered");
      }
      continue;
    }
    // Only a grant needs the peer path; revoking never does. A resident
    // device this runtime does not have (an imported pool's) has no peer
    // information to check against.
    if (d.flags != MemAccessFlags::kProtNone && p.attrs.device >= 0 &&
        p.attrs.device < c_.config.device_count &&
        (peers_[d.location.id] >> p.attrs.device & 1) == 0) {
      return absl::OutOfRangeError(absl::StrCat(
          "device ", d.location.id, " cannot access memory of device ", p.attrs.device));
    }
  }
  if (p.attrs.access == nullptr) return absl::OkStatus();
  if (auto native = native_memory_.find(pool); native != native_memory_.end()) {
    // The driver's grant first: if it refuses, nothing changed. (A revoke
    // is recorded for the checker only: memory once mapped for a peer stays
    // mapped for it until the pool gives the granule back.)
    for (const MemAccessDesc& d : descs) {
      if (d.location.type != MemLocationType::kDevice || d.location.id == p.attrs.device ||
          d.flags == MemAccessFlags::kProtNone) {
        continue;
      }
      // The upstream is the pool's, used under its lock.
      MemPool* mp = p.mem();
      if (mp == nullptr) continue;
      MutexLock pool_lock(&mp->central_mu());
      if (absl::Status st = c_.cuda->GrantAccess(*native->second, d.location.id); !st.ok()) {
        return st;
      }
    }
  }
  for (const MemAccessDesc& d : descs) {
    if (d.location.type != MemLocationType::kDevice || d.location.id == p.attrs.device) continue;
    p.attrs.access->flags[d.location.id] = static_cast<uint8_t>(d.flags);
  }
  return absl::OkStatus();
}

absl::StatusOr<MemAccessFlags> Pools::GetPoolAccess(uint64_t pool, MemLocation location) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  const PoolRec& p = **rec;
  if (location.type == MemLocationType::kHost) {
    return p.attrs.access == nullptr ? MemAccessFlags::kProtReadWrite : MemAccessFlags::kProtNone;
  }
  if (location.type != MemLocationType::kDevice) {
    return absl::InvalidArgumentError("unknown location type");
  }
  if (absl::Status st = c_.devices.Check(location.id); !st.ok()) return st;
  if (p.attrs.access == nullptr) return MemAccessFlags::kProtReadWrite;
  return static_cast<MemAccessFlags>(p.attrs.access->Get(location.id));
}

}  // namespace streampool::internal
