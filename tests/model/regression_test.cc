// Frozen instruction-stream programs for the reference model
// (tests/model/program.h), in their text form, plus the tools around them:
// the parser, the minimiser and the executor's well-formedness rules.
//
// The frozen programs are hand-written ones that pin decisions worth pinning
// (rule 5's inserted wait, legacy-stream ordering, the release rule's skip,
// expandable growth, promotion on observation) and run them through the full
// model check. A program whose expectation does not depend on how the pool
// grows runs under both growth modes. A program that a future property
// failure minimises to belongs here too, as it printed.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "tests/model/program.h"

namespace streampool::model {
namespace {

constexpr int kFresh = static_cast<int>(ReuseRule::kFresh);
constexpr int kSameStream = static_cast<int>(ReuseRule::kSameStream);
constexpr int kEventDependency = static_cast<int>(ReuseRule::kEventDependency);
constexpr int kInternalDependency = static_cast<int>(ReuseRule::kInternalDependency);

Program Parse(const std::string& text) {
  absl::StatusOr<Program> p = ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Program{};
}

// The program with every pool growing `growth`.
Program WithGrowth(Program p, PoolGrowth growth) {
  for (PoolDecl& d : p.pools) d.props.growth = growth;
  return p;
}

constexpr PoolGrowth kBothGrowths[] = {PoolGrowth::kChunked, PoolGrowth::kExpandable};

std::string Name(PoolGrowth g) { return g == PoolGrowth::kChunked ? "chunked" : "expandable"; }

// Rule 5: a stream that can neither grow the pool nor prove the other
// stream's free takes the block after a wait the pool inserts. The model
// predicts the block and the waited point, and checks the clocks and virtual
// time: the kernel after the allocation starts when the free completes
// (1000 ns), not at 0. The same in both growth modes: the pool's only chunk
// or its reservation's only granule.
TEST(FrozenProgram, InternalDependencyWaitsForTheFree) {
  const Program p = Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=2097152 follow=1 opportunistic=0 internal=1 threshold=max
stream s0 nonblocking device=0
stream s1 nonblocking device=0
events 1
alloc a0 p0 s0 2097152        # fresh: the pool's only chunk (or granule)
kernel s0 1000 w:a0+0+4096
free a0 s0                    # PENDING(s0, op 3), complete at 1000 ns
alloc a1 p0 s1 2097152        # no growth (maxSize), no order, opportunistic off: rule 5
kernel s1 10 r:a1+0+256       # 1000..1010 ns
query-stream s1               # host time 0: not ready
sync-stream s1                # host time 1010
)");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(p, g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.skipped, 0u);
    EXPECT_EQ(r.coverage.by_rule[kFresh], 1u);
    EXPECT_EQ(r.coverage.by_rule[kInternalDependency], 1u);
  }
}

// The legacy stream's op is ordered after all prior work of the blocking
// streams of its device, so it may take a blocking stream's pending free by
// rule 2; a non-blocking stream may not, and grows the pool instead (a new
// chunk, or the next granule of the reservation).
TEST(FrozenProgram, LegacyStreamFollowsBlockingStreams) {
  const Program p = Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=0 internal=0 threshold=max
stream s0 legacy device=0
stream s1 blocking device=0
stream s2 nonblocking device=0
events 1
alloc a0 p0 s1 2097152        # fresh: one chunk (granule)
kernel s1 500 w:a0+0+1024
free a0 s1                    # PENDING(s1, op 3), complete at 500 ns
alloc a1 p0 s2 2097152        # non-blocking: not ordered after it; grows (fresh)
alloc a2 p0 s0 2097152        # legacy: ordered after it; event-dependency
kernel s0 10 w:a2+0+64        # 500..510 ns
kernel s1 10                  # a blocking stream now follows the legacy stream: 510..520 ns
sync-device 0
)");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(p, g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.by_rule[kFresh], 2u);
    EXPECT_EQ(r.coverage.by_rule[kEventDependency], 1u);
  }
}

