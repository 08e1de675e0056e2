// The PyTorch allocator's parts, compiled into the test: the settings parser,
// the JSON writer, and AllocatorState over a simulator runtime, which serves
// the legacy stream as a CUDA runtime does, so that lazy creation, the
// settings applied to each device's pool, stream memoization, thread safety
// and the reports are checked without a GPU. (A simulator has no native
// streams: adopting one fails, which is checked too.)
#include "src/torch/allocator_state.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/torch/json_writer.h"
#include "src/torch/reports.h"
#include "src/torch/settings.h"
#include "streampool/streampool.h"

namespace streampool::internal::torch {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr ssize_t kMiB = ssize_t{1} << 20;

// ------------------------------------------------------------ settings

TEST(ParseSettingsTest, ReadsEveryKey) {
  TorchSettings s;
  std::string error;
  ASSERT_EQ(ParseSettings(" release_threshold = 4M , follow_event_dependencies=0,opportunistic=1,"
                          "internal_dependencies=0, growth=chunked, max_size=2G,",
                          &s, &error),
            spSuccess)
      << error;
  EXPECT_EQ(s.release_threshold, uint64_t{4} << 20);
  EXPECT_EQ(s.follow_event_dependencies, false);
  EXPECT_EQ(s.opportunistic, true);
  EXPECT_EQ(s.internal_dependencies, false);
  EXPECT_EQ(s.growth, spPoolGrowthChunked);
  EXPECT_EQ(s.max_size, uint64_t{2} << 30);
  EXPECT_TRUE(s.NeedsOwnPool());
}

TEST(ParseSettingsTest, MaxAndSuffixes) {
  TorchSettings s;
  std::string error;
  ASSERT_EQ(ParseSettings("release_threshold=max,max_size=3k", &s, &error), spSuccess);
  EXPECT_EQ(s.release_threshold, UINT64_MAX);
  EXPECT_EQ(s.max_size, 3072u);
  ASSERT_EQ(ParseSettings("", &s, &error), spSuccess);
  EXPECT_FALSE(s.release_threshold.has_value());
  EXPECT_FALSE(s.NeedsOwnPool());
}

TEST(ParseSettingsTest, AFailureSaysWhatAndChangesNothing) {
  TorchSettings s;
  std::string error;
  ASSERT_EQ(ParseSettings("growth=expandable", &s, &error), spSuccess);
  EXPECT_EQ(ParseSettings("release_threshold=1M,growth=huge", &s, &error), spErrorInvalidValue);
  EXPECT_EQ(error, "growth=huge: expected expandable or chunked");
  EXPECT_EQ(s.growth, spPoolGrowthExpandable);
  EXPECT_FALSE(s.release_threshold.has_value());
  EXPECT_EQ(ParseSettings("size=1", &s, &error), spErrorInvalidValue);
  EXPECT_THAT(error, HasSubstr("unknown setting 'size'"));
  EXPECT_THAT(error, HasSubstr("release_threshold, follow_event_dependencies"));
  EXPECT_EQ(ParseSettings("opportunistic=1,opportunistic=1", &s, &error), spErrorInvalidValue);
  EXPECT_EQ(error, "setting 'opportunistic' given twice");
  EXPECT_EQ(ParseSettings("growth", &s, &error), spErrorInvalidValue);
  EXPECT_EQ(error, "'growth' is not key=value");
  EXPECT_EQ(ParseSettings("max_size=18446744073709551615K", &s, &error), spErrorInvalidValue);
}

TEST(SettingsFromEnvTest, ReadsTheVariablesAndKeepsDefaultsForBadOnes) {
  const std::map<std::string, std::string> env = {
      {"STREAMPOOL_TORCH_RELEASE_THRESHOLD", " 1G "},
      {"STREAMPOOL_TORCH_OPPORTUNISTIC", "0"},
      {"STREAMPOOL_TORCH_GROWTH", "huge"},
      {"STREAMPOOL_TORCH_MAX_SIZE", ""},
      {"STREAMPOOL_TORCH_growth", "chunked"},  // not ours: names are upper case
  };
  std::vector<std::string> problems;
  const TorchSettings s = SettingsFromEnv(
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      &problems);
  EXPECT_EQ(s.release_threshold, uint64_t{1} << 30);
  EXPECT_EQ(s.opportunistic, false);
  EXPECT_FALSE(s.growth.has_value());
  EXPECT_FALSE(s.max_size.has_value());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "STREAMPOOL_TORCH_GROWTH=huge: expected expandable or chunked; using "
            "the default");
  EXPECT_THAT(problems[1], HasSubstr("STREAMPOOL_TORCH_MAX_SIZE=: expected bytes"));
}

