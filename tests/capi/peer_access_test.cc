// Multi-device access, CUDA guide F.10, through streampool.h: a configurable
// peer matrix (all pairs peer by default), per-pool access grants that apply
// to every allocation of the pool, past and future, and the stream-order
// checker's report when a kernel on a device touches pool memory that device
// was not granted.
//
// Rules pinned here (streampool.h, spMemPoolSetAccess):
//  * the resident device always has read-write access; lowering it is
//    spErrorInvalidValue;
//  * granting a device that cannot access the resident device is
//    spErrorInvalidDevice (revoking never needs the peer path);
//  * a device never granted reads back ProtNone;
//  * a failed call changes nothing, even when earlier descriptors were good.
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

spMemAccessDesc Desc(int device, spMemAccessFlags flags) {
  spMemAccessDesc d;
  d.location.type = spMemLocationTypeDevice;
  d.location.id = device;
  d.flags = flags;
  return d;
}

class PeerAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = 3;
    cfg.backing = spBackingAddressOnly;  // nothing here touches bytes
    SP_ASSERT_OK(spRuntimeCreate(&rt_, &cfg));
    // Reports are collected, not fatal: several tests provoke them.
    SP_ASSERT_OK(spCheckerEnable(rt_, 1));
    for (int d = 0; d < 3; ++d) SP_ASSERT_OK(spStreamCreate(&s_[d], rt_, d, spStreamDefault));
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    SP_ASSERT_OK(spMemPoolCreate(&pool_, rt_, &props));
  }
  void TearDown() override { EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess); }

  spMemAccessFlags Access(spMemPool_t pool, int device) {
    spMemLocation loc{spMemLocationTypeDevice, device};
    spMemAccessFlags f = spMemAccessFlagsProtNone;
    EXPECT_EQ(spMemPoolGetAccess(&f, pool, &loc), spSuccess);
    return f;
  }
  int CanAccess(int device, int peer) {
    int can = -1;
    EXPECT_EQ(spDeviceCanAccessPeer(&can, rt_, device, peer), spSuccess);
    return can;
  }
  std::vector<spCheckReport> Reports() {
    size_t n = 0;
    EXPECT_EQ(spCheckerGetReports(rt_, nullptr, 0, &n), spSuccess);
    std::vector<spCheckReport> out(n);
    if (n != 0) {
      EXPECT_EQ(spCheckerGetReports(rt_, out.data(), n, &n), spSuccess);
    }
    return out;
  }
  void* Alloc(size_t size, int stream_device = 0) {
    void* p = nullptr;
    EXPECT_EQ(spMallocFromPoolAsync(&p, size, pool_, s_[stream_device]), spSuccess);
    return p;
  }
  // Orders every other stream after the work enqueued on s_[0] so far, so
  // that the only thing a cross-device kernel can get wrong is access.
  void OrderAfterDevice0() {
    spEvent_t e;
    ASSERT_EQ(spEventCreate(&e, rt_), spSuccess);
    ASSERT_EQ(spEventRecord(e, s_[0]), spSuccess);
    for (int d = 1; d < 3; ++d) ASSERT_EQ(spStreamWaitEvent(s_[d], e), spSuccess);
    ASSERT_EQ(spEventDestroy(e), spSuccess);
  }
  void Kernel(int device, const void* p, size_t size, int write) {
    const spAccess a{p, size, write};
    ASSERT_EQ(spLaunchKernel(s_[device], 100, &a, 1), spSuccess);
  }

  spRuntime_t rt_ = nullptr;
  spStream_t s_[3] = {};
  spMemPool_t pool_ = nullptr;
};

// ------------------------------------------------------------ peer matrix

TEST_F(PeerAccessTest, AllPairsArePeersByDefaultButNoDeviceIsItsOwnPeer) {
  for (int d = 0; d < 3; ++d) {
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ(CanAccess(d, p), d != p ? 1 : 0) << d << " -> " << p;
    }
  }
}

TEST_F(PeerAccessTest, ThePeerMatrixIsDirectional) {
  SP_ASSERT_OK(spRuntimeSetPeerAccessible(rt_, 1, 0, 0));
  EXPECT_EQ(CanAccess(1, 0), 0);
  EXPECT_EQ(CanAccess(0, 1), 1) << "only 1 -> 0 was cut";
  EXPECT_EQ(CanAccess(2, 0), 1);
  SP_ASSERT_OK(spRuntimeSetPeerAccessible(rt_, 1, 0, 1));
  EXPECT_EQ(CanAccess(1, 0), 1);
}