// The release rule at a sync, threshold 3 MiB, chunks of 4 and 2 MiB wholly
// free: largest first, releasing the 4 MiB chunk would leave 2 MiB < 3 MiB,
// so it is skipped; releasing the 2 MiB chunk leaves 4 MiB.
// Changed: growth=chunked is now explicit. The program pins chunks, and a
// pool without the setting is expandable now (the default), where the same
// frees become one READY range released granule by granule
// (ReleaseRuleStopsAtTheBoundGranuleByGranule below). The old expectation
// (exact_releases == 3) named a judge the model no longer needs: it predicts
// every release and the statistics are compared after each instruction.
TEST(FrozenProgram, ReleaseRuleSkipsAChunkThatWouldUndershoot) {
  const ExecuteResult r = Execute(Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=3145728 growth=chunked
stream s0 blocking device=0
events 0
alloc a0 p0 s0 4194304        # a chunk of 4 MiB
alloc a1 p0 s0 2097152        # a chunk of 2 MiB
free a0 s0
free a1 s0
sync-stream s0                # reserved 6 MiB -> 4 MiB
alloc a2 p0 s0 4194304        # the kept chunk: after-sync reuse, no growth
free a2 s0
trim p0 0                     # trim observes no completion: a2's free is pending
sync-stream s0                # now it is complete: 4 MiB > 3 MiB, but releasing it would undershoot
trim p0 0                     # the rule with bound 0 takes it
)"));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kAfterSync)], 1u);
  EXPECT_EQ(r.coverage.releases, 2u);
  ASSERT_EQ(r.stats.size(), 1u);
  EXPECT_EQ(r.stats[0].upstream_maps, 2u);
  EXPECT_EQ(r.stats[0].upstream_unmaps, 2u);
  EXPECT_EQ(r.stats[0].reserved_bytes, 0u);
}

// Same-stream reuse needs no sync, and several pools of different variants
// (DVPP's 128-B rule, pinned host's 64-B rule) keep separate books.
TEST(FrozenProgram, VariantsReuseOnTheirOwnStream) {
  const Program p = Parse(R"(
config devices=2 capacity=16777216 backing=host api-ns=7 copy-bytes-per-us=1000
pool p0 dvpp device=1 max=4194304 follow=1 opportunistic=1 internal=1 threshold=0
pool p1 pinned device=0 max=2097152 follow=0 opportunistic=0 internal=0 threshold=0
stream s0 blocking device=1
stream s1 legacy device=1
events 2
alloc a0 p0 s0 100            # DVPP: ALIGN_UP(ALIGN_UP(100, 32) + 32, 128) = 256 bytes
alloc a1 p1 s0 100            # pinned: 128 bytes
fill s0 a0+0+100              # 100 ns at 1000 bytes/us
free a0 s0
free a1 s0
alloc a2 p0 s0 90             # 128 bytes: from the pending block, same stream
alloc a3 p1 s0 65             # 128 bytes again: same stream
record e0 s0
wait s1 e0
kernel s1 5 r:a2+0+90 w:a3+0+65
free a2 s1
free a3 s1
sync-event e0
sync-stream s1                # threshold 0: both pools give back everything
)");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(p, g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.by_rule[kSameStream], 2u);
    ASSERT_EQ(r.stats.size(), 2u);
    EXPECT_EQ(r.stats[0].reserved_bytes, 0u);
    EXPECT_EQ(r.stats[1].reserved_bytes, 0u);
  }
}

