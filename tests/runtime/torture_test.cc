// Torture: many host threads call every entry point at random on one runtime,
// another makes and destroys streams, events and pools, and the runtime is
// destroyed while they are all still calling. Run under both executors, and
// in CI under TSan and ASan too.
//
// What it holds the library to (docs/design.md, "Concurrency contract"):
//   - nothing hangs: a watchdog prints every thread's stack and aborts;
//   - nothing crashes, before, during or after the destroy;
//   - every call returns one of its documented codes, and a destroyed
//     handle's error only where a handle can have been destroyed;
//   - nothing leaks: the executor's threads are gone and every mapping that
//     backed an allocation is unmapped once the runtime is destroyed.
//
// The program is a correct one (each block is used in stream order and freed
// after its last use, waits order cross-stream frees), so the checker is off:
// this is the configuration that ships, fast path on.
//
// STREAMPOOL_TORTURE_SECONDS sets how long the threads call before the
// destroy (default 30 per executor).
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

// ------------------------------------------------------------- what is called

enum Op : int {
  kMalloc,
  kMallocFromPool,
  kFree,
  kMemset,
  kMemcpy,
  kKernel,
  kHostFunc,
  kEventRecord,
  kStreamWaitEvent,
  kStreamQuery,
  kEventQuery,
  kStreamSync,
  kEventSync,
  kDeviceSync,
  kElapsed,
  kHostAdvance,
  kHostNow,
  kSetAttr,
  kGetAttr,
  kTrim,
  kStats,
  kPointerAttrs,
  kSetMemPool,
  kGetMemPool,
  kDirectMalloc,
  kDirectFree,
  kStreamCreate,
  kStreamDestroy,
  kEventCreate,
  kEventDestroy,
  kPoolCreate,
  kPoolDestroy,
  kExport,
  kOpCount
};

const char* OpName(int op) {
  static const char* const kNames[kOpCount] = {"spMallocAsync",
                                               "spMallocFromPoolAsync",
                                               "spFreeAsync",
                                               "spMemsetAsync",
                                               "spMemcpyAsync",
                                               "spLaunchKernel",
                                               "spLaunchHostFunc",
                                               "spEventRecord",
                                               "spStreamWaitEvent",
                                               "spStreamQuery",
                                               "spEventQuery",
                                               "spStreamSynchronize",
                                               "spEventSynchronize",
                                               "spDeviceSynchronize",
                                               "spEventElapsedTime",
                                               "spHostAdvance",
                                               "spHostNow",
                                               "spMemPoolSetAttribute",
                                               "spMemPoolGetAttribute",
                                               "spMemPoolTrimTo",
                                               "spMemPoolGetStats",
                                               "spPointerGetAttributes",
                                               "spDeviceSetMemPool",
                                               "spDeviceGetMemPool",
                                               "spMalloc",
                                               "spFree",
                                               "spStreamCreate",
                                               "spStreamDestroy",
                                               "spEventCreate",
                                               "spEventDestroy",
                                               "spMemPoolCreate",
                                               "spMemPoolDestroy",
                                               "spMemPoolExportToShareableHandle"};
  return kNames[op];
}

// The codes a call may return in this program, whatever the interleaving
// (README's error tables): out of memory for anything that allocates, "not
// ready" for queries and elapsed times, a bad value for an elapsed time of
// events recorded without timing or an attribute refused. The destroyed
// handle's error is judged separately.
bool Documented(int op, spError_t e) {
  switch (e) {
    case spSuccess:
    case spErrorInvalidResourceHandle:
      return true;
    case spErrorMemoryAllocation:
      return op == kMalloc || op == kMallocFromPool || op == kDirectMalloc || op == kPoolCreate ||
             op == kStreamCreate || op == kEventCreate;
    case spErrorNotReady:
      return op == kStreamQuery || op == kEventQuery || op == kElapsed;
    case spErrorInvalidValue:
      return op == kElapsed;
    default:
      return false;
  }
}

// ------------------------------------------------------------- the watchdog

void DumpStack(int) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char header[64];
  const int len =
      snprintf(header, sizeof header, "--- thread %ld\n", static_cast<long>(syscall(SYS_gettid)));
  (void)!write(2, header, len);
  backtrace_symbols_fd(frames, n, 2);
}

