// MemPool on its own (tests/pool/mem_pool_fixture.h): random operations over
// four streams, checked against a reference of each byte's last free.
#include <algorithm>
#include <iterator>
#include <random>

#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------- random, with a model

// The last free of each byte range the pool has handed out: which stream
// freed it at which position, or `now` for FreeNow (the caller promised all
// access complete). Bytes never handed out have no entry; ranges of an
// unmapped chunk are erased (their addresses may come back fresh).
struct LastFree {
  StreamIndex stream = kNoStream;
  Position f = 0;
  bool now = false;
};

class LastFreeMap {
 public:
  void Assign(uintptr_t a, uintptr_t b, LastFree v) {
    Erase(a, b);
    m_.emplace(a, Interval{b, v});
  }
  void Erase(uintptr_t a, uintptr_t b) {
    SplitAt(a);
    SplitAt(b);
    m_.erase(m_.lower_bound(a), m_.lower_bound(b));
  }
  template <typename Fn>
  void ForEachOverlap(uintptr_t a, uintptr_t b, Fn&& fn) const {
    auto it = m_.upper_bound(a);
    if (it != m_.begin() && std::prev(it)->second.end > a) --it;
    for (; it != m_.end() && it->first < b; ++it) fn(it->second.v);
  }

 private:
  struct Interval {
    uintptr_t end;
    LastFree v;
  };
  void SplitAt(uintptr_t x) {
    auto it = m_.upper_bound(x);
    if (it == m_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      const Interval right{it->second.end, it->second.v};
      it->second.end = x;
      m_.emplace(x, right);
    }
  }
  std::map<uintptr_t, Interval> m_;
};

// Random allocations, frees, event waits, completions, promotions, releases
// and switch flips over 4 streams. The oracle's answers are consistent with
// a real program: VC(T)[S] and completion of S only grow and never pass
// pos(S). After every op the pool's invariants hold, and every allocation
// is checked against a reference: it overlaps no LIVE block, and each of its
// bytes last freed on another stream is covered by the bound of the rule
// that was counted (or was promoted, or freed with FreeNow). The upstream
// fails now and then (a chunk, a granule run, a reservation): a failed
// allocation changes nothing, in the pool or in the upstream.
//
// Both growth modes run it. Expandable pools are checked further against the
// fake's own account of mapped granules; the history of bytes survives their
// unmapping (a re-mapped granule's bytes were handed out before and must
// still be safe to reuse) and is forgotten only when the reservation goes.
struct RandomGrowth {
  const char* name;
  bool expandable;
  uint64_t reservation_bytes;  // 0: max_size
};

