// Stream, Event, MemPool and AsyncPtr: each owner destroys or frees exactly
// what it holds, once, and moving or releasing hands that duty over.
//
// "Destroyed" is observed through the runtime: handles are never reused, so a
// call on a destroyed handle answers kNotFound.
#include "streampool/raii.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class RaiiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
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
  bool StreamAlive(StreamId s) const {
    return rt_->StreamQuery(s).code() != absl::StatusCode::kNotFound;
  }
  bool EventAlive(EventId e) const {
    return rt_->EventQuery(e).code() != absl::StatusCode::kNotFound;
  }

  std::unique_ptr<Runtime> rt_;
  PoolId pool_;
};

// ------------------------------------------------------------------ Stream

TEST_F(RaiiTest, StreamIsDestroyedAtScopeExit) {
  StreamId id;
  {
    absl::StatusOr<Stream> s = Stream::Create(*rt_);
    ASSERT_TRUE(s.ok()) << s.status();
    id = s->id();
    EXPECT_NE(id.value, 0u);
    EXPECT_EQ(s->c(), id.c());
    EXPECT_EQ(s->runtime(), rt_.get());
    EXPECT_TRUE(s->Query().ok());
    EXPECT_TRUE(s->Synchronize().ok());
    EXPECT_TRUE(StreamAlive(id));
  }
  EXPECT_FALSE(StreamAlive(id));
}

TEST_F(RaiiTest, MovedStreamIsDestroyedOnceByItsNewOwner) {
  absl::StatusOr<Stream> made = Stream::Create(*rt_, 0, /*non_blocking=*/true);
  ASSERT_TRUE(made.ok());
  const StreamId id = made->id();
  Stream a = *std::move(made);
  Stream b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.id().value, 0u);
  EXPECT_EQ(a.Query().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b);
  EXPECT_EQ(b.id().value, id.value);
  // Move-assignment destroys the stream the target held.
  absl::StatusOr<Stream> other = Stream::Create(*rt_);
  ASSERT_TRUE(other.ok());
  const StreamId other_id = other->id();
  b = *std::move(other);
  EXPECT_FALSE(StreamAlive(id));
  EXPECT_TRUE(StreamAlive(other_id));
  EXPECT_TRUE(b.Destroy().ok());
  EXPECT_FALSE(StreamAlive(other_id));
  EXPECT_FALSE(b);
  EXPECT_TRUE(b.Destroy().ok());  // empty: nothing to do
}

TEST_F(RaiiTest, ReleasedStreamOutlivesItsOwner) {
  StreamId id;
  {
    absl::StatusOr<Stream> s = Stream::Create(*rt_);
    ASSERT_TRUE(s.ok());
    id = s->release();
    EXPECT_FALSE(*s);
  }
  EXPECT_TRUE(StreamAlive(id));
  EXPECT_TRUE(rt_->DestroyStream(id).ok());
}

TEST_F(RaiiTest, StreamDestroyReportsAHandleDestroyedBehindItsBack) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(rt_->DestroyStream(s->id()).ok());
  EXPECT_EQ(s->Destroy().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(*s);  // empty afterwards all the same
}

TEST_F(RaiiTest, StreamCreateFailureIsAnErrorValue) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_, /*device=*/7);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kOutOfRange);
}

// ------------------------------------------------------------------- Event

TEST_F(RaiiTest, EventIsDestroyedAtScopeExitAndOrdersStreams) {
  absl::StatusOr<Stream> producer = Stream::Create(*rt_);
  absl::StatusOr<Stream> consumer = Stream::Create(*rt_);
  ASSERT_TRUE(producer.ok() && consumer.ok());
  EventId id;
  void* freed = nullptr;
  {
    absl::StatusOr<Event> ev = Event::Create(*rt_);
    ASSERT_TRUE(ev.ok()) << ev.status();
    id = ev->id();
    EXPECT_EQ(ev->c(), id.c());
    // The producer frees a buffer after 1 us of work and records the event;
    // the consumer waits for it, so rule 2 (event dependency) hands the
    // consumer the same bytes while the producer is still busy. The buffer
    // fills its 2 MiB granule, so no never-used READY bytes beside it could
    // serve the consumer by rule 1 first.
    absl::StatusOr<AsyncPtr> buf = AsyncPtr::Allocate(*rt_, 2 * kMiB, producer->id());
    ASSERT_TRUE(buf.ok());
    freed = buf->get();
    ASSERT_TRUE(rt_->LaunchKernel(producer->id(), 1000, {}).ok());
    buf->reset();
    ASSERT_TRUE(ev->Record(producer->id()).ok());
    EXPECT_EQ(ev->Query().code(), absl::StatusCode::kUnavailable);
    ASSERT_TRUE(ev->MakeStreamWait(consumer->id()).ok());
    absl::StatusOr<AllocInfo> a = rt_->MallocAsync(2 * kMiB, consumer->id());
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->ptr, freed);
    EXPECT_EQ(a->rule, ReuseRule::kEventDependency);
    ASSERT_TRUE(rt_->FreeAsync(a->ptr, consumer->id()).ok());
    EXPECT_TRUE(ev->Synchronize().ok());
    EXPECT_EQ(rt_->HostNow(), 1000u);
    EXPECT_TRUE(EventAlive(id));
  }
  EXPECT_FALSE(EventAlive(id));
}