// Every thread's stack on stderr (each prints its own from a signal).
void DumpAllStacks() {
  signal(SIGUSR2, DumpStack);
  const pid_t pid = getpid();
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      const long tid = atol(e->d_name);
      if (tid <= 0) continue;
      syscall(SYS_tgkill, pid, tid, SIGUSR2);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    closedir(d);
  }
}

class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) {
    void* warm[1];
    backtrace(warm, 1);  // loads libgcc now, not inside a signal handler
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        fprintf(stderr, "torture: no progress after %lld s; every thread's stack follows\n",
                static_cast<long long>(limit.count()));
        DumpAllStacks();
        abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// ------------------------------------------------------------- the machine

int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// The mapped ranges of the process.
std::vector<std::pair<uintptr_t, uintptr_t>> Mappings() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) out.emplace_back(lo, hi);
  }
  return out;
}

double TortureSeconds() {
  if (const char* env = std::getenv("STREAMPOOL_TORTURE_SECONDS")) {
    const double s = atof(env);
    if (s > 0) return s;
  }
  return 30;
}

std::atomic<uint64_t> host_funcs_run{0};
void CountHostFunc(void*) { host_funcs_run.fetch_add(1, std::memory_order_relaxed); }

struct Tally {
  // calls[op][code]: codes are small integers but for a few; folded below.
  std::array<std::array<uint64_t, 16>, kOpCount> calls{};
  std::vector<std::pair<int, int>> undocumented;   // (op, code)
  std::vector<std::pair<int, int>> early_invalid;  // invalid handle before the destroy
  std::vector<uintptr_t> seen;                     // some allocation addresses
};

int Slot(spError_t e) {
  switch (e) {
    case spSuccess:
      return 0;
    case spErrorInvalidValue:
      return 1;
    case spErrorMemoryAllocation:
      return 2;
    case spErrorInvalidResourceHandle:
      return 3;
    case spErrorNotReady:
      return 4;
    case spErrorNotSupported:
      return 5;
    default:
      return 15;
  }
}

// State every thread reads: handles are plain values, published atomically.
struct Shared {
  spRuntime_t rt = nullptr;
  spMemPool_t pool = nullptr;  // the shared pool, destroyed with the runtime
  spMemPool_t default_pool = nullptr;
  std::array<std::atomic<spEvent_t>, 16> events{};  // made by workers, never destroyed
  std::atomic<spMemPool_t> chaos_pool{nullptr};     // made and destroyed by the chaos thread
  std::atomic<bool> destroying{false};
  std::atomic<bool> stop{false};
};

class Caller {
 public:
  Caller(Shared& sh, Tally& tally, uint64_t seed, bool chaos_target)
      : sh_(sh), t_(tally), rng_(seed), chaos_target_(chaos_target) {}

  // Records a call's result. `may_be_gone`: the call names an object another
  // thread may destroy, so the destroyed handle's error is fine even before
  // the runtime's destroy.
  spError_t Note(int op, spError_t e, bool may_be_gone = false) {
    ++t_.calls[op][Slot(e)];
    // A pointer names no handle: once its runtime is gone it is simply not a
    // live allocation, which is a bad value.
    const bool gone_pointer = op == kPointerAttrs && e == spErrorInvalidValue &&
                              sh_.destroying.load(std::memory_order_acquire);
    if (!Documented(op, e) && !gone_pointer) {
      t_.undocumented.emplace_back(op, static_cast<int>(e));
    }
    if (e == spErrorInvalidResourceHandle && !may_be_gone &&
        !sh_.destroying.load(std::memory_order_acquire)) {
      t_.early_invalid.emplace_back(op, static_cast<int>(e));
    }
    return e;
  }
  uint64_t Rand(uint64_t n) { return rng_() % n; }

 protected:
  Shared& sh_;
  Tally& t_;
  std::mt19937_64 rng_;
  bool chaos_target_;
};

struct Live {
  void* p;
  size_t size;
  int stream;  // 0 or 1: which own stream used it last
  bool direct;
};

// One worker: two streams of its own, its allocations, calls at random.
class Worker : public Caller {
 public:
  Worker(Shared& sh, Tally& tally, int id) : Caller(sh, tally, 0x5eed0000u + id, false), id_(id) {}

