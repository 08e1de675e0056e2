#include "src/runtime/runtime_impl.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/exec/thread_executor.h"
#include "src/runtime/registry.h"
#include "src/util/check.h"

namespace streampool::internal {

// ------------------------------------------------------------ lifecycle

RuntimeImpl::RuntimeImpl(const RuntimeConfig& config, uint32_t id, Process& process)
    : id_(id),
      core_(config, id, process, mu_, gate_),
      sync_(core_),
      streams_(core_, sync_),
      events_(core_, sync_),
      work_(core_),
      alloc_(core_),
      pools_(core_),
      ipc_(core_),
      observation_(core_),
      graphs_(core_, streams_, events_, work_) {
  core_.graphs = &graphs_;
}

RuntimeImpl::~RuntimeImpl() {
  MutexLock lock(&mu_);
  TearDown();
}

uint64_t RuntimeImpl::handle() const { return MakeHandle(HandleKind::kRuntime, id_, 0); }

void RuntimeImpl::RecordFromEnv() {
  const char* path = std::getenv("STREAMPOOL_RECORD");
  if (path == nullptr || *path == '\0') return;
  // One file per runtime: the process's first writes <path>, later ones
  // <path>.2, <path>.3, ... (a program that resets its device, a test that
  // makes a runtime per case), rather than overwriting each other.
  static std::atomic<uint64_t> recordings{0};
  const uint64_t n = recordings.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::string file = n == 1 ? std::string(path) : absl::StrCat(path, ".", n);
  if (absl::Status st = Run<&Observation::StartRecording>(file); !st.ok()) {
    // The program runs on unrecorded: a diagnostic must not stop it.
    std::fprintf(stderr, "streampool: STREAMPOOL_RECORD: %s; not recording\n",
                 std::string(st.message()).c_str());
  }
}

absl::StatusOr<std::shared_ptr<RuntimeImpl>> RuntimeImpl::Create(const RuntimeConfig& given,
                                                                 Process& process) {
  RuntimeConfig config = given;
  std::shared_ptr<CudaDriver> cuda;
  if (config.executor == ExecutorKind::kCuda && config.adapter == nullptr) {
    // The arguments first: a bad one is refused the same with or without a
    // driver, and costs no dlopen.
    const RuntimeConfig defaults;
    if (config.device_count < 0 || config.device_count > 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "deviceCount must be in [0, 64] on a CUDA runtime, got ", config.device_count));
    }
    if (config.backing != defaults.backing) {
      return absl::InvalidArgumentError("backing does not apply to a CUDA runtime");
    }
    if (config.copy_bytes_per_us != defaults.copy_bytes_per_us) {
      return absl::InvalidArgumentError("copyBytesPerUs does not apply to a CUDA runtime");
    }
    if (config.api_call_ns != defaults.api_call_ns) {
      return absl::InvalidArgumentError("apiCallNs does not apply to a CUDA runtime");
    }
    absl::StatusOr<std::shared_ptr<CudaDriver>> driver = CudaDriver::Open(config.device_count);
    if (!driver.ok()) return driver.status();
    cuda = *std::move(driver);
    config.device_count = cuda->device_count();
    // The smallest device's memory where they differ: one capacity for all.
    uint64_t total = UINT64_MAX;
    for (int d = 0; d < cuda->device_count(); ++d) total = std::min(total, cuda->total_memory(d));
    config.device_capacity =
        config.device_capacity == 0 ? total : std::min(config.device_capacity, total);
  }
  if (config.device_count < 1 || config.device_count > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("deviceCount must be in [1, 64], got ", config.device_count));
  }
  if (config.device_capacity == 0) {
    return absl::InvalidArgumentError("deviceCapacity must be non-zero");
  }
  if (config.copy_bytes_per_us == 0) {
    return absl::InvalidArgumentError("copyBytesPerUs must be non-zero");
  }
  if (config.backing != Backing::kHost && config.backing != Backing::kAddressOnly) {
    return absl::InvalidArgumentError("unknown backing");
  }
  if (config.executor != ExecutorKind::kSimulator && config.executor != ExecutorKind::kThreads &&
      config.executor != ExecutorKind::kCuda) {
    return absl::InvalidArgumentError("unknown executor");
  }
  const uint32_t id = process.registry().NextRuntimeId();
  if (id == 0) return absl::ResourceExhaustedError("runtime ids exhausted");
  std::shared_ptr<RuntimeImpl> rt(new RuntimeImpl(config, id, process));
  {
    MutexLock lock(&rt->mu_);
    rt->core_.cuda = std::move(cuda);
    absl::Status s = rt->Init();
    if (!s.ok()) {
      rt->TearDown();
      return s;
    }
  }
  process.registry().Add(id, rt);
  rt->RecordFromEnv();
  return rt;
}