// ---------------------------------------------------------- JSON writer

TEST(JsonWriterTest, PlacesCommasAndEscapes) {
  JsonWriter w;
  w.BeginObject();
  w.Field("a", 1);
  w.Key("list");
  w.BeginArray();
  w.Int(-2);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.String("q\"\\\n");
  w.EndArray();
  w.Key("t");
  w.Bool(true);
  w.EndObject();
  EXPECT_EQ(w.text(), R"({"a":1,"list":[-2,null,{},"q\"\\\u000a"],"t":true})");
  EXPECT_EQ(nlohmann::json::parse(w.text())["list"][3], "q\"\\\n");
}

// ---------------------------------------------------- AllocatorState

class AllocatorStateTest : public ::testing::Test {
 protected:
  // A state over a simulator runtime of two 256 MiB devices, its settings
  // from env_ unless configured.
  AllocatorState& State() {
    if (state_ == nullptr) {
      AllocatorOptions options;
      spRuntimeConfigInit(&options.runtime);
      options.runtime.deviceCount = 2;
      options.runtime.deviceCapacity = uint64_t{256} << 20;
      options.env = [this](const std::string& name) -> std::optional<std::string> {
        auto it = env_.find(name);
        if (it == env_.end()) return std::nullopt;
        return it->second;
      };
      state_ = std::make_unique<AllocatorState>(std::move(options));
    }
    return *state_;
  }

  spMemPool_t CurrentPool(int device) {
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spDeviceGetMemPool(&pool, State().runtime(), device), spSuccess);
    return pool;
  }
  spMemPool_t DefaultPool(int device) {
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spDeviceGetDefaultMemPool(&pool, State().runtime(), device), spSuccess);
    return pool;
  }
  uint64_t U64(spMemPool_t pool, spMemPoolAttr attr) {
    uint64_t v = 0;
    EXPECT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    return v;
  }
  int Int(spMemPool_t pool, spMemPoolAttr attr) {
    int v = -1;
    EXPECT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    return v;
  }
  spMemPoolStats Stats(int device) {
    spMemPoolStats s = {};
    EXPECT_EQ(spMemPoolGetStats(CurrentPool(device), &s), spSuccess);
    return s;
  }
  void* Alloc(ssize_t size, int device = 0, void* native = nullptr) {
    std::string error;
    void* p = State().Allocate(size, device, native, &error);
    EXPECT_NE(p, nullptr) << error;
    return p;
  }
  nlohmann::json Report(spError_t (*report)(spRuntime_t, int, std::string*, std::string*),
                        int device) {
    std::string out;
    std::string error;
    EXPECT_EQ(report(State().runtime(), device, &out, &error), spSuccess) << error;
    return nlohmann::json::parse(out);
  }
  nlohmann::json StatsReport(int device) {
    std::string out;
    std::string error;
    EXPECT_EQ(StatsJson(State(), State().runtime(), device, &out, &error), spSuccess) << error;
    return nlohmann::json::parse(out);
  }

  std::map<std::string, std::string> env_;
  std::unique_ptr<AllocatorState> state_;
};