  void Run() {
    for (int i = 0; i < 2; ++i) {
      if (Note(kStreamCreate,
               spStreamCreate(&s_[i], sh_.rt, 0, i == 0 ? spStreamDefault : spStreamNonBlocking)) !=
          spSuccess) {
        return;
      }
    }
    spEvent_t ev = nullptr;
    if (Note(kEventCreate, spEventCreate(&ev, sh_.rt)) == spSuccess) {
      sh_.events[id_ % sh_.events.size()].store(ev, std::memory_order_release);
    }
    spEvent_t mine = nullptr;
    Note(kEventCreate, spEventCreate(&mine, sh_.rt));
    while (!sh_.stop.load(std::memory_order_acquire)) Step(mine);
    // The runtime is gone: whatever is left is refused, not crashed on.
    for (const Live& l : live_) Note(kFree, spFreeAsync(l.p, s_[l.stream]));
  }

 private:
  spStream_t S(int i) const { return s_[i]; }

  void Step(spEvent_t mine) {
    const int k = static_cast<int>(Rand(100));
    const int si = static_cast<int>(Rand(2));
    if (k < 22) {
      Allocate(si);
    } else if (k < 42) {
      FreeOne();
    } else if (k < 50) {
      Touch();
    } else if (k < 54) {
      spEvent_t e = sh_.events[Rand(sh_.events.size())].load(std::memory_order_acquire);
      if (e != nullptr) Note(kStreamWaitEvent, spStreamWaitEvent(S(si), e));
    } else if (k < 58) {
      spEvent_t e = sh_.events[id_ % sh_.events.size()].load(std::memory_order_acquire);
      if (e != nullptr) Note(kEventRecord, spEventRecord(e, S(si)));
      if (mine != nullptr) Note(kEventRecord, spEventRecord(mine, S(si)));
    } else if (k < 62) {
      Note(kStreamQuery, spStreamQuery(S(si)));
      if (mine != nullptr) Note(kEventQuery, spEventQuery(mine));
    } else if (k < 64) {
      Note(kStreamSync, spStreamSynchronize(S(si)));
    } else if (k < 65) {
      if (mine != nullptr) Note(kEventSync, spEventSynchronize(mine));
    } else if (k < 66) {
      Note(kDeviceSync, spDeviceSynchronize(sh_.rt, 0));
    } else if (k < 68) {
      float ms;
      spEvent_t e = sh_.events[id_ % sh_.events.size()].load(std::memory_order_acquire);
      // A never-recorded event has no time: the destroyed handle's code.
      if (e != nullptr && mine != nullptr) {
        Note(kElapsed, spEventElapsedTime(&ms, e, mine), /*may_be_gone=*/true);
      }
    } else if (k < 70) {
      Note(kHostAdvance, spHostAdvance(sh_.rt, Rand(2000)));
      uint64_t now;
      Note(kHostNow, spHostNow(sh_.rt, &now));
    } else if (k < 74) {
      Attributes();
    } else if (k < 76) {
      Note(kTrim, spMemPoolTrimTo(sh_.pool, Rand(4) << 20));
    } else if (k < 80) {
      spMemPoolStats st;
      Note(kStats, spMemPoolGetStats(Rand(2) ? sh_.pool : sh_.default_pool, &st));
    } else if (k < 83) {
      Note(kHostFunc, spLaunchHostFunc(S(si), CountHostFunc, nullptr));
    } else if (k < 85) {
      spMemPool_t p;
      Note(kGetMemPool, spDeviceGetMemPool(&p, sh_.rt, 0));
      Note(kSetMemPool, spDeviceSetMemPool(sh_.rt, 0, Rand(2) ? sh_.pool : sh_.default_pool));
    } else if (k < 88) {
      DirectAllocate(si);
    } else {
      spMemPool_t p = sh_.chaos_pool.load(std::memory_order_acquire);
      if (p != nullptr) {
        void* ptr = nullptr;
        const size_t size = 256 + Rand(4096);
        const spError_t e =
            Note(kMallocFromPool, spMallocFromPoolAsync(&ptr, size, p, S(si)), true);
        if (e == spSuccess) live_.push_back(Live{ptr, size, si, false});
      }
    }
  }

  void Allocate(int si) {
    const size_t size = Rand(8) == 0 ? (size_t{1} << 20) + Rand(1 << 20) : 1 + Rand(16384);
    void* p = nullptr;
    spError_t e;
    if (Rand(2) == 0) {
      e = Note(kMalloc, spMallocAsync(&p, size, S(si)));
    } else {
      e = Note(kMallocFromPool, spMallocFromPoolAsync(&p, size, sh_.pool, S(si)));
    }
    if (e != spSuccess) return;
    if (t_.seen.size() < 4096) t_.seen.push_back(reinterpret_cast<uintptr_t>(p));
    live_.push_back(Live{p, size, si, false});
    if (Rand(2) == 0) Note(kMemset, spMemsetAsync(p, id_, size < 4096 ? size : 4096, S(si)));
    spPointerAttributes a;
    if (Rand(8) == 0) Note(kPointerAttrs, spPointerGetAttributes(&a, p));
  }

