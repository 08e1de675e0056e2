#include "src/pool/size_index.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

// Counts every global allocation so the steady-state test can prove the
// index does not allocate. Both the plain and the aligned forms are
// replaced: trie nodes are over-aligned and go through the latter.
namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, std::align_val_t al) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t a = static_cast<size_t>(al);
  if (void* p = std::aligned_alloc(a, (std::max<size_t>(n, 1) + a - 1) / a * a)) {
    return p;
  }
  throw std::bad_alloc();
}
// noinline: once inlined, GCC pairs a library `new` with our free() and
// warns about a mismatch that is not there.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace streampool::internal {
namespace {

constexpr uint64_t kQ = SizeIndex::kSizeQuantum;

// The reference model: exact best fit is the first (size, addr) pair in
// lexicographic order with size >= the request.
using Ref = std::multiset<std::pair<uint64_t, uintptr_t>>;

const std::pair<uint64_t, uintptr_t>* RefBestFit(const Ref& ref, uint64_t min_size) {
  auto it = ref.lower_bound({min_size, 0});
  return it == ref.end() ? nullptr : &*it;
}

template <typename Pred>
const std::pair<uint64_t, uintptr_t>* RefBestFitIf(const Ref& ref, uint64_t min_size,
                                                   Pred eligible) {
  for (auto it = ref.lower_bound({min_size, 0}); it != ref.end(); ++it) {
    if (eligible(it->second)) return &*it;
  }
  return nullptr;
}

const std::pair<uint64_t, uintptr_t>* RefLargest(const Ref& ref) {
  if (ref.empty()) return nullptr;
  const uint64_t largest = std::prev(ref.end())->first;
  return &*ref.lower_bound({largest, 0});
}

// Checks a result node against the reference answer (both may be absent).
::testing::AssertionResult Matches(const SizeIndexNode* got,
                                   const std::pair<uint64_t, uintptr_t>* want) {
  if (got == nullptr && want == nullptr) return ::testing::AssertionSuccess();
  if (got == nullptr) {
    return ::testing::AssertionFailure()
           << "got nullptr, want (" << want->first << ", " << want->second << ")";
  }
  if (want == nullptr) {
    return ::testing::AssertionFailure()
           << "got (" << got->size << ", " << got->addr << "), want nullptr";
  }
  if (got->size != want->first || got->addr != want->second) {
    return ::testing::AssertionFailure() << "got (" << got->size << ", " << got->addr << "), want ("
                                         << want->first << ", " << want->second << ")";
  }
  return ::testing::AssertionSuccess();
}

// A fixed arena of nodes, each with a distinct random address, of which
// some are in the index. `live` lists the in-index slots for O(1) random
// choice.
class Arena {
 public:
  Arena(size_t n, std::mt19937_64& rng) : nodes_(n), pos_(n, kAbsent) {
    std::set<uintptr_t> used;
    for (SizeIndexNode& node : nodes_) {
      uintptr_t a;
      do {
        a = (rng() & ((uint64_t{1} << 47) - 1)) & ~uintptr_t{kQ - 1};
      } while (!used.insert(a).second);
      node.addr = a;
      node.order = a;
    }
  }
  size_t capacity() const { return nodes_.size(); }
  SizeIndexNode& node(size_t i) { return nodes_[i]; }
  bool is_live(size_t i) const { return pos_[i] != kAbsent; }
  size_t live_count() const { return live_.size(); }
  size_t live_at(size_t k) const { return live_[k]; }
  void MarkLive(size_t i) {
    pos_[i] = live_.size();
    live_.push_back(i);
  }
  void MarkDead(size_t i) {
    const size_t k = pos_[i];
    live_[k] = live_.back();
    pos_[live_[k]] = k;
    live_.pop_back();
    pos_[i] = kAbsent;
  }

