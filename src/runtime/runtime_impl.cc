#include "src/runtime/runtime_impl.h"

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

// Every entry point starts here. The host-function check must come before the
// lock: host functions run while the runtime's lock is held.
// The pass comes before the lock, so that it is let go after it: a destroyer
// waiting for calls to leave never holds what they need to leave.
#define SP_ENTER()                                                    \
  if (InHostCallback()) {                                             \
    return absl::UnimplementedError("API call from a host function"); \
  }                                                                   \
  CallGate::Pass pass(gate_);                                         \
  if (!pass.entered()) return Destroyed();                            \
  MutexLock lock(&mu_);                                               \
  if (absl::Status enter_status = Enter(); !enter_status.ok()) return enter_status

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
      observation_(core_) {}

RuntimeImpl::~RuntimeImpl() {
  MutexLock lock(&mu_);
  TearDown();
}

uint64_t RuntimeImpl::handle() const { return MakeHandle(HandleKind::kRuntime, id_, 0); }

absl::StatusOr<std::shared_ptr<RuntimeImpl>> RuntimeImpl::Create(const RuntimeConfig& config,
                                                                 Process& process) {
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
  if (config.executor != ExecutorKind::kSimulator && config.executor != ExecutorKind::kThreads) {
    return absl::InvalidArgumentError("unknown executor");
  }
  const uint32_t id = process.registry().NextRuntimeId();
  if (id == 0) return absl::ResourceExhaustedError("runtime ids exhausted");
  std::shared_ptr<RuntimeImpl> rt(new RuntimeImpl(config, id, process));
  {
    MutexLock lock(&rt->mu_);
    absl::Status s = rt->Init();
    if (!s.ok()) {
      rt->TearDown();
      return s;
    }
  }
  process.registry().Add(id, rt);
  return rt;
}

absl::Status RuntimeImpl::Init() {
  RuntimeCore& c = core_;
  const RuntimeConfig& config = c.config;
  {
    MutexLock order_lock(&c.order_mu);
    if (config.adapter != nullptr) {
      auto adapter = std::make_unique<AdapterExecutor>(config.adapter);
      c.adapter = adapter.get();
      c.executor = std::move(adapter);
    } else if (config.executor == ExecutorKind::kThreads) {
      auto threads = std::make_unique<ThreadExecutor>();
      c.threads = threads.get();
      c.executor = std::move(threads);
    } else {
      auto sim = std::make_unique<SimExecutor>();
      c.sim = sim.get();
      c.executor = std::move(sim);
    }
  }
  c.upstream =
      c.Registering(config.backing == Backing::kHost ? NewHostMemory() : NewAddressOnlyMemory());
  if (config.check_stream_order) c.checker = std::make_unique<StreamOrderChecker>();
  if (const char* env = std::getenv("STREAMPOOL_CHECK_STREAM_ORDER")) {
    const std::string mode = env;
    if (mode == "1" || mode == "fatal") c.checker = std::make_unique<StreamOrderChecker>();
    c.checker_fatal = mode == "fatal";
  }
  c.devices = std::make_unique<RuntimeCore::Device[]>(config.device_count);
  for (int d = 0; d < config.device_count; ++d) {
    RuntimeCore::Device& dev = c.devices[d];
    dev.budget = std::make_unique<DeviceBudget>(config.device_capacity);
    dev.huge_budget = std::make_unique<HugePageBudget>();
    StreamIndex legacy;
    {
      MutexLock order_lock(&c.order_mu);
      if (c.adapter != nullptr) {
        absl::Status bound = c.adapter->BindStream(
            static_cast<StreamIndex>(c.ordering.stream_count()), d, /*legacy=*/true, false);
        if (!bound.ok()) return bound;
      }
      // The executor first: if it cannot run the stream, the ordering core
      // has nothing the teardown would wait for.
      legacy = c.ordering.NextSlot();
      try {
        c.executor->AddStream(legacy);
      } catch (const std::system_error& e) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot start the legacy stream's worker thread: ", e.what()));
      }
      SP_CHECK(c.ordering.AddStream(d, StreamKind::kLegacy) == legacy);
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
    dev.current_pool.store(*pool, std::memory_order_release);
  }
  MutexLock order_lock(&c.order_mu);
  if (c.checker) c.checker->set_done(&c.ordering.done());
  c.UpdateFastPath();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RuntimeImpl>> RuntimeImpl::Find(uint64_t handle) {
  if (handle == 0 || static_cast<uint8_t>(KindOf(handle)) == 0 ||
      static_cast<uint8_t>(KindOf(handle)) > static_cast<uint8_t>(HandleKind::kPool)) {
    return absl::NotFoundError("invalid handle");
  }
  std::shared_ptr<RuntimeImpl> rt = Process::Default().registry().Find(RuntimeIdOf(handle));
  if (rt == nullptr) return absl::NotFoundError("handle of a destroyed or unknown runtime");
  return rt;
}

absl::Status RuntimeImpl::Destroy(uint64_t runtime_handle) {
  if (KindOf(runtime_handle) != HandleKind::kRuntime || ObjectIdOf(runtime_handle) != 0) {
    return InvalidHandle("runtime", runtime_handle);
  }
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  std::shared_ptr<RuntimeImpl> rt =
      Process::Default().registry().Remove(RuntimeIdOf(runtime_handle));
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
    MutexLock order_lock(&core_.order_mu);
    if (core_.threads != nullptr) core_.threads->InterruptHostWaits(true);
  }
  // No lock is held while calls leave: they may need any of them to.
  gate_.Drain();
  {
    MutexLock order_lock(&core_.order_mu);
    if (core_.threads != nullptr) core_.threads->InterruptHostWaits(false);
  }
  MutexLock lock(&mu_);
  TearDown();
}