TEST_F(RaiiTest, MovedEventIsDestroyedOnceAndReleaseHandsItOver) {
  absl::StatusOr<Event> made = Event::Create(*rt_);
  ASSERT_TRUE(made.ok());
  const EventId id = made->id();
  Event a = *std::move(made);
  Event b;
  EXPECT_FALSE(b);
  b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.release().value, id.value);
  EXPECT_FALSE(b);
  EXPECT_TRUE(EventAlive(id));
  EXPECT_TRUE(rt_->DestroyEvent(id).ok());
}

// ----------------------------------------------------------------- MemPool

TEST_F(RaiiTest, MemPoolIsDestroyedAtScopeExit) {
  PoolId id;
  {
    PoolProps props;
    props.max_size = 4 * kMiB;
    absl::StatusOr<MemPool> pool = MemPool::Create(*rt_, props);
    ASSERT_TRUE(pool.ok()) << pool.status();
    id = pool->id();
    EXPECT_EQ(pool->c(), id.c());
    absl::StatusOr<PoolStats> st = pool->Stats();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->reserved_bytes, 0u);
  }
  EXPECT_EQ(rt_->GetPoolStats(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RaiiTest, MemPoolCreateFailureIsAnErrorValue) {
  PoolProps props;
  props.alloc_type = static_cast<AllocationType>(9);  // no such type
  EXPECT_EQ(MemPool::Create(*rt_, props).status().code(), absl::StatusCode::kInvalidArgument);
  props.alloc_type = AllocationType::kDevice;
  props.device = 3;  // the runtime has one device
  EXPECT_EQ(MemPool::Create(*rt_, props).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(RaiiTest, MemPoolOverAnUpstreamUnmapsWhenDestroyed) {
  struct Counts {
    int maps = 0;
    int unmaps = 0;
  };
  auto counts = std::make_shared<Counts>();
  UpstreamCallbacks cb;
  cb.map = [counts](uint64_t bytes) -> void* {
    ++counts->maps;
    return ::operator new (bytes, std::align_val_t{4096});
  };
  cb.unmap = [counts](void* base, uint64_t bytes) {
    ++counts->unmaps;
    ::operator delete (base, std::align_val_t{4096});
  };
  PoolProps props;
  props.release_threshold = UINT64_MAX;  // keep the chunk through syncs
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  {
    absl::StatusOr<MemPool> pool = MemPool::Create(*rt_, props, NewCallbackMemory(cb));
    ASSERT_TRUE(pool.ok()) << pool.status();
    {
      absl::StatusOr<AsyncPtr> p = AsyncPtr::AllocateFromPool(*rt_, 1000, pool->id(), s->id());
      ASSERT_TRUE(p.ok());
      static_cast<char*>(p->get())[999] = 1;  // touchable user memory
    }
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_EQ(counts->maps, 1);
    EXPECT_EQ(counts->unmaps, 0);  // threshold: the free chunk stays
  }
  EXPECT_EQ(counts->unmaps, 1);
}

TEST_F(RaiiTest, DestroyingAPoolLeavesItsLiveAllocationsValid) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  absl::StatusOr<MemPool> pool = MemPool::Create(*rt_, PoolProps{});
  ASSERT_TRUE(pool.ok());
  absl::StatusOr<AsyncPtr> p = AsyncPtr::AllocateFromPool(*rt_, 4096, pool->id(), s->id());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(pool->Destroy().ok());
  static_cast<char*>(p->get())[0] = 1;
  EXPECT_TRUE(p->Free().ok());
}

// ---------------------------------------------------------------- AsyncPtr

TEST_F(RaiiTest, AsyncPtrFreesOnItsStreamAtScopeExit) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  void* raw = nullptr;
  {
    absl::StatusOr<AsyncPtr> p = AsyncPtr::Allocate(*rt_, kMiB, s->id());
    ASSERT_TRUE(p.ok()) << p.status();
    raw = p->get();
    ASSERT_NE(raw, nullptr);
    EXPECT_EQ(p->as<char>(), static_cast<char*>(raw));
    EXPECT_EQ(p->stream().value, s->id().value);
    EXPECT_EQ(Stats().used_bytes, kMiB);
  }
  EXPECT_EQ(Stats().used_bytes, 0u);
  EXPECT_EQ(Stats().free_count, 1u);
  // The free was on s: s gets the same bytes back from its own pending free.
  absl::StatusOr<AllocInfo> again = rt_->MallocAsync(kMiB, s->id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ptr, raw);
  EXPECT_EQ(again->rule, ReuseRule::kSameStream);
  ASSERT_TRUE(rt_->FreeAsync(again->ptr, s->id()).ok());
}

TEST_F(RaiiTest, AsyncPtrSetStreamFreesOnTheConsumer) {
  absl::StatusOr<Stream> producer = Stream::Create(*rt_);
  absl::StatusOr<Stream> consumer = Stream::Create(*rt_);
  ASSERT_TRUE(producer.ok() && consumer.ok());
  absl::StatusOr<AsyncPtr> p = AsyncPtr::Allocate(*rt_, kMiB, producer->id());
  ASSERT_TRUE(p.ok());
  void* raw = p->get();
  // The consumer takes the buffer over (in a program: after waiting on an
  // event the producer recorded) and frees it when done.
  p->set_stream(consumer->id());
  ASSERT_TRUE(rt_->LaunchKernel(consumer->id(), 500, {}).ok());
  p->reset();
  EXPECT_FALSE(*p);
  absl::StatusOr<AllocInfo> a = rt_->MallocAsync(kMiB, consumer->id());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ptr, raw);
  EXPECT_EQ(a->rule, ReuseRule::kSameStream);
  ASSERT_TRUE(rt_->FreeAsync(a->ptr, consumer->id()).ok());
}