 private:
  static constexpr size_t kAbsent = ~size_t{0};
  std::vector<SizeIndexNode> nodes_;
  std::vector<size_t> pos_;
  std::vector<size_t> live_;
};

// Sizes with many duplicates in the small range (32 B .. 64 KiB) and sparse
// ones up to 2^45 bytes, so that both shallow and deep trie paths, wide bins
// and singleton bins all occur.
uint64_t DrawSize(std::mt19937_64& rng) {
  static constexpr uint64_t kPopular[] = {32, 64, 256, 1024, 4096, 65536, 96, 2048 * 32};
  switch (rng() % 5) {
    case 0:
      return kPopular[rng() % std::size(kPopular)];
    case 1:
    case 2:
      return kQ * (1 + rng() % 2048);  // 32 .. 64 KiB
    case 3:
      return kQ * (1 + rng() % (uint64_t{1} << 40));  // up to 2^45
    default: {
      // Powers of two up to 2^45 and their neighbours: digit boundaries.
      const uint64_t p = uint64_t{1} << (5 + rng() % 41);
      const uint64_t d = kQ * (rng() % 3);
      return rng() % 2 == 0 || p <= d ? p + d : p - d;
    }
  }
}

// Requests are any byte count, including 0, non-multiples of the quantum
// and values past kMaxSize.
uint64_t DrawRequest(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
      return 0;
    case 1:
      return rng() % (64 * 1024 + 100);
    case 2:
      return rng() % (uint64_t{1} << 46);
    case 3:
      return SizeIndex::kMaxSize + rng() % 1000;
    default:
      return DrawSize(rng) - (rng() % 2) * (rng() % kQ);
  }
}

bool Eligible(uintptr_t addr) {
  // A fixed pseudo-random third of addresses is ineligible.
  return (addr * 0x9E3779B97F4A7C15ull) >> 62 != 0;
}

TEST(SizeIndexTest, EmptyIndex) {
  SizeIndex index;
  EXPECT_TRUE(index.empty());
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.FindBestFit(0), nullptr);
  EXPECT_EQ(index.FindBestFit(32), nullptr);
  EXPECT_EQ(index.Largest(), nullptr);
  size_t examined = 123;
  EXPECT_EQ(index.FindBestFitIf(
                32, [](const SizeIndexNode*) { return true; }, 10, &examined),
            nullptr);
  EXPECT_EQ(examined, 0u);
  EXPECT_TRUE(index.CheckInvariants());
}

TEST(SizeIndexTest, TieGoesToLowestAddress) {
  SizeIndex index;
  // Inserted in an order where neither first nor last is lowest.
  SizeIndexNode a{.size = 256, .addr = 0x5000, .order = 0x5000};
  SizeIndexNode b{.size = 256, .addr = 0x1000, .order = 0x1000};
  SizeIndexNode c{.size = 256, .addr = 0x9000, .order = 0x9000};
  SizeIndexNode smaller_but_too_small{.size = 224, .addr = 0x0, .order = 0x0};
  SizeIndexNode bigger_lower_addr{.size = 288, .addr = 0x20, .order = 0x20};
  for (SizeIndexNode* n : {&a, &b, &c, &smaller_but_too_small, &bigger_lower_addr}) {
    index.Insert(n);
  }
  EXPECT_EQ(index.FindBestFit(256), &b);
  EXPECT_EQ(index.FindBestFit(225), &b);  // rounds up to the 256 bin
  EXPECT_EQ(index.FindBestFit(224), &smaller_but_too_small);
  EXPECT_EQ(index.FindBestFit(257), &bigger_lower_addr);
  index.Remove(&b);
  EXPECT_EQ(index.FindBestFit(256), &a);
  index.Remove(&a);
  EXPECT_EQ(index.FindBestFit(256), &c);
  EXPECT_TRUE(index.CheckInvariants());
}

