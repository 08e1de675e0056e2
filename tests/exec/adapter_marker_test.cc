// The StreamAdapter contract as an adapter sees it: markers are made only
// when someone must learn where a stream is (a same-stream pair makes no
// call), and a marker is released only once no native Wait on it can still
// be queued. The adapter here is scripted: its streams advance only when the
// test says, and it records every violation of the contract it sees.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/stream_adapter.h"

namespace streampool {
namespace {

class ScriptedAdapter final : public StreamAdapter {
 public:
  struct Item {
    int marker = -1;  // a Wait on this marker, or -1 for a record
  };
  struct Stream {
    std::vector<Item> items;
    size_t reached = 0;  // items[0, reached) are done
  };
  struct MarkerState {
    int stream;
    size_t index;  // the record's item
    bool released = false;
  };

  absl::StatusOr<NativeStream> CreateStream(int, bool, bool) override {
    streams_.push_back(std::make_unique<Stream>());
    return streams_.back().get();
  }
  void DestroyStream(NativeStream s) override { ++destroyed; }
  Marker Record(NativeStream s) override {
    ++records;
    auto* st = static_cast<Stream*>(s);
    st->items.push_back(Item{});
    markers_.push_back(MarkerState{IndexOf(st), st->items.size() - 1});
    return reinterpret_cast<Marker>(markers_.size());  // 1-based: never null
  }
  bool Done(Marker m) override {
    const MarkerState& ms = Get(m);
    if (ms.released) violations.push_back("Done on a released marker");
    return streams_[ms.stream]->reached > ms.index;
  }
  void Wait(NativeStream s, Marker m) override {
    ++waits;
    if (Get(m).released) violations.push_back("Wait on a released marker");
    auto* st = static_cast<Stream*>(s);
    st->items.push_back(Item{static_cast<int>(reinterpret_cast<uintptr_t>(m)) - 1});
  }
  void Synchronize(Marker m) override {
    MarkerState& ms = Get(m);
    if (ms.released) violations.push_back("Synchronize on a released marker");
    // The host waits: the device runs the marker's stream up to it.
    Advance(ms.stream, ms.index + 1);
  }
  void Release(Marker m) override {
    MarkerState& ms = Get(m);
    if (ms.released) violations.push_back("double Release");
    ms.released = true;
    ++releases;
    // A native Wait on it still queued (not yet passed by its stream) would
    // read freed memory in a real adapter.
    for (const auto& st : streams_) {
      for (size_t i = st->reached; i < st->items.size(); ++i) {
        if (st->items[i].marker == static_cast<int>(reinterpret_cast<uintptr_t>(m)) - 1) {
          violations.push_back("Release while a Wait on the marker is queued");
        }
      }
    }
  }

  // Runs stream `s` up to `n` items, as far as its waits allow (a wait
  // passes once its marker's stream reached the marker).
  void Advance(int s, size_t n) {
    Stream& st = *streams_[s];
    while (st.reached < std::min(n, st.items.size())) {
      const Item& it = st.items[st.reached];
      if (it.marker >= 0) {
        const MarkerState& ms = markers_[it.marker];
        if (ms.released) violations.push_back("a queued Wait ran on a released marker");
        if (streams_[ms.stream]->reached <= ms.index) Advance(ms.stream, ms.index + 1);
      }
      ++st.reached;
    }
  }
  void RunAll() {
    for (int round = 0; round < 4; ++round) {
      for (size_t s = 0; s < streams_.size(); ++s) Advance(static_cast<int>(s), SIZE_MAX);
    }
  }
  int StreamOf(void* native) { return IndexOf(static_cast<Stream*>(native)); }

  int records = 0, waits = 0, releases = 0, destroyed = 0;
  std::vector<std::string> violations;

 private:
  MarkerState& Get(Marker m) { return markers_[reinterpret_cast<uintptr_t>(m) - 1]; }
  int IndexOf(Stream* st) {
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (streams_[i].get() == st) return static_cast<int>(i);
    }
    return -1;
  }
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<MarkerState> markers_;
};

static_assert(kIsStreamAdapter<ScriptedAdapter>);

struct Fixture {
  std::shared_ptr<ScriptedAdapter> adapter = std::make_shared<ScriptedAdapter>();
  std::unique_ptr<Runtime> rt;
  Fixture() {
    RuntimeConfig cfg;
    cfg.adapter = adapter;
    auto made = Runtime::Create(cfg);
    EXPECT_TRUE(made.ok()) << made.status();
    rt = *std::move(made);
  }
};

TEST(AdapterMarkerTest, SameStreamPairsMakeNoAdapterCall) {
  Fixture f;
  auto s = f.rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  const int records = f.adapter->records, waits = f.adapter->waits;
  for (int i = 0; i < 1000; ++i) {
    auto a = f.rt->MallocAsync(64 << (i % 12), *s);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(f.rt->FreeAsync(a->ptr, *s).ok());
  }
  EXPECT_EQ(f.adapter->records, records);
  EXPECT_EQ(f.adapter->waits, waits);
  // An observation needs one marker, which stands for every point before it.
  EXPECT_EQ(f.rt->StreamQuery(*s).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.adapter->records, records + 1);
  f.adapter->RunAll();
  EXPECT_TRUE(f.rt->StreamQuery(*s).ok());
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
}

TEST(AdapterMarkerTest, AQueryAfterTheStreamRanOnSeesItsFreesComplete) {
  Fixture f;
  auto a = f.rt->CreateStream(0);
  auto b = f.rt->CreateStream(0);
  ASSERT_TRUE(a.ok() && b.ok());
  auto x = f.rt->MallocAsync(1 << 20, *a);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(f.rt->FreeAsync(x->ptr, *a).ok());
  // Nothing told the executor the free is reached: b cannot take it by
  // observation until a marker says so.
  f.adapter->RunAll();
  ASSERT_TRUE(f.rt->StreamQuery(*a).code() == absl::StatusCode::kUnavailable ||
              f.rt->StreamQuery(*a).ok());
  f.adapter->RunAll();
  ASSERT_TRUE(f.rt->StreamQuery(*a).ok());
  auto y = f.rt->MallocAsync(1 << 20, *b);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->ptr, x->ptr);
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
}