absl::Status RuntimeImpl::Init() {
  RuntimeCore& c = core_;
  const RuntimeConfig& config = c.config;
  {
    MutexLock order_lock(&c.seq.mu());
    if (c.cuda != nullptr) {
      c.native = c.cuda.get();
      c.seq.set_executor(std::make_unique<AdapterExecutor>(c.cuda, c.cuda.get()));
    } else if (config.adapter != nullptr) {
      c.seq.set_executor(std::make_unique<AdapterExecutor>(config.adapter));
    } else if (config.executor == ExecutorKind::kThreads) {
      c.seq.set_executor(std::make_unique<ThreadExecutor>());
    } else {
      c.seq.set_executor(std::make_unique<SimExecutor>());
    }
  }
  c.devices.set_upstream(
      c.Registering(config.backing == Backing::kHost ? NewHostMemory() : NewAddressOnlyMemory()));
  if (c.cuda != nullptr) c.pinned_memory = c.Registering(c.cuda->NewPinnedHostMemory());
  bool check = config.check_stream_order, fatal = false;
  if (const char* env = std::getenv("STREAMPOOL_CHECK_STREAM_ORDER")) {
    const std::string mode = env;
    check = check || mode == "1" || mode == "fatal";
    fatal = mode == "fatal";
  }
  for (int d = 0; d < config.device_count; ++d) {
    DeviceTable::Device& dev = c.devices[d];
    if (c.cuda != nullptr) dev.native_memory = c.Registering(c.cuda->NewDeviceMemory(d));
    StreamIndex legacy;
    {
      MutexLock order_lock(&c.seq.mu());
      if (c.seq.adapter() != nullptr) {
        absl::Status bound = c.seq.adapter()->BindStream(
            static_cast<StreamIndex>(c.seq.ordering().stream_count()), d, /*legacy=*/true, false);
        if (!bound.ok()) return bound;
      }
      // The executor first: if it cannot run the stream, the ordering core
      // has nothing the teardown would wait for.
      legacy = c.seq.ordering().NextSlot();
      try {
        c.seq.executor()->AddStream(legacy);
      } catch (const std::system_error& e) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot start the legacy stream's worker thread: ", e.what()));
      }
      SP_CHECK(c.seq.ordering().AddStream(d, StreamKind::kLegacy) == legacy);
    }
    absl::StatusOr<uint64_t> lh = c.streams.Add([&](RuntimeCore::StreamRec& r, uint64_t) {
      r.index = legacy;
      r.device = d;
      r.legacy = true;
    });
    SP_CHECK(lh.ok());
    dev.legacy_stream = *lh;
    c.stream_handles.push_back(dev.legacy_stream);
    PoolProps props;
    props.device = d;
    absl::StatusOr<uint64_t> pool = pools_.CreatePool(props, nullptr);
    if (!pool.ok()) return pool.status();
    (*c.pools.Find(*pool))->attrs.is_default = true;
    dev.default_pool = *pool;
    c.devices.set_current_pool(d, *pool);
  }
  MutexLock order_lock(&c.seq.mu());
  c.obs.EnableChecker(check, fatal, &c.seq.ordering().done(), &c.host_ranges);
  c.UpdateFastPath();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RuntimeImpl>> RuntimeImpl::Find(Process& process, uint64_t handle) {
  if (handle == 0 || static_cast<uint8_t>(KindOf(handle)) == 0 ||
      static_cast<uint8_t>(KindOf(handle)) > static_cast<uint8_t>(HandleKind::kGraphExec)) {
    return absl::NotFoundError("invalid handle");
  }
  std::shared_ptr<RuntimeImpl> rt = process.registry().Find(RuntimeIdOf(handle));
  if (rt == nullptr) return absl::NotFoundError("handle of a destroyed or unknown runtime");
  return rt;
}

