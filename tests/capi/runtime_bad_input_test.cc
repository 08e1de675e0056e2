// Bad input to the runtime part of the C API, table by table: NULL
// out-pointers, unknown enum values and flags, device indices out of range,
// NULL / forged / destroyed / wrong-kind handles, handles of another runtime,
// handles of a destroyed runtime, and validation that must come before a
// no-op rule. Every case asserts the exact error and then that nothing
// observable changed (streampool.h: "A call that fails changes nothing").
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr

void Noop(void*) {}

// A reserve-then-map upstream whose functions only count their calls (in
// *user): a create that fails must call none of them.
spUpstreamVmm CountingVmm(int* calls) {
  spUpstreamVmm up{};
  up.reserve = [](size_t, size_t, void* user) -> void* {
    ++*static_cast<int*>(user);
    return nullptr;
  };
  up.map = [](void*, size_t, void* user) {
    ++*static_cast<int*>(user);
    return 1;
  };
  up.unmap = [](void*, size_t, void* user) { ++*static_cast<int*>(user); };
  up.release = [](void*, size_t, void* user) { ++*static_cast<int*>(user); };
  up.user = calls;
  up.touchable = 1;
  return up;
}

struct Case {
  std::string name;
  std::function<spError_t()> call;
  spError_t want;
};

template <typename To, typename From>
To Cast(From h) {
  return reinterpret_cast<To>(h);
}
template <typename H>
H Forge(uintptr_t v) {
  return reinterpret_cast<H>(v);
}
// A handle that looks like `h` (same kind, same runtime) but names an object
// that was never created: handles are ids, and ids are never reissued.
template <typename H>
H LookAlike(H h) {
  return reinterpret_cast<H>(reinterpret_cast<uintptr_t>(h) + 100000);
}

class RuntimeBadInputTest : public ::testing::Test {
 protected:
  static constexpr int kDevices = 2;

  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = kDevices;
    SP_ASSERT_OK(spRuntimeCreate(&rt_, &cfg));
    SP_ASSERT_OK(spStreamCreate(&s_, rt_, 0, spStreamDefault));
    SP_ASSERT_OK(spEventCreate(&e_, rt_));
    SP_ASSERT_OK(spEventCreate(&never_, rt_));
    SP_ASSERT_OK(spStreamGetLegacy(&legacy_, rt_, 0));
    SP_ASSERT_OK(spDeviceGetDefaultMemPool(&pool_, rt_, 0));
    SP_ASSERT_OK(spStreamCreate(&dead_stream_, rt_, 0, spStreamDefault));
    SP_ASSERT_OK(spStreamDestroy(dead_stream_));
    SP_ASSERT_OK(spEventCreate(&dead_event_, rt_));
    SP_ASSERT_OK(spEventDestroy(dead_event_));
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    SP_ASSERT_OK(spMemPoolCreate(&dead_pool_, rt_, &props));
    SP_ASSERT_OK(spMemPoolDestroy(dead_pool_));
    // e_ is recorded and complete; s_ has done some work.
    SP_ASSERT_OK(spLaunchKernel(s_, 100, nullptr, 0));
    SP_ASSERT_OK(spEventRecord(e_, s_));
    SP_ASSERT_OK(spStreamSynchronize(s_));

    // A second, live runtime whose handles must not be accepted by the first.
    SP_ASSERT_OK(spRuntimeCreate(&rt2_, nullptr));
    SP_ASSERT_OK(spStreamCreate(&s2_, rt2_, 0, spStreamDefault));
    SP_ASSERT_OK(spEventCreate(&e2_, rt2_));
    SP_ASSERT_OK(spEventRecord(e2_, s2_));
    SP_ASSERT_OK(spDeviceGetDefaultMemPool(&pool2_, rt2_, 0));

    // A destroyed runtime and every kind of handle it handed out.
    SP_ASSERT_OK(spRuntimeCreate(&gone_rt_, nullptr));
    SP_ASSERT_OK(spStreamCreate(&gone_s_, gone_rt_, 0, spStreamDefault));
    SP_ASSERT_OK(spStreamGetLegacy(&gone_legacy_, gone_rt_, 0));
    SP_ASSERT_OK(spEventCreate(&gone_e_, gone_rt_));
    SP_ASSERT_OK(spEventRecord(gone_e_, gone_s_));
    SP_ASSERT_OK(spDeviceGetDefaultMemPool(&gone_pool_, gone_rt_, 0));
    SP_ASSERT_OK(spMalloc(&gone_ptr_, 4096, gone_rt_, 0));
    SP_ASSERT_OK(spRuntimeDestroy(gone_rt_));