TEST_F(AllocatorStateTest, TheRuntimeIsMadeAtTheFirstAllocation) {
  EXPECT_EQ(State().runtime(), nullptr);
  std::string error;
  EXPECT_EQ(State().Allocate(0, 0, nullptr, &error), nullptr);
  EXPECT_EQ(State().Allocate(-5, 0, nullptr, &error), nullptr);
  EXPECT_EQ(State().runtime(), nullptr);
  EXPECT_EQ(State().NoRuntimeError(&error), spErrorNotReady);
  void* p = Alloc(kMiB);
  EXPECT_NE(State().runtime(), nullptr);
  State().Free(p, 0, nullptr);
  EXPECT_EQ(Stats(0).usedBytes, 0u);
}

TEST_F(AllocatorStateTest, DefaultsKeepEveryReservedByte) {
  Alloc(kMiB);
  for (int device : {0, 1}) {
    EXPECT_EQ(CurrentPool(device), DefaultPool(device));
    EXPECT_EQ(U64(CurrentPool(device), spMemPoolAttrReleaseThreshold), UINT64_MAX);
    EXPECT_EQ(Int(CurrentPool(device), spMemPoolReuseFollowEventDependencies), 1);
    EXPECT_EQ(Int(CurrentPool(device), spMemPoolReuseAllowOpportunistic), 1);
    EXPECT_EQ(Int(CurrentPool(device), spMemPoolReuseAllowInternalDependencies), 1);
  }
}

TEST_F(AllocatorStateTest, ConfiguredSettingsApplyToEveryDevice) {
  env_["STREAMPOOL_TORCH_RELEASE_THRESHOLD"] = "0";  // configuring ignores the environment
  std::string error;
  ASSERT_EQ(State().Configure("release_threshold=4M,opportunistic=0,internal_dependencies=0,"
                              "growth=chunked,max_size=64M",
                              &error),
            spSuccess);
  Alloc(kMiB, 1);
  for (int device : {0, 1}) {
    spMemPool_t pool = CurrentPool(device);
    EXPECT_NE(pool, DefaultPool(device)) << "growth and max_size need a pool of their own";
    EXPECT_EQ(Int(pool, spMemPoolAttrGrowth), spPoolGrowthChunked);
    EXPECT_EQ(U64(pool, spMemPoolAttrMaxPoolSize), uint64_t{64} << 20);
    EXPECT_EQ(U64(pool, spMemPoolAttrReleaseThreshold), uint64_t{4} << 20);
    EXPECT_EQ(Int(pool, spMemPoolReuseFollowEventDependencies), 1);
    EXPECT_EQ(Int(pool, spMemPoolReuseAllowOpportunistic), 0);
    EXPECT_EQ(Int(pool, spMemPoolReuseAllowInternalDependencies), 0);
  }
  // The pool's max_size holds.
  EXPECT_EQ(State().Allocate(65 * kMiB, 0, nullptr, &error), nullptr);
  EXPECT_THAT(error, HasSubstr("spErrorMemoryAllocation"));
  // Settings cannot follow the pools once they are made; a malformed string
  // is still reported as malformed.
  EXPECT_EQ(State().Configure("release_threshold=0", &error), spErrorNotSupported);
  EXPECT_EQ(State().Configure(nullptr, &error), spErrorNotSupported);
  EXPECT_EQ(State().Configure("bogus=1", &error), spErrorInvalidValue);
  EXPECT_EQ(U64(CurrentPool(0), spMemPoolAttrReleaseThreshold), uint64_t{4} << 20);
}

TEST_F(AllocatorStateTest, TheEnvironmentAppliesWhenNotConfigured) {
  env_["STREAMPOOL_TORCH_RELEASE_THRESHOLD"] = "1K";
  env_["STREAMPOOL_TORCH_FOLLOW_EVENT_DEPENDENCIES"] = "0";
  env_["STREAMPOOL_TORCH_GROWTH"] = "sideways";  // reported, and the default kept
  std::string error;
  ASSERT_EQ(State().Configure("release_threshold=8K", &error), spSuccess);
  ASSERT_EQ(State().Configure(nullptr, &error), spSuccess);  // back to the environment
  Alloc(kMiB);
  EXPECT_EQ(CurrentPool(0), DefaultPool(0));
  EXPECT_EQ(U64(CurrentPool(0), spMemPoolAttrReleaseThreshold), 1024u);
  EXPECT_EQ(Int(CurrentPool(0), spMemPoolReuseFollowEventDependencies), 0);
}

