// Snapshots (Runtime::Snapshot, spMemPoolSnapshot) and live allocations
// (Runtime::LiveAllocations, spRuntimeGetLiveAllocations, the leak check at
// destroy): what a pool holds block by block, and what was never freed.
#include "streampool/snapshot.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;

std::unique_ptr<Runtime> MakeRuntime(RuntimeConfig cfg = {}) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *std::move(rt) : nullptr;
}

PoolId MakePool(Runtime& rt, PoolGrowth growth = PoolGrowth::kDefault) {
  PoolProps props;
  props.growth = growth;
  props.release_threshold = UINT64_MAX;
  absl::StatusOr<PoolId> p = rt.CreatePool(props);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : PoolId{};
}

void* Alloc(Runtime& rt, uint64_t size, PoolId pool, StreamId s) {
  absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(size, pool, s);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? a->ptr : nullptr;
}

const SnapshotBlock* BlockAt(const PoolSnapshot& snap, const void* p) {
  for (const SnapshotSegment& seg : snap.segments) {
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.address == reinterpret_cast<uintptr_t>(p)) return &b;
    }
  }
  return nullptr;
}

// Segments in address order, blocks tiling each, and the byte counts the
// statistics read in the same lock.
void ExpectConsistent(const PoolSnapshot& snap) {
  uint64_t mapped = 0, used = 0, requested = 0, last_end = 0;
  for (const SnapshotSegment& seg : snap.segments) {
    EXPECT_GE(seg.address, last_end);
    last_end = seg.address + seg.size;
    mapped += seg.mapped_bytes;
    uint64_t at = seg.address;
    for (const SnapshotBlock& b : seg.blocks) {
      EXPECT_EQ(b.address, at);
      at += b.size;
      if (b.state == BlockState::kLive) {
        used += b.size;
        requested += b.requested;
      }
    }
    EXPECT_EQ(at, seg.address + seg.size);
  }
  EXPECT_EQ(mapped, snap.stats.reserved_bytes);
  EXPECT_EQ(used, snap.stats.used_bytes);
  EXPECT_EQ(requested, snap.stats.requested_bytes);
  EXPECT_EQ(snap.segments.size(), snap.stats.segments);
}

TEST(Snapshot, EveryStateWithItsStreamSizesAndSequence) {
  std::unique_ptr<Runtime> rt = MakeRuntime();
  const PoolId pool = MakePool(*rt);
  const StreamId s1 = *rt->CreateStream(0);
  const StreamId s2 = *rt->CreateStream(0);
  // Large blocks go central on free (PENDING); a small one stays in the
  // freeing stream's front cache (CACHED).
  void* live = Alloc(*rt, 3 * kMiB + 5, pool, s1);
  void* pending = Alloc(*rt, 2 * kMiB, pool, s1);
  void* other = Alloc(*rt, 4 * kMiB, pool, s2);
  void* small = Alloc(*rt, 4 * kKiB + 1, pool, s2);
  ASSERT_TRUE(rt->FreeAsync(pending, s1).ok());
  ASSERT_TRUE(rt->FreeAsync(small, s2).ok());

  absl::StatusOr<PoolSnapshot> snap = rt->Snapshot(pool);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->pool, pool);
  EXPECT_EQ(snap->device, 0);
  ASSERT_FALSE(snap->segments.empty());
  ExpectConsistent(*snap);

  const SnapshotBlock* b = BlockAt(*snap, live);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, BlockState::kLive);
  EXPECT_EQ(b->requested, 3 * kMiB + 5);
  EXPECT_GE(b->size, b->requested);
  EXPECT_EQ(b->stream.value, s1.value);
  EXPECT_EQ(b->free_point, 0u);
  const uint64_t live_seq = b->alloc_seq;
  EXPECT_GT(live_seq, 0u);

  b = BlockAt(*snap, pending);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, BlockState::kPending);
  EXPECT_EQ(b->stream.value, s1.value);
  EXPECT_EQ(b->requested, 0u);
  // Two allocations and then the free on s1: its point comes after both.
  EXPECT_GT(b->free_point, live_seq + 1);

  b = BlockAt(*snap, other);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, BlockState::kLive);
  EXPECT_EQ(b->stream.value, s2.value);
  const uint64_t other_seq = b->alloc_seq;

  b = BlockAt(*snap, small);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, BlockState::kCached);
  EXPECT_EQ(b->stream.value, s2.value);
  EXPECT_EQ(b->requested, 4 * kKiB + 1);
  EXPECT_GT(b->alloc_seq, other_seq);
  EXPECT_GT(b->free_point, b->alloc_seq);

  // A synchronize proves the frees complete: READY, with no stream.
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
  snap = rt->Snapshot(pool);
  ASSERT_TRUE(snap.ok());
  ExpectConsistent(*snap);
  for (const SnapshotSegment& seg : snap->segments) {
    for (const SnapshotBlock& blk : seg.blocks) {
      EXPECT_NE(blk.state, BlockState::kPending);
      if (blk.state == BlockState::kReady) {
        EXPECT_EQ(blk.stream.value, 0u);
        EXPECT_EQ(blk.requested, 0u);
        EXPECT_EQ(blk.free_point, 0u);
      }
    }
  }
  EXPECT_EQ(BlockAt(*snap, live)->state, BlockState::kLive);
}