// Expandable growth (docs/design.md "Block lifecycle"): a growth maps only what
// the chosen range lacks, one upstream map per run of granules; blocks span
// ranges that different growths mapped; the release rule unmaps whole
// granules of READY blocks from the top down and never below the bound; a
// READY range whose granules were released is mapped again when reused, and
// its reuse counts as after-sync (its bytes were handed out before).
TEST(FrozenProgram, ExpandableGrowthMapsTheShortfallAndReleasesGranules) {
  const ExecuteResult r = Execute(Parse(R"(
config devices=1 capacity=67108864 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=0 opportunistic=0 internal=0 threshold=max growth=expandable
stream s0 nonblocking device=0
events 0
alloc a0 p0 s0 3145728        # fresh [0, 3 MiB): one map of granules 0-1; reserved 4 MiB
alloc a1 p0 s0 1048576        # fresh [3, 4 MiB): the mapped low end of the READY rest, no map
alloc a2 p0 s0 3145728        # fresh [4, 7 MiB): maps only granules 2-3; reserved 8 MiB
free a0 s0
free a1 s0                    # one PENDING(s0) block [0, 4 MiB)
free a2 s0                    # ... [0, 7 MiB)
sync-stream s0                # READY [0, 1 GiB) with granules 0-3 mapped
alloc a3 p0 s0 7340032        # after-sync [0, 7 MiB): spans both growths, maps nothing
free a3 s0
sync-stream s0
trim p0 3145728               # bound 3 MiB: granules 3 and 2 go (one unmap); 4 MiB stay
alloc a4 p0 s0 6291456        # after-sync [0, 6 MiB): maps granule 2 again
free a4 s0
sync-stream s0
trim p0 0                     # granules 0-2 go; the pool keeps its (empty) reservation
alloc a5 p0 s0 256            # after-sync [0, 256): granule 0 again
)"));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.coverage.by_rule[kFresh], 3u);
  EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kAfterSync)], 3u);
  EXPECT_EQ(r.coverage.remapped, 2u);
  EXPECT_EQ(r.coverage.releases, 2u);
  EXPECT_EQ(r.coverage.bound_stops, 1u);
  ASSERT_EQ(r.stats.size(), 1u);
  const PoolStats& s = r.stats[0];
  EXPECT_EQ(s.upstream_maps, 4u);
  EXPECT_EQ(s.upstream_bytes_mapped, 12u << 20);  // 4 + 4 + 2 + 2 MiB
  EXPECT_EQ(s.upstream_unmaps, 2u);
  EXPECT_EQ(s.reserved_bytes, 2u << 20);
  EXPECT_EQ(s.reserved_high, 8u << 20);
}

// The never-below-the-bound rule over granules: the same frees as
// ReleaseRuleSkipsAChunkThatWouldUndershoot, in an expandable pool. Both
// growths' granules form one READY range; with threshold 3 MiB one granule
// goes and 4 MiB stay (a second would leave 2 MiB < 3 MiB).
TEST(FrozenProgram, ReleaseRuleStopsAtTheBoundGranuleByGranule) {
  const ExecuteResult r = Execute(Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=3145728 growth=expandable
stream s0 blocking device=0
events 0
alloc a0 p0 s0 4194304        # granules 0-1
alloc a1 p0 s0 2097152        # granule 2
free a0 s0
free a1 s0
sync-stream s0                # reserved 6 MiB -> 4 MiB: granule 2 goes
alloc a2 p0 s0 4194304        # after-sync from the mapped low end, no growth
free a2 s0
sync-stream s0                # 4 MiB - 3 MiB < one granule: nothing goes
trim p0 0                     # granules 0-1 go, in one unmap
)"));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kAfterSync)], 1u);
  EXPECT_EQ(r.coverage.low_end, 1u);
  ASSERT_EQ(r.stats.size(), 1u);
  EXPECT_EQ(r.stats[0].upstream_maps, 2u);
  EXPECT_EQ(r.stats[0].upstream_unmaps, 2u);
  EXPECT_EQ(r.stats[0].reserved_bytes, 0u);
}