TEST_F(AllocatorStateTest, SameStreamFreesAreReused) {
  void* p = Alloc(kMiB);
  State().Free(p, 0, nullptr);
  void* q = Alloc(kMiB);
  EXPECT_EQ(q, p);
  EXPECT_EQ(Stats(0).reuseSameStream, 1u);
  // cudaStreamLegacy is NULL's stream: one adoption, and its free is the same
  // stream's.
  State().Free(q, 0, reinterpret_cast<void*>(0x1));
  void* r = Alloc(kMiB, 0, reinterpret_cast<void*>(0x1));
  EXPECT_EQ(r, p);
  EXPECT_EQ(Stats(0).reuseSameStream, 2u);
  EXPECT_EQ(State().StreamCount(0), 1);
  EXPECT_EQ(State().StreamCount(1), 0);
  // A free whose device PyTorch does not know finds it from the pointer.
  State().Free(r, -1, nullptr);
  EXPECT_EQ(Stats(0).freeCount, 3u);
}

TEST_F(AllocatorStateTest, StreamsThatCannotBeAdoptedFailTheAllocation) {
  std::string error;
  Alloc(kMiB);
  EXPECT_EQ(State().Allocate(kMiB, 0, reinterpret_cast<void*>(0x1234), &error), nullptr);
  EXPECT_THAT(error, HasSubstr("spStreamCreateFromNative (device 0) failed: spErrorNotSupported"));
  EXPECT_EQ(State().Allocate(kMiB, 0, reinterpret_cast<void*>(0x2), &error), nullptr);
  EXPECT_THAT(error, HasSubstr("cudaStreamPerThread"));
  EXPECT_EQ(State().Allocate(kMiB, 7, nullptr, &error), nullptr);
  EXPECT_THAT(error, HasSubstr("spErrorInvalidDevice"));
  EXPECT_EQ(State().StreamCount(0), 1);
}

TEST_F(AllocatorStateTest, FreesOfWhatItDidNotAllocateChangeNothing) {
  void* p = Alloc(kMiB);
  const spMemPoolStats before = Stats(0);
  int local = 0;
  State().Free(nullptr, 0, nullptr);
  State().Free(&local, 0, nullptr);
  State().Free(static_cast<char*>(p) + 256, 0, nullptr);  // not a start
  State().RecordStream(nullptr, nullptr);
  State().RecordStream(&local, nullptr);
  State().RecordStream(p, reinterpret_cast<void*>(0x1234));  // cannot be adopted
  State().RecordStream(p, nullptr);  // the allocating stream: nothing to add
  const spMemPoolStats after = Stats(0);
  EXPECT_EQ(after.freeCount, before.freeCount);
  EXPECT_EQ(after.usedBytes, before.usedBytes);
  State().Free(p, 0, nullptr);
  EXPECT_EQ(Stats(0).usedBytes, 0u);
}

TEST_F(AllocatorStateTest, ManyThreadsAllocateAndFree) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 500;
  Alloc(1);  // the runtime, before the threads race for it
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<void*> held;
      for (int i = 0; i < kRounds; ++i) {
        std::string error;
        const int device = (t + i) % 2;
        void* p = State().Allocate((i % 7 + 1) * 4096, device, nullptr, &error);
        if (p == nullptr) {
          failures.fetch_add(1);
          continue;
        }
        held.push_back(p);
        if (held.size() > 4) {
          State().Free(held.front(), -1, nullptr);
          held.erase(held.begin());
        }
      }
      for (void* p : held) State().Free(p, -1, nullptr);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Stats(1).usedBytes, 0u);
  EXPECT_EQ(State().StreamCount(0), 1);
  EXPECT_EQ(State().StreamCount(1), 1);
}