void RuntimeImpl::TearDown() {
  RuntimeCore& c = core_;
  if (c.destroyed) return;
  c.destroyed = true;
  std::vector<std::pair<StreamIndex, Position>> all;
  bool running;
  {
    MutexLock order_lock(&c.order_mu);
    c.UpdateFastPath();
    running = c.executor != nullptr;
    for (StreamIndex s = 0; running && s < c.ordering.stream_count(); ++s) {
      all.emplace_back(s, c.ordering.pos(s));
    }
  }
  // Work already enqueued completes (host functions run, Malloc frees
  // unmap), as a device reset would let it.
  if (running) {
    (void)sync_.WaitPoints(all, /*interruptible=*/false);
    MutexLock order_lock(&c.order_mu);
    c.executor->RunDueEffects();
  }
  alloc_.UnmapAll();
  c.allocs.clear();
  c.pools.Clear();
  events_.Clear();
  // Worker threads end with the runtime, not with the last reference to this
  // object (a thread's cached lookup may keep it alive a while longer, and a
  // process that forks meanwhile must not inherit live workers).
  MutexLock order_lock(&c.order_mu);
  c.executor.reset();
  c.sim = nullptr;
  c.adapter = nullptr;
  c.threads = nullptr;
}

absl::Status RuntimeImpl::Enter() {
  if (core_.destroyed) return absl::NotFoundError("runtime destroyed");
  return absl::OkStatus();
}

// ----------------------------------------------------- streams

absl::StatusOr<uint64_t> RuntimeImpl::CreateStream(int device, bool non_blocking) {
  SP_ENTER();
  return streams_.CreateStream(device, non_blocking);
}

absl::Status RuntimeImpl::DestroyStream(uint64_t s) {
  SP_ENTER();
  return streams_.DestroyStream(s);
}

absl::StatusOr<uint64_t> RuntimeImpl::LegacyStream(int device) {
  SP_ENTER();
  return streams_.LegacyStream(device);
}

absl::Status RuntimeImpl::StreamSynchronize(uint64_t s) {
  SP_ENTER();
  return streams_.StreamSynchronize(s);
}

absl::Status RuntimeImpl::StreamQuery(uint64_t s) {
  SP_ENTER();
  return streams_.StreamQuery(s);
}

absl::Status RuntimeImpl::DeviceSynchronize(int device) {
  SP_ENTER();
  return streams_.DeviceSynchronize(device);
}

absl::StatusOr<void*> RuntimeImpl::NativeStream(uint64_t s) {
  SP_ENTER();
  return streams_.NativeStream(s);
}

// ------------------------------------------------------ events

absl::Status RuntimeImpl::StreamWaitEvent(uint64_t s, uint64_t e) {
  SP_ENTER();
  return events_.StreamWaitEvent(s, e);
}

absl::StatusOr<uint64_t> RuntimeImpl::CreateEvent(unsigned flags) {
  SP_ENTER();
  return events_.CreateEvent(flags);
}

absl::Status RuntimeImpl::DestroyEvent(uint64_t e) {
  SP_ENTER();
  return events_.DestroyEvent(e);
}

