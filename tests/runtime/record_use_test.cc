// Multi-stream frees (Runtime::RecordUse, spMemRecordUse): a block another
// stream used is freed on one stream without that stream waiting for the
// other; the pool records the other stream's point at the free and reuses the
// bytes on no stream before both are complete. The checker agrees: the free
// covers the other stream's accesses, and a reuse must be ordered after both.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/snapshot.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kMs = 1000000;

struct Fixture {
  std::unique_ptr<Runtime> rt;
  PoolId pool;
  StreamId s1, s2, s3;
};

Fixture Make(bool checker = true) {
  RuntimeConfig cfg;
  cfg.check_stream_order = checker;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  Fixture f;
  f.rt = *std::move(rt);
  // Turned on here, it collects reports even where the suite makes them fatal.
  if (checker) f.rt->EnableChecker(true);
  PoolProps props;
  props.release_threshold = UINT64_MAX;
  f.pool = *f.rt->CreatePool(props);
  f.s1 = *f.rt->CreateStream(0);
  f.s2 = *f.rt->CreateStream(0);
  f.s3 = *f.rt->CreateStream(0);
  return f;
}

AllocInfo Alloc(Fixture& f, uint64_t size, StreamId s) {
  absl::StatusOr<AllocInfo> a = f.rt->MallocFromPoolAsync(size, f.pool, s);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : AllocInfo{};
}

std::optional<BlockState> StateAt(Fixture& f, const void* p) {
  absl::StatusOr<PoolSnapshot> snap = f.rt->Snapshot(f.pool);
  EXPECT_TRUE(snap.ok());
  for (const SnapshotSegment& seg : snap->segments) {
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.address == reinterpret_cast<uintptr_t>(p)) return b.state;
    }
  }
  return std::nullopt;
}

// `to` waits for what `from` enqueued so far (an event).
void Follow(Fixture& f, StreamId from, StreamId to) {
  EventId e = *f.rt->CreateEvent();
  EXPECT_TRUE(f.rt->RecordEvent(e, from).ok());
  EXPECT_TRUE(f.rt->StreamWaitEvent(to, e).ok());
  EXPECT_TRUE(f.rt->DestroyEvent(e).ok());
}

// s1 allocates, s2 reads it for 1 ms, s1 frees it.
void* UsedOnS2(Fixture& f, bool record) {
  void* a = Alloc(f, 2 * kMiB, f.s1).ptr;
  EXPECT_TRUE(f.rt->LaunchKernel(f.s1, 1000, {{a, 2 * kMiB, true}}).ok());
  // s2 starts after s1's write, then reads on its own.
  Follow(f, f.s1, f.s2);
  EXPECT_TRUE(f.rt->LaunchKernel(f.s2, kMs, {{a, 2 * kMiB, false}}).ok());
  if (record) {
    EXPECT_TRUE(f.rt->RecordUse(a, f.s2).ok());
  }
  EXPECT_TRUE(f.rt->FreeAsync(a, f.s1).ok());
  return a;
}

TEST(RecordUse, WithoutItTheCheckerReportsTheFreeAsUseAfterFree) {
  Fixture f = Make();
  UsedOnS2(f, /*record=*/false);
  std::vector<CheckReport> reports = f.rt->CheckReports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].kind, CheckKind::kUseAfterFree);
  f.rt->ClearCheckReports();
}

TEST(RecordUse, TheFreeCoversTheOtherStreamAndNothingReusesItEarly) {
  Fixture f = Make();
  void* a = UsedOnS2(f, /*record=*/true);
  EXPECT_TRUE(f.rt->CheckReports().empty());
  EXPECT_EQ(StateAt(f, a), BlockState::kAwaitingUses);
  // Not even the freeing stream reuses it while s2 may still read it.
  const AllocInfo b = Alloc(f, 2 * kMiB, f.s1);
  EXPECT_NE(b.ptr, a);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  const AllocInfo c = Alloc(f, 2 * kMiB, f.s3);
  EXPECT_NE(c.ptr, a);
  PoolStats stats = *f.rt->GetPoolStats(f.pool);
  EXPECT_EQ(stats.free_count, 1u);
  EXPECT_EQ(stats.used_bytes, 4 * kMiB);
  absl::StatusOr<std::vector<LiveAllocation>> live = f.rt->LiveAllocations();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->size(), 2u);
  // A proof of both completes it: READY, and reused.
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kReady);
  const AllocInfo d = Alloc(f, 2 * kMiB, f.s3);
  EXPECT_EQ(d.ptr, a);
  EXPECT_EQ(d.rule, ReuseRule::kAfterSync);
  EXPECT_TRUE(f.rt->CheckReports().empty());
  EXPECT_TRUE(f.rt->CheckPoolInvariants(f.pool).ok());
}