// Promotion on observation (docs/design.md "Block lifecycle"): with the
// opportunistic switch on, an allocation that finds nothing promotes every
// free the executor reports complete (end <= host now), of any stream; the
// promoted blocks merge like any READY block, and a failed allocation keeps
// the promotions it made. Counting: a block holding observed frees counts as
// opportunistic, or same-stream when all of them were the allocating
// stream's, until the next proof (here a successful query of an unrelated
// stream), after which as after-sync.
TEST(FrozenProgram, PromotionOnObservationMergesAndCounts) {
  const std::string text = R"(
config devices=1 capacity=16777216 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=4194304 follow=0 opportunistic=1 internal=0 threshold=max growth=expandable
stream s0 nonblocking device=0
stream s1 nonblocking device=0
stream s2 nonblocking device=0
events 0
alloc a0 p0 s0 1048576        # fresh [0, 1 MiB): maps granule 0
alloc a1 p0 s1 1048576        # fresh [1, 2 MiB)
alloc a2 p0 s2 2097152        # fresh [2, 4 MiB): maps granule 1; reserved = maxSize
kernel s0 1000 w:a0+0+4096
kernel s1 2000 w:a1+0+4096
free a0 s0                    # PENDING(s0), completes at 1000 ns
free a1 s1                    # PENDING(s1), completes at 2000 ns; two streams: no merge
alloc a3 p0 s2 2097152        # host 0: nothing observed, no growth (maxSize): fails
advance 1500
alloc a4 p0 s2 2097152        # a0's free observed: READY [0, 1 MiB), too small: fails, stays READY
advance 1000
alloc a5 p0 s2 2097152        # a1's too: [0, 1) + [1, 2) MiB merge: opportunistic at +0
kernel s2 500 w:a5+0+64       # 2500..3000 ns
free a5 s2                    # PENDING(s2), completes at 3000 ns
advance 1000
alloc a6 p0 s0 3145728        # promotes s2's free, READY [0, 2 MiB): too small; fails
alloc a7 p0 s2 1048576        # READY holding only s2's observed frees: same-stream at +0
query-stream s1               # succeeds: a proof (of s1's work, not of s2's free)
alloc a8 p0 s0 1048576        # the rest [1, 2 MiB): observation's count ended: after-sync
)";
  const ExecuteResult r = Execute(Parse(text));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.coverage.by_rule[kFresh], 3u);
  EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kOpportunistic)], 1u);
  EXPECT_EQ(r.coverage.by_rule[kSameStream], 1u);
  EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kAfterSync)], 1u);
  EXPECT_EQ(r.coverage.failed, 3u);
  EXPECT_EQ(r.coverage.observed, 3u);         // a4, a5, a6
  EXPECT_EQ(r.coverage.observed_failed, 2u);  // a4, a6
  ASSERT_EQ(r.stats.size(), 1u);
  EXPECT_EQ(r.stats[0].reserved_bytes, 4u << 20);  // never grew past maxSize

  // With the switch off nothing is promoted without a proof: a5, a6 and a7
  // fail too (a5's kernel and free are skipped), and a8 takes s0's own
  // pending free a0 (same-stream), which beats a1's block, READY since the
  // query, at the lower address.
  Program strict = Parse(text);
  strict.pools[0].props.opportunistic = false;
  const ExecuteResult off = Execute(strict);
  EXPECT_TRUE(off.ok) << off.failure;
  EXPECT_EQ(off.coverage.observed, 0u);
  EXPECT_EQ(off.coverage.by_rule[static_cast<int>(ReuseRule::kOpportunistic)], 0u);
  EXPECT_EQ(off.coverage.failed, 5u);
  EXPECT_EQ(off.coverage.by_rule[kSameStream], 1u);
  EXPECT_EQ(off.coverage.by_rule[static_cast<int>(ReuseRule::kAfterSync)], 0u);
}

// Changed rule: a PENDING block no longer absorbs its READY neighbours (it
// used to, so the never-used rest of a chunk became PENDING(s0) with a0's
// free). The rest stays READY, so another stream with no reuse policy takes
// it at once instead of failing; in both growth modes.
TEST(FrozenProgram, PendingBlocksLeaveReadyNeighboursReady) {
  const Program p = Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=2097152 follow=0 opportunistic=0 internal=0 threshold=max
stream s0 nonblocking device=0
stream s1 nonblocking device=0
events 0
alloc a0 p0 s0 1048576        # fresh [0, 1 MiB) of the only chunk (granule)
free a0 s0                    # PENDING(s0) [0, 1 MiB); [1, 2 MiB) stays READY
alloc a1 p0 s1 1048576        # fresh [1, 2 MiB): once a failure (maxSize, no policy)
alloc a2 p0 s1 1048576        # s0's free is still pending: fails
)");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(p, g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.by_rule[kFresh], 2u);
    EXPECT_EQ(r.coverage.failed, 1u);
  }
}