absl::Status RuntimeImpl::RecordEvent(uint64_t e, uint64_t s) {
  SP_ENTER();
  return events_.RecordEvent(e, s);
}

absl::Status RuntimeImpl::EventSynchronize(uint64_t e) {
  SP_ENTER();
  return events_.EventSynchronize(e);
}

absl::Status RuntimeImpl::EventQuery(uint64_t e) {
  SP_ENTER();
  return events_.EventQuery(e);
}

absl::StatusOr<float> RuntimeImpl::EventElapsedMs(uint64_t start, uint64_t end) {
  SP_ENTER();
  return events_.EventElapsedMs(start, end);
}

absl::Status RuntimeImpl::GetIpcEventHandle(uint64_t e, unsigned char handle[64]) {
  SP_ENTER();
  return events_.GetIpcEventHandle(e, handle);
}

absl::StatusOr<uint64_t> RuntimeImpl::OpenIpcEvent(const unsigned char handle[64]) {
  SP_ENTER();
  return events_.OpenIpcEvent(handle);
}

// -------------------------------------------------------- work

absl::Status RuntimeImpl::LaunchKernel(uint64_t s, uint64_t duration_ns,
                                       absl::Span<const Access> accesses) {
  SP_ENTER();
  return work_.LaunchKernel(s, duration_ns, accesses);
}

absl::Status RuntimeImpl::LaunchWork(uint64_t s, uint64_t duration_ns, std::function<void()> work,
                                     absl::Span<const Access> accesses) {
  SP_ENTER();
  return work_.LaunchWork(s, duration_ns, std::move(work), accesses);
}

absl::Status RuntimeImpl::LaunchHostFunc(uint64_t s, std::function<void()> fn) {
  SP_ENTER();
  return work_.LaunchHostFunc(s, std::move(fn));
}

absl::Status RuntimeImpl::MemcpyAsync(void* dst, const void* src, uint64_t bytes, uint64_t s) {
  SP_ENTER();
  return work_.MemcpyAsync(dst, src, bytes, s);
}

absl::Status RuntimeImpl::MemsetAsync(void* dst, int value, uint64_t bytes, uint64_t s) {
  SP_ENTER();
  return work_.MemsetAsync(dst, value, bytes, s);
}

absl::Status RuntimeImpl::HostAdvance(uint64_t ns) {
  SP_ENTER();
  return work_.HostAdvance(ns);
}

// ------------------------------------------------------ memory

absl::StatusOr<void*> RuntimeImpl::Malloc(uint64_t size, int device) {
  SP_ENTER();
  return alloc_.Malloc(size, device);
}

absl::Status RuntimeImpl::Free(void* ptr) {
  SP_ENTER();
  return alloc_.Free(ptr);
}

absl::StatusOr<void*> RuntimeImpl::MallocHost(uint64_t size) {
  SP_ENTER();
  return alloc_.MallocHost(size);
}

absl::Status RuntimeImpl::FreeHost(void* ptr) {
  SP_ENTER();
  return alloc_.FreeHost(ptr);
}

absl::StatusOr<DeviceMemInfo> RuntimeImpl::MemGetInfo(int device) {
  SP_ENTER();
  return alloc_.MemGetInfo(device);
}

absl::StatusOr<PointerAttributes> RuntimeImpl::GetPointerAttributes(const void* ptr) {
  SP_ENTER();
  return alloc_.GetPointerAttributes(ptr);
}

// ------------------------------------------------------- pools

absl::StatusOr<uint64_t> RuntimeImpl::CreatePool(const PoolProps& props,
                                                 std::shared_ptr<PhysicalMemory> upstream) {
  SP_ENTER();
  return pools_.CreatePool(props, std::move(upstream));
}

absl::Status RuntimeImpl::SetHugePageBudget(int device, uint64_t bytes) {
  SP_ENTER();
  return pools_.SetHugePageBudget(device, bytes);
}

absl::Status RuntimeImpl::DestroyPool(uint64_t pool) {
  SP_ENTER();
  return pools_.DestroyPool(pool);
}

absl::StatusOr<uint64_t> RuntimeImpl::DefaultPool(int device) {
  SP_ENTER();
  return pools_.DefaultPool(device);
}

absl::StatusOr<uint64_t> RuntimeImpl::CurrentPool(int device) {
  SP_ENTER();
  return pools_.CurrentPool(device);
}

absl::Status RuntimeImpl::SetCurrentPool(int device, uint64_t pool) {
  SP_ENTER();
  return pools_.SetCurrentPool(device, pool);
}