TEST(Snapshot, ExpandableSegmentsShowUnmappedGranules) {
  std::unique_ptr<Runtime> rt = MakeRuntime();
  const PoolId pool = MakePool(*rt, PoolGrowth::kExpandable);
  const StreamId s = *rt->CreateStream(0);
  void* a = Alloc(*rt, 8 * kMiB, pool, s);
  void* b = Alloc(*rt, 8 * kMiB, pool, s);
  ASSERT_TRUE(rt->FreeAsync(b, s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  ASSERT_TRUE(rt->TrimTo(pool, 0).ok());
  absl::StatusOr<PoolSnapshot> snap = rt->Snapshot(pool);
  ASSERT_TRUE(snap.ok());
  ExpectConsistent(*snap);
  ASSERT_EQ(snap->segments.size(), 1u);
  const SnapshotSegment& seg = snap->segments[0];
  EXPECT_TRUE(seg.expandable);
  EXPECT_EQ(seg.mapped_bytes, 8 * kMiB);
  EXPECT_GT(seg.size, seg.mapped_bytes);
  uint64_t unmapped = 0;
  for (const SnapshotBlock& blk : seg.blocks) {
    unmapped += blk.unmapped_bytes;
    EXPECT_TRUE(blk.unmapped_bytes == 0 || blk.unmapped_bytes == blk.size);
    if (blk.unmapped_bytes != 0) {
      EXPECT_EQ(blk.state, BlockState::kReady);
    }
  }
  EXPECT_EQ(unmapped, seg.size - seg.mapped_bytes);
  EXPECT_EQ(BlockAt(*snap, a)->state, BlockState::kLive);
}

TEST(Snapshot, BadHandlesAndImportedPools) {
  std::unique_ptr<Runtime> rt = MakeRuntime();
  EXPECT_FALSE(rt->Snapshot(PoolId{}).ok());
  EXPECT_FALSE(rt->Snapshot(PoolId{12345}).ok());
  const PoolId pool = MakePool(*rt);
  ASSERT_TRUE(rt->DestroyPool(pool).ok());
  EXPECT_FALSE(rt->Snapshot(pool).ok());
}

TEST(Snapshot, StateNames) {
  EXPECT_STREQ(BlockStateName(BlockState::kLive), "live");
  EXPECT_STREQ(BlockStateName(BlockState::kPending), "pending");
  EXPECT_STREQ(BlockStateName(BlockState::kReady), "ready");
  EXPECT_STREQ(BlockStateName(BlockState::kCached), "cached");
  EXPECT_STREQ(BlockStateName(static_cast<BlockState>(99)), "unknown");
}

// As shipped: other host threads allocate and free through the fast path
// while snapshots are taken; every snapshot stays a tiling of its segments.
TEST(Snapshot, WhileOtherThreadsAllocate) {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kThreads;
  std::unique_ptr<Runtime> rt = MakeRuntime(cfg);
  const PoolId pool = MakePool(*rt);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&rt, pool] {
      const StreamId s = *rt->CreateStream(0);
      for (int i = 0; i < 2000; ++i) {
        absl::StatusOr<AllocInfo> a = rt->MallocFromPoolAsync(256 * (1 + i % 7), pool, s);
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE(rt->FreeAsync(a->ptr, s).ok());
      }
      ASSERT_TRUE(rt->StreamSynchronize(s).ok());
      ASSERT_TRUE(rt->DestroyStream(s).ok());
    });
  }
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<PoolSnapshot> snap = rt->Snapshot(pool);
    ASSERT_TRUE(snap.ok());
    for (const SnapshotSegment& seg : snap->segments) {
      uint64_t at = seg.address;
      for (const SnapshotBlock& b : seg.blocks) {
        EXPECT_EQ(b.address, at);
        at += b.size;
      }
      EXPECT_EQ(at, seg.address + seg.size);
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(rt->CheckPoolInvariants(pool).ok());
}

