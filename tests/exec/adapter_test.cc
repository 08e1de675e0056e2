// A runtime over an embedder's streams (StreamAdapter), with the example
// thread-backed adapter: the embedder launches native work, streampool
// serves allocations and its reuse policies follow the native dependencies.
#include <atomic>
#include <cstring>
#include <memory>

#include "examples/thread_stream_adapter.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

std::unique_ptr<Runtime> AdapterRuntime() {
  RuntimeConfig cfg;
  cfg.adapter = std::make_shared<example::ThreadStreams>();
  cfg.check_stream_order = true;
  auto rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return *std::move(rt);
}

example::ThreadStreams::Stream& Native(Runtime& rt, StreamId s) {
  return *static_cast<example::ThreadStreams::Stream*>(*rt.NativeStream(s));
}

TEST(AdapterTest, EventDependencyReuseFollowsNativeOrder) {
  auto rt = AdapterRuntime();
  auto producer = rt->CreateStream(0);
  auto consumer = rt->CreateStream(0);
  auto ev = rt->CreateEvent();
  ASSERT_TRUE(producer.ok() && consumer.ok() && ev.ok());
  std::atomic<int> bad{0};
  void* first = nullptr;
  // Each buffer fills a 2 MiB granule, so the only memory a round can reuse
  // is the previous round's, through the events (rule 1 finds nothing).
  constexpr size_t kBytes = size_t{2} << 20;
  for (int round = 0; round < 100; ++round) {
    auto a = rt->MallocAsync(kBytes, *producer);
    ASSERT_TRUE(a.ok());
    if (round == 0) first = a->ptr;
    auto* p = static_cast<unsigned char*>(a->ptr);
    Native(*rt, *producer).Launch([p, round] { std::memset(p, round, kBytes); });
    ASSERT_TRUE(rt->RecordEvent(*ev, *producer).ok());      // native record
    ASSERT_TRUE(rt->StreamWaitEvent(*consumer, *ev).ok());  // native wait
    Native(*rt, *consumer).Launch([p, round, &bad] {
      if (p[0] != round || p[kBytes - 1] != round) ++bad;
    });
    ASSERT_TRUE(rt->FreeAsync(p, *consumer).ok());
    ASSERT_TRUE(rt->RecordEvent(*ev, *consumer).ok());
    ASSERT_TRUE(rt->StreamWaitEvent(*producer, *ev).ok());
  }
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
  EXPECT_EQ(bad.load(), 0);
  auto stats = rt->GetPoolStats(*rt->DefaultPool(0));
  ASSERT_TRUE(stats.ok());
  // Every round after the first reuses the consumer's free through the
  // events: one chunk serves the whole pipeline.
  EXPECT_EQ(stats->reuse_event_dependency, 99u);
  EXPECT_EQ(stats->upstream_maps, 1u);
  EXPECT_NE(first, nullptr);
  EXPECT_TRUE(rt->CheckReports().empty());
}

TEST(AdapterTest, QueryAndSynchronizeSeeNativeProgress) {
  auto rt = AdapterRuntime();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  std::atomic<bool> go{false};
  Native(*rt, *s).Launch([&go] {
    while (!go.load()) std::this_thread::yield();
  });
  auto a = rt->MallocAsync(4096, *s);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  EXPECT_EQ(rt->StreamQuery(*s).code(), absl::StatusCode::kUnavailable);
  go = true;
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_TRUE(rt->StreamQuery(*s).ok());
  // The sync proved the free complete and, threshold 0, released the chunk.
  EXPECT_EQ(rt->GetPoolStats(*rt->DefaultPool(0))->reserved_bytes, 0u);
}

TEST(AdapterTest, RuntimesWithoutAnAdapterHaveNoNativeStreams) {
  auto rt = Runtime::Create();
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->CreateStream(0);
  EXPECT_EQ((*rt)->NativeStream(*s).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace streampool