    Snapshot();
  }

  void TearDown() override {
    // The stream is still usable after all that: work runs and times right.
    uint64_t t = 0;
    ASSERT_EQ(spHostNow(rt_, &t), spSuccess);
    EXPECT_EQ(spLaunchKernel(s_, 5, nullptr, 0), spSuccess);
    EXPECT_EQ(spStreamSynchronize(s_), spSuccess);
    uint64_t after = 0;
    ASSERT_EQ(spHostNow(rt_, &after), spSuccess);
    EXPECT_EQ(after, t + 5);
    EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
    EXPECT_EQ(spRuntimeDestroy(rt2_), spSuccess);
  }

  void Snapshot() {
    ASSERT_EQ(spHostNow(rt_, &now_), spSuccess);
    ASSERT_EQ(spHostNow(rt2_, &now2_), spSuccess);
    ASSERT_EQ(spMemPoolGetStats(pool_, &stats_), spSuccess);
  }

  // What a failed call must have left alone.
  void ExpectNothingChanged() {
    uint64_t now = 0;
    EXPECT_EQ(spHostNow(rt_, &now), spSuccess);
    EXPECT_EQ(now, now_) << "host time moved";
    EXPECT_EQ(spHostNow(rt2_, &now), spSuccess);
    EXPECT_EQ(now, now2_) << "the other runtime's host time moved";
    // No work was enqueued (a kernel would make these NotReady; a record or
    // marker would not, but would show in the timings of TearDown).
    EXPECT_EQ(spStreamQuery(s_), spSuccess);
    EXPECT_EQ(spStreamQuery(legacy_), spSuccess);
    EXPECT_EQ(spStreamQuery(s2_), spSuccess);
    EXPECT_EQ(spEventQuery(e_), spSuccess);
    spMemPoolStats stats;
    EXPECT_EQ(spMemPoolGetStats(pool_, &stats), spSuccess);
    EXPECT_EQ(std::memcmp(&stats, &stats_, sizeof(stats)), 0) << "pool statistics changed";
    // Out-pointers of failed creations are not written.
    EXPECT_EQ(out_rt_, kSentinel<spRuntime_t>());
    EXPECT_EQ(out_stream_, kSentinel<spStream_t>());
    EXPECT_EQ(out_event_, kSentinel<spEvent_t>());
  }

  void RunTable(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      EXPECT_EQ(c.call(), c.want) << spGetErrorName(c.want) << " expected";
      ExpectNothingChanged();
    }
  }

  template <typename H>
  static H kSentinel() {
    return reinterpret_cast<H>(uintptr_t{0x5e5e5e50});
  }

  spRuntime_t rt_ = nullptr;
  spStream_t s_ = nullptr;
  spStream_t legacy_ = nullptr;
  spEvent_t e_ = nullptr;
  spEvent_t never_ = nullptr;
  spMemPool_t pool_ = nullptr;
  spStream_t dead_stream_ = nullptr;
  spEvent_t dead_event_ = nullptr;
  spMemPool_t dead_pool_ = nullptr;

  spRuntime_t rt2_ = nullptr;
  spStream_t s2_ = nullptr;
  spEvent_t e2_ = nullptr;
  spMemPool_t pool2_ = nullptr;

  spRuntime_t gone_rt_ = nullptr;
  spStream_t gone_s_ = nullptr;
  spStream_t gone_legacy_ = nullptr;
  spEvent_t gone_e_ = nullptr;
  spMemPool_t gone_pool_ = nullptr;
  void* gone_ptr_ = nullptr;

  uint64_t now_ = 0;
  uint64_t now2_ = 0;
  spMemPoolStats stats_{};

  // Out-parameters for calls expected to fail.
  spRuntime_t out_rt_ = kSentinel<spRuntime_t>();
  spStream_t out_stream_ = kSentinel<spStream_t>();
  spEvent_t out_event_ = kSentinel<spEvent_t>();
  spMemPool_t out_pool_ = nullptr;
  void* out_ptr_ = nullptr;
  uint64_t out_ns_ = 0;
  float out_ms_ = 0;
  unsigned char buf_[64] = {};
  unsigned char buf2_[64] = {};
};

// -------------------------------------------------------- NULL arguments