// A destroyed stream's slot (its index in every clock) is handed back at a
// later CreateStream once its work is complete and no pool holds its frees;
// a pool with the opportunistic switch on first promotes the dead stream's
// frees as observed (src/ordering/ordering.h, "Slot reuse"). The model
// numbers streams as the runtime does and checks every index it hands out.
TEST(FrozenProgram, DestroyedStreamSlotsAreReused) {
  const std::string text = R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=0 opportunistic=1 internal=0 threshold=max
stream s0 nonblocking device=0
stream s1 nonblocking device=0
stream s2 nonblocking device=0
events 0
alloc a0 p0 s1 1048576        # fresh [0, 1 MiB)
kernel s1 100 w:a0+0+64
free a0 s1                    # PENDING(s1), completes at 100 ns
destroy-stream s1             # retired: its kernel still runs, its free is pending
destroy-stream s2             # retired with nothing outstanding
create-stream s2              # host 0: s2's old slot is idle and reused; s1's is not
advance 200
create-stream s1              # s1's old slot: work complete; a0's free promoted as observed; reused
alloc a1 p0 s0 1048576        # READY holding a dead stream's observed free: opportunistic at +0
)";
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(Parse(text), g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.slots_reused, 2u);
    EXPECT_EQ(r.coverage.slot_promotions, 1u);
    EXPECT_EQ(r.coverage.by_rule[static_cast<int>(ReuseRule::kOpportunistic)], 1u);

    // In strict mode the free stays pending: s1's slot stays retired (the
    // new s1 gets a new one) and a1 takes fresh memory beside the free.
    Program strict = WithGrowth(Parse(text), g);
    strict.pools[0].props.opportunistic = false;
    const ExecuteResult off = Execute(strict);
    EXPECT_TRUE(off.ok) << off.failure;
    EXPECT_EQ(off.coverage.slots_reused, 1u);
    EXPECT_EQ(off.coverage.slot_promotions, 0u);
    EXPECT_EQ(off.coverage.by_rule[kFresh], 2u);
  }
}

// Rule 2 examines at most 32 blocks of a stream when only part of its frees
// are eligible (MemPool::kCrossStreamProbes). Here s0 has 40 pending frees
// of 256 B, kept apart by live blocks, and s1 is ordered after the first 20
// only: the model accepts any eligible block (or none) for such a stream,
// and follows the runtime's choice.
TEST(FrozenProgram, RuleTwoProbeBoundMayCutTheSearchShort) {
  std::string text = R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=0 internal=0 threshold=max
stream s0 nonblocking device=0
stream s1 nonblocking device=0
events 1
)";
  for (int i = 0; i < 80; ++i) absl::StrAppend(&text, "alloc a", i, " p0 s0 256\n");
  // The rest of the first 2 MiB stays live, so rule 1 finds nothing READY.
  absl::StrAppend(&text, "alloc a99 p0 s0 ", (2 << 20) - 80 * 256, "\n");
  for (int i = 0; i < 80; i += 2) {
    absl::StrAppend(&text, "free a", i, " s0\n");
    if (i == 38) absl::StrAppend(&text, "record e0 s0\n");
  }
  absl::StrAppend(&text, "wait s1 e0\nalloc a80 p0 s1 256\nalloc a81 p0 s1 256\n");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(Parse(text), g));
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.probe_limited, 2u);
  }
}

// Instructions that would break the stream-order contract are skipped, the
// same way for the runtime and the model, so a minimised program stays
// meaningful: here a free on s1 that nothing orders after s0's access, and an
// access to an allocation already freed.
TEST(FrozenProgram, ContractBreakingInstructionsAreSkipped) {
  const ExecuteResult r = Execute(Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=0
stream s0 nonblocking device=0
stream s1 nonblocking device=0
events 1
alloc a0 p0 s0 4096
kernel s0 100 w:a0+0+4096
free a0 s1                    # skipped: not ordered after the kernel
record e0 s0
wait s1 e0
free a0 s1                    # now it is
kernel s0 1 r:a0+0+16         # the access is dropped (a0 is freed), the kernel runs
free a7 s0                    # skipped: a7 was never allocated
)"));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.skipped, 2u);
}