absl::Status RuntimeImpl::Destroy(Process& process, uint64_t runtime_handle) {
  if (KindOf(runtime_handle) != HandleKind::kRuntime || ObjectIdOf(runtime_handle) != 0) {
    return InvalidHandle("runtime", runtime_handle);
  }
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  std::shared_ptr<RuntimeImpl> rt = process.registry().Remove(RuntimeIdOf(runtime_handle));
  if (rt == nullptr) return InvalidHandle("runtime", runtime_handle);
  rt->Shutdown();
  return absl::OkStatus();
}

absl::Status RuntimeImpl::Destroyed() { return absl::NotFoundError("runtime destroyed"); }

void RuntimeImpl::Shutdown() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // New calls are refused from here on (they get a destroyed handle's error).
  gate_.Close();
  // Wake the calls blocked in a synchronize: they see the gate closed and
  // return that error too. Waits on another process's event poll it.
  {
    MutexLock order_lock(&core_.seq.mu());
    if (core_.seq.threads() != nullptr) core_.seq.threads()->InterruptHostWaits(true);
  }
  // No lock is held while calls leave: they may need any of them to.
  gate_.Drain();
  {
    MutexLock order_lock(&core_.seq.mu());
    if (core_.seq.threads() != nullptr) core_.seq.threads()->InterruptHostWaits(false);
  }
  bool leaked;
  {
    MutexLock lock(&mu_);
    TearDown();
    leaked = leaked_;
  }
  // LeakCheck::kFail: the runtime is gone, no lock is held; what the process
  // buffered still reaches its files.
  if (leaked) {
    std::fflush(nullptr);
    std::_Exit(1);
  }
}

LeakCheck RuntimeImpl::LeakCheckMode() const {
  const char* env = std::getenv("STREAMPOOL_LEAK_CHECK");
  if (env == nullptr || *env == '\0') return core_.config.leak_check;
  const std::string mode = env;
  if (mode == "0" || mode == "off") return LeakCheck::kOff;
  if (mode == "report") return LeakCheck::kReport;
  if (mode == "1" || mode == "fail") return LeakCheck::kFail;
  std::fprintf(stderr, "streampool: STREAMPOOL_LEAK_CHECK='%s' is not 0, report or 1; ignored\n",
               env);
  return core_.config.leak_check;
}