TEST_F(RuntimeBadInputTest, NullOutPointersAndRequiredArgumentsAreInvalidValue) {
  spRuntimeConfig good;
  spRuntimeConfigInit(&good);
  const spAccess null_access{nullptr, 16, 1};
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  int vmm_calls = 0;
  const spUpstreamVmm vmm = CountingVmm(&vmm_calls);
  RunTable({
      {"spRuntimeCreate(NULL, NULL)", [&] { return spRuntimeCreate(nullptr, nullptr); },
       spErrorInvalidValue},
      {"spRuntimeCreate(NULL, cfg)", [&] { return spRuntimeCreate(nullptr, &good); },
       spErrorInvalidValue},
      {"spStreamCreate(NULL)", [&] { return spStreamCreate(nullptr, rt_, 0, 0); },
       spErrorInvalidValue},
      {"spStreamGetLegacy(NULL)", [&] { return spStreamGetLegacy(nullptr, rt_, 0); },
       spErrorInvalidValue},
      {"spEventCreate(NULL)", [&] { return spEventCreate(nullptr, rt_); }, spErrorInvalidValue},
      {"spHostNow(NULL)", [&] { return spHostNow(rt_, nullptr); }, spErrorInvalidValue},
      {"spEventElapsedTime(NULL)", [&] { return spEventElapsedTime(nullptr, e_, e_); },
       spErrorInvalidValue},
      {"spMalloc(NULL)", [&] { return spMalloc(nullptr, 256, rt_, 0); }, spErrorInvalidValue},
      {"spMallocAsync(NULL)", [&] { return spMallocAsync(nullptr, 256, s_); }, spErrorInvalidValue},
      {"spMallocFromPoolAsync(NULL)",
       [&] { return spMallocFromPoolAsync(nullptr, 256, pool_, s_); }, spErrorInvalidValue},
      {"spDeviceGetDefaultMemPool(NULL)",
       [&] { return spDeviceGetDefaultMemPool(nullptr, rt_, 0); }, spErrorInvalidValue},
      {"spDeviceGetMemPool(NULL)", [&] { return spDeviceGetMemPool(nullptr, rt_, 0); },
       spErrorInvalidValue},
      {"spMemPoolGetStats(NULL)", [&] { return spMemPoolGetStats(pool_, nullptr); },
       spErrorInvalidValue},
      {"spMemPoolGetAttribute(growth, NULL)",
       [&] { return spMemPoolGetAttribute(pool_, spMemPoolAttrGrowth, nullptr); },
       spErrorInvalidValue},
      {"spMemPoolCreateWithVmmUpstream(NULL pool)",
       [&] { return spMemPoolCreateWithVmmUpstream(nullptr, rt_, &props, &vmm); },
       spErrorInvalidValue},
      {"spMemPoolCreateWithVmmUpstream(NULL props)",
       [&] { return spMemPoolCreateWithVmmUpstream(&out_pool_, rt_, nullptr, &vmm); },
       spErrorInvalidValue},
      {"spMemPoolCreateWithVmmUpstream(NULL upstream)",
       [&] { return spMemPoolCreateWithVmmUpstream(&out_pool_, rt_, &props, nullptr); },
       spErrorInvalidValue},
      {"spPointerGetAttributes(NULL, p)", [&] { return spPointerGetAttributes(nullptr, buf_); },
       spErrorInvalidValue},
      {"spLaunchKernel(accesses NULL, count 1)", [&] { return spLaunchKernel(s_, 10, nullptr, 1); },
       spErrorInvalidValue},
      {"spLaunchKernel(access of NULL)", [&] { return spLaunchKernel(s_, 10, &null_access, 1); },
       spErrorInvalidValue},
      {"spLaunchHostFunc(fn NULL)", [&] { return spLaunchHostFunc(s_, nullptr, nullptr); },
       spErrorInvalidValue},
      {"spMemcpyAsync(dst NULL)", [&] { return spMemcpyAsync(nullptr, buf_, 16, s_); },
       spErrorInvalidValue},
      {"spMemcpyAsync(src NULL)", [&] { return spMemcpyAsync(buf_, nullptr, 16, s_); },
       spErrorInvalidValue},
      {"spMemsetAsync(dst NULL)", [&] { return spMemsetAsync(nullptr, 0, 16, s_); },
       spErrorInvalidValue},
  });
  EXPECT_EQ(out_pool_, nullptr);
  EXPECT_EQ(vmm_calls, 0);
}

// ---------------------------------------------------- unknown enums, flags

TEST_F(RuntimeBadInputTest, UnknownStreamFlagsAreInvalidValue) {
  std::vector<Case> cases;
  for (unsigned flags : {2u, 3u, 0x100u, 0x80000000u, ~0u}) {
    cases.push_back({"spStreamCreate flags " + std::to_string(flags),
                     [this, flags] { return spStreamCreate(&out_stream_, rt_, 0, flags); },
                     spErrorInvalidValue});
  }
  RunTable(cases);
}

TEST_F(RuntimeBadInputTest, BadRuntimeConfigsAreInvalidValue) {
  struct Bad {
    const char* name;
    std::function<void(spRuntimeConfig&)> edit;
  };
  const Bad kBad[] = {
      {"deviceCount 0", [](spRuntimeConfig& c) { c.deviceCount = 0; }},
      {"deviceCount -1", [](spRuntimeConfig& c) { c.deviceCount = -1; }},
      {"deviceCount 65", [](spRuntimeConfig& c) { c.deviceCount = 65; }},
      {"deviceCount INT_MIN", [](spRuntimeConfig& c) { c.deviceCount = INT_MIN; }},
      {"deviceCapacity 0", [](spRuntimeConfig& c) { c.deviceCapacity = 0; }},
      {"copyBytesPerUs 0", [](spRuntimeConfig& c) { c.copyBytesPerUs = 0; }},
      {"backing 2", [](spRuntimeConfig& c) { c.backing = static_cast<spBacking>(2); }},
      {"backing -1", [](spRuntimeConfig& c) { c.backing = static_cast<spBacking>(-1); }},
      {"backing 0x7fffffff",
       [](spRuntimeConfig& c) { c.backing = static_cast<spBacking>(0x7fffffff); }},
  };
  std::vector<Case> cases;
  for (const Bad& b : kBad) {
    cases.push_back({b.name,
                     [this, edit = b.edit] {
                       spRuntimeConfig cfg;
                       spRuntimeConfigInit(&cfg);
                       edit(cfg);
                       return spRuntimeCreate(&out_rt_, &cfg);
                     },
                     spErrorInvalidValue});
  }
  RunTable(cases);
}

TEST_F(RuntimeBadInputTest, DeviceCountBoundsAreInclusive) {
  // The other side of the bounds above: 1 and 64 devices are fine.
  for (int n : {1, 64}) {
    SCOPED_TRACE(n);
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = n;
    spRuntime_t rt = nullptr;
    ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamGetLegacy(&s, rt, n - 1), spSuccess);
    EXPECT_EQ(spStreamGetLegacy(&s, rt, n), spErrorInvalidDevice);
    EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
  }
}

// ---------------------------------------------------------- device index