// A kernel touches another device's pool only as far as the pool grants that
// device (spMemPoolSetAccess); the executor drops the rest of its accesses,
// so the checker has nothing to report. The resident device's read-write
// access cannot be lowered.
TEST(FrozenProgram, AccessFollowsThePoolsGrants) {
  const ExecuteResult r = Execute(Parse(R"(
config devices=2 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=0
stream s0 blocking device=0
stream s1 blocking device=1
events 1
alloc a0 p0 s0 4096
record e0 s0
wait s1 e0
kernel s1 10 r:a0+0+64                # dropped: device 1 has no access yet
grant p0 1 r
kernel s1 10 r:a0+0+64 w:a0+64+64     # the read stays, the write is dropped
grant p0 1 rw
kernel s1 10 w:a0+64+64
grant p0 0 r                          # refused: the resident device keeps read-write
record e0 s1
wait s0 e0
free a0 s0
sync-device 0
)"));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.skipped, 0u);
}

// ------------------------------------------------------------------ tools

TEST(ProgramText, GeneratedProgramsRoundTrip) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    GeneratorOptions o;
    o.seed = seed;
    o.length = 300;
    o.policy_mask = static_cast<int>(seed % 8);
    o.threshold_max = seed % 2 == 1;
    o.growth = static_cast<GrowthChoice>(seed % 3);
    const Program p = Generate(o);
    const std::string text = ToString(p);
    absl::StatusOr<Program> back = ParseProgram(text);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ToString(*back), text) << "seed " << seed;
    EXPECT_EQ(back->code.size(), 300u);
  }
}

TEST(ProgramText, GenerationIsDeterministic) {
  GeneratorOptions o;
  o.seed = 42;
  o.length = 500;
  EXPECT_EQ(ToString(Generate(o)), ToString(Generate(o)));
  GeneratorOptions other = o;
  other.seed = 43;
  EXPECT_NE(ToString(Generate(o)), ToString(Generate(other)));
}

TEST(ProgramText, MalformedLinesAreRejectedWithTheirLine) {
  const std::string header =
      "config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1\n"
      "pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=0\n"
      "stream s0 blocking device=0\n"
      "events 1\n";
  const char* bad[] = {
      "alloc a0 p1 s0 64",      // undeclared pool
      "alloc a0 p0 s3 64",      // undeclared stream
      "free a0",                // missing stream
      "kernel s0 10 x:a0+0+1",  // bad access mode
      "set p0 colour 1",        // unknown attribute
      "wait s0 e1",             // undeclared event
      "launch s0",              // unknown instruction
  };
  for (const char* line : bad) {
    absl::StatusOr<Program> p = ParseProgram(header + line + "\n");
    ASSERT_FALSE(p.ok()) << line;
    EXPECT_NE(p.status().message().find("line 5"), std::string::npos) << p.status();
  }
  EXPECT_FALSE(ParseProgram("alloc a0 p0 s0 1\n").ok());  // no config line
  EXPECT_FALSE(
      ParseProgram("config devices=1 capacity=1 backing=address api-ns=0 copy-bytes-per-us=1\n"
                   "stream s0 legacy device=0\nstream s1 legacy device=0\n")
          .ok());  // two legacy streams on one device
}

