// PoolResource: std::pmr containers on stream-ordered pool memory.
//
// Expected values follow docs/design.md: a Device pool's block of `len` bytes
// occupies ALIGN_UP(len, 256); growth maps ALIGN_UP(size, 2 MiB); a freed
// block is PENDING on its stream and reusable by that stream at once; a
// synchronize releases wholly free chunks (threshold 0). Host backing, so the
// memory is real and the host may touch it (it owns it between allocation and
// free in the order of the resource's stream).
#include "streampool/pool_resource.h"

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <new>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

class PoolResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
    auto s = rt_->CreateStream(0);
    ASSERT_TRUE(s.ok());
    stream_ = *s;
    auto p = rt_->DefaultPool(0);
    ASSERT_TRUE(p.ok());
    pool_ = *p;
  }

  PoolStats Stats(PoolId pool) const {
    auto st = rt_->GetPoolStats(pool);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : PoolStats{};
  }
  PoolStats Stats() const { return Stats(pool_); }

  std::unique_ptr<Runtime> rt_;
  StreamId stream_;
  PoolId pool_;
};

TEST_F(PoolResourceTest, VectorBuffersComeFromThePoolAndTheOldOneIsReusedBySameStream) {
  PoolResource mr(*rt_, pool_, stream_, 256);
  std::pmr::vector<uint64_t> v(&mr);
  v.reserve(1000);  // 8000 bytes -> one 8192-byte block of a fresh 2 MiB chunk
  EXPECT_EQ(Stats().used_bytes, 8192u);
  EXPECT_EQ(Stats().reserved_bytes, 2 * kMiB);
  EXPECT_EQ(Stats().fresh_allocs, 1u);
  auto attr = rt_->GetPointerAttributes(v.data());
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->pool, pool_);
  EXPECT_EQ(attr->base, v.data());
  EXPECT_EQ(attr->size, 8000u);

  // The host owns the bytes: nothing on the stream touches them.
  for (uint64_t i = 0; i < 1000; ++i) v.push_back(i);
  const uint64_t* first = v.data();

  // Growing allocates the new buffer (16000 -> 16128 bytes, right after the
  // first block), copies, then frees the old one on the stream: PENDING(S).
  v.reserve(2000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()), reinterpret_cast<uintptr_t>(first) + 8192);
  EXPECT_EQ(std::accumulate(v.begin(), v.end(), uint64_t{0}), 999u * 1000 / 2);
  EXPECT_EQ(Stats().used_bytes, AlignUp(16000, 256));
  EXPECT_EQ(Stats().free_count, 1u);

  // Same stream: the pending buffer is reusable at once, no synchronize.
  std::pmr::vector<uint64_t> w(1000, 7, &mr);
  EXPECT_EQ(w.data(), first);
  EXPECT_EQ(Stats().reuse_same_stream, 1u);
  EXPECT_EQ(w[999], 7u);
}

TEST_F(PoolResourceTest, DestroyedContainersFreeOnTheStreamAndSyncReleasesTheChunk) {
  {
    PoolResource mr(*rt_, pool_, stream_, 256);
    std::pmr::vector<int> v(4096, 1, &mr);  // 16 KiB
    std::pmr::string s(&mr);
    s.assign(1000, 'x');  // past the small-string buffer
    EXPECT_EQ(Stats().used_bytes, 16384 + AlignUp(s.capacity() + 1, 256));
    EXPECT_EQ(Stats().alloc_count, 2u);
  }
  // Both frees are enqueued; the bytes are PENDING, so the chunk stays.
  EXPECT_EQ(Stats().used_bytes, 0u);
  EXPECT_EQ(Stats().free_count, 2u);
  EXPECT_EQ(Stats().reserved_bytes, 2 * kMiB);
  ASSERT_TRUE(rt_->StreamSynchronize(stream_).ok());
  EXPECT_EQ(Stats().reserved_bytes, 0u);
  EXPECT_EQ(Stats().upstream_unmaps, 1u);
}

TEST_F(PoolResourceTest, NestedPmrContainersAllUseTheResource) {
  PoolResource mr(*rt_, pool_, stream_, 256);
  // polymorphic_allocator propagates to elements by uses-allocator
  // construction: the strings' heap buffers come from the pool too.
  std::pmr::vector<std::pmr::string> names(&mr);
  names.reserve(4);
  names.emplace_back(200, 'a');
  names.emplace_back(300, 'b');
  for (const std::pmr::string& n : names) {
    EXPECT_EQ(n.get_allocator().resource(), &mr);
    auto attr = rt_->GetPointerAttributes(n.data());
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(attr->pool, pool_);
  }
  EXPECT_EQ(Stats().alloc_count, 3u);  // the vector's buffer and two strings
  EXPECT_EQ(std::string_view(names[1]), std::string(300, 'b'));
}