TEST_F(RuntimeBadInputTest, DeviceIndexOutOfRangeIsInvalidDevice) {
  std::vector<Case> cases;
  for (int d : {-1, kDevices, kDevices + 1, INT_MAX, INT_MIN}) {
    const std::string at = "(device " + std::to_string(d) + ")";
    cases.push_back({"spStreamCreate" + at,
                     [this, d] { return spStreamCreate(&out_stream_, rt_, d, 0); },
                     spErrorInvalidDevice});
    cases.push_back(
        {"spStreamCreate non-blocking" + at,
         [this, d] { return spStreamCreate(&out_stream_, rt_, d, spStreamNonBlocking); },
         spErrorInvalidDevice});
    cases.push_back({"spStreamGetLegacy" + at,
                     [this, d] { return spStreamGetLegacy(&out_stream_, rt_, d); },
                     spErrorInvalidDevice});
    cases.push_back({"spDeviceSynchronize" + at, [this, d] { return spDeviceSynchronize(rt_, d); },
                     spErrorInvalidDevice});
    cases.push_back({"spMalloc" + at, [this, d] { return spMalloc(&out_ptr_, 256, rt_, d); },
                     spErrorInvalidDevice});
    // Validation comes before the size-0 no-op.
    cases.push_back({"spMalloc size 0" + at, [this, d] { return spMalloc(&out_ptr_, 0, rt_, d); },
                     spErrorInvalidDevice});
    cases.push_back({"spDeviceGetDefaultMemPool" + at,
                     [this, d] { return spDeviceGetDefaultMemPool(&out_pool_, rt_, d); },
                     spErrorInvalidDevice});
    cases.push_back({"spDeviceGetMemPool" + at,
                     [this, d] { return spDeviceGetMemPool(&out_pool_, rt_, d); },
                     spErrorInvalidDevice});
    cases.push_back({"spDeviceSetMemPool" + at,
                     [this, d] { return spDeviceSetMemPool(rt_, d, pool_); },
                     spErrorInvalidDevice});
  }
  RunTable(cases);
}

// ------------------------------------------------------------ bad handles

TEST_F(RuntimeBadInputTest, BadStreamHandlesAreInvalidResourceHandle) {
  const struct {
    const char* name;
    spStream_t s;
  } kBadStreams[] = {
      {"NULL", nullptr},
      {"forged 0x1234", Forge<spStream_t>(0x1234)},
      {"forged all ones", Forge<spStream_t>(~uintptr_t{0})},
      {"never issued", LookAlike(s_)},
      {"destroyed", dead_stream_},
      {"an event", Cast<spStream_t>(e_)},
      {"a pool", Cast<spStream_t>(pool_)},
      {"a runtime", Cast<spStream_t>(rt_)},
      {"of a destroyed runtime", gone_s_},
      {"legacy of a destroyed runtime", gone_legacy_},
  };
  std::vector<Case> cases;
  for (const auto& bad : kBadStreams) {
    const spStream_t x = bad.s;
    const std::string n = std::string("(") + bad.name + " stream)";
    const auto add = [&](const std::string& call, std::function<spError_t()> fn) {
      // docs/design.md: NULL is a bad value; anything else naming nothing live
      // is an invalid handle.
      cases.push_back({call + n, std::move(fn),
                       x == nullptr ? spErrorInvalidValue : spErrorInvalidResourceHandle});
    };
    add("spStreamDestroy", [=] { return spStreamDestroy(x); });
    add("spStreamSynchronize", [=] { return spStreamSynchronize(x); });
    add("spStreamQuery", [=] { return spStreamQuery(x); });
    add("spStreamWaitEvent", [=, this] { return spStreamWaitEvent(x, e_); });
    add("spStreamWaitEvent never-recorded", [=, this] { return spStreamWaitEvent(x, never_); });
    add("spEventRecord", [=, this] { return spEventRecord(e_, x); });
    add("spLaunchKernel", [=] { return spLaunchKernel(x, 10, nullptr, 0); });
    add("spLaunchHostFunc", [=] { return spLaunchHostFunc(x, &Noop, nullptr); });
    add("spMemcpyAsync", [=, this] { return spMemcpyAsync(buf_, buf2_, 16, x); });
    add("spMemsetAsync", [=, this] { return spMemsetAsync(buf_, 1, 16, x); });
    add("spMallocAsync", [=, this] { return spMallocAsync(&out_ptr_, 256, x); });
    add("spMallocFromPoolAsync",
        [=, this] { return spMallocFromPoolAsync(&out_ptr_, 256, pool_, x); });
    add("spFreeAsync(NULL)", [=] { return spFreeAsync(nullptr, x); });
  }
  RunTable(cases);
}

TEST_F(RuntimeBadInputTest, BadEventHandlesAreInvalidResourceHandle) {
  const struct {
    const char* name;
    spEvent_t e;
  } kBadEvents[] = {
      {"NULL", nullptr},
      {"forged 0x1234", Forge<spEvent_t>(0x1234)},
      {"forged all ones", Forge<spEvent_t>(~uintptr_t{0})},
      {"never issued", LookAlike(e_)},
      {"destroyed", dead_event_},
      {"a stream", Cast<spEvent_t>(s_)},
      {"the legacy stream", Cast<spEvent_t>(legacy_)},
      {"a pool", Cast<spEvent_t>(pool_)},
      {"a runtime", Cast<spEvent_t>(rt_)},
      {"of a destroyed runtime", gone_e_},
  };
  std::vector<Case> cases;
  for (const auto& bad : kBadEvents) {
    const spEvent_t x = bad.e;
    const std::string n = std::string("(") + bad.name + " event)";
    const auto add = [&](const std::string& call, std::function<spError_t()> fn) {
      // docs/design.md: NULL is a bad value; anything else naming nothing live
      // is an invalid handle.
      cases.push_back({call + n, std::move(fn),
                       x == nullptr ? spErrorInvalidValue : spErrorInvalidResourceHandle});
    };
    add("spEventDestroy", [=] { return spEventDestroy(x); });
    add("spEventRecord", [=, this] { return spEventRecord(x, s_); });
    add("spEventSynchronize", [=] { return spEventSynchronize(x); });
    add("spEventQuery", [=] { return spEventQuery(x); });
    add("spStreamWaitEvent", [=, this] { return spStreamWaitEvent(s_, x); });
    add("spEventElapsedTime start", [=, this] { return spEventElapsedTime(&out_ms_, x, e_); });
    add("spEventElapsedTime end", [=, this] { return spEventElapsedTime(&out_ms_, e_, x); });
  }
  RunTable(cases);
}