TEST_F(RaiiTest, AsyncPtrReleaseKeepsTheAllocationLive) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  void* raw = nullptr;
  {
    absl::StatusOr<AsyncPtr> p = AsyncPtr::Allocate(*rt_, 4096, s->id());
    ASSERT_TRUE(p.ok());
    raw = p->release();
    EXPECT_EQ(p->get(), nullptr);
  }
  EXPECT_EQ(Stats().used_bytes, 4096u);
  EXPECT_EQ(Stats().free_count, 0u);
  ASSERT_TRUE(rt_->FreeAsync(raw, s->id()).ok());
}

TEST_F(RaiiTest, AsyncPtrMoveTransfersAndMoveAssignFreesTheOld) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  absl::StatusOr<AsyncPtr> made = AsyncPtr::Allocate(*rt_, 4096, s->id());
  ASSERT_TRUE(made.ok());
  AsyncPtr a = *std::move(made);
  void* first = a.get();
  AsyncPtr b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(Stats().free_count, 0u);

  absl::StatusOr<AsyncPtr> second = AsyncPtr::Allocate(*rt_, 8192, s->id());
  ASSERT_TRUE(second.ok());
  b = *std::move(second);  // frees `first`
  EXPECT_EQ(Stats().free_count, 1u);
  EXPECT_EQ(Stats().used_bytes, 8192u);
  b.reset();
  b.reset();  // empty: nothing more
  EXPECT_EQ(Stats().free_count, 2u);
  EXPECT_EQ(Stats().used_bytes, 0u);
}

TEST_F(RaiiTest, AsyncPtrFreeFailureKeepsOwnership) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  absl::StatusOr<Stream> gone = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok() && gone.ok());
  absl::StatusOr<AsyncPtr> p = AsyncPtr::Allocate(*rt_, 4096, gone->id());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(gone->Destroy().ok());
  // A free on a destroyed stream is refused and changes nothing.
  EXPECT_EQ(p->Free().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p->get(), nullptr);
  EXPECT_EQ(Stats().used_bytes, 4096u);
  p->set_stream(s->id());
  EXPECT_TRUE(p->Free().ok());
  EXPECT_FALSE(*p);
  EXPECT_EQ(Stats().used_bytes, 0u);
  EXPECT_TRUE(p->Free().ok());  // empty: OK
}

TEST_F(RaiiTest, AsyncPtrAdoptsARawAllocationAndSizeZeroIsEmpty) {
  absl::StatusOr<Stream> s = Stream::Create(*rt_);
  ASSERT_TRUE(s.ok());
  absl::StatusOr<AllocInfo> a = rt_->MallocAsync(512, s->id());
  ASSERT_TRUE(a.ok());
  {
    AsyncPtr owner(*rt_, a->ptr, s->id());
    EXPECT_EQ(Stats().used_bytes, 512u);
  }
  EXPECT_EQ(Stats().used_bytes, 0u);

  absl::StatusOr<AsyncPtr> zero = AsyncPtr::Allocate(*rt_, 0, s->id());
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(*zero);
  EXPECT_EQ(Stats().alloc_count, 1u);  // size 0 is no allocation

  absl::StatusOr<AsyncPtr> huge = AsyncPtr::Allocate(*rt_, uint64_t{2} << 30, s->id());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace streampool