TEST_F(PoolResourceTest, ZeroBytesStillGivesADistinctPointer) {
  PoolResource mr(*rt_, pool_, stream_, 256);
  void* a = mr.allocate(0, 1);
  void* b = mr.allocate(0, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(Stats().used_bytes, 512u);  // one byte each, one 256-B block each
  mr.deallocate(a, 0, 1);
  mr.deallocate(b, 0, 1);
  EXPECT_EQ(Stats().used_bytes, 0u);
}

TEST_F(PoolResourceTest, OverAlignedRequestsOverAllocateAndFreeTheWholeBlock) {
  PoolResource mr(*rt_, pool_, stream_, 256);
  void* head = mr.allocate(256, 16);  // at the chunk's start
  ASSERT_EQ(reinterpret_cast<uintptr_t>(head) % 4096, 0u) << "host mmap is page aligned";

  // 512-B alignment from a 256-B pool: the block (100 + 256 bytes -> 512)
  // starts right after `head`, at head + 256, so the aligned pointer is
  // head + 512, inside it.
  void* p = mr.allocate(100, 512);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(head) + 512);
  EXPECT_EQ(Stats().used_bytes, 256u + 512u);
  auto attr = rt_->GetPointerAttributes(p);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(attr->base), reinterpret_cast<uintptr_t>(head) + 256);

  // Deallocation frees the block, not the aligned pointer inside it.
  mr.deallocate(p, 100, 512);
  EXPECT_EQ(Stats().used_bytes, 256u);
  EXPECT_EQ(Stats().failed_alloc_count, 0u);
  mr.deallocate(head, 256, 16);
  EXPECT_EQ(Stats().used_bytes, 0u);
}