TEST_F(RuntimeBadInputTest, BadRuntimeHandlesAreInvalidResourceHandle) {
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  int vmm_calls = 0;
  const spUpstreamVmm vmm = CountingVmm(&vmm_calls);
  const struct {
    const char* name;
    spRuntime_t rt;
  } kBadRuntimes[] = {
      {"NULL", nullptr},
      {"forged 0x1234", Forge<spRuntime_t>(0x1234)},
      {"forged all ones", Forge<spRuntime_t>(~uintptr_t{0})},
      {"runtime handle plus one", Forge<spRuntime_t>(reinterpret_cast<uintptr_t>(rt_) + 1)},
      {"a stream", Cast<spRuntime_t>(s_)},
      {"an event", Cast<spRuntime_t>(e_)},
      {"a pool", Cast<spRuntime_t>(pool_)},
      {"destroyed", gone_rt_},
  };
  std::vector<Case> cases;
  for (const auto& bad : kBadRuntimes) {
    const spRuntime_t x = bad.rt;
    const std::string n = std::string("(") + bad.name + " runtime)";
    const auto add = [&](const std::string& call, std::function<spError_t()> fn) {
      // docs/design.md: NULL is a bad value; anything else naming nothing live
      // is an invalid handle.
      cases.push_back({call + n, std::move(fn),
                       x == nullptr ? spErrorInvalidValue : spErrorInvalidResourceHandle});
    };
    add("spRuntimeDestroy", [=] { return spRuntimeDestroy(x); });
    add("spStreamCreate", [=, this] { return spStreamCreate(&out_stream_, x, 0, 0); });
    add("spStreamGetLegacy", [=, this] { return spStreamGetLegacy(&out_stream_, x, 0); });
    add("spEventCreate", [=, this] { return spEventCreate(&out_event_, x); });
    add("spDeviceSynchronize", [=] { return spDeviceSynchronize(x, 0); });
    add("spHostAdvance", [=] { return spHostAdvance(x, 5); });
    add("spHostNow", [=, this] { return spHostNow(x, &out_ns_); });
    add("spMalloc", [=, this] { return spMalloc(&out_ptr_, 256, x, 0); });
    add("spFree(NULL)", [=] { return spFree(x, nullptr); });
    add("spMemPoolCreate", [=, this] { return spMemPoolCreate(&out_pool_, x, &props); });
    add("spMemPoolCreateWithVmmUpstream",
        [=, this] { return spMemPoolCreateWithVmmUpstream(&out_pool_, x, &props, &vmm); });
    add("spDeviceGetDefaultMemPool",
        [=, this] { return spDeviceGetDefaultMemPool(&out_pool_, x, 0); });
    add("spDeviceGetMemPool", [=, this] { return spDeviceGetMemPool(&out_pool_, x, 0); });
    add("spDeviceSetMemPool", [=, this] { return spDeviceSetMemPool(x, 0, pool_); });
  }
  RunTable(cases);
  EXPECT_EQ(out_pool_, nullptr);
  EXPECT_EQ(vmm_calls, 0);
}

// spMemPoolAttrGrowth goes through the same handle checks as every other
// attribute: NULL is InvalidValue, anything else that is not a live pool of a
// live runtime InvalidResourceHandle.
TEST_F(RuntimeBadInputTest, TheGrowthAttributeOfBadPoolHandles) {
  const struct {
    const char* name;
    spMemPool_t pool;
  } kBadPools[] = {
      {"NULL", nullptr},
      {"forged 0x1234", Forge<spMemPool_t>(0x1234)},
      {"never issued", LookAlike(pool_)},
      {"destroyed", dead_pool_},
      {"a stream", Cast<spMemPool_t>(s_)},
      {"an event", Cast<spMemPool_t>(e_)},
      {"a runtime", Cast<spMemPool_t>(rt_)},
      {"of a destroyed runtime", gone_pool_},
  };
  std::vector<Case> cases;
  for (const auto& bad : kBadPools) {
    const spMemPool_t x = bad.pool;
    const std::string n = std::string("(") + bad.name + " pool)";
    cases.push_back({"spMemPoolGetAttribute(growth)" + n,
                     [x] {
                       int v = -7;
                       return spMemPoolGetAttribute(x, spMemPoolAttrGrowth, &v);
                     },
                     x == nullptr ? spErrorInvalidValue : spErrorInvalidResourceHandle});
    cases.push_back({"spMemPoolSetAttribute(growth)" + n,
                     [x] {
                       int v = spPoolGrowthChunked;
                       return spMemPoolSetAttribute(x, spMemPoolAttrGrowth, &v);
                     },
                     x == nullptr ? spErrorInvalidValue : spErrorInvalidResourceHandle});
  }
  RunTable(cases);
  int growth = -7;
  ASSERT_EQ(spMemPoolGetAttribute(pool_, spMemPoolAttrGrowth, &growth), spSuccess);
  EXPECT_EQ(growth, spPoolGrowthExpandable);
}