// A pool line may leave growth= out (default, as programs frozen before
// growth modes existed do); anything else must name a mode.
TEST(ProgramText, GrowthIsOptionalAndChecked) {
  const std::string config =
      "config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1\n";
  const std::string pool =
      "pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=0";
  absl::StatusOr<Program> p = ParseProgram(config + pool + "\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->pools[0].props.growth, PoolGrowth::kDefault);
  EXPECT_NE(ToString(*p).find("growth=default"), std::string::npos);
  p = ParseProgram(config + pool + " growth=chunked\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->pools[0].props.growth, PoolGrowth::kChunked);
  p = ParseProgram(config + pool + " growth=expandable\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->pools[0].props.growth, PoolGrowth::kExpandable);
  EXPECT_FALSE(ParseProgram(config + pool + " growth=paged\n").ok());
  EXPECT_FALSE(ParseProgram(config + pool + " colour=red\n").ok());
}

// The minimiser against a stand-in failure ("an allocation of more than
// 4 MiB on a stream that is later synchronized"): it must keep exactly the
// two instructions that matter and drop every declaration they do not name.
TEST(Minimiser, KeepsOnlyWhatTheFailureNeeds) {
  GeneratorOptions o;
  o.seed = 7;
  o.length = 400;
  Program p = Generate(o);
  p.streams.push_back(StreamDecl{0, StreamKind::kNonBlocking});
  const int s = static_cast<int>(p.streams.size()) - 1;
  p.code.insert(p.code.begin() + 100, AllocOp{9000, 0, s, 5 << 20});
  p.code.insert(p.code.begin() + 300, SyncStreamOp{Slot(s)});
  const auto fails = [](const Program& q) {
    ExecuteResult r;
    for (size_t i = 0; i < q.code.size(); ++i) {
      const auto* a = std::get_if<AllocOp>(&q.code[i]);
      if (a == nullptr || a->size <= (4u << 20)) continue;
      for (size_t j = i + 1; j < q.code.size(); ++j) {
        const auto* y = std::get_if<SyncStreamOp>(&q.code[j]);
        if (y != nullptr && y->stream == Slot(a->stream)) {
          r.ok = false;
          r.failed_at = j;
          r.failure = "planted: big allocation synchronized";
          return r;
        }
      }
    }
    return r;
  };
  const ExecuteResult failure = fails(p);
  ASSERT_FALSE(failure.ok);
  const Program small = Minimise(p, failure, 3000, fails);
  EXPECT_EQ(small.code.size(), 2u) << ToString(small);
  EXPECT_EQ(small.streams.size(), 1u) << ToString(small);
  EXPECT_EQ(small.pools.size(), 1u) << ToString(small);
  EXPECT_EQ(small.events, 0) << ToString(small);
  EXPECT_FALSE(fails(small).ok);
  ASSERT_TRUE(std::holds_alternative<AllocOp>(small.code[0]));
  EXPECT_EQ(std::get<AllocOp>(small.code[0]).id, 0);  // renumbered
}

// ----------------------------------------------------------------- finding

// RuntimeConfig::api_call_ns: "Failed calls and pure getters cost nothing."
// Looking up the legacy stream is a pure getter (spStreamGetLegacy), yet it
// is charged like a call that enqueues work. The executor starts the model's
// clock after these lookups, so only this test sees it.
TEST(Finding, LegacyStreamLookupCostsNoHostTime) {
  RuntimeConfig cfg;
  cfg.api_call_ns = 10;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok()) << rt.status();
  const uint64_t before = (*rt)->HostNow();
  ASSERT_TRUE((*rt)->LegacyStream(0).ok());
  EXPECT_EQ((*rt)->HostNow(), before);
}

// docs/design.md "Statistics": reuseAfterSync is "a READY block holding bytes
// handed out before"; bytes never handed out are fresh memory. The pool once
// marked whole blocks dirty: a0's free absorbed the never-used rest of the
// chunk into one pending block flagged dirty, a1 took a0's bytes back, and
// the rest kept the flag, so a2 (none of whose bytes was ever handed out) was
// counted reuseAfterSync instead of fresh. Fixed by the handed-out mark.
// Changed since: a pending block no longer absorbs READY neighbours at all,
// so a0's free stays [0, 256) and the rest stays READY; a1 still takes a0's
// bytes (its own pending free is the best fit) and a2 is still fresh. Kept
// for both growth modes (expandable: the rest spans unmapped granules, and
// a2 comes from its mapped low end).
TEST(Finding, AfterSyncOfBytesNeverHandedOut) {
  ExecuteOptions strict;
  strict.strict_fresh = true;
  const Program p = Parse(R"(
config devices=1 capacity=1073741824 backing=address api-ns=0 copy-bytes-per-us=1000000
pool p0 device device=0 max=0 follow=1 opportunistic=1 internal=1 threshold=max
stream s0 blocking device=0
events 0
alloc a0 p0 s0 256            # fresh: [0, 256) of a new 2 MiB chunk (granule)
free a0 s0                    # PENDING(s0) [0, 256); [256, ...) stays READY
alloc a1 p0 s0 256            # same stream: [0, 256) again
sync-stream s0
alloc a2 p0 s0 1048576        # [256, 1 MiB + 256): never handed out, so fresh
)");
  for (PoolGrowth g : kBothGrowths) {
    SCOPED_TRACE(Name(g));
    const ExecuteResult r = Execute(WithGrowth(p, g), strict);
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.coverage.by_rule[kFresh], 2u);
    EXPECT_EQ(r.coverage.by_rule[kSameStream], 1u);
  }
}

}  // namespace
}  // namespace streampool::model