absl::Status RuntimeImpl::SetPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value) {
  SP_ENTER();
  return pools_.SetPoolAttribute(pool, attr, value);
}

absl::StatusOr<uint64_t> RuntimeImpl::GetPoolAttribute(uint64_t pool, PoolAttr attr) {
  SP_ENTER();
  return pools_.GetPoolAttribute(pool, attr);
}

absl::Status RuntimeImpl::TrimTo(uint64_t pool, uint64_t min_bytes_to_keep) {
  SP_ENTER();
  return pools_.TrimTo(pool, min_bytes_to_keep);
}

absl::StatusOr<PoolStats> RuntimeImpl::GetPoolStats(uint64_t pool) {
  SP_ENTER();
  return pools_.GetPoolStats(pool);
}

absl::Status RuntimeImpl::CheckPoolInvariants(uint64_t pool) {
  SP_ENTER();
  return pools_.CheckPoolInvariants(pool);
}

absl::Status RuntimeImpl::SetPeerAccessible(int device, int peer, bool accessible) {
  SP_ENTER();
  return pools_.SetPeerAccessible(device, peer, accessible);
}

absl::StatusOr<bool> RuntimeImpl::CanAccessPeer(int device, int peer) {
  SP_ENTER();
  return pools_.CanAccessPeer(device, peer);
}

absl::Status RuntimeImpl::SetPoolAccess(uint64_t pool, absl::Span<const MemAccessDesc> descs) {
  SP_ENTER();
  return pools_.SetPoolAccess(pool, descs);
}

absl::StatusOr<MemAccessFlags> RuntimeImpl::GetPoolAccess(uint64_t pool, MemLocation location) {
  SP_ENTER();
  return pools_.GetPoolAccess(pool, location);
}

// --------------------------------------------------------- IPC

absl::StatusOr<int> RuntimeImpl::ExportPool(uint64_t pool) {
  SP_ENTER();
  return ipc_.ExportPool(pool);
}

absl::StatusOr<uint64_t> RuntimeImpl::ImportPool(int fd) {
  SP_ENTER();
  return ipc_.ImportPool(fd);
}

absl::StatusOr<PtrExportData> RuntimeImpl::ExportPointer(const void* ptr) {
  SP_ENTER();
  return ipc_.ExportPointer(ptr);
}

absl::StatusOr<void*> RuntimeImpl::ImportPointer(uint64_t pool, const PtrExportData& data) {
  SP_ENTER();
  return ipc_.ImportPointer(pool, data);
}

// ------------------------------------------------- the two paths' entries

absl::StatusOr<AllocInfo> RuntimeImpl::MallocAsync(uint64_t size, uint64_t pool,
                                                   uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return Destroyed();
  // The allocator takes the runtime's lock itself, only when it must.
  return alloc_.MallocAsync(size, pool, s);
}

absl::Status RuntimeImpl::FreeAsync(void* ptr, uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (InHostCallback()) return absl::UnimplementedError("API call from a host function");
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return Destroyed();
  return alloc_.FreeAsync(ptr, s);
}

uint64_t RuntimeImpl::HostNow() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // From a host function this thread already holds the lock.
  if (InHostCallback()) return core_.executor->Now();
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return 0;
  MutexLock lock(&mu_);
  MutexLock order_lock(&core_.order_mu);
  return core_.executor != nullptr ? core_.executor->Now() : 0;  // null once destroyed
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

void RuntimeImpl::EnableChecker(bool on, bool fatal) {
  if (InHostCallback()) return;
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return;
  MutexLock lock(&mu_);
  observation_.EnableChecker(on, fatal);
}

std::vector<streampool::CheckReport> RuntimeImpl::CheckReports() {
  if (InHostCallback()) return {};
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return {};
  MutexLock lock(&mu_);
  return observation_.CheckReports();
}

void RuntimeImpl::ClearCheckReports() {
  if (InHostCallback()) return;
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return;
  MutexLock lock(&mu_);
  observation_.ClearCheckReports();
}

void RuntimeImpl::RecordTimeline(bool on) {
  if (InHostCallback()) return;
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return;
  MutexLock lock(&mu_);
  observation_.RecordTimeline(on);
}

std::vector<TimelineEntry> RuntimeImpl::Timeline() {
  if (InHostCallback()) return {};
  CallGate::Pass pass(gate_);
  if (!pass.entered()) return {};
  MutexLock lock(&mu_);
  return observation_.Timeline();
}

}  // namespace streampool::internal