TEST_F(RuntimeBadInputTest, HandlesOfAnotherRuntimeAreInvalidResourceHandle) {
  RunTable({
      {"record A's event on B's stream", [&] { return spEventRecord(e_, s2_); },
       spErrorInvalidResourceHandle},
      {"record B's event on A's stream", [&] { return spEventRecord(e2_, s_); },
       spErrorInvalidResourceHandle},
      {"A's stream waits on B's event", [&] { return spStreamWaitEvent(s_, e2_); },
       spErrorInvalidResourceHandle},
      {"B's stream waits on A's event", [&] { return spStreamWaitEvent(s2_, e_); },
       spErrorInvalidResourceHandle},
      {"elapsed A -> B", [&] { return spEventElapsedTime(&out_ms_, e_, e2_); },
       spErrorInvalidResourceHandle},
      {"elapsed B -> A", [&] { return spEventElapsedTime(&out_ms_, e2_, e_); },
       spErrorInvalidResourceHandle},
      {"A's pool on B's stream", [&] { return spMallocFromPoolAsync(&out_ptr_, 256, pool_, s2_); },
       spErrorInvalidResourceHandle},
      {"B's pool made current on A", [&] { return spDeviceSetMemPool(rt_, 0, pool2_); },
       spErrorInvalidResourceHandle},
  });
  // B's event was not re-recorded by the failed record on A's stream, nor A's
  // on B's: both still complete, and an elapsed time within B still works.
  float ms = -1;
  EXPECT_EQ(spEventElapsedTime(&ms, e2_, e2_), spSuccess);
  EXPECT_EQ(ms, 0.0f);
}

TEST_F(RuntimeBadInputTest, EveryCallOnADestroyedRuntimesHandlesIsInvalidResourceHandle) {
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  spUpstream upstream{};
  upstream.map = [](size_t, void*) -> void* { return nullptr; };
  upstream.unmap = [](void*, size_t, void*) {};
  int vmm_calls = 0;
  const spUpstreamVmm vmm = CountingVmm(&vmm_calls);
  spMemPoolStats stats;
  int flag = 1;
  uint64_t value = 0;
  const spError_t kBad = spErrorInvalidResourceHandle;
  RunTable({
      {"spRuntimeDestroy", [&] { return spRuntimeDestroy(gone_rt_); }, kBad},
      {"spStreamCreate", [&] { return spStreamCreate(&out_stream_, gone_rt_, 0, 0); }, kBad},
      {"spStreamDestroy", [&] { return spStreamDestroy(gone_s_); }, kBad},
      {"spStreamGetLegacy", [&] { return spStreamGetLegacy(&out_stream_, gone_rt_, 0); }, kBad},
      {"spStreamSynchronize", [&] { return spStreamSynchronize(gone_s_); }, kBad},
      {"spStreamSynchronize legacy", [&] { return spStreamSynchronize(gone_legacy_); }, kBad},
      {"spStreamQuery", [&] { return spStreamQuery(gone_s_); }, kBad},
      {"spStreamWaitEvent", [&] { return spStreamWaitEvent(gone_s_, gone_e_); }, kBad},
      {"spEventCreate", [&] { return spEventCreate(&out_event_, gone_rt_); }, kBad},
      {"spEventDestroy", [&] { return spEventDestroy(gone_e_); }, kBad},
      {"spEventRecord", [&] { return spEventRecord(gone_e_, gone_s_); }, kBad},
      {"spEventSynchronize", [&] { return spEventSynchronize(gone_e_); }, kBad},
      {"spEventQuery", [&] { return spEventQuery(gone_e_); }, kBad},
      {"spEventElapsedTime", [&] { return spEventElapsedTime(&out_ms_, gone_e_, gone_e_); }, kBad},
      {"spDeviceSynchronize", [&] { return spDeviceSynchronize(gone_rt_, 0); }, kBad},
      {"spLaunchKernel", [&] { return spLaunchKernel(gone_s_, 10, nullptr, 0); }, kBad},
      {"spLaunchHostFunc", [&] { return spLaunchHostFunc(gone_s_, &Noop, nullptr); }, kBad},
      {"spHostAdvance", [&] { return spHostAdvance(gone_rt_, 5); }, kBad},
      {"spHostNow", [&] { return spHostNow(gone_rt_, &out_ns_); }, kBad},
      {"spMemcpyAsync", [&] { return spMemcpyAsync(buf_, buf2_, 16, gone_s_); }, kBad},
      {"spMemsetAsync", [&] { return spMemsetAsync(buf_, 0, 16, gone_s_); }, kBad},
      {"spMallocAsync", [&] { return spMallocAsync(&out_ptr_, 256, gone_s_); }, kBad},
      {"spMallocFromPoolAsync",
       [&] { return spMallocFromPoolAsync(&out_ptr_, 256, gone_pool_, gone_s_); }, kBad},
      {"spFreeAsync", [&] { return spFreeAsync(gone_ptr_, gone_s_); }, kBad},
      {"spFreeAsync(NULL)", [&] { return spFreeAsync(nullptr, gone_s_); }, kBad},
      {"spMalloc", [&] { return spMalloc(&out_ptr_, 256, gone_rt_, 0); }, kBad},
      {"spFree", [&] { return spFree(gone_rt_, gone_ptr_); }, kBad},
      {"spFree(NULL)", [&] { return spFree(gone_rt_, nullptr); }, kBad},
      {"spMemPoolCreate", [&] { return spMemPoolCreate(&out_pool_, gone_rt_, &props); }, kBad},
      {"spMemPoolCreateWithUpstream",
       [&] { return spMemPoolCreateWithUpstream(&out_pool_, gone_rt_, &props, &upstream); }, kBad},
      {"spMemPoolCreateWithVmmUpstream",
       [&] { return spMemPoolCreateWithVmmUpstream(&out_pool_, gone_rt_, &props, &vmm); }, kBad},
      {"spDeviceSetHugePageBudget", [&] { return spDeviceSetHugePageBudget(gone_rt_, 0, 0); },
       kBad},
      {"spMemPoolDestroy", [&] { return spMemPoolDestroy(gone_pool_); }, kBad},
      {"spDeviceGetDefaultMemPool",
       [&] { return spDeviceGetDefaultMemPool(&out_pool_, gone_rt_, 0); }, kBad},
      {"spDeviceSetMemPool", [&] { return spDeviceSetMemPool(gone_rt_, 0, gone_pool_); }, kBad},
      {"spDeviceGetMemPool", [&] { return spDeviceGetMemPool(&out_pool_, gone_rt_, 0); }, kBad},
      {"spMemPoolSetAttribute",
       [&] { return spMemPoolSetAttribute(gone_pool_, spMemPoolReuseAllowOpportunistic, &flag); },
       kBad},
      {"spMemPoolGetAttribute",
       [&] { return spMemPoolGetAttribute(gone_pool_, spMemPoolAttrReservedMemCurrent, &value); },
       kBad},
      {"spMemPoolGetAttribute(growth)",
       [&] { return spMemPoolGetAttribute(gone_pool_, spMemPoolAttrGrowth, &flag); }, kBad},
      {"spMemPoolTrimTo", [&] { return spMemPoolTrimTo(gone_pool_, 0); }, kBad},
      {"spMemPoolGetStats", [&] { return spMemPoolGetStats(gone_pool_, &stats); }, kBad},
      // Not a handle but a bare pointer: the runtime that owned it is gone,
      // so it lies in no live allocation.
      {"spPointerGetAttributes",
       [&] {
         spPointerAttributes attr;
         return spPointerGetAttributes(&attr, gone_ptr_);
       },
       spErrorInvalidValue},
  });
  EXPECT_EQ(vmm_calls, 0);
}