TEST(LiveAllocations, PoolAndSynchronousAllocationsUntilFreed) {
  std::unique_ptr<Runtime> rt = MakeRuntime();
  const PoolId pool = MakePool(*rt);
  const StreamId s = *rt->CreateStream(0);
  void* a = Alloc(*rt, 1000, pool, s);
  void* b = Alloc(*rt, 5 * kMiB, pool, s);
  absl::StatusOr<void*> dev = rt->Malloc(12345, 0);
  absl::StatusOr<void*> host = rt->MallocHost(100);
  ASSERT_TRUE(dev.ok() && host.ok());

  absl::StatusOr<std::vector<LiveAllocation>> live = rt->LiveAllocations();
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 4u);
  std::set<void*> ptrs;
  for (const LiveAllocation& l : *live) ptrs.insert(l.ptr);
  EXPECT_EQ(ptrs, (std::set<void*>{a, b, *dev, *host}));
  for (const LiveAllocation& l : *live) {
    if (l.ptr == a || l.ptr == b) {
      EXPECT_EQ(l.pool, pool);
      EXPECT_EQ(l.stream.value, s.value);
      EXPECT_EQ(l.device, 0);
      EXPECT_GT(l.seq, 0u);
      EXPECT_EQ(l.size, l.ptr == a ? 1000u : 5 * kMiB);
      EXPECT_GE(l.block_size, l.size);
    } else {
      EXPECT_EQ(l.pool.value, 0u);
      EXPECT_EQ(l.stream.value, 0u);
      EXPECT_EQ(l.device, l.ptr == *host ? -1 : 0);
      EXPECT_EQ(l.size, l.ptr == *host ? 100u : 12345u);
    }
  }
  // Sequence numbers follow the stream's order.
  const LiveAllocation& first = (*live)[0].ptr == a ? (*live)[0] : (*live)[1];
  const LiveAllocation& second = (*live)[0].ptr == a ? (*live)[1] : (*live)[0];
  EXPECT_LT(first.seq, second.seq);

  // A free, even one still pending, ends the allocation; a destroyed pool's
  // allocations stay listed under its handle until freed.
  ASSERT_TRUE(rt->FreeAsync(a, s).ok());
  ASSERT_TRUE(rt->Free(*dev).ok());
  ASSERT_TRUE(rt->FreeHost(*host).ok());
  ASSERT_TRUE(rt->DestroyPool(pool).ok());
  live = rt->LiveAllocations();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].ptr, b);
  EXPECT_EQ((*live)[0].pool, pool);
  ASSERT_TRUE(rt->FreeAsync(b, s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  live = rt->LiveAllocations();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
}

TEST(LiveAllocations, DestroyedStreamReadsAsNone) {
  std::unique_ptr<Runtime> rt = MakeRuntime();
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> a = rt->MallocAsync(4096, s);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(rt->DestroyStream(s).ok());
  absl::StatusOr<std::vector<LiveAllocation>> live = rt->LiveAllocations();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].stream.value, 0u);
  EXPECT_NE((*live)[0].pool.value, 0u);
}