TEST_F(PeerAccessTest, PeerMatrixCallsRejectBadArguments) {
  int can = 7;
  EXPECT_EQ(spRuntimeSetPeerAccessible(rt_, 0, 0, 1), spErrorInvalidDevice);
  EXPECT_EQ(spRuntimeSetPeerAccessible(rt_, 3, 0, 1), spErrorInvalidDevice);
  EXPECT_EQ(spRuntimeSetPeerAccessible(rt_, 0, -1, 1), spErrorInvalidDevice);
  EXPECT_EQ(spRuntimeSetPeerAccessible(nullptr, 0, 1, 1), spErrorInvalidValue);
  EXPECT_EQ(spDeviceCanAccessPeer(&can, rt_, 0, 3), spErrorInvalidDevice);
  EXPECT_EQ(spDeviceCanAccessPeer(&can, rt_, -1, 0), spErrorInvalidDevice);
  EXPECT_EQ(spDeviceCanAccessPeer(nullptr, rt_, 0, 1), spErrorInvalidValue);
  EXPECT_EQ(spDeviceCanAccessPeer(&can, nullptr, 0, 1), spErrorInvalidValue);
  EXPECT_EQ(can, 7) << "no failed call wrote it";
  EXPECT_EQ(CanAccess(0, 1), 1) << "no failed call changed the matrix";
}

// ------------------------------------------------- the guide's F.10 example

// F.10's setAccessOnDevice, with the sp* names.
spError_t SetAccessOnDevice(spRuntime_t rt, spMemPool_t memPool, int residentDevice,
                            int accessingDevice) {
  spMemAccessDesc accessDesc = {};
  accessDesc.location.type = spMemLocationTypeDevice;
  accessDesc.location.id = accessingDevice;
  accessDesc.flags = spMemAccessFlagsProtReadWrite;
  int canAccess = 0;
  spError_t error = spDeviceCanAccessPeer(&canAccess, rt, accessingDevice, residentDevice);
  if (error != spSuccess) {
    return error;
  } else if (canAccess == 0) {
    return spErrorPeerAccessUnsupported;
  }
  // Make the address accessible
  return spMemPoolSetAccess(memPool, &accessDesc, 1);
}

TEST_F(PeerAccessTest, GuideF10SetAccessOnDeviceGrantsAPeer) {
  EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtNone);
  SP_ASSERT_OK(SetAccessOnDevice(rt_, pool_, 0, 1));
  EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtReadWrite);
  EXPECT_EQ(Access(pool_, 2), spMemAccessFlagsProtNone) << "only device 1 was granted";
}

TEST_F(PeerAccessTest, GuideF10SetAccessOnDeviceRefusesANonPeer) {
  SP_ASSERT_OK(spRuntimeSetPeerAccessible(rt_, 2, 0, 0));
  // The guide's helper checks first and answers PeerAccessUnsupported ...
  EXPECT_EQ(SetAccessOnDevice(rt_, pool_, 0, 2), spErrorPeerAccessUnsupported);
  // ... without the check, the grant itself is InvalidDevice (F.10: "setting
  // access may fail with cudaErrorInvalidDevice").
  const spMemAccessDesc d = Desc(2, spMemAccessFlagsProtReadWrite);
  EXPECT_EQ(spMemPoolSetAccess(pool_, &d, 1), spErrorInvalidDevice);
  const spMemAccessDesc r = Desc(2, spMemAccessFlagsProtRead);
  EXPECT_EQ(spMemPoolSetAccess(pool_, &r, 1), spErrorInvalidDevice) << "read is a grant too";
  EXPECT_EQ(Access(pool_, 2), spMemAccessFlagsProtNone);
  // Revoking needs no peer path.
  const spMemAccessDesc none = Desc(2, spMemAccessFlagsProtNone);
  EXPECT_EQ(spMemPoolSetAccess(pool_, &none, 1), spSuccess);
}

// ------------------------------------------------------------- grants