void RuntimeImpl::ReportLeaks() {
  const LeakCheck mode = LeakCheckMode();
  if (mode == LeakCheck::kOff) return;
  absl::StatusOr<std::vector<LiveAllocation>> live = alloc_.LiveAllocations();
  if (!live.ok() || live->empty()) return;
  uint64_t bytes = 0;
  for (const LiveAllocation& a : *live) bytes += a.size;
  std::string text = absl::StrCat("streampool: runtime 0x", absl::Hex(handle()), " destroyed with ",
                                  live->size(), " live allocation", live->size() == 1 ? "" : "s",
                                  " (", bytes, " bytes asked for):\n");
  for (const LiveAllocation& a : *live) {
    absl::StrAppend(&text, "  0x", absl::Hex(reinterpret_cast<uintptr_t>(a.ptr)), " size ", a.size,
                    " (", a.block_size, " held)");
    if (a.pool.value != 0) {
      absl::StrAppend(
          &text, " pool 0x", absl::Hex(a.pool.value), " stream ",
          a.stream.value != 0 ? absl::StrCat("0x", absl::Hex(a.stream.value)) : "destroyed",
          " seq ", a.seq);
    } else {
      absl::StrAppend(&text, a.device < 0 ? " MallocHost" : " Malloc", " seq ", a.seq);
    }
    absl::StrAppend(&text, a.device < 0 ? " host\n" : absl::StrCat(" device ", a.device, "\n"));
  }
  std::fputs(text.c_str(), stderr);
  if (mode == LeakCheck::kFail) leaked_ = true;
}

void RuntimeImpl::TearDown() {
  RuntimeCore& c = core_;
  if (c.destroyed) return;
  c.destroyed = true;
  std::vector<std::pair<StreamIndex, Position>> all;
  bool running;
  {
    MutexLock order_lock(&c.seq.mu());
    c.UpdateFastPath();
    running = c.seq.executor() != nullptr;
    for (StreamIndex s = 0; running && s < c.seq.ordering().stream_count(); ++s) {
      all.emplace_back(s, c.seq.ordering().pos(s));
    }
  }
  // Work already enqueued completes (host functions run, Malloc frees
  // unmap), as a device reset would let it.
  if (running) {
    (void)sync_.WaitPoints(all, /*interruptible=*/false);
    MutexLock order_lock(&c.seq.mu());
    c.seq.executor()->RunDueEffects();
  }
  // The recording is complete once the runtime is gone: its last lines are
  // the synchronize above's effects, which write nothing.
  if (c.obs.recorder() != nullptr) {
    // No call is inside any more (Shutdown drained them): nothing can be
    // writing.
    (void)c.obs.TakeRecording()->Close();
  }
  ReportLeaks();
  graphs_.Clear();
  alloc_.UnmapAll();
  c.index.Clear();
  c.pools.Clear();
  events_.Clear();
  // Worker threads end with the runtime, not with the last reference to this
  // object (a thread's cached lookup may keep it alive a while longer, and a
  // process that forks meanwhile must not inherit live workers).
  MutexLock order_lock(&c.seq.mu());
  c.seq.set_executor(nullptr);
}

absl::Status RuntimeImpl::Enter() {
  if (core_.destroyed) return absl::NotFoundError("runtime destroyed");
  return absl::OkStatus();
}

// ------------------------------------------- the entry points beside Run

absl::StatusOr<AllocInfo> RuntimeImpl::AllocateSlow(uint64_t size, uint64_t pool,
                                                    uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return Destroyed();
  // The allocator takes the runtime's lock itself, only when it must.
  return alloc_.MallocAsync(size, pool, s);
}

absl::Status RuntimeImpl::FreeSlow(void* ptr, uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return Destroyed();
  return alloc_.FreeAsync(ptr, s);
}

uint64_t RuntimeImpl::HostNow() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // From a host function this thread already holds the lock.
  if (InHostCallback()) return core_.seq.executor()->Now();
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return 0;
  MutexLock lock(&mu_);
  MutexLock order_lock(&core_.seq.mu());
  return core_.seq.executor() != nullptr ? core_.seq.executor()->Now() : 0;  // null once destroyed
}

// ------------------------------------------------------------ observation

RuntimeImpl::Introspection RuntimeImpl::Introspect() {
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return {};  // a destroyed runtime has nothing to show
  MutexLock lock(&mu_);
  return observation_.Introspect();
}

absl::StatusOr<StreamIndex> RuntimeImpl::StreamIndexOf(uint64_t s) {
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return Destroyed();
  MutexLock lock(&mu_);
  return streams_.StreamIndexOf(s);
}

}  // namespace streampool::internal