TEST(LeakCheck, ReportListsWhatWasNeverFreed) {
  RuntimeConfig cfg;
  cfg.leak_check = LeakCheck::kReport;
  std::unique_ptr<Runtime> rt = MakeRuntime(cfg);
  const StreamId s = *rt->CreateStream(0);
  ASSERT_TRUE(rt->MallocAsync(777, s).ok());
  ASSERT_TRUE(rt->Malloc(4096, 0).ok());
  absl::StatusOr<AllocInfo> freed = rt->MallocAsync(888, s);
  ASSERT_TRUE(freed.ok());
  ASSERT_TRUE(rt->FreeAsync(freed->ptr, s).ok());
  testing::internal::CaptureStderr();
  rt.reset();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("2 live allocations"));
  EXPECT_THAT(err, HasSubstr("size 777"));
  EXPECT_THAT(err, HasSubstr("size 4096"));
  EXPECT_THAT(err, HasSubstr("Malloc"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("size 888")));
}

TEST(LeakCheck, NothingPrintedWhenEverythingWasFreed) {
  RuntimeConfig cfg;
  cfg.leak_check = LeakCheck::kFail;
  std::unique_ptr<Runtime> rt = MakeRuntime(cfg);
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> a = rt->MallocAsync(777, s);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(rt->FreeAsync(a->ptr, s).ok());
  testing::internal::CaptureStderr();
  rt.reset();  // would end the process if anything were live
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(LeakCheckDeathTest, FailEndsTheProcessWithStatusOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        RuntimeConfig cfg;
        cfg.leak_check = LeakCheck::kFail;
        std::unique_ptr<Runtime> rt = MakeRuntime(cfg);
        const StreamId s = *rt->CreateStream(0);
        (void)rt->MallocAsync(4242, s);
        rt.reset();
        std::exit(0);
      },
      testing::ExitedWithCode(1), "1 live allocation.*size 4242");
}

TEST(LeakCheckDeathTest, EnvironmentVariableAppliesToEveryRuntime) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_LEAK_CHECK", "1", 1);
        std::unique_ptr<Runtime> rt = MakeRuntime();
        (void)rt->Malloc(4096, 0);
        rt.reset();
        std::exit(0);
      },
      testing::ExitedWithCode(1), "live allocation");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_LEAK_CHECK", "0", 1);
        RuntimeConfig cfg;
        cfg.leak_check = LeakCheck::kFail;
        std::unique_ptr<Runtime> rt = MakeRuntime(cfg);
        (void)rt->Malloc(4096, 0);
        rt.reset();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

// ------------------------------------------------------------------ C API