TEST(SizeIndexTest, ExtremeSizesAndRootGrowth) {
  SizeIndex index;
  SizeIndexNode small{.size = 32, .addr = 1 << 10, .order = 1 << 10};
  SizeIndexNode max{.size = SizeIndex::kMaxSize, .addr = 1 << 11, .order = 1 << 11};
  SizeIndexNode mid{.size = uint64_t{1} << 30, .addr = 1 << 12, .order = 1 << 12};
  index.Insert(&small);
  EXPECT_EQ(index.FindBestFit(33), nullptr);
  index.Insert(&max);  // grows the root to full height under `small`
  EXPECT_TRUE(index.CheckInvariants());
  EXPECT_EQ(index.FindBestFit(1), &small);
  EXPECT_EQ(index.FindBestFit(33), &max);
  index.Insert(&mid);
  EXPECT_EQ(index.FindBestFit(33), &mid);
  EXPECT_EQ(index.FindBestFit((uint64_t{1} << 30) + 1), &max);
  EXPECT_EQ(index.FindBestFit(SizeIndex::kMaxSize), &max);
  EXPECT_EQ(index.FindBestFit(SizeIndex::kMaxSize + 1), nullptr);
  EXPECT_EQ(index.FindBestFit(UINT64_MAX), nullptr);
  EXPECT_EQ(index.Largest(), &max);
  index.Remove(&max);
  EXPECT_EQ(index.Largest(), &mid);
  EXPECT_EQ(index.FindBestFit((uint64_t{1} << 30) + 1), nullptr);
  index.Remove(&mid);
  index.Remove(&small);
  EXPECT_TRUE(index.empty());
  EXPECT_EQ(index.FindBestFit(0), nullptr);
  EXPECT_TRUE(index.CheckInvariants());
}

TEST(SizeIndexDeathTest, RejectsBadSizesAndDoubleInsert) {
  SizeIndex index;
  SizeIndexNode odd{.size = 48, .addr = 0, .order = 0};
  EXPECT_DEATH(index.Insert(&odd), "");
  SizeIndexNode zero{.size = 0, .addr = 0, .order = 0};
  EXPECT_DEATH(index.Insert(&zero), "");
  SizeIndexNode huge{.size = SizeIndex::kMaxSize + kQ, .addr = 0, .order = 0};
  EXPECT_DEATH(index.Insert(&huge), "");
  SizeIndexNode ok{.size = 64, .addr = 0, .order = 0};
  index.Insert(&ok);
  EXPECT_DEATH(index.Insert(&ok), "");
  index.Remove(&ok);
  EXPECT_DEATH(index.Remove(&ok), "");
}

TEST(SizeIndexTest, RemoveFromMiddleOfHeap) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr size_t kN = 3000;
  SizeIndex index;
  std::vector<SizeIndexNode> nodes(kN);
  std::vector<size_t> order(kN);
  for (size_t i = 0; i < kN; ++i) {
    nodes[i].size = 4096;
    nodes[i].addr = (i + 1) * 4096;
    nodes[i].order = (i + 1) * 4096;
    order[i] = i;
  }
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) index.Insert(&nodes[i]);
  // Removing the root once runs the two-pass pairing and gives the heap
  // depth, so later removals hit interior nodes with children.
  std::set<uintptr_t> ref;
  for (const SizeIndexNode& n : nodes) ref.insert(n.addr);
  auto remove = [&](SizeIndexNode* n) {
    index.Remove(n);
    ref.erase(n->addr);
    EXPECT_FALSE(n->in_index);
  };
  remove(index.FindBestFit(4096));
  std::shuffle(order.begin(), order.end(), rng);
  size_t step = 0;
  for (size_t i : order) {
    if (!nodes[i].in_index) continue;
    // Prefer nodes that are neither the root nor leaves.
    if (nodes[i].prev == nullptr && step % 3 != 0) continue;
    remove(&nodes[i]);
    ++step;
    const SizeIndexNode* best = index.FindBestFit(1);
    if (ref.empty()) {
      ASSERT_EQ(best, nullptr);
    } else {
      ASSERT_NE(best, nullptr);
      ASSERT_EQ(best->addr, *ref.begin());
    }
    if (step % 97 == 0) {
      ASSERT_TRUE(index.CheckInvariants());
    }
  }
  // Whatever the loop skipped (roots), remove now.
  while (!index.empty()) remove(index.FindBestFit(0));
  EXPECT_TRUE(ref.empty());
  EXPECT_TRUE(index.CheckInvariants());
}