TEST_F(AllocatorStateTest, StatsReportEveryDeviceWithItsSettings) {
  void* p = Alloc(kMiB);
  State().Free(p, 0, nullptr);
  Alloc(kMiB);
  const nlohmann::json all = StatsReport(-1);
  ASSERT_EQ(all["devices"].size(), 2u);
  const nlohmann::json& d0 = all["devices"][0];
  EXPECT_EQ(d0["device"], 0);
  EXPECT_EQ(d0["streams"], 1);
  EXPECT_EQ(d0["alloc_count"], 2);
  EXPECT_EQ(d0["reuse_same_stream"], 1);
  EXPECT_EQ(d0["fresh_allocs"], 1);
  EXPECT_EQ(d0["used_bytes"], Stats(0).usedBytes);
  EXPECT_EQ(d0["reserved_high"], Stats(0).reservedHigh);
  EXPECT_EQ(d0["settings"]["release_threshold"], UINT64_MAX);
  EXPECT_EQ(d0["settings"]["opportunistic"], 1);
  EXPECT_EQ(d0["settings"]["max_size"], 0);
  EXPECT_TRUE(d0["settings"]["growth"] == "expandable" || d0["settings"]["growth"] == "chunked");
  EXPECT_EQ(all["devices"][1]["alloc_count"], 0);
  EXPECT_EQ(StatsReport(1)["devices"].size(), 1u);
  std::string out;
  std::string error;
  EXPECT_EQ(StatsJson(State(), State().runtime(), 2, &out, &error), spErrorInvalidDevice);
  EXPECT_EQ(StatsJson(State(), State().runtime(), -2, &out, &error), spErrorInvalidDevice);
}

TEST_F(AllocatorStateTest, SnapshotShowsTheBlocks) {
  void* p = Alloc(3 * kMiB);
  const nlohmann::json doc = Report(&SnapshotJson, 0);
  ASSERT_EQ(doc["devices"].size(), 1u);
  const nlohmann::json& dev = doc["devices"][0];
  EXPECT_EQ(dev["device"], 0);
  ASSERT_FALSE(dev["segments"].empty());
  bool found = false;
  for (const auto& seg : dev["segments"]) {
    for (const auto& b : seg["blocks"]) {
      if (b["address"] == reinterpret_cast<uintptr_t>(p)) {
        found = true;
        EXPECT_EQ(b["state"], "live");
        EXPECT_EQ(b["requested"], 3 * kMiB);
        // A simulator stream has no native handle.
        EXPECT_TRUE(b["stream"].is_null());
      }
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(Report(&SnapshotJson, 1)["devices"][0]["segments"].empty());
}

// A graph's allocations are no pool's: the snapshot shows the device's
// graph memory beside the pool's segments.
TEST_F(AllocatorStateTest, SnapshotShowsGraphMemoryBesideThePool) {
  State().Free(Alloc(kMiB), 0, nullptr);  // the runtime is made at the first allocation
  spRuntime_t rt = State().runtime();
  EXPECT_EQ(Report(&SnapshotJson, 0)["devices"][0]["graph_memory"]["reserved"], 0);
  spGraph_t g;
  ASSERT_EQ(spGraphCreate(&g, rt, 0), spSuccess);
  spMemAllocNodeParams params;
  std::memset(&params, 0, sizeof params);
  params.poolProps.allocType = spMemAllocationTypeDevice;
  params.poolProps.device = 0;
  params.bytesize = 4 * kMiB;
  spGraphNode_t alloc;
  ASSERT_EQ(spGraphAddMemAllocNode(&alloc, g, nullptr, 0, &params), spSuccess);
  spGraphExec_t exec;
  ASSERT_EQ(spGraphInstantiate(&exec, g, 0), spSuccess);
  spStream_t s;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamNonBlocking), spSuccess);
  ASSERT_EQ(spGraphLaunch(exec, s), spSuccess);
  ASSERT_EQ(spStreamSynchronize(s), spSuccess);
  const nlohmann::json graph = Report(&SnapshotJson, 0)["devices"][0]["graph_memory"];
  EXPECT_EQ(graph["used"], 4 * kMiB);
  EXPECT_EQ(graph["used_high"], 4 * kMiB);
  EXPECT_EQ(graph["reserved"], 4 * kMiB);
  EXPECT_EQ(Report(&SnapshotJson, 1)["devices"][0]["graph_memory"]["reserved"], 0);
  // Freed, and the graphs that refer to it gone: used no more, reserved
  // until a trim.
  ASSERT_EQ(spFreeAsync(params.dptr, s), spSuccess);
  ASSERT_EQ(spStreamSynchronize(s), spSuccess);
  EXPECT_EQ(spGraphExecDestroy(exec), spSuccess);
  EXPECT_EQ(spGraphDestroy(g), spSuccess);
  EXPECT_EQ(Report(&SnapshotJson, 0)["devices"][0]["graph_memory"]["used"], 0);
  EXPECT_EQ(Report(&SnapshotJson, 0)["devices"][0]["graph_memory"]["reserved"], 4 * kMiB);
  EXPECT_EQ(spDeviceGraphMemTrim(rt, 0), spSuccess);
  EXPECT_EQ(Report(&SnapshotJson, 0)["devices"][0]["graph_memory"]["reserved"], 0);
  EXPECT_EQ(spStreamDestroy(s), spSuccess);
}