TEST(AdapterMarkerTest, MarkersOutliveTheWaitsOnThem) {
  Fixture f;
  auto producer = f.rt->CreateStream(0);
  auto consumer = f.rt->CreateStream(0);
  auto ev = f.rt->CreateEvent();
  ASSERT_TRUE(producer.ok() && consumer.ok() && ev.ok());
  const int p = f.adapter->StreamOf(*f.rt->NativeStream(*producer));
  for (int round = 0; round < 50; ++round) {
    auto x = f.rt->MallocAsync(2 << 20, *producer);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(f.rt->RecordEvent(*ev, *producer).ok());
    ASSERT_TRUE(f.rt->StreamWaitEvent(*consumer, *ev).ok());
    ASSERT_TRUE(f.rt->FreeAsync(x->ptr, *consumer).ok());
    // The producer runs ahead; the consumer's wait stays queued while the
    // event is recorded again (which drops the executor's use of the old
    // record) and queried.
    f.adapter->Advance(p, SIZE_MAX);
    ASSERT_TRUE(f.rt->EventQuery(*ev).ok());
    if (round % 7 == 0) f.adapter->RunAll();
  }
  f.adapter->RunAll();
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
  EXPECT_GT(f.adapter->releases, 0);
}

TEST(AdapterMarkerTest, InternalDependencyWaitsOnALazyMarker) {
  Fixture f;
  auto a = f.rt->CreateStream(0);
  auto b = f.rt->CreateStream(0);
  ASSERT_TRUE(a.ok() && b.ok());
  PoolProps props;
  props.max_size = 2 << 20;  // one granule: growth fails, rule 5 must wait
  auto pool = f.rt->CreatePool(props);
  ASSERT_TRUE(pool.ok());
  auto x = f.rt->MallocFromPoolAsync(2 << 20, *pool, *a);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(f.rt->FreeAsync(x->ptr, *a).ok());
  const int records = f.adapter->records;
  auto y = f.rt->MallocFromPoolAsync(2 << 20, *pool, *b);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->ptr, x->ptr);
  // The free had no marker: one was recorded on a for b to wait on.
  EXPECT_GT(f.adapter->records, records);
  EXPECT_GT(f.adapter->waits, 0);
  ASSERT_TRUE(f.rt->FreeAsync(y->ptr, *b).ok());
  f.adapter->RunAll();
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
}

TEST(AdapterMarkerTest, DestroyedStreamsGiveBackTheirNativeStreams) {
  Fixture f;
  for (int i = 0; i < 200; ++i) {
    auto s = f.rt->CreateStream(0);
    ASSERT_TRUE(s.ok());
    auto x = f.rt->MallocAsync(4096, *s);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(f.rt->FreeAsync(x->ptr, *s).ok());
    ASSERT_TRUE(f.rt->DestroyStream(*s).ok());
    f.adapter->RunAll();
  }
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  // Slots are reused once their work is reached: the native streams of the
  // destroyed ones went back (all but the few not yet looked at again).
  EXPECT_GE(f.adapter->destroyed, 190);
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
}

TEST(AdapterMarkerTest, AdoptedStreamsAreNeverDestroyed) {
  Fixture f;
  auto own = f.adapter->CreateStream(0, false, false);
  ASSERT_TRUE(own.ok());
  auto s = f.rt->CreateStreamFromNative(0, *own);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*f.rt->NativeStream(*s), *own);
  auto x = f.rt->MallocAsync(4096, *s);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(f.rt->FreeAsync(x->ptr, *s).ok());
  const int destroyed = f.adapter->destroyed;
  ASSERT_TRUE(f.rt->DestroyStream(*s).ok());
  f.adapter->RunAll();
  ASSERT_TRUE(f.rt->DeviceSynchronize(0).ok());
  f.rt.reset();
  // The runtime's own streams (the legacy stream) went; the adopted one not.
  EXPECT_EQ(f.adapter->destroyed, destroyed + 1);
  EXPECT_TRUE(f.adapter->violations.empty()) << f.adapter->violations[0];
}

TEST(AdapterMarkerTest, SimulatorRuntimesHaveNoNativeStreams) {
  auto rt = Runtime::Create({});
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->CreateStream(0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*rt)->NativeStream(*s).status().code(), absl::StatusCode::kUnimplemented);
  int dummy = 0;
  EXPECT_EQ((*rt)->CreateStreamFromNative(0, &dummy).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace streampool