TEST_F(PeerAccessTest, TheResidentDeviceHasReadWriteAccessThatCannotBeLowered) {
  EXPECT_EQ(Access(pool_, 0), spMemAccessFlagsProtReadWrite);
  for (spMemAccessFlags lower : {spMemAccessFlagsProtNone, spMemAccessFlagsProtRead}) {
    const spMemAccessDesc d = Desc(0, lower);
    EXPECT_EQ(spMemPoolSetAccess(pool_, &d, 1), spErrorInvalidValue);
  }
  const spMemAccessDesc rw = Desc(0, spMemAccessFlagsProtReadWrite);
  EXPECT_EQ(spMemPoolSetAccess(pool_, &rw, 1), spSuccess) << "what it already has";
  EXPECT_EQ(Access(pool_, 0), spMemAccessFlagsProtReadWrite);
  // The same holds for a device's default pool.
  spMemPool_t dflt;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&dflt, rt_, 1));
  EXPECT_EQ(Access(dflt, 1), spMemAccessFlagsProtReadWrite);
  EXPECT_EQ(Access(dflt, 0), spMemAccessFlagsProtNone);
}

TEST_F(PeerAccessTest, GrantsReadBackAndCanBeChangedAndRevoked) {
  const spMemAccessDesc grants[] = {Desc(1, spMemAccessFlagsProtRead),
                                    Desc(2, spMemAccessFlagsProtReadWrite)};
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, grants, 2));
  EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtRead);
  EXPECT_EQ(Access(pool_, 2), spMemAccessFlagsProtReadWrite);
  const spMemAccessDesc revoke = Desc(2, spMemAccessFlagsProtNone);
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, &revoke, 1));
  EXPECT_EQ(Access(pool_, 2), spMemAccessFlagsProtNone);
  EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtRead) << "untouched by the second call";
  EXPECT_EQ(spMemPoolSetAccess(pool_, nullptr, 0), spSuccess) << "nothing to change";
}

TEST_F(PeerAccessTest, CuttingThePeerPathLaterKeepsAnExistingGrant) {
  const spMemAccessDesc d = Desc(1, spMemAccessFlagsProtReadWrite);
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, &d, 1));
  SP_ASSERT_OK(spRuntimeSetPeerAccessible(rt_, 1, 0, 0));
  EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtReadWrite);
  // A new grant would now fail.
  EXPECT_EQ(spMemPoolSetAccess(pool_, &d, 1), spErrorInvalidDevice);
}

TEST_F(PeerAccessTest, BadDescriptorsAreRejectedAndChangeNothing) {
  const spMemAccessDesc good = Desc(1, spMemAccessFlagsProtReadWrite);
  struct Case {
    const char* what;
    spMemAccessDesc bad;
    spError_t want;
  };
  spMemAccessDesc flags2 = Desc(2, spMemAccessFlagsProtNone);
  int two = 2;
  std::memcpy(&flags2.flags, &two, sizeof two);  // not a spMemAccessFlags value
  spMemAccessDesc type0 = Desc(2, spMemAccessFlagsProtRead);
  int zero = 0;
  std::memcpy(&type0.location.type, &zero, sizeof zero);
  spMemAccessDesc host = Desc(0, spMemAccessFlagsProtReadWrite);
  host.location.type = spMemLocationTypeHost;
  const Case cases[] = {
      {"flags 2", flags2, spErrorInvalidValue},
      {"location type 0", type0, spErrorInvalidValue},
      {"device 3", Desc(3, spMemAccessFlagsProtRead), spErrorInvalidDevice},
      {"device -1", Desc(-1, spMemAccessFlagsProtRead), spErrorInvalidDevice},
      {"host location on a device pool", host, spErrorInvalidValue},
      {"lowering the resident device", Desc(0, spMemAccessFlagsProtRead), spErrorInvalidValue},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    // A good grant first: it must not apply when a later descriptor fails.
    const spMemAccessDesc both[] = {good, c.bad};
    EXPECT_EQ(spMemPoolSetAccess(pool_, both, 2), c.want);
    EXPECT_EQ(Access(pool_, 1), spMemAccessFlagsProtNone);
    EXPECT_EQ(Access(pool_, 2), spMemAccessFlagsProtNone);
  }
  EXPECT_EQ(spMemPoolSetAccess(pool_, nullptr, 1), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolSetAccess(nullptr, &good, 1), spErrorInvalidValue);
}

