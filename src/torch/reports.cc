#include "src/torch/reports.h"

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/torch/json_writer.h"
#include "src/torch/settings.h"

namespace streampool::internal::torch {
namespace {

// See allocator_state.cc: the runtime's devices are those with a pool.
constexpr int kMaxDevices = 1024;

// A snapshot or list is copied only when it fits; the pools may grow between
// sizing it and copying it, so each try leaves room for this much growth, and
// gives up after a few (a pool changing that fast has no one moment to show).
constexpr size_t kSlack = 64;
constexpr int kTries = 8;

std::string Describe(absl::string_view call, spError_t e) {
  return absl::StrCat(call, " failed: ", spGetErrorName(e), " (", spGetErrorString(e), ")");
}

// The devices a report covers, each with its current pool.
spError_t Pools(spRuntime_t rt, int device, std::vector<std::pair<int, spMemPool_t>>* pools,
                std::string* error) {
  if (device >= 0) {
    spMemPool_t pool = nullptr;
    if (spError_t e = spDeviceGetMemPool(&pool, rt, device); e != spSuccess) {
      *error = Describe(absl::StrCat("spDeviceGetMemPool (device ", device, ")"), e);
      return e;
    }
    pools->emplace_back(device, pool);
    return spSuccess;
  }
  if (device != -1) {
    *error = absl::StrCat("device ", device, ": a device index, or -1 for every device");
    return spErrorInvalidDevice;
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    spMemPool_t pool = nullptr;
    const spError_t e = spDeviceGetMemPool(&pool, rt, d);
    if (e == spErrorInvalidDevice) break;
    if (e != spSuccess) {
      *error = Describe(absl::StrCat("spDeviceGetMemPool (device ", d, ")"), e);
      return e;
    }
    pools->emplace_back(d, pool);
  }
  return spSuccess;
}

// A stream as PyTorch knows it: its native handle (0 for the legacy stream),
// or null for none (a READY block, a synchronous allocation).
void WriteStream(JsonWriter& w, spStream_t s) {
  void* native = nullptr;
  if (s == nullptr || spStreamGetNative(s, &native) != spSuccess) {
    w.Null();
    return;
  }
  w.Uint(reinterpret_cast<uintptr_t>(native));
}

uint64_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

const char* StateName(spBlockState state) {
  switch (state) {
    case spBlockStateLive:
      return "live";
    case spBlockStatePending:
      return "pending";
    case spBlockStateReady:
      return "ready";
    case spBlockStateCached:
      return "cached";
    case spBlockStateAwaitingUses:
      return "awaiting_uses";
  }
  return "unknown";
}

spError_t WriteSettings(JsonWriter& w, spMemPool_t pool, std::string* error) {
  uint64_t threshold = 0;
  uint64_t max_size = 0;
  int growth = 0;
  int event = 0;
  int opportunistic = 0;
  int internal = 0;
  const struct {
    spMemPoolAttr attr;
    void* value;
  } reads[] = {
      {spMemPoolAttrReleaseThreshold, &threshold},
      {spMemPoolAttrMaxPoolSize, &max_size},
      {spMemPoolAttrGrowth, &growth},
      {spMemPoolReuseFollowEventDependencies, &event},
      {spMemPoolReuseAllowOpportunistic, &opportunistic},
      {spMemPoolReuseAllowInternalDependencies, &internal},
  };
  for (const auto& r : reads) {
    if (spError_t e = spMemPoolGetAttribute(pool, r.attr, r.value); e != spSuccess) {
      *error = Describe(absl::StrCat("spMemPoolGetAttribute (", static_cast<int>(r.attr), ")"), e);
      return e;
    }
  }
  w.Key("settings");
  w.BeginObject();
  w.Field("release_threshold", threshold);
  w.Field("follow_event_dependencies", static_cast<uint64_t>(event));
  w.Field("opportunistic", static_cast<uint64_t>(opportunistic));
  w.Field("internal_dependencies", static_cast<uint64_t>(internal));
  w.FieldString("growth", GrowthName(growth));
  w.Field("max_size", max_size);
  w.EndObject();
  return spSuccess;
}

}  // namespace

spError_t StatsJson(const AllocatorState& state, spRuntime_t rt, int device, std::string* out,
                    std::string* error) {
  std::vector<std::pair<int, spMemPool_t>> pools;
  if (spError_t e = Pools(rt, device, &pools, error); e != spSuccess) return e;
  JsonWriter w;
  w.BeginObject();
  w.Key("devices");
  w.BeginArray();
  for (const auto& [d, pool] : pools) {
    spMemPoolStats s;
    if (spError_t e = spMemPoolGetStats(pool, &s); e != spSuccess) {
      *error = Describe(absl::StrCat("spMemPoolGetStats (device ", d, ")"), e);
      return e;
    }
    w.BeginObject();
    w.Field("device", static_cast<uint64_t>(d));
    w.Field("streams", static_cast<uint64_t>(state.StreamCount(d)));
    // The C struct lacks the one C++-only statistic shown: every successful
    // allocation counts one outcome, and those no reuse rule served are the
    // fresh ones.
    const uint64_t reused = s.reuseSameStream + s.reuseEventDependency + s.reuseOpportunistic +
                            s.reuseAfterSync + s.reuseInternalDependency;
#define SP_POOL_STAT(c_name, cxx_name, combine, run, run_key, torch) \
  if (torch) w.Field(#cxx_name, s.c_name);
#define SP_POOL_STAT_CXX(cxx_name, type, combine, run, run_key, torch)              \
  static_assert(!(torch) || std::string_view(#cxx_name) == "fresh_allocs",          \
                "StatsJson derives fresh_allocs alone of the C++-only statistics"); \
  if (torch) w.Field(#cxx_name, s.allocCount >= reused ? s.allocCount - reused : 0);
#include "src/pool/pool_stats.def"
    if (spError_t e = WriteSettings(w, pool, error); e != spSuccess) return e;
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  *out = w.text();
  return spSuccess;
}

spError_t SnapshotJson(spRuntime_t rt, int device, std::string* out, std::string* error) {
  std::vector<std::pair<int, spMemPool_t>> pools;
  if (spError_t e = Pools(rt, device, &pools, error); e != spSuccess) return e;
  JsonWriter w;
  w.BeginObject();
  w.Key("devices");
  w.BeginArray();
  for (const auto& [d, pool] : pools) {
    std::vector<spMemPoolSnapshotSegment> segments;
    std::vector<spMemPoolSnapshotBlock> blocks;
    size_t segment_count = 0;
    size_t block_count = 0;
    bool copied = false;
    for (int attempt = 0; attempt < kTries && !copied; ++attempt) {
      if (spError_t e = spMemPoolSnapshot(pool, segments.data(), segments.size(), &segment_count,
                                          blocks.data(), blocks.size(), &block_count);
          e != spSuccess) {
        *error = Describe(absl::StrCat("spMemPoolSnapshot (device ", d, ")"), e);
        return e;
      }
      copied = segment_count <= segments.size() && block_count <= blocks.size();
      if (!copied) {
        segments.resize(segment_count + kSlack);
        blocks.resize(block_count + kSlack);
      }
    }
    if (!copied) {
      *error =
          absl::StrCat("device ", d, "'s pool changed under every one of ", kTries, " snapshots");
      return spErrorUnknown;
    }
    // The device's graph memory, apart from the pool's segments: ranges of
    // graphs' allocation nodes, which no pool holds.
    uint64_t graph[4] = {0, 0, 0, 0};
    for (int attr = 0; attr < 4; ++attr) {
      if (spError_t e = spDeviceGetGraphMemAttribute(
              rt, d, static_cast<spGraphMemAttributeType>(attr), &graph[attr]);
          e != spSuccess) {
        *error = Describe(absl::StrCat("spDeviceGetGraphMemAttribute (device ", d, ")"), e);
        return e;
      }
    }
    w.BeginObject();
    w.Field("device", static_cast<uint64_t>(d));
    w.Field("pool", Address(pool));
    w.Key("graph_memory");
    w.BeginObject();
    w.Field("used", graph[spGraphMemAttrUsedMemCurrent]);
    w.Field("used_high", graph[spGraphMemAttrUsedMemHigh]);
    w.Field("reserved", graph[spGraphMemAttrReservedMemCurrent]);
    w.Field("reserved_high", graph[spGraphMemAttrReservedMemHigh]);
    w.EndObject();
    w.Key("segments");
    w.BeginArray();
    for (size_t i = 0; i < segment_count; ++i) {
      const spMemPoolSnapshotSegment& seg = segments[i];
      w.BeginObject();
      w.Field("address", Address(seg.address));
      w.Field("size", seg.size);
      w.Field("mapped_bytes", seg.mappedBytes);
      w.Key("expandable");
      w.Bool(seg.expandable != 0);
      w.Key("blocks");
      w.BeginArray();
      for (size_t j = seg.firstBlock; j < seg.firstBlock + seg.blockCount && j < block_count; ++j) {
        const spMemPoolSnapshotBlock& b = blocks[j];
        w.BeginObject();
        w.Field("address", Address(b.address));
        w.Field("size", b.size);
        w.Field("requested", b.requested);
        w.FieldString("state", StateName(b.state));
        w.Key("stream");
        WriteStream(w, b.stream);
        w.Field("free_point", b.freePoint);
        w.Field("alloc_seq", b.allocSeq);
        w.Field("unmapped_bytes", b.unmappedBytes);
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  *out = w.text();
  return spSuccess;
}

spError_t LeakReportJson(spRuntime_t rt, int device, std::string* out, std::string* error) {
  std::vector<std::pair<int, spMemPool_t>> pools;
  // Checks the device, as the other reports do.
  if (spError_t e = Pools(rt, device, &pools, error); e != spSuccess) return e;
  std::vector<spLiveAllocation> live;
  size_t count = 0;
  bool copied = false;
  for (int attempt = 0; attempt < kTries && !copied; ++attempt) {
    if (spError_t e = spRuntimeGetLiveAllocations(rt, live.data(), live.size(), &count);
        e != spSuccess) {
      *error = Describe("spRuntimeGetLiveAllocations", e);
      return e;
    }
    copied = count <= live.size();
    if (!copied) live.resize(count + kSlack);
  }
  if (!copied) {
    *error = absl::StrCat("the live allocations changed under every one of ", kTries, " reads");
    return spErrorUnknown;
  }
  live.resize(count);
  uint64_t n = 0;
  uint64_t bytes = 0;
  JsonWriter w;
  w.BeginObject();
  w.Key("allocations");
  w.BeginArray();
  for (const spLiveAllocation& a : live) {
    if (device >= 0 && a.device != device) continue;
    ++n;
    bytes += a.size;
    w.BeginObject();
    w.Field("ptr", Address(a.ptr));
    w.Field("size", a.size);
    w.Field("block_size", a.blockSize);
    w.Key("device");
    w.Int(a.device);
    w.Key("stream");
    WriteStream(w, a.stream);
    w.Field("seq", a.seq);
    w.EndObject();
  }
  w.EndArray();
  w.Field("count", n);
  w.Field("bytes", bytes);
  w.EndObject();
  *out = w.text();
  return spSuccess;
}

}  // namespace streampool::internal::torch