TEST_F(PoolResourceTest, DefaultGuaranteeOverAllocatesOnlyAboveThirtyTwoBytes) {
  // Told nothing about the pool, the resource assumes 32-B blocks.
  PoolResource mr(*rt_, pool_, stream_);
  EXPECT_EQ(mr.pool_alignment(), PoolResource::kMinPoolAlignment);
  void* a = mr.allocate(100, 32);  // 100 -> 256
  EXPECT_EQ(Stats().used_bytes, 256u);
  void* b = mr.allocate(240, 64);  // 240 + 32 -> 512
  EXPECT_EQ(Stats().used_bytes, 256u + 512u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  mr.deallocate(b, 240, 64);
  mr.deallocate(a, 100, 32);
  EXPECT_EQ(Stats().used_bytes, 0u);
  EXPECT_EQ(Stats().free_count, 2u);
}

TEST_F(PoolResourceTest, ExhaustionThrowsBadAllocAndChangesNothingElse) {
  PoolProps props;
  props.max_size = 2 * kMiB;
  auto small = rt_->CreatePool(props);
  ASSERT_TRUE(small.ok());
  PoolResource mr(*rt_, *small, stream_, PoolResource::PoolAlignment(props));
  EXPECT_THROW(static_cast<void>(mr.allocate(4 * kMiB, 8)), std::bad_alloc);
  EXPECT_EQ(Stats(*small).failed_alloc_count, 1u);
  EXPECT_EQ(Stats(*small).reserved_bytes, 0u);

  // A container sees the standard exception and keeps its old buffer.
  std::pmr::vector<char> v(kMiB, 'z', &mr);
  EXPECT_THROW(v.resize(3 * kMiB), std::bad_alloc);
  EXPECT_EQ(v.size(), kMiB);
  EXPECT_EQ(v.back(), 'z');
  EXPECT_EQ(Stats(*small).failed_alloc_count, 2u);
}

TEST_F(PoolResourceTest, DestroyedPoolOrStreamThrowsBadAlloc) {
  auto other = rt_->CreateStream(0);
  ASSERT_TRUE(other.ok());
  PoolResource on_dead_stream(*rt_, pool_, *other, 256);
  ASSERT_TRUE(rt_->DestroyStream(*other).ok());
  EXPECT_THROW(static_cast<void>(on_dead_stream.allocate(64, 8)), std::bad_alloc);

  PoolResource on_no_pool(*rt_, PoolId{12345}, stream_, 256);
  EXPECT_THROW(static_cast<void>(on_no_pool.allocate(64, 8)), std::bad_alloc);
  EXPECT_EQ(Stats().alloc_count, 0u);
}

// What PoolAlignment promises, per pool type, is exactly the spacing of block
// starts: the second block of a fresh chunk starts at a multiple of it but not
// of twice it. The resource, told that value, serves up to it directly and
// over-allocates past it.
TEST_F(PoolResourceTest, PoolAlignmentIsTheBlockStartGranuleOfEachType) {
  struct Case {
    const char* name;
    PoolProps props;
    uint64_t first;     // a request whose block is an odd multiple of the granule
    uint64_t expected;  // PoolAlignment(props)
  };
  PoolProps device, pinned, huge, dvpp, acl, acl32;
  pinned.alloc_type = AllocationType::kPinnedHost;
  huge.alloc_type = AllocationType::kHugePage;
  huge.page_policy = PagePolicy::kNormalOnly;
  dvpp.alloc_type = AllocationType::kDvpp;
  dvpp.page_policy = PagePolicy::kNormalOnly;
  acl.acl_rounding = true;
  acl32.acl_rounding = true;
  acl32.acl_align32 = true;
  const Case cases[] = {
      {"device", device, 1, 256},  // 256
      {"pinned", pinned, 1, 64},   // 64
      {"huge", huge, 1, 256},      // 256
      {"dvpp", dvpp, 1, 128},      // ALIGN_UP(32 + 32, 128) = 128
      {"acl", acl, 1, 64},         // ALIGN_UP(ALIGN_UP(1, 32) + 32, 64) = 64
      {"acl32", acl32, 1, 64},     // ALIGN_UP(1, 64) = 64
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(PoolResource::PoolAlignment(c.props), c.expected);
    auto pool = rt_->CreatePool(c.props);
    ASSERT_TRUE(pool.ok()) << pool.status();
    PoolResource mr(*rt_, *pool, stream_, PoolResource::PoolAlignment(c.props));
    EXPECT_EQ(mr.pool_alignment(), c.expected);
    void* a = mr.allocate(c.first, 1);
    void* b = mr.allocate(1, c.expected);  // served as is
    const uint64_t offset = reinterpret_cast<uintptr_t>(b) - reinterpret_cast<uintptr_t>(a);
    EXPECT_EQ(offset % c.expected, 0u);
    EXPECT_NE(offset % (2 * c.expected), 0u);
    void* d = mr.allocate(1, 2 * c.expected);  // over-allocated
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % (2 * c.expected), 0u);
    mr.deallocate(d, 1, 2 * c.expected);
    mr.deallocate(b, 1, c.expected);
    mr.deallocate(a, c.first, 1);
    EXPECT_EQ(Stats(*pool).used_bytes, 0u);
    EXPECT_EQ(Stats(*pool).failed_alloc_count, 0u);
    ASSERT_TRUE(rt_->DestroyPool(*pool).ok());
  }
}

TEST_F(PoolResourceTest, OverstatedPoolAlignmentThrowsInsteadOfMisaligning) {
  PoolProps pinned;
  pinned.alloc_type = AllocationType::kPinnedHost;  // 64-B blocks
  auto pool = rt_->CreatePool(pinned);
  ASSERT_TRUE(pool.ok());
  PoolResource mr(*rt_, *pool, stream_, /*pool_alignment=*/256);  // wrong
  void* a = mr.allocate(64, 16);                                  // at the page-aligned chunk start
  // 128 <= the claimed 256, so no over-allocation: the block lands at a + 64,
  // which is not 128-aligned. The resource gives it back and throws.
  EXPECT_THROW(static_cast<void>(mr.allocate(64, 128)), std::bad_alloc);
  EXPECT_EQ(Stats(*pool).alloc_count, 2u);
  EXPECT_EQ(Stats(*pool).free_count, 1u);
  EXPECT_EQ(Stats(*pool).used_bytes, 64u);
  mr.deallocate(a, 64, 16);
}

TEST_F(PoolResourceTest, InvalidPoolAlignmentFallsBackToTheMinimum) {
  EXPECT_EQ(PoolResource(*rt_, pool_, stream_, 48).pool_alignment(), 32u);
  EXPECT_EQ(PoolResource(*rt_, pool_, stream_, 16).pool_alignment(), 32u);
  EXPECT_EQ(PoolResource(*rt_, pool_, stream_, 0).pool_alignment(), 32u);
  EXPECT_EQ(PoolResource(*rt_, pool_, stream_, 4096).pool_alignment(), 4096u);
}