  void DirectAllocate(int si) {
    void* p = nullptr;
    if (Note(kDirectMalloc, spMalloc(&p, 4096 + Rand(65536), sh_.rt, 0)) != spSuccess) return;
    if (Rand(2) == 0) {
      // Never used by a stream: freed at once.
      Note(kDirectFree, spFree(sh_.rt, p));
      return;
    }
    Note(kMemset, spMemsetAsync(p, 1, 4096, S(si)));
    // Freed in the stream's order, after the memset.
    Note(kFree, spFreeAsync(p, S(si)));
  }

  void Touch() {
    if (live_.empty()) return;
    Live& l = live_[Rand(live_.size())];
    const size_t n = l.size < 4096 ? l.size : 4096;
    if (Rand(3) == 0 && live_.size() > 1) {
      Live& m = live_[Rand(live_.size())];
      if (&m != &l && m.stream == l.stream) {
        const size_t c = n < m.size ? n : m.size;
        Note(kMemcpy, spMemcpyAsync(m.p, l.p, c, S(l.stream)));
        return;
      }
    }
    if (Rand(2) == 0) {
      Note(kMemset, spMemsetAsync(l.p, 7, n, S(l.stream)));
    } else {
      spAccess acc{l.p, n, 1};
      Note(kKernel, spLaunchKernel(S(l.stream), 1 + Rand(5000), &acc, 1));
    }
  }

  void FreeOne() {
    if (live_.empty()) return;
    const size_t i = Rand(live_.size());
    const Live l = live_[i];
    live_[i] = live_.back();
    live_.pop_back();
    int on = l.stream;
    if (Rand(4) == 0) {
      // A free on the other stream, ordered after the last use by an event.
      spEvent_t e = nullptr;
      if (Note(kEventCreate, spEventCreate(&e, sh_.rt)) == spSuccess) {
        Note(kEventRecord, spEventRecord(e, S(on)));
        Note(kStreamWaitEvent, spStreamWaitEvent(S(1 - on), e));
        Note(kEventDestroy, spEventDestroy(e));
        on = 1 - on;
      }
    }
    Note(kFree, spFreeAsync(l.p, S(on)), /*may_be_gone=*/false);
  }

  void Attributes() {
    // CUDA's attributes 1-14 and streampool's own two.
    static constexpr spMemPoolAttr kAttrs[] = {spMemPoolReuseFollowEventDependencies,
                                               spMemPoolReuseAllowOpportunistic,
                                               spMemPoolReuseAllowInternalDependencies,
                                               spMemPoolAttrReleaseThreshold,
                                               spMemPoolAttrReservedMemCurrent,
                                               spMemPoolAttrReservedMemHigh,
                                               spMemPoolAttrUsedMemCurrent,
                                               spMemPoolAttrUsedMemHigh,
                                               spMemPoolAttrAllocationType,
                                               spMemPoolAttrExportHandleTypes,
                                               spMemPoolAttrLocationId,
                                               spMemPoolAttrLocationType,
                                               spMemPoolAttrMaxPoolSize,
                                               spMemPoolAttrHwDecompressEnabled,
                                               spMemPoolAttrGrowth,
                                               spMemPoolAttrFrontCache};
    const spMemPoolAttr attr = kAttrs[Rand(std::size(kAttrs))];
    int flag = static_cast<int>(Rand(2));
    uint64_t value = Rand(2) ? 0 : Rand(8) << 20;
    switch (attr) {
      case spMemPoolReuseFollowEventDependencies:
      case spMemPoolReuseAllowOpportunistic:
      case spMemPoolReuseAllowInternalDependencies:
      case spMemPoolAttrFrontCache:
        Note(kSetAttr, spMemPoolSetAttribute(sh_.pool, attr, &flag));
        break;
      case spMemPoolAttrReleaseThreshold:
        Note(kSetAttr, spMemPoolSetAttribute(sh_.pool, attr, &value));
        break;
      case spMemPoolAttrReservedMemHigh:
      case spMemPoolAttrUsedMemHigh:
        value = 0;
        Note(kSetAttr, spMemPoolSetAttribute(sh_.pool, attr, &value));
        break;
      default:
        break;
    }
    uint64_t out = 0;
    Note(kGetAttr, spMemPoolGetAttribute(sh_.pool, attr, &out));
  }