// -------------------------------------------- validation before no-op rules

TEST_F(RuntimeBadInputTest, HandleValidationComesBeforeNoOpRules) {
  const spError_t kBad = spErrorInvalidResourceHandle;
  RunTable({
      // NULL free is a no-op, but only on a valid stream.
      {"spFreeAsync(NULL, destroyed stream)", [&] { return spFreeAsync(nullptr, dead_stream_); },
       kBad},
      // Waiting on a never-recorded event is a no-op, but only on a valid stream.
      {"spStreamWaitEvent(destroyed stream, never recorded)",
       [&] { return spStreamWaitEvent(dead_stream_, never_); }, kBad},
      // A destroyed event is not "never recorded".
      {"spStreamWaitEvent(stream, destroyed event)",
       [&] { return spStreamWaitEvent(s_, dead_event_); }, kBad},
      {"spEventQuery(destroyed event)", [&] { return spEventQuery(dead_event_); }, kBad},
      {"spEventSynchronize(destroyed event)", [&] { return spEventSynchronize(dead_event_); },
       kBad},
      // Size 0 allocations and copies are no-ops, but only on a valid stream
      // or pool.
      {"spMallocAsync(size 0, destroyed stream)",
       [&] { return spMallocAsync(&out_ptr_, 0, dead_stream_); }, kBad},
      {"spMallocFromPoolAsync(size 0, destroyed pool)",
       [&] { return spMallocFromPoolAsync(&out_ptr_, 0, dead_pool_, s_); }, kBad},
      {"spMemcpyAsync(0 bytes, destroyed stream)",
       [&] { return spMemcpyAsync(nullptr, nullptr, 0, dead_stream_); }, kBad},
      {"spMemsetAsync(0 bytes, destroyed stream)",
       [&] { return spMemsetAsync(nullptr, 0, 0, dead_stream_); }, kBad},
      {"spLaunchKernel(0 ns, destroyed stream)",
       [&] { return spLaunchKernel(dead_stream_, 0, nullptr, 0); }, kBad},
      {"spFree(destroyed runtime, NULL)", [&] { return spFree(gone_rt_, nullptr); }, kBad},
      {"spMalloc(size 0, device -1)", [&] { return spMalloc(&out_ptr_, 0, rt_, -1); },
       spErrorInvalidDevice},
  });
}

TEST_F(RuntimeBadInputTest, TheLegacyStreamCannotBeDestroyed) {
  // The header says it cannot; the implementation answers InvalidValue (the
  // handle itself is valid). It stays usable.
  RunTable(
      {{"spStreamDestroy(legacy)", [&] { return spStreamDestroy(legacy_); }, spErrorInvalidValue}});
  uint64_t t = 0;
  ASSERT_EQ(spHostNow(rt_, &t), spSuccess);
  EXPECT_EQ(spLaunchKernel(legacy_, 7, nullptr, 0), spSuccess);
  EXPECT_EQ(spStreamSynchronize(legacy_), spSuccess);
  uint64_t after = 0;
  ASSERT_EQ(spHostNow(rt_, &after), spSuccess);
  EXPECT_EQ(after, t + 7);
}