TEST_F(PeerAccessTest, GetAccessRejectsBadArguments) {
  // A sentinel no call would write, stored and compared as bytes: 42 is not
  // an spMemAccessFlags value, so reading it as one would be undefined.
  spMemAccessFlags f;
  const int sentinel = 42;
  std::memcpy(&f, &sentinel, sizeof f);
  spMemLocation loc{spMemLocationTypeDevice, 3};
  EXPECT_EQ(spMemPoolGetAccess(&f, pool_, &loc), spErrorInvalidDevice);
  loc.id = 0;
  EXPECT_EQ(spMemPoolGetAccess(nullptr, pool_, &loc), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolGetAccess(&f, pool_, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolGetAccess(&f, nullptr, &loc), spErrorInvalidValue);
  int seven = 7;
  std::memcpy(&loc.type, &seven, sizeof seven);
  EXPECT_EQ(spMemPoolGetAccess(&f, pool_, &loc), spErrorInvalidValue);
  EXPECT_EQ(std::memcmp(&f, &sentinel, sizeof f), 0) << "no failed call wrote it";
  spMemPool_t gone;
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  SP_ASSERT_OK(spMemPoolCreate(&gone, rt_, &props));
  SP_ASSERT_OK(spMemPoolDestroy(gone));
  loc = {spMemLocationTypeDevice, 0};
  EXPECT_EQ(spMemPoolGetAccess(&f, gone, &loc), spErrorInvalidResourceHandle);
  // The host has no access to a device pool.
  loc = {spMemLocationTypeHost, 0};
  SP_EXPECT_OK(spMemPoolGetAccess(&f, pool_, &loc));
  EXPECT_EQ(f, spMemAccessFlagsProtNone);
}

TEST_F(PeerAccessTest, PinnedHostPoolsAreEveryDevicesAndTheHostsReadWrite) {
  spMemPool_t pinned;
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypePinnedHost;
  SP_ASSERT_OK(spMemPoolCreate(&pinned, rt_, &props));
  for (int d = 0; d < 3; ++d) EXPECT_EQ(Access(pinned, d), spMemAccessFlagsProtReadWrite);
  spMemLocation host{spMemLocationTypeHost, 0};
  spMemAccessFlags f;
  SP_ASSERT_OK(spMemPoolGetAccess(&f, pinned, &host));
  EXPECT_EQ(f, spMemAccessFlagsProtReadWrite);
  const spMemAccessDesc lower = Desc(2, spMemAccessFlagsProtRead);
  EXPECT_EQ(spMemPoolSetAccess(pinned, &lower, 1), spErrorInvalidValue);
  const spMemAccessDesc rw = Desc(2, spMemAccessFlagsProtReadWrite);
  EXPECT_EQ(spMemPoolSetAccess(pinned, &rw, 1), spSuccess);
  // Every device's kernels may touch it: no report.
  void* p = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&p, 4096, pinned, s_[0]));
  OrderAfterDevice0();
  for (int d = 0; d < 3; ++d) Kernel(d, p, 4096, 1);
  EXPECT_EQ(Reports().size(), 0u);
}

// ------------------------------------------------- allocation and checker

TEST_F(PeerAccessTest, AllocatingOnAnotherDevicesStreamPlacesMemoryOnThePoolsDevice) {
  // F.3: the pool, not the stream, decides where an allocation lives.
  void* p = Alloc(1000, /*stream_device=*/1);
  ASSERT_NE(p, nullptr);
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, p));
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.pool, pool_);
  spMemPoolStats st;
  SP_ASSERT_OK(spMemPoolGetStats(pool_, &st));
  EXPECT_EQ(st.usedBytes, 1024u);
  spMemPool_t dev1;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&dev1, rt_, 1));
  SP_ASSERT_OK(spMemPoolGetStats(dev1, &st));
  EXPECT_EQ(st.reservedBytes, 0u) << "device 1's pool was not asked";
  SP_ASSERT_OK(spFreeAsync(p, s_[1]));
}