// Runs a random instruction stream against the reference model.
void RunRandomOps(uint64_t seed, size_t arena_size, size_t ops, bool check_every_step) {
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Arena arena(arena_size, rng);
  SizeIndex index;
  Ref ref;
  auto pred = [](const SizeIndexNode* n) { return Eligible(n->addr); };
  size_t max_live = 0;

  for (size_t step = 0; step < ops; ++step) {
    const uint64_t r = rng();
    // Removals (op 30..65) outnumber inserts, so inserts get an extra share
    // below 3/4 occupancy: the index hovers there, with wide bins.
    const bool filling = arena.live_count() < arena.capacity() * 3 / 4;
    const unsigned op = r % 100;
    if ((op < 30 || (filling && (r >> 32) % 3 == 0)) && arena.live_count() < arena.capacity()) {
      // Insert a random dead node, with a fresh size.
      size_t i;
      do {
        i = rng() % arena.capacity();
      } while (arena.is_live(i));
      SizeIndexNode& n = arena.node(i);
      n.size = DrawSize(rng);
      index.Insert(&n);
      ref.insert({n.size, n.addr});
      arena.MarkLive(i);
    } else if (op < 58 && arena.live_count() > 0) {
      // Remove an arbitrary node: root, interior or leaf of its heap.
      const size_t i = arena.live_at(rng() % arena.live_count());
      SizeIndexNode& n = arena.node(i);
      index.Remove(&n);
      ref.erase(ref.find({n.size, n.addr}));
      arena.MarkDead(i);
    } else if (op < 66 && arena.live_count() > 0) {
      // Allocator pattern: take the best fit out.
      const uint64_t req = DrawRequest(rng);
      SizeIndexNode* got = index.FindBestFit(req);
      ASSERT_TRUE(Matches(got, RefBestFit(ref, req))) << "request " << req;
      if (got != nullptr) {
        index.Remove(got);
        ref.erase(ref.find({got->size, got->addr}));
        arena.MarkDead(static_cast<size_t>(got - &arena.node(0)));
      }
    } else if (op < 88) {
      const uint64_t req = DrawRequest(rng);
      ASSERT_TRUE(Matches(index.FindBestFit(req), RefBestFit(ref, req))) << "request " << req;
    } else if (op < 92) {
      ASSERT_TRUE(Matches(index.Largest(), RefLargest(ref)));
    } else if (op < 97) {
      // Unlimited budget: must equal the filtered brute force exactly.
      const uint64_t req = DrawRequest(rng);
      size_t examined = 0;
      const SizeIndexNode* got = index.FindBestFitIf(req, pred, index.size(), &examined);
      ASSERT_TRUE(Matches(got, RefBestFitIf(ref, req, Eligible))) << "request " << req;
      ASSERT_LE(examined, index.size());
    } else {
      // Small budget: may miss, but never returns a wrong kind of node.
      const uint64_t req = DrawRequest(rng);
      const size_t budget = rng() % 8;
      size_t examined = ~size_t{0};
      const SizeIndexNode* got = index.FindBestFitIf(req, pred, budget, &examined);
      ASSERT_LE(examined, budget);
      if (got != nullptr) {
        ASSERT_TRUE(Eligible(got->addr));
        ASSERT_GE(got->size, req);
        ASSERT_TRUE(got->in_index);
        // Nothing smaller than the result can be eligible: the search goes
        // in size order, so any eligible smaller node would have been seen
        // first. (Within the result's size, a lower address may be missed.)
        const auto* want = RefBestFitIf(ref, req, Eligible);
        ASSERT_NE(want, nullptr);
        ASSERT_EQ(got->size, want->first);
      }
    }
    ASSERT_EQ(index.size(), ref.size());
    ASSERT_EQ(index.empty(), ref.empty());
    max_live = std::max(max_live, index.size());
    if (check_every_step) {
      ASSERT_TRUE(index.CheckInvariants()) << "step " << step;
    }
  }
  ASSERT_TRUE(index.CheckInvariants());
  // The stream really did fill the index (else the comparisons are weak).
  EXPECT_GT(max_live, arena_size / 2);
  EXPECT_GT(index.size(), arena_size / 2);

  // ForEach sees exactly the reference contents.
  Ref seen;
  uint64_t last_size = 0;
  bool sorted = true;
  index.ForEach([&](const SizeIndexNode* n) {
    sorted = sorted && n->size >= last_size;
    last_size = n->size;
    seen.insert({n->size, n->addr});
  });
  EXPECT_TRUE(sorted);
  EXPECT_EQ(seen, ref);
}