TEST(SnapshotCApi, TwoCallsAndCapacities) {
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  spStream_t s = nullptr;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  spMemPool_t pool = nullptr;
  ASSERT_EQ(spDeviceGetDefaultMemPool(&pool, rt, 0), spSuccess);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(spMallocAsync(&a, 3 * kMiB, s), spSuccess);
  ASSERT_EQ(spMallocAsync(&b, 2 * kMiB, s), spSuccess);
  ASSERT_EQ(spFreeAsync(b, s), spSuccess);

  size_t nseg = 99, nblk = 99;
  ASSERT_EQ(spMemPoolSnapshot(pool, nullptr, 0, &nseg, nullptr, 0, &nblk), spSuccess);
  ASSERT_GE(nseg, 1u);
  ASSERT_GE(nblk, 2u);
  std::vector<spMemPoolSnapshotSegment> segs(nseg);
  std::vector<spMemPoolSnapshotBlock> blks(nblk);
  // One array too small: the counts, and nothing copied.
  std::vector<spMemPoolSnapshotBlock> few(nblk - 1);
  segs[0].blockCount = 12345;
  size_t n1 = 0, n2 = 0;
  ASSERT_EQ(spMemPoolSnapshot(pool, segs.data(), segs.size(), &n1, few.data(), few.size(), &n2),
            spSuccess);
  EXPECT_EQ(n1, nseg);
  EXPECT_EQ(n2, nblk);
  EXPECT_EQ(segs[0].blockCount, 12345u);

  ASSERT_EQ(spMemPoolSnapshot(pool, segs.data(), segs.size(), &n1, blks.data(), blks.size(), &n2),
            spSuccess);
  ASSERT_EQ(n1, nseg);
  ASSERT_EQ(n2, nblk);
  size_t tiled = 0;
  bool saw_live = false, saw_pending = false;
  for (const spMemPoolSnapshotSegment& seg : segs) {
    EXPECT_EQ(seg.firstBlock, tiled);
    uintptr_t at = reinterpret_cast<uintptr_t>(seg.address);
    for (size_t i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; ++i) {
      const spMemPoolSnapshotBlock& blk = blks[i];
      EXPECT_EQ(reinterpret_cast<uintptr_t>(blk.address), at);
      at += blk.size;
      if (blk.address == a) {
        saw_live = true;
        EXPECT_EQ(blk.state, spBlockStateLive);
        EXPECT_EQ(blk.requested, 3 * kMiB);
        EXPECT_EQ(blk.stream, s);
        EXPECT_GT(blk.allocSeq, 0u);
      }
      if (blk.address == b) {
        saw_pending = true;
        EXPECT_EQ(blk.state, spBlockStatePending);
        EXPECT_EQ(blk.stream, s);
        EXPECT_GT(blk.freePoint, 0u);
      }
    }
    EXPECT_EQ(at, reinterpret_cast<uintptr_t>(seg.address) + seg.size);
    tiled += seg.blockCount;
  }
  EXPECT_EQ(tiled, nblk);
  EXPECT_TRUE(saw_live && saw_pending);

  // Bad arguments change nothing and say so.
  EXPECT_EQ(spMemPoolSnapshot(pool, nullptr, 0, nullptr, nullptr, 0, &n2), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSnapshot(pool, nullptr, 0, &n1, nullptr, 0, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSnapshot(pool, nullptr, 1, &n1, nullptr, 0, &n2), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSnapshot(pool, nullptr, 0, &n1, nullptr, 1, &n2), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSnapshot(nullptr, nullptr, 0, &n1, nullptr, 0, &n2), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSnapshot(reinterpret_cast<spMemPool_t>(s), nullptr, 0, &n1, nullptr, 0, &n2),
            spErrorInvalidResourceHandle);

  // Live allocations: up to the capacity, the count in all.
  size_t count = 0;
  ASSERT_EQ(spRuntimeGetLiveAllocations(rt, nullptr, 0, &count), spSuccess);
  EXPECT_EQ(count, 1u);
  spLiveAllocation live[2] = {};
  ASSERT_EQ(spRuntimeGetLiveAllocations(rt, live, 2, &count), spSuccess);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(live[0].ptr, a);
  EXPECT_EQ(live[0].size, 3 * kMiB);
  EXPECT_EQ(live[0].stream, s);
  EXPECT_EQ(live[0].pool, pool);
  EXPECT_EQ(live[0].device, 0);
  EXPECT_EQ(live[1].ptr, nullptr);
  EXPECT_EQ(spRuntimeGetLiveAllocations(rt, nullptr, 1, &count), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeGetLiveAllocations(rt, live, 2, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeGetLiveAllocations(nullptr, live, 2, &count), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeGetLiveAllocations(reinterpret_cast<spRuntime_t>(s), live, 2, &count),
            spErrorInvalidResourceHandle);

  ASSERT_EQ(spFreeAsync(a, s), spSuccess);
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

TEST(SnapshotCApi, LeakCheckConfigIsValidated) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  EXPECT_EQ(cfg.leakCheck, spLeakCheckOff);
  cfg.leakCheck = static_cast<spLeakCheck>(3);
  spRuntime_t rt = nullptr;
  EXPECT_EQ(spRuntimeCreate(&rt, &cfg), spErrorInvalidValue);
  EXPECT_EQ(rt, nullptr);
  cfg.leakCheck = spLeakCheckReport;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  spStream_t s = nullptr;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  void* p = nullptr;
  ASSERT_EQ(spMallocAsync(&p, 321, s), spSuccess);
  testing::internal::CaptureStderr();
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("size 321"));
}

}  // namespace
}  // namespace streampool