TEST_F(PoolResourceTest, EqualityIsSameRuntimePoolAndStream) {
  auto other_stream = rt_->CreateStream(0);
  ASSERT_TRUE(other_stream.ok());
  PoolProps props;
  auto other_pool = rt_->CreatePool(props);
  ASSERT_TRUE(other_pool.ok());
  auto view = Runtime::FromC(rt_->c());  // the same runtime, another object
  ASSERT_TRUE(view.ok());

  PoolResource a(*rt_, pool_, stream_, 256);
  PoolResource same(**view, pool_, stream_, 32);
  PoolResource by_stream(*rt_, pool_, *other_stream, 256);
  PoolResource by_pool(*rt_, *other_pool, stream_, 256);
  EXPECT_TRUE(a.is_equal(same));
  EXPECT_TRUE(same.is_equal(a));
  EXPECT_FALSE(a.is_equal(by_stream));
  EXPECT_FALSE(a.is_equal(by_pool));
  EXPECT_FALSE(a.is_equal(*std::pmr::new_delete_resource()));

  // Equal resources may free each other's memory, over-aligned included.
  void* p = a.allocate(1000, 128);
  same.deallocate(p, 1000, 128);
  EXPECT_EQ(Stats().used_bytes, 0u);
}

TEST_F(PoolResourceTest, OtherStreamsMustOrderTheFreeAfterTheirAccess) {
  // Collect reports instead of aborting (the suite runs with =fatal).
  rt_->EnableChecker(true);
  auto reader = rt_->CreateStream(0);
  auto ev = rt_->CreateEvent();
  ASSERT_TRUE(reader.ok() && ev.ok());
  PoolResource mr(*rt_, pool_, stream_, 256);
  {
    std::pmr::vector<float> v(1024, 1.0f, &mr);
    // The reader is ordered after the allocation by an event.
    ASSERT_TRUE(rt_->RecordEvent(*ev, stream_).ok());
    ASSERT_TRUE(rt_->StreamWaitEvent(*reader, *ev).ok());
    Access read{v.data(), v.size() * sizeof(float), false};
    ASSERT_TRUE(rt_->LaunchKernel(*reader, 1000, {&read, 1}).ok());
    // A same-stream kernel needs no ordering at all.
    ASSERT_TRUE(rt_->LaunchKernel(stream_, 1000, {&read, 1}).ok());
    EXPECT_TRUE(rt_->CheckReports().empty());
  }  // ~vector: FreeAsync on stream_, not ordered after the reader's kernel
  std::vector<CheckReport> reports = rt_->CheckReports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].kind, CheckKind::kUseAfterFree);
  EXPECT_EQ(reports[0].stream.value, reader->value);        // the unordered access
  EXPECT_EQ(reports[0].other_stream.value, stream_.value);  // the free
}

TEST_F(PoolResourceTest, ThreadsExecutorVectorGrowsOnRealMemory) {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kThreads;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->CreateStream(0);
  auto pool = (*rt)->DefaultPool(0);
  ASSERT_TRUE(s.ok() && pool.ok());
  {
    PoolResource mr(**rt, *pool, *s, 256);
    std::pmr::vector<uint32_t> v(&mr);
    for (uint32_t i = 0; i < 100000; ++i) v.push_back(i);
    EXPECT_EQ(std::accumulate(v.begin(), v.end(), uint64_t{0}), uint64_t{99999} * 100000 / 2);
  }
  ASSERT_TRUE((*rt)->StreamSynchronize(*s).ok());
  auto st = (*rt)->GetPoolStats(*pool);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->used_bytes, 0u);
  EXPECT_EQ(st->alloc_count, st->free_count);
  EXPECT_EQ(st->reserved_bytes, 0u);
}

using PoolResourceDeathTest = PoolResourceTest;

TEST_F(PoolResourceDeathTest, DeallocatingAfterTheStreamIsDestroyedAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto doomed = rt_->CreateStream(0);
  ASSERT_TRUE(doomed.ok());
  PoolResource mr(*rt_, pool_, *doomed, 256);
  void* p = mr.allocate(64, 8);
  ASSERT_TRUE(rt_->DestroyStream(*doomed).ok());
  EXPECT_DEATH(mr.deallocate(p, 64, 8), "PoolResource: FreeAsync");
}

}  // namespace
}  // namespace streampool