TEST(RecordUse, TheFreeingStreamWaitsForNothing) {
  Fixture f = Make();
  UsedOnS2(f, /*record=*/true);
  // s1's next kernel starts when s1 is free, not after s2's 1 ms read.
  f.rt->RecordTimeline(true);
  ASSERT_TRUE(f.rt->LaunchKernel(f.s1, 1000, {}).ok());
  std::vector<TimelineEntry> ops = f.rt->Timeline();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_LT(ops[0].start_ns, kMs / 2);
}

TEST(RecordUse, ProvingOnlyOneSideIsNotEnough) {
  Fixture f = Make();
  void* a = UsedOnS2(f, /*record=*/true);
  ASSERT_TRUE(f.rt->StreamSynchronize(f.s1).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kAwaitingUses);
  ASSERT_TRUE(f.rt->StreamSynchronize(f.s2).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kReady);
}

TEST(RecordUse, ObservedCompleteWithTheOpportunisticSwitch) {
  Fixture f = Make();
  void* a = UsedOnS2(f, /*record=*/true);
  ASSERT_TRUE(f.rt->HostAdvance(2 * kMs).ok());
  const AllocInfo b = Alloc(f, 2 * kMiB, f.s3);
  EXPECT_EQ(b.ptr, a);
  EXPECT_EQ(b.rule, ReuseRule::kOpportunistic);
  EXPECT_TRUE(f.rt->CheckReports().empty());
}

TEST(RecordUse, StrictPoolsWaitForAProof) {
  Fixture f = Make();
  ASSERT_TRUE(f.rt->SetPoolAttribute(f.pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  void* a = UsedOnS2(f, /*record=*/true);
  ASSERT_TRUE(f.rt->HostAdvance(2 * kMs).ok());
  const AllocInfo b = Alloc(f, 2 * kMiB, f.s3);
  EXPECT_NE(b.ptr, a);
  EXPECT_EQ(StateAt(f, a), BlockState::kAwaitingUses);
}

TEST(RecordUse, AUseAlreadyOrderedBeforeTheFreeCostsNothing) {
  Fixture f = Make();
  void* a = Alloc(f, 2 * kMiB, f.s1).ptr;
  Follow(f, f.s1, f.s2);
  ASSERT_TRUE(f.rt->LaunchKernel(f.s2, kMs, {{a, 2 * kMiB, false}}).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s2).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s1).ok());  // the freeing stream: nothing
  // s1 waits for s2's read itself: the free is ordered after it already.
  Follow(f, f.s2, f.s1);
  ASSERT_TRUE(f.rt->FreeAsync(a, f.s1).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kPending);
  const AllocInfo b = Alloc(f, 2 * kMiB, f.s1);
  EXPECT_EQ(b.ptr, a);
  EXPECT_EQ(b.rule, ReuseRule::kSameStream);
  EXPECT_TRUE(f.rt->CheckReports().empty());
}

TEST(RecordUse, SeveralStreams) {
  Fixture f = Make();
  void* a = Alloc(f, 2 * kMiB, f.s1).ptr;
  Follow(f, f.s1, f.s2);
  Follow(f, f.s1, f.s3);
  ASSERT_TRUE(f.rt->LaunchKernel(f.s2, kMs, {{a, 2 * kMiB, false}}).ok());
  ASSERT_TRUE(f.rt->LaunchKernel(f.s3, 2 * kMs, {{a, 2 * kMiB, false}}).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s2).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s3).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s3).ok());  // twice: once
  ASSERT_TRUE(f.rt->FreeAsync(a, f.s1).ok());
  EXPECT_TRUE(f.rt->CheckReports().empty());
  ASSERT_TRUE(f.rt->StreamSynchronize(f.s1).ok());
  ASSERT_TRUE(f.rt->StreamSynchronize(f.s2).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kAwaitingUses);
  ASSERT_TRUE(f.rt->StreamSynchronize(f.s3).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kReady);
}