TEST(SizeIndexTest, RandomOpsMatchBruteForce) {
  const uint64_t seed = std::random_device{}();
  // 300k steps; an arena of 6000 nodes keeps bins wide for popular sizes.
  RunRandomOps(seed, 6000, 300000, /*check_every_step=*/false);
}

TEST(SizeIndexTest, RandomOpsKeepInvariantsEveryStep) {
  const uint64_t seed = std::random_device{}();
  RunRandomOps(seed, 300, 20000, /*check_every_step=*/true);
}

TEST(SizeIndexTest, FindBestFitIfScansWholeFirstEligibleBin) {
  SizeIndex index;
  std::vector<SizeIndexNode> nodes(200);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].size = 512;
    nodes[i].addr = 0x10000 - i * 64;  // inserted from high to low address
    nodes[i].order = 0x10000 - i * 64;
    index.Insert(&nodes[i]);
  }
  SizeIndexNode larger{.size = 1024, .addr = 0, .order = 0};
  index.Insert(&larger);
  // Only two addresses in the bin are eligible; the lower one must win.
  const uintptr_t want = nodes[150].addr;
  const uintptr_t other = nodes[20].addr;
  auto pred = [&](const SizeIndexNode* n) {
    return n->addr == want || n->addr == other || n == &larger;
  };
  size_t examined = 0;
  EXPECT_EQ(index.FindBestFitIf(1, pred, index.size(), &examined), &nodes[150]);
  EXPECT_LE(examined, nodes.size());
  // Nothing eligible in the 512 bin: falls through to the next size.
  EXPECT_EQ(index.FindBestFitIf(
                1, [&](const SizeIndexNode* n) { return n == &larger; }, index.size(), &examined),
            &larger);
  EXPECT_EQ(examined, index.size());
  // A budget that runs out inside the bin returns nothing eligible yet.
  EXPECT_EQ(index.FindBestFitIf(
                1, [&](const SizeIndexNode* n) { return n == &larger; }, 50, &examined),
            nullptr);
  EXPECT_EQ(examined, 50u);
}

TEST(SizeIndexTest, SteadyStateDoesNotAllocate) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  SizeIndex index;
  std::vector<SizeIndexNode> background(5000);
  const size_t before_warmup = g_allocations.load();
  for (size_t i = 0; i < background.size(); ++i) {
    background[i].size = DrawSize(rng);
    background[i].addr = (i + 1) * 1024;
    background[i].order = (i + 1) * 1024;
    index.Insert(&background[i]);
  }
  // Proves the counter sees the index's allocations, so the check below is
  // not vacuous.
  ASSERT_GT(g_allocations.load(), before_warmup);

  // Sizes whose paths are shared with the background (a wide bin) and
  // sizes on their own path, which empties and is recycled on every
  // Remove.
  SizeIndexNode shared{.size = background[0].size, .addr = 7, .order = 7};
  SizeIndexNode lonely{.size = (uint64_t{1} << 44) + 3 * kQ, .addr = 9, .order = 9};
  SizeIndexNode lonely_small{.size = 64 * 1024 - kQ, .addr = 11, .order = 11};
  for (SizeIndexNode* n : {&shared, &lonely, &lonely_small}) {
    // Warm-up: the first insert of a new path may allocate.
    index.Insert(n);
    index.Remove(n);
  }
  const size_t before = g_allocations.load();
  for (int i = 0; i < 10000; ++i) {
    for (SizeIndexNode* n : {&shared, &lonely, &lonely_small}) {
      index.Insert(n);
      SizeIndexNode* best = index.FindBestFit(n->size);
      ASSERT_NE(best, nullptr);
      ASSERT_EQ(best->size, n->size);
      index.Remove(n);
    }
    // Also the allocator pattern on a background bin: take the root, put
    // it back.
    SizeIndexNode* best = index.FindBestFit(background[i % 100].size);
    index.Remove(best);
    index.Insert(best);
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_TRUE(index.CheckInvariants());
}

}  // namespace
}  // namespace streampool::internal