TEST_F(AllocatorStateTest, LeakReportListsWhatIsStillAllocated) {
  void* p = Alloc(kMiB, 0);
  void* q = Alloc(2 * kMiB, 1);
  void* r = Alloc(kMiB, 1);
  State().Free(r, 1, nullptr);
  const nlohmann::json all = Report(&LeakReportJson, -1);
  EXPECT_EQ(all["count"], 2);
  EXPECT_EQ(all["bytes"], 3 * kMiB);
  const nlohmann::json one = Report(&LeakReportJson, 1);
  ASSERT_EQ(one["count"], 1);
  EXPECT_EQ(one["allocations"][0]["ptr"], reinterpret_cast<uintptr_t>(q));
  EXPECT_EQ(one["allocations"][0]["size"], 2 * kMiB);
  EXPECT_EQ(one["allocations"][0]["device"], 1);
  State().Free(p, 0, nullptr);
  State().Free(q, 1, nullptr);
  EXPECT_THAT(Report(&LeakReportJson, -1)["allocations"], IsEmpty());
}

TEST_F(AllocatorStateTest, AFailedCreationIsRememberedUntilConfigured) {
  // A simulator runtime refuses 0 devices, as a CUDA one without a GPU
  // refuses to be made.
  AllocatorOptions options;
  spRuntimeConfigInit(&options.runtime);
  options.runtime.deviceCount = 0;
  options.env = [](const std::string&) { return std::nullopt; };
  AllocatorState state(std::move(options));
  std::string error;
  spError_t code = spSuccess;
  EXPECT_EQ(state.GetOrCreateRuntime(&code, &error), nullptr);
  EXPECT_EQ(code, spErrorInvalidValue);
  EXPECT_THAT(error, HasSubstr("spRuntimeCreate failed: spErrorInvalidValue"));
  EXPECT_EQ(state.NoRuntimeError(&error), spErrorInvalidValue);
  EXPECT_EQ(state.Allocate(kMiB, 0, nullptr, &error), nullptr);
  ASSERT_EQ(state.Configure("", &error), spSuccess);
  EXPECT_EQ(state.NoRuntimeError(&error), spErrorNotReady);
}

}  // namespace
}  // namespace streampool::internal::torch