  const int id_;
  spStream_t s_[2] = {nullptr, nullptr};
  std::vector<Live> live_;
};

// Makes and destroys streams (with work and pending frees on them), events
// and pools (one exportable, its fd exported), while the workers call.
class Chaos : public Caller {
 public:
  Chaos(Shared& sh, Tally& tally) : Caller(sh, tally, 0xc4a05, true) {}

  void Run() {
    while (!sh_.stop.load(std::memory_order_acquire)) {
      switch (Rand(4)) {
        case 0:
          StreamLife();
          break;
        case 1:
          EventLife();
          break;
        case 2:
          PoolLife();
          break;
        case 3:
          ExportLife();
          break;
      }
    }
  }

 private:
  void StreamLife() {
    spStream_t s = nullptr;
    if (Note(kStreamCreate,
             spStreamCreate(&s, sh_.rt, 0, Rand(2) ? spStreamDefault : spStreamNonBlocking)) !=
        spSuccess) {
      return;
    }
    void* p = nullptr;
    if (Note(kMalloc, spMallocAsync(&p, 512 + Rand(8192), s)) == spSuccess) {
      Note(kMemset, spMemsetAsync(p, 3, 512, s));
      Note(kFree, spFreeAsync(p, s));
    }
    spAccess none{};
    Note(kKernel, spLaunchKernel(s, Rand(3000), &none, 0));
    // Destroyed with its work and its free still pending.
    Note(kStreamDestroy, spStreamDestroy(s));
  }

  void EventLife() {
    spEvent_t e = nullptr;
    if (Note(kEventCreate,
             spEventCreateWithFlags(&e, sh_.rt, Rand(2) ? spEventDisableTiming : 0)) != spSuccess) {
      return;
    }
    spStream_t legacy = nullptr;
    if (spStreamGetLegacy(&legacy, sh_.rt, 0) == spSuccess) {
      Note(kEventRecord, spEventRecord(e, legacy));
      Note(kEventQuery, spEventQuery(e));
    }
    Note(kEventDestroy, spEventDestroy(e));
  }

  void PoolLife() {
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    props.maxSize = size_t{64} << 20;
    props.growth = static_cast<int>(Rand(3));
    spMemPool_t p = nullptr;
    if (Note(kPoolCreate, spMemPoolCreate(&p, sh_.rt, &props)) != spSuccess) return;
    sh_.chaos_pool.store(p, std::memory_order_release);
    spStream_t legacy = nullptr;
    std::vector<void*> mine;
    if (spStreamGetLegacy(&legacy, sh_.rt, 0) == spSuccess) {
      for (int i = 0; i < 8; ++i) {
        void* ptr = nullptr;
        if (Note(kMallocFromPool, spMallocFromPoolAsync(&ptr, 4096, p, legacy)) == spSuccess) {
          mine.push_back(ptr);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(Rand(2000)));
    sh_.chaos_pool.store(nullptr, std::memory_order_release);
    // Destroyed with live allocations (the workers' and these): they go back
    // as they are freed.
    Note(kPoolDestroy, spMemPoolDestroy(p), /*may_be_gone=*/false);
    for (void* ptr : mine) Note(kFree, spFreeAsync(ptr, legacy));
  }

  void ExportLife() {
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    props.maxSize = size_t{16} << 20;
    props.handleTypes = spMemHandleTypePosixFileDescriptor;
    spMemPool_t p = nullptr;
    if (Note(kPoolCreate, spMemPoolCreate(&p, sh_.rt, &props)) != spSuccess) return;
    int fd = -1;
    if (Note(kExport, spMemPoolExportToShareableHandle(&fd, p, spMemHandleTypePosixFileDescriptor,
                                                       0)) == spSuccess) {
      close(fd);
    }
    spStream_t legacy = nullptr;
    if (spStreamGetLegacy(&legacy, sh_.rt, 0) == spSuccess) {
      void* ptr = nullptr;
      if (Note(kMallocFromPool, spMallocFromPoolAsync(&ptr, 65536, p, legacy)) == spSuccess) {
        Note(kFree, spFreeAsync(ptr, legacy));
      }
    }
    Note(kPoolDestroy, spMemPoolDestroy(p));
  }
};

class TortureTest : public ::testing::TestWithParam<spExecutorKind> {};

TEST_P(TortureTest, EveryEntryPointFromManyThreadsThenDestroyWhileCalling) {
  const double seconds = TortureSeconds();
  // Generous: sanitizers slow every call, and the destroy waits for the work
  // already enqueued.
  Watchdog watchdog(std::chrono::seconds(static_cast<int64_t>(seconds) + 240));
  const int threads_before = ThreadCount();

  Shared sh;
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = GetParam();
  cfg.deviceCapacity = uint64_t{1} << 30;
  ASSERT_EQ(spRuntimeCreate(&sh.rt, &cfg), spSuccess);
  // The configuration that ships: checker off, fast path on.
  ASSERT_EQ(spCheckerEnable(sh.rt, 0), spSuccess);
  ASSERT_EQ(spDeviceGetDefaultMemPool(&sh.default_pool, sh.rt, 0), spSuccess);
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  props.device = 0;
  ASSERT_EQ(spMemPoolCreate(&sh.pool, sh.rt, &props), spSuccess);

  constexpr int kWorkers = 8;
  std::vector<Tally> tallies(kWorkers + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] { Worker(sh, tallies[i], i).Run(); });
  }
  threads.emplace_back([&] { Chaos(sh, tallies[kWorkers]).Run(); });

  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  // Destroyed while every thread is still calling, some blocked in a
  // synchronize; they go on calling a while after it.
  sh.destroying.store(true, std::memory_order_release);
  const spError_t destroyed = spRuntimeDestroy(sh.rt);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  sh.stop.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(destroyed, spSuccess);
  EXPECT_EQ(spRuntimeDestroy(sh.rt), spErrorInvalidResourceHandle);

