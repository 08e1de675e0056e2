// MemPool on its own (tests/pool/mem_pool_fixture.h): the hot path touches
// no host heap. This executable replaces the global operator new to count
// allocations; keep other tests out of it.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <random>

#include "tests/pool/mem_pool_fixture.h"

// Counts every global allocation so that the steady-state test can prove a
// same-stream alloc/free pair touches no host heap. Both the plain and the
// aligned forms are replaced: SizeIndex trie nodes are over-aligned.
namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

// Every replacement is noinline. GCC matches allocation and deallocation
// functions through inlining: an inlined `new` shows it the malloc() inside,
// and it then reports the library's sized `delete` on that pointer as a
// mismatch; an inlined `delete` shows it free() on a library `new`'s pointer.
// Kept opaque, GCC sees only new and delete calls, which these pair correctly.
[[gnu::noinline]] void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(size_t n, std::align_val_t al) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t a = static_cast<size_t>(al);
  if (void* p = std::aligned_alloc(a, (std::max<size_t>(n, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace streampool::internal {
namespace {

// --------------------------------------------------- host heap, hot path

// A same-stream alloc/free pair, once warm, allocates no host memory however
// many other free blocks (READY, and PENDING on other streams) the pool
// holds.
void ExpectSteadyPairsDoNotAllocate(size_t other_free_blocks, bool expandable = false) {
  SCOPED_TRACE(
      absl::StrCat("other free blocks: ", other_free_blocks, expandable ? " (expandable)" : ""));
  auto upstream = std::make_shared<ScriptedMemory>(expandable);
  DeviceBudget budget(4 * kGiB);
  MemPool pool(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, 4 * kGiB, upstream,
               &budget);
  ASSERT_EQ(pool.expandable(), expandable);
  std::mt19937_64 rng(other_free_blocks);
  Position pos[4] = {};
  std::vector<std::pair<Block*, StreamIndex>> others;
  for (size_t i = 0; i < other_free_blocks; ++i) {
    const StreamIndex s = 1 + i % 3;
    ScriptedOracle o(s);
    const uint64_t size = std::uniform_int_distribution<uint64_t>(1, 16)(rng) * kGranule;
    absl::StatusOr<MemPool::Allocation> a = pool.Allocate(size, o);
    ASSERT_TRUE(a.ok());
    others.emplace_back(a->block, s);
    ASSERT_TRUE(pool.Allocate(kGranule, o).ok());  // a LIVE separator
  }
  for (size_t i = 0; i < others.size(); ++i) {
    if (i % 2 == 0) {
      pool.FreeNow(others[i].first);
    } else {
      const StreamIndex s = others[i].second;
      pool.FreeAsync(others[i].first, s, ++pos[s]);
    }
  }
  ASSERT_TRUE(pool.CheckInvariants());

  // 64 KiB is larger than any other free block: the pair lives in its own.
  ScriptedOracle o0(0);
  bool ok = true;
  auto pair = [&] {
    absl::StatusOr<MemPool::Allocation> a = pool.Allocate(64 * kKiB, o0);
    if (!a.ok() || a->rule == ReuseRule::kInternalDependency) {
      ok = false;
      return;
    }
    pool.FreeAsync(a->block, 0, ++pos[0]);
  };
  for (int i = 0; i < 1000; ++i) pair();
  const PoolStats warm = pool.Stats();
  const size_t before = g_allocations.load(std::memory_order_relaxed);
  for (int i = 0; i < 10000; ++i) pair();
  const size_t after = g_allocations.load(std::memory_order_relaxed);
  EXPECT_TRUE(ok);
  EXPECT_EQ(after - before, 0u);
  const PoolStats s = pool.Stats();
  EXPECT_EQ(s.reuse_same_stream - warm.reuse_same_stream, 10000u);
  EXPECT_EQ(s.reserved_bytes, warm.reserved_bytes);
  EXPECT_TRUE(pool.CheckInvariants());
}

TEST(MemPoolHostHeapTest, SameStreamPairDoesNotAllocateWith1000OtherFreeBlocks) {
  ExpectSteadyPairsDoNotAllocate(1000);
}

TEST(MemPoolHostHeapTest, SameStreamPairDoesNotAllocateWith64000OtherFreeBlocks) {
  ExpectSteadyPairsDoNotAllocate(64000);
}

TEST(MemPoolHostHeapTest, SameStreamPairInAnExpandablePoolDoesNotAllocate) {
  ExpectSteadyPairsDoNotAllocate(1000, /*expandable=*/true);
  ExpectSteadyPairsDoNotAllocate(64000, /*expandable=*/true);
}

}  // namespace
}  // namespace streampool::internal