TEST_F(RuntimeBadInputTest, DestroyedHandlesStayInvalidAfterNewObjectsAreCreated) {
  // Ids are never reissued: creating many new streams and events does not
  // bring the destroyed handles back to life.
  std::vector<spStream_t> streams(32);
  std::vector<spEvent_t> events(32);
  for (auto& s : streams) ASSERT_EQ(spStreamCreate(&s, rt_, 0, 0), spSuccess);
  for (auto& e : events) ASSERT_EQ(spEventCreate(&e, rt_), spSuccess);
  for (spStream_t s : streams) {
    EXPECT_NE(s, dead_stream_);
    EXPECT_EQ(spStreamDestroy(s), spSuccess);
  }
  for (spEvent_t e : events) {
    EXPECT_NE(e, dead_event_);
    EXPECT_EQ(spEventDestroy(e), spSuccess);
  }
  EXPECT_EQ(spStreamQuery(dead_stream_), spErrorInvalidResourceHandle);
  EXPECT_EQ(spEventQuery(dead_event_), spErrorInvalidResourceHandle);
  // A new runtime does not revive the destroyed one's handles either.
  spRuntime_t fresh = nullptr;
  ASSERT_EQ(spRuntimeCreate(&fresh, nullptr), spSuccess);
  EXPECT_NE(fresh, gone_rt_);
  EXPECT_EQ(spStreamQuery(gone_s_), spErrorInvalidResourceHandle);
  EXPECT_EQ(spHostAdvance(gone_rt_, 1), spErrorInvalidResourceHandle);
  EXPECT_EQ(spRuntimeDestroy(fresh), spSuccess);
}

// ----------------------------------------------- failed calls cost nothing

// With a per-call cost, a failed call must still leave host time alone
// ("A call that fails changes nothing"), and so must not run host functions
// that the extra time would have made due. Each case gets a fresh runtime.
TEST(RuntimeBadInputCostTest, FailedCallsDoNotChargeHostTimeOrRunHostFunctions) {
  struct World {
    spRuntime_t rt = nullptr;
    spStream_t s = nullptr;
    spStream_t dead = nullptr;
    spEvent_t dead_event = nullptr;
    int ran = 0;
  };
  const struct {
    const char* name;
    std::function<spError_t(World&)> call;
    spError_t want;
  } kCases[] = {
      {"spStreamSynchronize(destroyed)", [](World& w) { return spStreamSynchronize(w.dead); },
       spErrorInvalidResourceHandle},
      {"spLaunchKernel(destroyed)", [](World& w) { return spLaunchKernel(w.dead, 1, nullptr, 0); },
       spErrorInvalidResourceHandle},
      {"spEventQuery(destroyed)", [](World& w) { return spEventQuery(w.dead_event); },
       spErrorInvalidResourceHandle},
      {"spStreamCreate(device 9)",
       [](World& w) {
         spStream_t out;
         return spStreamCreate(&out, w.rt, 9, 0);
       },
       spErrorInvalidDevice},
      {"spStreamCreate(flags 7)",
       [](World& w) {
         spStream_t out;
         return spStreamCreate(&out, w.rt, 0, 7);
       },
       spErrorInvalidValue},
      {"spLaunchHostFunc(NULL fn)",
       [](World& w) { return spLaunchHostFunc(w.s, nullptr, nullptr); }, spErrorInvalidValue},
      {"spMemsetAsync(NULL dst)", [](World& w) { return spMemsetAsync(nullptr, 0, 16, w.s); },
       spErrorInvalidValue},
      {"spMalloc(device -1)",
       [](World& w) {
         void* p;
         return spMalloc(&p, 256, w.rt, -1);
       },
       spErrorInvalidDevice},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.apiCallNs = 5;
    World w;
    ASSERT_EQ(spRuntimeCreate(&w.rt, &cfg), spSuccess);
    ASSERT_EQ(spStreamCreate(&w.s, w.rt, 0, spStreamNonBlocking), spSuccess);
    ASSERT_EQ(spStreamCreate(&w.dead, w.rt, 0, spStreamNonBlocking), spSuccess);
    ASSERT_EQ(spStreamDestroy(w.dead), spSuccess);
    ASSERT_EQ(spEventCreate(&w.dead_event, w.rt), spSuccess);
    ASSERT_EQ(spEventDestroy(w.dead_event), spSuccess);
    // A host function 3 ns ahead of the host: due as soon as time moves 3 ns.
    ASSERT_EQ(spLaunchKernel(w.s, 8, nullptr, 0), spSuccess);
    ASSERT_EQ(spLaunchHostFunc(
                  w.s, [](void* p) { ++*static_cast<int*>(p); }, &w.ran),
              spSuccess);
    uint64_t t0 = 0;
    ASSERT_EQ(spHostNow(w.rt, &t0), spSuccess);

    EXPECT_EQ(c.call(w), c.want);
    uint64_t now = 0;
    ASSERT_EQ(spHostNow(w.rt, &now), spSuccess);
    EXPECT_EQ(now, t0) << "a failed call moved host time";
    EXPECT_EQ(w.ran, 0) << "a failed call ran a host function";
    ASSERT_EQ(spRuntimeDestroy(w.rt), spSuccess);
    EXPECT_EQ(w.ran, 1);  // enqueued work completes at destroy
  }
}

}  // namespace