  uint64_t total = 0, successes = 0;
  std::set<std::pair<int, int>> undocumented, early;
  std::vector<uintptr_t> seen;
  for (const Tally& t : tallies) {
    for (int op = 0; op < kOpCount; ++op) {
      for (uint64_t n : t.calls[op]) total += n;
      successes += t.calls[op][0];
    }
    undocumented.insert(t.undocumented.begin(), t.undocumented.end());
    early.insert(t.early_invalid.begin(), t.early_invalid.end());
    seen.insert(seen.end(), t.seen.begin(), t.seen.end());
  }
  for (const auto& [op, code] : undocumented) {
    ADD_FAILURE() << OpName(op) << " returned " << spGetErrorName(static_cast<spError_t>(code))
                  << ", not one of its documented codes here";
  }
  for (const auto& [op, code] : early) {
    ADD_FAILURE() << OpName(op) << " returned " << spGetErrorName(static_cast<spError_t>(code))
                  << " on a live handle, before the runtime was destroyed";
  }
  EXPECT_GT(successes, 1000u) << "of " << total << " calls";
  // Every op ran at least once and succeeded at least once.
  for (int op = 0; op < kOpCount; ++op) {
    uint64_t n = 0;
    for (const Tally& t : tallies) n += t.calls[op][0];
    EXPECT_GT(n, 0u) << OpName(op) << " never succeeded";
  }

  // Nothing leaks: the executor's threads are joined, and no memory that
  // backed an allocation is still mapped.
  EXPECT_EQ(ThreadCount(), threads_before) << "threads left behind";
  const auto maps = Mappings();
  size_t still_mapped = 0;
  for (uintptr_t p : seen) {
    for (const auto& [lo, hi] : maps) {
      if (p >= lo && p < hi) {
        ++still_mapped;
        break;
      }
    }
  }
  EXPECT_EQ(still_mapped, 0u) << "of " << seen.size() << " allocations sampled";
  printf("torture: %llu calls (%llu succeeded) in %.0f s, %llu host functions ran\n",
         static_cast<unsigned long long>(total), static_cast<unsigned long long>(successes),
         seconds, static_cast<unsigned long long>(host_funcs_run.load()));
}

INSTANTIATE_TEST_SUITE_P(Executors, TortureTest,
                         ::testing::Values(spExecutorSimulator, spExecutorThreads),
                         [](const ::testing::TestParamInfo<spExecutorKind>& info) {
                           return info.param == spExecutorSimulator ? std::string("Simulator")
                                                                    : std::string("Threads");
                         });

}  // namespace