TEST_F(PeerAccessTest, CheckerReportsAKernelOnADeviceWithoutAccess) {
  void* p = Alloc(512);
  OrderAfterDevice0();  // ordered: only access is wrong
  Kernel(0, p, 512, 1);
  EXPECT_EQ(Reports().size(), 0u) << "the resident device";
  Kernel(1, p, 512, 0);  // op 2 of s_[1] (the wait is op 1)
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckNoAccess);
  EXPECT_EQ(r[0].stream, s_[1]);
  EXPECT_EQ(r[0].opIndex, 2u);
  EXPECT_EQ(r[0].ptr, p);
  EXPECT_EQ(r[0].size, 512u);
  EXPECT_EQ(r[0].otherStream, s_[0]) << "the allocation";
  EXPECT_EQ(r[0].otherOpIndex, 1u);
  EXPECT_NE(std::strstr(r[0].message, "device 1"), nullptr) << r[0].message;
}

TEST_F(PeerAccessTest, AccessAppliesToPastAndFutureAllocations) {
  void* before = Alloc(256);
  const spMemAccessDesc d = Desc(1, spMemAccessFlagsProtReadWrite);
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, &d, 1));
  void* after = Alloc(256);
  OrderAfterDevice0();
  Kernel(1, before, 256, 1);
  Kernel(1, after, 256, 1);
  EXPECT_EQ(Reports().size(), 0u);
  // Revoking is as retroactive as granting.
  const spMemAccessDesc none = Desc(1, spMemAccessFlagsProtNone);
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, &none, 1));
  Kernel(1, before, 256, 0);
  Kernel(1, after, 256, 0);
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].kind, spCheckNoAccess);
  EXPECT_EQ(r[0].ptr, before);
  EXPECT_EQ(r[1].kind, spCheckNoAccess);
  EXPECT_EQ(r[1].ptr, after);
}

TEST_F(PeerAccessTest, ReadAccessAllowsReadsAndReportsWrites) {
  void* p = Alloc(256);
  OrderAfterDevice0();
  const spMemAccessDesc d = Desc(2, spMemAccessFlagsProtRead);
  SP_ASSERT_OK(spMemPoolSetAccess(pool_, &d, 1));
  Kernel(2, p, 256, 0);
  EXPECT_EQ(Reports().size(), 0u);
  Kernel(2, p, 16, 1);
  const std::vector<spCheckReport> r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckNoAccess);
  EXPECT_NE(std::strstr(r[0].message, "read access only"), nullptr) << r[0].message;
}

TEST_F(PeerAccessTest, CopiesAreNotAccessChecked) {
  // Copies move bytes through whatever path the runtime has (CUDA's
  // cudaMemcpyPeerAsync needs no grant); only kernels are checked.
  void* a = Alloc(256);
  void* b = Alloc(256);
  OrderAfterDevice0();
  SP_ASSERT_OK(spMemcpyAsync(a, b, 256, s_[1]));
  EXPECT_EQ(Reports().size(), 0u);
}

// The C++ API says the same through its own types.
TEST(PeerAccessCppTest, RuntimeMethodsMirrorTheCApi) {
  streampool::RuntimeConfig cfg;
  cfg.device_count = 2;
  cfg.backing = streampool::Backing::kAddressOnly;
  auto rt = streampool::Runtime::Create(cfg).value();
  EXPECT_EQ(rt->CanAccessPeer(0, 1).value(), true);
  EXPECT_EQ(rt->CanAccessPeer(1, 1).value(), false);
  ASSERT_TRUE(rt->SetPeerAccessible(0, 1, false).ok());
  EXPECT_EQ(rt->CanAccessPeer(0, 1).value(), false);
  const streampool::PoolId pool = rt->DefaultPool(1).value();
  const streampool::MemAccessDesc grant{{streampool::MemLocationType::kDevice, 0},
                                        streampool::MemAccessFlags::kProtRead};
  EXPECT_EQ(rt->SetPoolAccess(pool, {&grant, 1}).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(rt->SetPeerAccessible(0, 1, true).ok());
  ASSERT_TRUE(rt->SetPoolAccess(pool, {&grant, 1}).ok());
  EXPECT_EQ(rt->GetPoolAccess(pool, {streampool::MemLocationType::kDevice, 0}).value(),
            streampool::MemAccessFlags::kProtRead);
  EXPECT_EQ(rt->GetPoolAccess(pool, {streampool::MemLocationType::kDevice, 1}).value(),
            streampool::MemAccessFlags::kProtReadWrite);
}

}  // namespace