// coverage: assert that every path was exercised (true for the fixed seed,
// whose sequence is known to; a fresh seed may miss a rare one, such as a
// chunk wholly free at a release, without anything being wrong).
void RunRandomOps(uint64_t seed, int ops, const RandomGrowth& growth, bool coverage) {
  SCOPED_TRACE(absl::StrCat("seed=", seed, " growth=", growth.name));
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  constexpr StreamIndex kStreams = 4;
  constexpr uint64_t kMaxSize = 32 * kMiB;
  constexpr size_t kMaxLive = 150;

  LastFreeMap last_free;
  auto upstream = std::make_shared<ScriptedMemory>(growth.expandable);
  upstream->on_unmap = [&](const Mapping& m) {
    const auto base = reinterpret_cast<uintptr_t>(m.base);
    last_free.Erase(base, base + m.size);
  };
  upstream->on_release = [&](uintptr_t base, uint64_t bytes) {
    last_free.Erase(base, base + bytes);
  };
  DeviceBudget budget(48 * kMiB);
  auto pool = std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule},
                                        kMaxSize, upstream, &budget, growth.reservation_bytes);
  ASSERT_EQ(pool->expandable(), growth.expandable);

  Position pos[kStreams] = {};
  Position vc[kStreams][kStreams] = {};  // vc[T][S]: VC(T)[S]
  Position complete[kStreams] = {};      // observed complete
  Position promoted[kStreams] = {};      // the done vector last promoted
  struct Live {
    Block* block;
    StreamIndex stream;
  };
  std::vector<Live> live;
  std::map<uintptr_t, uintptr_t> live_ranges;  // base -> end
  uint64_t used = 0;
  uint64_t successes = 0, failures = 0, waits = 0, joins = 0;

  auto free_one = [&](bool now) -> ::testing::AssertionResult {
    const size_t k = uniform(0, live.size() - 1);
    const Live l = live[k];
    live[k] = live.back();
    live.pop_back();
    const uintptr_t a = l.block->addr(), e = l.block->end();
    live_ranges.erase(a);
    used -= l.block->size();
    if (now) {
      pool->FreeNow(l.block);
      last_free.Assign(a, e, LastFree{kNoStream, 0, true});
    } else {
      const StreamIndex s =
          uniform(0, 9) < 7 ? l.stream : static_cast<StreamIndex>(uniform(0, kStreams - 1));
      const Position f = ++pos[s];
      pool->FreeAsync(l.block, s, f);
      last_free.Assign(a, e, LastFree{s, f, false});
    }
    return ::testing::AssertionSuccess();
  };

  auto alloc = [&]() -> ::testing::AssertionResult {
    const StreamIndex t = uniform(0, kStreams - 1);
    const uint64_t r = uniform(0, 99);
    const uint64_t size = r < 70   ? uniform(1, 16 * kKiB)
                          : r < 95 ? uniform(16 * kKiB, 512 * kKiB)
                                   : uniform(512 * kKiB, 3 * kMiB);
    ScriptedOracle o(t);
    for (StreamIndex s = 0; s < kStreams; ++s) {
      if (s == t) continue;
      o.ordered_after[s] = vc[t][s];
      o.observed_complete[s] = complete[s];
    }
    ++pos[t];  // the allocation's marker op
    if (uniform(0, 99) < 3) {
      if (growth.expandable) {
        upstream->FailNthMapAt(uniform(1, 2));
      } else {
        upstream->fail_maps = 1;
      }
    }
    if (growth.expandable && uniform(0, 99) < 1) upstream->FailNthReserve(1, uniform(1, 2));
    PoolStats expected = pool->Stats();
    const std::set<uintptr_t> mapped = upstream->mapped;
    const std::map<uintptr_t, uint64_t> reservations = upstream->reservations;
    const uint64_t live_bytes = upstream->live_bytes, live_mappings = upstream->live_mappings;
    absl::StatusOr<MemPool::Allocation> a = pool->Allocate(size, o);
    if (!a.ok()) {
      ++failures;
      ++expected.failed_alloc_count;
      if (upstream->mapped != mapped || upstream->reservations != reservations ||
          upstream->live_bytes != live_bytes || upstream->live_mappings != live_mappings) {
        return ::testing::AssertionFailure() << "failed allocation left the upstream changed";
      }
      // Rule 3 promotes what it observed complete even when nothing fits (as a
      // query would): blocks merge, so the largest free block may change. In
      // a chunked pool it can only grow; in an expandable one a promoted
      // block that merges with a READY block whose low granules are unmapped
      // counts only by the merged block's mapped low end, so it may shrink.
      const PoolStats got = pool->Stats();
      if (pool->reuse_allow_opportunistic() &&
          (growth.expandable || got.largest_free_block >= expected.largest_free_block)) {
        expected.largest_free_block = got.largest_free_block;
      }
      if (a.status().code() != absl::StatusCode::kResourceExhausted || !o.waits.empty() ||
          StatsString(got) != StatsString(expected)) {
        return ::testing::AssertionFailure()
               << "failed allocation changed state: " << a.status() << "\n  "
               << StatsString(pool->Stats()) << "\n  " << StatsString(expected);
      }
      return ::testing::AssertionSuccess();
    }
    ++successes;
    waits += o.waits.size();
    joins += o.waits.size() > 1;
    Block* b = a->block;
    const ReuseRule rule = a->rule;
    const uintptr_t lo = b->addr(), hi = b->end();
    if (b->size() != *pool->RuleSize(size) || b->requested != size || lo % kGranule != 0 ||
        b->state != BlockState::kLive) {
      return ::testing::AssertionFailure() << "bad block for " << size;
    }
    // Safety 1: no byte shared with a LIVE allocation.
    auto next = live_ranges.lower_bound(lo);
    if (next != live_ranges.end() && next->first < hi) {
      return ::testing::AssertionFailure() << "overlaps LIVE block at " << next->first;
    }
    if (next != live_ranges.begin() && std::prev(next)->second > lo) {
      return ::testing::AssertionFailure() << "overlaps LIVE block at " << std::prev(next)->first;
    }
    // Waits are inserted exactly for rule 5, on other streams, one per
    // stream (several when it joined frees of several streams).
    if (rule == ReuseRule::kInternalDependency) {
      bool distinct = !o.waits.empty();
      for (size_t i = 0; i < o.waits.size(); ++i) {
        distinct = distinct && o.waits[i].stream != t &&
                   (i == 0 || o.waits[i - 1].stream < o.waits[i].stream);
      }
      if (!distinct) {
        return ::testing::AssertionFailure()
               << "rule 5 without one wait per other stream, in stream order";
      }
    } else if (!o.waits.empty()) {
      return ::testing::AssertionFailure() << "a wait inserted for " << ReuseRuleName(rule);
    }
    // Safety 2: every byte's last free is covered by the counted rule.
    std::string error;
    StreamIndex pending_stream = kNoStream;
    last_free.ForEachOverlap(lo, hi, [&](const LastFree& lf) {
      if (!error.empty()) return;
      // Complete as far as the pool may know: proven by a sync, or observed
      // by the executor (rule 3 promotes observed frees, which then merge and
      // may serve any rule that reuses READY bytes).
      const bool completed = lf.now || lf.f <= promoted[lf.stream] || lf.f <= complete[lf.stream];
      bool ok = false;
      switch (rule) {
        case ReuseRule::kFresh:
          ok = false;  // fresh bytes were never handed out
          break;
        case ReuseRule::kAfterSync:
        case ReuseRule::kOpportunistic:
          ok = completed;
          break;
        case ReuseRule::kSameStream:
          ok = completed || lf.stream == t;
          break;
        case ReuseRule::kEventDependency:
          ok = completed || (lf.stream != t && lf.f <= vc[t][lf.stream]);
          break;
        case ReuseRule::kInternalDependency:
          ok = completed || lf.stream == t ||
               std::any_of(o.waits.begin(), o.waits.end(), [&](const ScriptedOracle::Wait& w) {
                 return lf.stream == w.stream && lf.f <= w.f;
               });
          break;
      }
      // The block was PENDING on one stream: its bytes not known complete
      // were all freed by that stream (a join of several frees excepted).
      if (ok && !completed && rule != ReuseRule::kInternalDependency) {
        if (pending_stream == kNoStream) pending_stream = lf.stream;
        ok = lf.stream == pending_stream;
      }
      if (!ok) {
        error = absl::StrCat(ReuseRuleName(rule), " on stream ", t, " reused bytes last freed at (",
                             lf.stream, ", ", lf.f, ") now=", lf.now,
                             "; VC(T)[S]=", lf.stream < kStreams ? vc[t][lf.stream] : 0,
                             " complete=", lf.stream < kStreams ? complete[lf.stream] : 0,
                             " promoted=", lf.stream < kStreams ? promoted[lf.stream] : 0);
      }
    });
    if (!error.empty()) return ::testing::AssertionFailure() << error;
    for (const ScriptedOracle::Wait& w : o.waits) {
      Position& v = vc[t][w.stream];
      v = std::max(v, w.f);
    }
    live.push_back(Live{b, t});
    live_ranges.emplace(lo, hi);
    used += b->size();
    return ::testing::AssertionSuccess();
  };

  for (int i = 0; i < ops; ++i) {
    const uint64_t r = uniform(0, 99);
    if (r < 40 && live.size() < kMaxLive) {
      ASSERT_TRUE(alloc()) << "op " << i;
    } else if (r < 71 && !live.empty()) {
      ASSERT_TRUE(free_one(/*now=*/r >= 69)) << "op " << i;
    } else if (r < 82) {
      // An event wait: T learns a prefix of S.
      const StreamIndex t = uniform(0, kStreams - 1), s = uniform(0, kStreams - 1);
      if (s != t) vc[t][s] = uniform(vc[t][s], pos[s]);
    } else if (r < 90) {
      // The executor reports progress of S, at most half of what is
      // outstanding: frees must stay pending a while, or rule 3 promotes
      // nearly all of them before rule 2 (which comes first but needs an
      // event) ever serves one.
      const StreamIndex s = uniform(0, kStreams - 1);
      complete[s] = uniform(complete[s], complete[s] + (pos[s] - complete[s]) / 2);
    } else if (r < 93) {
      // A synchronize action proves what is observed complete.
      VectorClock done;
      for (StreamIndex s = 0; s < kStreams; ++s) {
        done.Raise(s, complete[s]);
        promoted[s] = complete[s];
      }
      pool->Promote(done);
    } else if (r < 97) {
      const uint64_t reserved = pool->reserved();
      const uint64_t bound = uniform(0, 2) == 0 ? 0 : uniform(0, reserved);
      if (uniform(0, 1) == 0) {
        pool->Release(bound);
      } else {
        pool->set_release_threshold(bound);
        pool->ReleaseAtSync();
      }
      ASSERT_LE(pool->reserved(), reserved) << "op " << i;
      // The release rule never goes below its bound by releasing.
      if (reserved >= bound) {
        ASSERT_GE(pool->reserved(), bound) << "op " << i;
      }
    } else {
      const bool on = uniform(0, 9) < 7;
      switch (uniform(0, 2)) {
        case 0:
          pool->set_reuse_follow_event_dependencies(on);
          break;
        case 1:
          pool->set_reuse_allow_opportunistic(on);
          break;
        default:
          pool->set_reuse_allow_internal_dependencies(on);
          break;
      }
    }
    ASSERT_TRUE(pool->CheckInvariants()) << "op " << i;
    ASSERT_EQ(pool->used(), used) << "op " << i;
    ASSERT_EQ(pool->reserved(), upstream->live_bytes) << "op " << i;
    if (growth.expandable) {
      ASSERT_EQ(pool->reserved(), upstream->mapped.size() * Chunk::kGranule) << "op " << i;
    }
    ASSERT_TRUE(upstream->violations.empty()) << "op " << i << ": " << upstream->violations[0];
    ASSERT_EQ(budget.used(), pool->reserved()) << "op " << i;
    ASSERT_LE(pool->reserved(), kMaxSize) << "op " << i;
  }

  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.alloc_count, successes);
  EXPECT_EQ(s.failed_alloc_count, failures);
  EXPECT_EQ(s.fresh_allocs + s.reuse_same_stream + s.reuse_event_dependency +
                s.reuse_opportunistic + s.reuse_after_sync + s.reuse_internal_dependency,
            successes);
  EXPECT_EQ(s.waits_inserted, waits);
  EXPECT_LE(s.reuse_internal_dependency, s.waits_inserted);
  EXPECT_LE(joins, s.joined_reuses);
  // Every path was exercised, or the sequence proves little.
  if (coverage) {
    EXPECT_GT(s.fresh_allocs, 0u);
    EXPECT_GT(s.reuse_same_stream, 0u);
    EXPECT_GT(s.reuse_event_dependency, 0u);
    EXPECT_GT(s.reuse_opportunistic, 0u);
    EXPECT_GT(s.reuse_after_sync, 0u);
    EXPECT_GT(s.reuse_internal_dependency, 0u);
    EXPECT_GT(s.upstream_unmaps, 0u);
    EXPECT_GT(failures, 0u);
  }

  // Drain: everything freed and proven complete goes back.
  while (!live.empty()) ASSERT_TRUE(free_one(/*now=*/false));
  VectorClock all;
  for (StreamIndex st = 0; st < kStreams; ++st) all.Raise(st, pos[st]);
  pool->Promote(all);
  pool->Release(0);
  EXPECT_TRUE(pool->CheckInvariants());
  EXPECT_EQ(pool->reserved(), 0u);
  EXPECT_EQ(upstream->live_mappings, 0u);
  EXPECT_EQ(budget.used(), 0u);
  // Released to the bound 0, nothing is mapped; every reservation went back
  // but the last, which a pool keeps unless its address space is scarce
  // (reservations sized by the caller), and which goes at destruction.
  EXPECT_TRUE(upstream->mapped.empty());
  EXPECT_EQ(upstream->reservations.size(),
            growth.expandable && growth.reservation_bytes == 0 ? 1u : 0u);
  if (growth.expandable) {
    EXPECT_GT(upstream->unmap_at_calls, 0u);
    // Small reservations come and go.
    if (growth.reservation_bytes != 0) {
      EXPECT_GT(upstream->release_calls, 0u);
    }
  }
  pool.reset();
  EXPECT_TRUE(upstream->reservations.empty());
  EXPECT_TRUE(upstream->violations.empty());
}

class MemPoolRandomTest : public ::testing::TestWithParam<RandomGrowth> {};

TEST_P(MemPoolRandomTest, FixedSeed) { RunRandomOps(20240601, 60000, GetParam(), true); }

TEST_P(MemPoolRandomTest, FreshSeed) {
  RunRandomOps(std::random_device{}(), 60000, GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Growth, MemPoolRandomTest,
                         ::testing::Values(RandomGrowth{"Chunked", false, 0},
                                           RandomGrowth{"Expandable", true, 0},
                                           // Several reservations at once.
                                           RandomGrowth{"Expandable8MiB", true, 8 * kMiB}),
                         [](const ::testing::TestParamInfo<RandomGrowth>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace streampool::internal