TEST(RecordUse, BadArguments) {
  Fixture f = Make();
  const AllocInfo a = Alloc(f, 4096, f.s1);
  EXPECT_EQ(f.rt->RecordUse(nullptr, f.s2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.rt->RecordUse(static_cast<char*>(a.ptr) + 8, f.s2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(f.rt->RecordUse(a.ptr, StreamId{}).ok());
  void* m = *f.rt->Malloc(4096, 0);
  EXPECT_EQ(f.rt->RecordUse(m, f.s2).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(f.rt->FreeAsync(a.ptr, f.s1).ok());
  EXPECT_EQ(f.rt->RecordUse(a.ptr, f.s2).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(f.rt->Free(m).ok());

  // The C API: the same rules, as error codes.
  const AllocInfo b = Alloc(f, 4096, f.s1);
  EXPECT_EQ(spMemRecordUse(b.ptr, f.s2.c()), spSuccess);
  EXPECT_EQ(spMemRecordUse(nullptr, f.s2.c()), spErrorInvalidValue);
  EXPECT_EQ(spMemRecordUse(static_cast<char*>(b.ptr) + 1, f.s2.c()), spErrorInvalidValue);
  EXPECT_EQ(spMemRecordUse(b.ptr, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemRecordUse(b.ptr, reinterpret_cast<spStream_t>(f.pool.c())),
            spErrorInvalidResourceHandle);
  ASSERT_TRUE(f.rt->FreeAsync(b.ptr, f.s1).ok());
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  EXPECT_TRUE(f.rt->CheckPoolInvariants(f.pool).ok());
}

TEST(RecordUse, ASynchronousFreeForgetsTheUses) {
  Fixture f = Make();
  const AllocInfo a = Alloc(f, 2 * kMiB, f.s1);
  ASSERT_TRUE(f.rt->RecordUse(a.ptr, f.s2).ok());
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  ASSERT_TRUE(f.rt->Free(a.ptr).ok());
  const AllocInfo b = Alloc(f, 2 * kMiB, f.s1);
  EXPECT_EQ(b.ptr, a.ptr);
  // The block came back without the mark: its next free is an ordinary one.
  ASSERT_TRUE(f.rt->FreeAsync(b.ptr, f.s1).ok());
  EXPECT_EQ(StateAt(f, b.ptr), BlockState::kPending);
}

TEST(RecordUse, ADestroyedUsingStreamStillCounts) {
  Fixture f = Make();
  void* a = Alloc(f, 2 * kMiB, f.s1).ptr;
  Follow(f, f.s1, f.s2);
  ASSERT_TRUE(f.rt->LaunchKernel(f.s2, kMs, {{a, 2 * kMiB, false}}).ok());
  ASSERT_TRUE(f.rt->RecordUse(a, f.s2).ok());
  ASSERT_TRUE(f.rt->DestroyStream(f.s2).ok());
  ASSERT_TRUE(f.rt->FreeAsync(a, f.s1).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kAwaitingUses);
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  EXPECT_EQ(StateAt(f, a), BlockState::kReady);
  EXPECT_TRUE(f.rt->CheckReports().empty());
}

// As shipped: real threads, the fast path on, the checker off; producer
// threads mark each block used by a consumer stream and free it on their own.
TEST(RecordUse, ThreadsAndTheFastPath) {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kThreads;
  absl::StatusOr<std::unique_ptr<Runtime>> made = Runtime::Create(cfg);
  ASSERT_TRUE(made.ok());
  Runtime& rt = **made;
  const StreamId consumer = *rt.CreateStream(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&rt, consumer] {
      const StreamId s = *rt.CreateStream(0);
      for (int i = 0; i < 500; ++i) {
        absl::StatusOr<AllocInfo> a = rt.MallocAsync(512 * (1 + i % 5), s);
        ASSERT_TRUE(a.ok());
        if (i % 2 == 0) {
          ASSERT_TRUE(rt.RecordUse(a->ptr, consumer).ok());
        }
        ASSERT_TRUE(rt.FreeAsync(a->ptr, s).ok());
      }
      ASSERT_TRUE(rt.StreamSynchronize(s).ok());
      ASSERT_TRUE(rt.DestroyStream(s).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(rt.DeviceSynchronize(0).ok());
  const PoolId pool = *rt.DefaultPool(0);
  EXPECT_TRUE(rt.CheckPoolInvariants(pool).ok());
  absl::StatusOr<PoolSnapshot> snap = rt.Snapshot(pool);
  ASSERT_TRUE(snap.ok());
  for (const SnapshotSegment& seg : snap->segments) {
    for (const SnapshotBlock& b : seg.blocks) EXPECT_EQ(b.state, BlockState::kReady);
  }
}

}  // namespace
}  // namespace streampool
