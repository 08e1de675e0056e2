#include "src/runtime/runtime_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/memory/upstreams.h"
#include "src/runtime/registry.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

thread_local bool in_host_callback = false;

// Host functions and work bodies run with API calls refused on their thread.
std::function<void()> AsHostCallback(std::function<void()> fn) {
  return [fn = std::move(fn)]() {
    in_host_callback = true;
    fn();
    in_host_callback = false;
  };
}

// A NULL handle is a bad argument (CUDA answers a NULL pool or event so); a
// handle that names nothing live is an invalid handle.
absl::Status InvalidHandle(const char* what, uint64_t h) {
  if (h == 0) return absl::InvalidArgumentError(absl::StrCat("NULL ", what, " handle"));
  return absl::NotFoundError(absl::StrCat("invalid or destroyed ", what, " handle"));
}

// Streams alive at once (slots): the widest clock we are willing to keep.
constexpr size_t kMaxStreamsPerRuntime = 1 << 16;

// One attribute switch for MemPool and ImportedPool (which share accessor
// names). An imported pool cannot allocate or release, so its reuse switches
// and threshold mean nothing (CUDA F.11.5); it keeps them so they read back.
template <typename Pool>
absl::Status SetAttribute(Pool& p, PoolAttr attr, uint64_t value) {
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      p.set_reuse_follow_event_dependencies(value != 0);
      return absl::OkStatus();
    case PoolAttr::kReuseAllowOpportunistic:
      p.set_reuse_allow_opportunistic(value != 0);
      return absl::OkStatus();
    case PoolAttr::kReuseAllowInternalDependencies:
      p.set_reuse_allow_internal_dependencies(value != 0);
      return absl::OkStatus();
    case PoolAttr::kReleaseThreshold:
      p.set_release_threshold(value);
      return absl::OkStatus();
    case PoolAttr::kReservedMemCurrent:
    case PoolAttr::kUsedMemCurrent:
      return absl::InvalidArgumentError("current usage attributes are read-only");
    case PoolAttr::kGrowth:
      return absl::InvalidArgumentError("the growth mode is a property of the pool (read-only)");
    case PoolAttr::kFrontCache:
      if (value > 1) return absl::InvalidArgumentError("the front cache switch is 0 or 1");
      p.set_front_cache(value != 0);
      return absl::OkStatus();
    case PoolAttr::kReservedMemHigh:
    case PoolAttr::kUsedMemHigh:
      if (value != 0) {
        return absl::InvalidArgumentError("a high watermark can only be reset, by setting 0");
      }
      if (attr == PoolAttr::kReservedMemHigh) {
        p.ResetReservedHigh();
      } else {
        p.ResetUsedHigh();
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown pool attribute");
}

template <typename Pool>
absl::StatusOr<uint64_t> GetAttribute(const Pool& p, PoolAttr attr) {
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      return p.reuse_follow_event_dependencies() ? 1 : 0;
    case PoolAttr::kReuseAllowOpportunistic:
      return p.reuse_allow_opportunistic() ? 1 : 0;
    case PoolAttr::kReuseAllowInternalDependencies:
      return p.reuse_allow_internal_dependencies() ? 1 : 0;
    case PoolAttr::kReleaseThreshold:
      return p.release_threshold();
    case PoolAttr::kReservedMemCurrent:
      return p.reserved();
    case PoolAttr::kReservedMemHigh:
      return p.reserved_high();
    case PoolAttr::kUsedMemCurrent:
      return p.used();
    case PoolAttr::kUsedMemHigh:
      return p.used_high();
    case PoolAttr::kGrowth:
      return static_cast<uint64_t>(p.growth());
    case PoolAttr::kFrontCache:
      return p.front_cache() ? 1 : 0;
  }
  return absl::InvalidArgumentError("unknown pool attribute");
}

}  // namespace

bool InHostCallback() { return in_host_callback; }

// Every entry point starts here. The host-function check must come before the
// lock: host functions run while the runtime's lock is held.
#define SP_ENTER()                                                    \
  if (in_host_callback) {                                             \
    return absl::UnimplementedError("API call from a host function"); \
  }                                                                   \
  MutexLock lock(&mu_);                                               \
  if (absl::Status enter_status = Enter(); !enter_status.ok()) return enter_status

// Keeps the process registry of address ranges in step with what pools and
// Malloc map, so a bare pointer finds its runtime.
class RuntimeImpl::RegisteringUpstream final : public PhysicalMemory {
 public:
  RegisteringUpstream(std::shared_ptr<PhysicalMemory> inner, RuntimeImpl* rt)
      : inner_(std::move(inner)),
        runtime_id_(rt->id_),
        rt_(rt),
        registry_(rt->process_.registry()) {}
  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    absl::StatusOr<Mapping> m = inner_->Map(bytes);
    if (m.ok()) {
      registry_.AddRange(reinterpret_cast<uintptr_t>(m->base), m->size, runtime_id_,
                         inner_->touchable());
    }
    return m;
  }
  void Unmap(const Mapping& mapping) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Pools unmap only under the runtime's lock.
    rt_->OnUnmapped(reinterpret_cast<uintptr_t>(mapping.base), mapping.size);
    rt_->OnAddressSpaceReleased(reinterpret_cast<uintptr_t>(mapping.base), mapping.size);
    registry_.RemoveRange(reinterpret_cast<uintptr_t>(mapping.base), mapping.size);
    inner_->Unmap(mapping);
  }
  bool touchable() const override { return inner_->touchable(); }
  const char* name() const override { return inner_->name(); }

  // A reservation is the runtime's address space but never touchable; its
  // granules are touchable while mapped.
  bool can_reserve() const override { return inner_->can_reserve(); }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    absl::StatusOr<void*> p = inner_->Reserve(bytes, alignment);
    if (p.ok()) {
      registry_.AddRange(reinterpret_cast<uintptr_t>(*p), bytes, runtime_id_, false);
    }
    return p;
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    absl::StatusOr<Mapping> m = inner_->MapAt(addr, bytes);
    if (m.ok()) {
      registry_.AddRange(reinterpret_cast<uintptr_t>(m->base), m->size, runtime_id_,
                         inner_->touchable());
    }
    return m;
  }
  void UnmapAt(const Mapping& mapping) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    rt_->OnUnmapped(reinterpret_cast<uintptr_t>(mapping.base), mapping.size);
    registry_.AddRange(reinterpret_cast<uintptr_t>(mapping.base), mapping.size, runtime_id_, false);
    inner_->UnmapAt(mapping);
  }
  void ReleaseReservation(void* base, uint64_t bytes) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    rt_->OnAddressSpaceReleased(reinterpret_cast<uintptr_t>(base), bytes);
    registry_.RemoveRange(reinterpret_cast<uintptr_t>(base), bytes);
    inner_->ReleaseReservation(base, bytes);
  }

 private:
  std::shared_ptr<PhysicalMemory> inner_;
  uint32_t runtime_id_;
  RuntimeImpl* rt_;
  Registry& registry_;
};

// Answers the pool's questions for one allocation on stream t.
class Oracle final : public OrderOracle {
 public:
  Oracle(RuntimeImpl& rt, StreamIndex t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(rt.mu_) : rt_(rt), t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return rt_.ordering_.OrderedAfter(t_, s);
  }
  Position ObservedComplete(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::max(rt_.ordering_.done(s), rt_.ExecutedThrough(s));
  }
  void InsertWait(StreamIndex s, Position f) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    OpDesc op;
    op.kind = OpKind::kInternalWait;
    op.wait_stream = s;
    op.wait_position = f;
    rt_.EnqueueOp(t_, std::move(op));
    if (f == rt_.ordering_.pos(s)) {
      // The free is S's latest op, so S's current clock is the free's clock
      // and the wait can carry everything the free was ordered after.
      rt_.ordering_.JoinInto(t_, rt_.ordering_.clock(s));
    } else {
      rt_.ordering_.OrderAfterPoint(t_, s, f);
    }
  }

 private:
  RuntimeImpl& rt_;
  StreamIndex t_;
};

// ------------------------------------------------------------ lifecycle

RuntimeImpl::RuntimeImpl(const RuntimeConfig& config, uint32_t id, Process& process)
    : config_(config), id_(id), process_(process), streams_(HandleKind::kStream, id), pools_(id) {}

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
  if (config_.adapter != nullptr) {
    auto adapter = std::make_unique<AdapterExecutor>(config_.adapter);
    adapter_ = adapter.get();
    executor_ = std::move(adapter);
  } else if (config_.executor == ExecutorKind::kThreads) {
    executor_ = std::make_unique<ThreadExecutor>();
  } else {
    auto sim = std::make_unique<SimExecutor>();
    sim_ = sim.get();
    executor_ = std::move(sim);
  }
  std::unique_ptr<PhysicalMemory> inner =
      config_.backing == Backing::kHost ? NewHostMemory() : NewAddressOnlyMemory();
  upstream_ = std::make_shared<RegisteringUpstream>(std::move(inner), this);
  // Pinned host memory is the host's own, touchable whatever the devices' backing.
  host_upstream_ = std::make_shared<RegisteringUpstream>(NewHostMemory(), this);
  if (config_.check_stream_order) checker_ = std::make_unique<StreamOrderChecker>();
  if (const char* env = std::getenv("STREAMPOOL_CHECK_STREAM_ORDER")) {
    const std::string mode = env;
    if (mode == "1" || mode == "fatal") checker_ = std::make_unique<StreamOrderChecker>();
    checker_fatal_ = mode == "fatal";
  }
  if (checker_) checker_->set_done(&ordering_.done());
  devices_ = std::make_unique<Device[]>(config_.device_count);
  // Every pair of devices is peer until the embedder says otherwise.
  peers_.assign(config_.device_count, ~uint64_t{0});
  for (int d = 0; d < config_.device_count; ++d) {
    Device& dev = devices_[d];
    dev.budget = std::make_unique<DeviceBudget>(config_.device_capacity);
    dev.huge_budget = std::make_unique<HugePageBudget>();
    if (adapter_ != nullptr) {
      absl::Status bound = adapter_->BindStream(static_cast<StreamIndex>(ordering_.stream_count()),
                                                d, /*legacy=*/true, false);
      if (!bound.ok()) return bound;
    }
    // The executor first: if it cannot run the stream, the ordering core
    // has nothing the teardown would wait for.
    const StreamIndex legacy = ordering_.NextSlot();
    try {
      executor_->AddStream(legacy);
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start the legacy stream's worker thread: ", e.what()));
    }
    SP_CHECK(ordering_.AddStream(d, StreamKind::kLegacy) == legacy);
    absl::StatusOr<uint64_t> lh = streams_.Add([&](StreamRec& r, uint64_t) {
      r.index = legacy;
      r.device = d;
      r.legacy = true;
    });
    SP_CHECK(lh.ok());
    dev.legacy_stream = *lh;
    stream_handles_.push_back(dev.legacy_stream);
    PoolProps props;
    props.device = d;
    absl::StatusOr<uint64_t> pool = CreatePoolLocked(props, nullptr);
    if (!pool.ok()) return pool.status();
    (*pools_.Find(*pool))->attrs.is_default = true;
    dev.default_pool = *pool;
    dev.current_pool.store(*pool, std::memory_order_release);
  }
  UpdateFastPath();
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

RuntimeImpl* RuntimeImpl::FindFast(uint64_t handle) {
  const auto kind = static_cast<uint8_t>(KindOf(handle));
  if (kind == 0 || kind > static_cast<uint8_t>(HandleKind::kPool)) return nullptr;
  return Process::Default().registry().FindCached(RuntimeIdOf(handle));
}

absl::Status RuntimeImpl::Destroy(uint64_t runtime_handle) {
  if (KindOf(runtime_handle) != HandleKind::kRuntime || ObjectIdOf(runtime_handle) != 0) {
    return InvalidHandle("runtime", runtime_handle);
  }
  if (in_host_callback) return absl::UnimplementedError("API call from a host function");
  std::shared_ptr<RuntimeImpl> rt =
      Process::Default().registry().Remove(RuntimeIdOf(runtime_handle));
  if (rt == nullptr) return InvalidHandle("runtime", runtime_handle);
  MutexLock lock(&rt->mu_);
  rt->TearDown();
  return absl::OkStatus();
}

void RuntimeImpl::TearDown() {
  if (destroyed_) return;
  destroyed_ = true;
  UpdateFastPath();
  // Work already enqueued completes (host functions run, Malloc frees
  // unmap), as a device reset would let it.
  if (executor_ != nullptr) {
    std::vector<std::pair<StreamIndex, Position>> all;
    for (StreamIndex s = 0; s < ordering_.stream_count(); ++s)
      all.emplace_back(s, ordering_.pos(s));
    WaitPoints(all);
    executor_->RunDueEffects();
  }
  direct_.UnmapAll();
  allocs_.clear();
  pools_.Clear();
  events_.clear();
  // Worker threads end with the runtime, not with the last reference to this
  // object (a thread's cached lookup may keep it alive a while longer, and a
  // process that forks meanwhile must not inherit live workers).
  executor_.reset();
  sim_ = nullptr;
  adapter_ = nullptr;
}

// --------------------------------------------------------------- helpers

absl::Status RuntimeImpl::Enter() {
  if (destroyed_) return absl::NotFoundError("runtime destroyed");
  return absl::OkStatus();
}

void RuntimeImpl::ChargeCall() {
  if (config_.api_call_ns != 0) executor_->HostAdvance(config_.api_call_ns);
}

absl::Status RuntimeImpl::CheckDevice(int device) const {
  if (device < 0 || device >= config_.device_count) {
    return absl::OutOfRangeError(
        absl::StrCat("device ", device, " out of range [0, ", config_.device_count, ")"));
  }
  return absl::OkStatus();
}

absl::Status RuntimeImpl::HandleRoom() const {
  // 2^36 handles per runtime: a runtime making a million objects a second
  // runs out after 19 hours; it then refuses to make more instead of aborting.
  if (next_object_id_ > kMaxObjectId) {
    return absl::ResourceExhaustedError("this runtime has issued every handle it can");
  }
  return absl::OkStatus();
}

uint64_t RuntimeImpl::NewHandle(HandleKind kind) {
  SP_CHECK(next_object_id_ <= kMaxObjectId);
  return MakeHandle(kind, id_, next_object_id_++);
}

absl::StatusOr<RuntimeImpl::StreamRec*> RuntimeImpl::FindStream(uint64_t h) {
  StreamRec* rec = streams_.Find(h);
  if (rec == nullptr) return InvalidHandle("stream", h);
  return rec;
}

absl::StatusOr<RuntimeImpl::EventRec*> RuntimeImpl::FindEvent(uint64_t h) {
  if (KindOf(h) != HandleKind::kEvent || RuntimeIdOf(h) != id_) return InvalidHandle("event", h);
  auto it = events_.find(h);
  if (it == events_.end()) return InvalidHandle("event", h);
  return &it->second;
}

Position RuntimeImpl::EnqueueOp(StreamIndex s, OpDesc op) {
  Position p;
  {
    SpinLockHolder lock(&ordering_.stream_lock(s));
    p = ordering_.Enqueue(s, &op.implicit_waits);
  }
  // Executors wait for ops: a point (allocation, free) is waited for through
  // the op before it.
  if (op.wait_stream != kNoStream)
    op.wait_position = OpAtOrBefore(op.wait_stream, op.wait_position);
  for (auto& [ws, wp] : op.implicit_waits) wp = OpAtOrBefore(ws, wp);
  if (s >= last_op_.size()) last_op_.resize(s + 1, 0);
  last_op_[s] = p;
  last_enqueue_end_ = executor_->Enqueue(s, p, std::move(op));
  return p;
}

Position RuntimeImpl::AdvancePoint(StreamIndex s, OpKind kind) {
  if (adapter_ != nullptr) {
    // An embedder's native stream runs work we never saw: only a native
    // marker tells when the stream has reached the point.
    OpDesc marker;
    marker.kind = kind;
    return EnqueueOp(s, std::move(marker));
  }
  Position p;
  {
    SpinLockHolder lock(&ordering_.stream_lock(s));
    p = ordering_.AdvancePoint(s);
  }
  if (sim_ != nullptr) sim_->RecordPoint(s, p, kind);
  return p;
}

Position RuntimeImpl::ExecutedThrough(StreamIndex s) {
  const Position c = executor_->CompletedPosition(s);
  const Position last = s < last_op_.size() ? last_op_[s] : 0;
  return c >= last ? ordering_.pos(s) : c;
}

std::vector<StreamIndex> RuntimeImpl::StreamsOfDevice(int device) const {
  std::vector<StreamIndex> out;
  for (StreamIndex s = 0; s < ordering_.stream_count(); ++s) {
    if (ordering_.device(s) == device) out.push_back(s);
  }
  return out;
}

absl::Status RuntimeImpl::SyncStreams(absl::Span<const StreamIndex> streams) {
  // What is proven is what was enqueued at the call: later work (other host
  // threads may enqueue while we wait) is not covered.
  std::vector<std::pair<StreamIndex, Position>> points;
  std::vector<VectorClock> proofs;
  for (StreamIndex s : streams) {
    points.emplace_back(s, ordering_.pos(s));
    proofs.push_back(ordering_.clock(s));
  }
  WaitPoints(points);
  executor_->RunDueEffects();
  for (const VectorClock& proof : proofs) ordering_.MarkComplete(proof);
  pools_.AfterCompletion(ordering_.done(), /*release=*/true);
  return absl::OkStatus();
}

void RuntimeImpl::WaitPoints(absl::Span<const std::pair<StreamIndex, Position>> points)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!executor_->blocks_host()) {
    for (const auto& [s, p] : points) executor_->WaitFor(s, OpAtOrBefore(s, p));
    return;
  }
  // Workers run effects that take this lock (Malloc memory going back).
  std::vector<std::pair<StreamIndex, Position>> ops;
  for (const auto& [s, p] : points) ops.emplace_back(s, OpAtOrBefore(s, p));
  Executor* executor = executor_.get();
  mu_.Unlock();
  for (const auto& [s, p] : ops) executor->WaitFor(s, p);
  mu_.Lock();
}

TimeNs RuntimeImpl::SimAllocReady(StreamIndex t) const {
  if (sim_ == nullptr) return 0;
  // T's next op will wait for the legacy-stream ordering too.
  TimeNs at = SimLastEnd(t);
  const StreamKind kind = ordering_.kind(t);
  if (kind == StreamKind::kNonBlocking) return at;
  for (StreamIndex b = 0; b < ordering_.stream_count(); ++b) {
    if (b == t || ordering_.device(b) != ordering_.device(t)) continue;
    const StreamKind other = ordering_.kind(b);
    if ((kind == StreamKind::kBlocking && other == StreamKind::kLegacy) ||
        (kind == StreamKind::kLegacy && other == StreamKind::kBlocking)) {
      at = std::max(at, sim_->LastEnd(b));
    }
  }
  return at;
}

TimeNs RuntimeImpl::SimLastEnd(StreamIndex s) const {
  // A point on s is reached once the host is past s's last op.
  return sim_ != nullptr ? std::max(sim_->Now(), sim_->LastEnd(s)) : 0;
}

std::function<void()> RuntimeImpl::MemoryEffect(void* dst, const void* src, int value,
                                                uint64_t bytes) {
  // Memory of any runtime is touched only while mapped and touchable; a range
  // that was runtime memory at enqueue and is unmapped since is skipped, as it
  // may belong to someone else by now. Other memory is the caller's.
  const Registry& reg = process_.registry();
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  const bool dst_managed = reg.Intersects(d, bytes);
  const bool src_managed = src != nullptr && reg.Intersects(s, bytes);
  return [&reg, dst, src, value, bytes, d, s, dst_managed, src_managed]() {
    const auto ok = [&](uintptr_t p, bool managed) {
      return managed ? reg.Intersects(p, bytes) && reg.SafeToTouch(p, bytes)
                     : reg.SafeToTouch(p, bytes);
    };
    if (!ok(d, dst_managed) || (src != nullptr && !ok(s, src_managed))) return;
    if (src != nullptr) {
      std::memmove(dst, src, bytes);
    } else {
      std::memset(dst, value, bytes);
    }
  };
}

// --------------------------------------------------------------- streams

absl::StatusOr<uint64_t> RuntimeImpl::CreateStream(int device, bool non_blocking) {
  SP_ENTER();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (!streams_.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's stream handles are used up");
  }
  // A destroyed stream's slot once nothing can refer to its positions, else
  // a new one (src/ordering/ordering.h, "Slot reuse").
  RecycleSlots();
  const StreamIndex idx = ordering_.NextSlot();
  if (idx == ordering_.stream_count() && idx >= kMaxStreamsPerRuntime) {
    return absl::ResourceExhaustedError(
        "too many streams alive (or destroyed with work not yet proven complete) in this runtime");
  }
  if (adapter_ != nullptr) {
    // The native stream first: if the embedder cannot make one, nothing changes.
    absl::Status bound = adapter_->BindStream(idx, device, /*legacy=*/false, non_blocking);
    if (!bound.ok()) return bound;
  }
  try {
    executor_->AddStream(idx);
  } catch (const std::system_error& e) {
    // No thread for the stream's worker: an error, with nothing changed.
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start the stream's worker thread: ", e.what()));
  }
  ChargeCall();
  SP_CHECK(ordering_.AddStream(
               device, non_blocking ? StreamKind::kNonBlocking : StreamKind::kBlocking) == idx);
  absl::StatusOr<uint64_t> added = streams_.Add([&](StreamRec& r, uint64_t) {
    r.index = idx;
    r.device = device;
    r.legacy = false;
  });
  SP_CHECK(added.ok());  // room was checked above
  const uint64_t h = *added;
  if (idx == stream_handles_.size()) {
    stream_handles_.push_back(h);
  } else {
    stream_handles_[idx] = h;
  }
  return h;
}

absl::Status RuntimeImpl::DestroyStream(uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if ((*rec)->legacy) return absl::InvalidArgumentError("the legacy stream cannot be destroyed");
  ChargeCall();
  // Enqueued work still completes and pending frees stay valid; the slot is
  // reused once that work is complete and no pool holds those frees
  // (RecycleSlots). An embedder's native streams
  // (adapter) and a recorded timeline name streams by slot for the
  // runtime's life, so there slots are never reused.
  const StreamIndex idx = (*rec)->index;
  stream_handles_[idx] = 0;
  streams_.Remove(s);
  // Its frees waiting in front caches go central (where they stay pending on
  // the dead stream until proven or observed complete).
  pools_.ForEachMemPool([idx](MemPool& pool) { pool.RetireCache(idx); });
  if (adapter_ == nullptr && (sim_ == nullptr || !sim_->record_timeline())) {
    ordering_.RetireStream(idx);
    retired_slots_.push_back(idx);
  }
  executor_->RemoveStream(idx);
  return absl::OkStatus();
}

bool RuntimeImpl::SlotIdle(StreamIndex s) {
  const Position last = ordering_.pos(s);
  if (ExecutedThrough(s) < last) return false;
  // The dead stream's frees are observed complete: pools whose opportunistic
  // switch is on promote them, as rule 3 would; a pool in strict mode keeps
  // them pending (and the slot retired) until a sync proves them.
  auto settle = [s, last](MemPool& pool) {
    if (pool.HasPendingOn(s) && pool.reuse_allow_opportunistic()) {
      pool.PromoteObservedOn(s, last);
    }
    return !pool.HasPendingOn(s);
  };
  bool idle = true;
  pools_.ForEachMemPool([&](MemPool& pool) { idle = settle(pool) && idle; });
  return idle;
}

void RuntimeImpl::RecycleSlots() {
  // A few checks per call, round robin: CreateStream stays O(1) however many
  // destroyed streams still have work running or frees pending.
  constexpr size_t kChecksPerCall = 4;
  const size_t checks = std::min(retired_slots_.size(), kChecksPerCall);
  for (size_t n = 0; n < checks && !retired_slots_.empty(); ++n) {
    if (recycle_cursor_ >= retired_slots_.size()) recycle_cursor_ = 0;
    const StreamIndex s = retired_slots_[recycle_cursor_];
    if (SlotIdle(s)) {
      // Every position of the old incarnation is complete: say so, since the
      // executor reports completion by ops and its successor's ops come next.
      VectorClock proof;
      proof.Raise(s, ordering_.pos(s));
      ordering_.MarkComplete(proof);
      ordering_.ReuseSlot(s);
      retired_slots_[recycle_cursor_] = retired_slots_.back();
      retired_slots_.pop_back();
    } else {
      ++recycle_cursor_;
    }
  }
}

absl::StatusOr<uint64_t> RuntimeImpl::LegacyStream(int device) {
  SP_ENTER();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  return devices_[device].legacy_stream;  // a getter: no host time charged
}

absl::Status RuntimeImpl::StreamSynchronize(uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  ChargeCall();
  const StreamIndex idx = (*rec)->index;
  return SyncStreams({&idx, 1});
}

absl::Status RuntimeImpl::StreamQuery(uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  ChargeCall();
  const StreamIndex idx = (*rec)->index;
  executor_->RunDueEffects();
  if (ExecutedThrough(idx) < ordering_.pos(idx)) {
    return absl::UnavailableError("stream has work pending");
  }
  ordering_.MarkComplete(ordering_.clock(idx));
  pools_.AfterCompletion(ordering_.done(), /*release=*/false);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::StreamWaitEvent(uint64_t s, uint64_t e) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    // Another process's record: nothing of ours to order after, only a point
    // in time to wait for.
    std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
    if (seg->completed() >= target) return absl::OkStatus();
    if (sim_ != nullptr || adapter_ != nullptr) {
      return absl::UnimplementedError(
          "a stream of this executor cannot wait for another process's record that has not "
          "completed (use the threads executor, or synchronize on the event)");
    }
    ChargeCall();
    OpDesc op;
    op.kind = OpKind::kWait;
    op.effect = [seg, target] { seg->WaitComplete(target); };
    EnqueueOp((*rec)->index, std::move(op));
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();  // CUDA: waiting on nothing
  ChargeCall();
  OpDesc op;
  op.kind = OpKind::kWait;
  op.wait_stream = (*ev)->stream;
  op.wait_position = (*ev)->position;
  EnqueueOp((*rec)->index, std::move(op));
  ordering_.JoinInto((*rec)->index, (*ev)->snapshot);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- events

absl::StatusOr<uint64_t> RuntimeImpl::CreateEvent(unsigned flags) {
  SP_ENTER();
  if (absl::Status st = HandleRoom(); !st.ok()) return st;
  if ((flags & ~(kEventDisableTiming | kEventInterprocess)) != 0) {
    return absl::InvalidArgumentError("unknown event flags");
  }
  if ((flags & kEventInterprocess) != 0 && (flags & kEventDisableTiming) == 0) {
    return absl::InvalidArgumentError("an interprocess event needs spEventDisableTiming");
  }
  EventRec rec;
  rec.flags = flags;
  if ((flags & kEventInterprocess) != 0) {
    absl::StatusOr<std::shared_ptr<IpcEventSegment>> seg = IpcEventSegment::Create();
    if (!seg.ok()) return seg.status();
    rec.ipc = *std::move(seg);
  }
  ChargeCall();
  const uint64_t h = NewHandle(HandleKind::kEvent);
  events_.emplace(h, std::move(rec));
  return h;
}

uint64_t RuntimeImpl::RemoteTarget(const EventRec& e) {
  if (e.ipc == nullptr) return 0;
  const uint64_t latest = e.ipc->recorded();
  return latest != 0 && latest != e.ipc_seq ? latest : 0;
}

void RuntimeImpl::WaitIpc(const std::shared_ptr<IpcEventSegment>& seg,
                          uint64_t seq) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Another process completes it; other host threads may use the runtime
  // meanwhile (and our own workers may need the lock).
  mu_.Unlock();
  seg->WaitComplete(seq);
  mu_.Lock();
}

absl::Status RuntimeImpl::DestroyEvent(uint64_t e) {
  SP_ENTER();
  if (absl::StatusOr<EventRec*> ev = FindEvent(e); !ev.ok()) return ev.status();
  ChargeCall();
  events_.erase(e);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::RecordEvent(uint64_t e, uint64_t s) {
  SP_ENTER();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  const StreamIndex idx = (*rec)->index;
  ChargeCall();
  OpDesc op;
  op.kind = OpKind::kRecord;
  std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
  uint64_t seq = 0;
  if (seg != nullptr) {
    // The executor marks the shared record complete when the record op
    // completes: the threads executor as its worker reaches it, the
    // simulator when the host observes it.
    seq = seg->BeginRecord();
    op.effect = [seg, seq] { seg->Complete(seq); };
  }
  const Position p = EnqueueOp(idx, std::move(op));
  const TimeNs end = last_enqueue_end_;
  if (seg != nullptr && executor_->CompletedPosition(idx) >= p) seg->Complete(seq);
  EventRec& r = **ev;
  r.ipc_seq = seq;
  r.recorded = true;
  r.stream = idx;
  r.position = p;
  r.end = end;
  r.snapshot = ordering_.clock(idx);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::EventSynchronize(uint64_t e) {
  SP_ENTER();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  ChargeCall();
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    // Proves nothing about our own streams: no pool changes.
    std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
    if (seg->completed() < target) WaitIpc(seg, target);
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();
  const std::pair<StreamIndex, Position> point((*ev)->stream, (*ev)->position);
  const VectorClock proof = (*ev)->snapshot;
  WaitPoints({&point, 1});
  executor_->RunDueEffects();
  ordering_.MarkComplete(proof);
  pools_.AfterCompletion(ordering_.done(), /*release=*/true);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::EventQuery(uint64_t e) {
  SP_ENTER();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  ChargeCall();
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    if ((*ev)->ipc->completed() < target) {
      return absl::UnavailableError("event's latest record (another process's) has not completed");
    }
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();
  executor_->RunDueEffects();
  if (executor_->CompletedPosition((*ev)->stream) < (*ev)->position) {
    return absl::UnavailableError("event's record has not completed");
  }
  ordering_.MarkComplete((*ev)->snapshot);
  pools_.AfterCompletion(ordering_.done(), /*release=*/false);
  return absl::OkStatus();
}

absl::StatusOr<float> RuntimeImpl::EventElapsedMs(uint64_t start, uint64_t end) {
  SP_ENTER();
  absl::StatusOr<EventRec*> a = FindEvent(start);
  if (!a.ok()) return a.status();
  absl::StatusOr<EventRec*> b = FindEvent(end);
  if (!b.ok()) return b.status();
  if ((((*a)->flags | (*b)->flags) & kEventDisableTiming) != 0) {
    return absl::NotFoundError("elapsed time of an event created without timing");
  }
  if (!(*a)->recorded || !(*b)->recorded) {
    return absl::NotFoundError("elapsed time of an event that was never recorded");
  }
  ChargeCall();
  if (executor_->CompletedPosition((*a)->stream) < (*a)->position ||
      executor_->CompletedPosition((*b)->stream) < (*b)->position) {
    return absl::UnavailableError("event's record has not completed");
  }
  const double ns = static_cast<double>((*b)->end) - static_cast<double>((*a)->end);
  return static_cast<float>(ns / 1e6);
}

absl::Status RuntimeImpl::DeviceSynchronize(int device) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  ChargeCall();
  const std::vector<StreamIndex> streams = StreamsOfDevice(device);
  return SyncStreams(streams);
}

// ------------------------------------------------------------------ work

absl::Status RuntimeImpl::LaunchKernel(uint64_t s, uint64_t duration_ns,
                                       absl::Span<const Access> accesses) {
  return EnqueueKernel(s, duration_ns, nullptr, /*needs_body=*/false, accesses);
}

absl::Status RuntimeImpl::LaunchWork(uint64_t s, uint64_t duration_ns, std::function<void()> work,
                                     absl::Span<const Access> accesses) {
  return EnqueueKernel(s, duration_ns, std::move(work), /*needs_body=*/true, accesses);
}

absl::Status RuntimeImpl::EnqueueKernel(uint64_t s, uint64_t duration_ns,
                                        std::function<void()> body, bool needs_body,
                                        absl::Span<const Access> accesses) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (needs_body && !body) return absl::InvalidArgumentError("NULL work function");
  for (const Access& a : accesses) {
    if (a.ptr == nullptr && a.size != 0) {
      return absl::InvalidArgumentError("kernel access with a NULL pointer");
    }
  }
  ChargeCall();
  OpDesc op;
  op.kind = OpKind::kKernel;
  op.duration_ns = duration_ns;
  if (body) op.effect = AsHostCallback(std::move(body));
  const StreamIndex idx = (*rec)->index;
  const Position p = EnqueueOp(idx, std::move(op));
  if (checker_) {
    for (const Access& a : accesses) {
      checker_->OnAccess(idx, p, ordering_.clock(idx), reinterpret_cast<uintptr_t>(a.ptr), a.size,
                         a.write, (*rec)->device);
    }
    CheckerAfterEvent();
  }
  return absl::OkStatus();
}

absl::Status RuntimeImpl::LaunchHostFunc(uint64_t s, std::function<void()> fn) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (!fn) return absl::InvalidArgumentError("NULL host function");
  ChargeCall();
  OpDesc op;
  op.kind = OpKind::kHostFunc;
  op.effect = AsHostCallback(std::move(fn));
  EnqueueOp((*rec)->index, std::move(op));
  return absl::OkStatus();
}

absl::Status RuntimeImpl::MemcpyAsync(void* dst, const void* src, uint64_t bytes, uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (bytes != 0) {
    if (dst == nullptr || src == nullptr) return absl::InvalidArgumentError("NULL copy pointer");
    if (reinterpret_cast<uintptr_t>(dst) > UINTPTR_MAX - bytes ||
        reinterpret_cast<uintptr_t>(src) > UINTPTR_MAX - bytes) {
      return absl::InvalidArgumentError("copy range wraps the address space");
    }
  }
  ChargeCall();
  if (bytes == 0) return absl::OkStatus();
  OpDesc op;
  op.kind = OpKind::kCopy;
  op.duration_ns = bytes * 1000 / config_.copy_bytes_per_us;
  op.effect = MemoryEffect(dst, src, 0, bytes);
  const Position p = EnqueueOp((*rec)->index, std::move(op));
  CheckCopyAccess((*rec)->index, p, src, bytes, /*write=*/false);
  CheckCopyAccess((*rec)->index, p, dst, bytes, /*write=*/true);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::MemsetAsync(void* dst, int value, uint64_t bytes, uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (bytes != 0) {
    if (dst == nullptr) return absl::InvalidArgumentError("NULL fill pointer");
    if (reinterpret_cast<uintptr_t>(dst) > UINTPTR_MAX - bytes) {
      return absl::InvalidArgumentError("fill range wraps the address space");
    }
  }
  ChargeCall();
  if (bytes == 0) return absl::OkStatus();
  OpDesc op;
  op.kind = OpKind::kFill;
  op.duration_ns = bytes * 1000 / config_.copy_bytes_per_us;
  op.effect = MemoryEffect(dst, nullptr, value, bytes);
  const Position p = EnqueueOp((*rec)->index, std::move(op));
  CheckCopyAccess((*rec)->index, p, dst, bytes, /*write=*/true);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::HostAdvance(uint64_t ns) {
  SP_ENTER();
  ChargeCall();
  executor_->HostAdvance(ns);
  return absl::OkStatus();
}

uint64_t RuntimeImpl::HostNow() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // From a host function this thread already holds the lock.
  if (in_host_callback) return executor_->Now();
  MutexLock lock(&mu_);
  return executor_ != nullptr ? executor_->Now() : 0;  // null once destroyed
}

// ---------------------------------------------------------------- memory

void RuntimeImpl::UpdateFastPath() {
  // What the fast path skips: the checker's and the timeline's records, the
  // simulated cost of a call, and the native marker an adapter's points need.
  const bool on = !destroyed_ && checker_ == nullptr && config_.api_call_ns == 0 &&
                  adapter_ == nullptr && (sim_ == nullptr || !sim_->record_timeline());
  fast_path_.store(on, std::memory_order_release);
}

bool RuntimeImpl::TryMallocFast(uint64_t size, uint64_t pool, uint64_t s,
                                AllocInfo* out) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Lock-free reads throughout: the handle tables, the device's current pool
  // (atomics), and the ordering core's pos(T) (see Ordering's constructor).
  if (!fast_path_.load(std::memory_order_acquire) || size == 0 || in_host_callback) return false;
  const StreamRec* rec = streams_.Find(s);
  if (rec == nullptr) return false;
  const uint64_t ph = pool != 0
                          ? pool
                          : devices_[rec->device.load(std::memory_order_relaxed)].current_pool.load(
                                std::memory_order_acquire);
  MemPool* mp = pools_.FindFast(ph);
  if (mp == nullptr) return false;
  const StreamIndex t = rec->index.load(std::memory_order_relaxed);
  Block* b;
  {
    // The stream's lock: its cache and its position, one atomic instruction.
    SpinLockHolder lock(&ordering_.stream_lock(t));
    b = mp->CacheAllocate(t, size);
    if (b == nullptr) return false;
    ordering_.AdvancePoint(t);
  }
  if (!page_map_.Set(b->addr(), b)) {
    // No memory for a page-map node: the hash map holds it instead.
    MutexLock lock(&mu_);
    if (absl::StatusOr<PoolRec*> prec = pools_.Find(mp->owner_handle()); prec.ok()) {
      RecordPoolAlloc(mp->owner_handle(), **prec, b);
    }
  }
  *out = AllocInfo{reinterpret_cast<void*>(b->addr()), ReuseRule::kSameStream};
  return true;
}

bool RuntimeImpl::TryFreeFast(void* ptr, uint64_t s, Block** claimed, StreamIndex* idx,
                              Position* f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  *claimed = nullptr;
  if (!fast_path_.load(std::memory_order_acquire) || ptr == nullptr || in_host_callback) {
    return false;
  }
  const StreamRec* rec = streams_.Find(s);
  if (rec == nullptr) return false;
  // One exchange decides which of two racing frees of a pointer owns it.
  Block* b = page_map_.Claim(reinterpret_cast<uintptr_t>(ptr));
  if (b == nullptr) return false;
  *claimed = b;
  *idx = rec->index.load(std::memory_order_relaxed);
  SpinLockHolder lock(&ordering_.stream_lock(*idx));
  *f = ordering_.AdvancePoint(*idx);
  return static_cast<MemPool*>(b->chunk->pool)->CacheFree(b, *idx, *f);
}

void RuntimeImpl::RecordPoolAlloc(uint64_t pool_handle, const PoolRec& rec, Block* b) {
  if (page_map_.Set(b->addr(), b)) return;
  // Outside the page map's range (or no memory for a node): the hash map.
  AllocRec r;
  r.pool = rec.mem();
  r.pool_handle = pool_handle;
  r.block = b;
  r.device = rec.mem()->props().device;
  r.requested = b->requested;
  r.memfd = rec.memfd();
  allocs_.emplace(b->addr(), r);
}

void RuntimeImpl::FreeClaimed(Block* b, StreamIndex idx, Position f) {
  MemPool& pool = *static_cast<MemPool*>(b->chunk->pool);
  if (checker_) {
    checker_->OnFree(b->addr(), idx, f, ordering_.PointClock(idx), SimLastEnd(idx));
    CheckerAfterEvent();
  }
  // Through the cache (flushed first when full), or central where there is
  // none yet; later frees of this stream in this pool then take the fast path.
  pool.FreeOverflow(b, idx, f);
  pool.EnsureCache(idx, &ordering_.stream_lock(idx));
}

absl::StatusOr<AllocInfo> RuntimeImpl::MallocAsync(uint64_t size, uint64_t pool, uint64_t s) {
  AllocInfo fast;
  if (TryMallocFast(size, pool, s, &fast)) return fast;
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  const uint64_t pool_handle =
      pool != 0 ? pool : devices_[(*rec)->device].current_pool.load(std::memory_order_relaxed);
  absl::StatusOr<PoolRec*> prec = pools_.Find(pool_handle);
  if (!prec.ok()) return prec.status();
  if ((*prec)->imported() != nullptr) {
    return absl::InvalidArgumentError("an imported pool cannot allocate (CUDA F.11.5)");
  }
  if (size == 0) return AllocInfo{};
  MemPool& mp = *(*prec)->mem();
  const StreamIndex t = (*rec)->index;
  // The pool judges safety against the clock T's next op would have (on the
  // legacy stream that includes every blocking stream); the allocation's
  // point is taken only once it succeeded, so a failure leaves the stream as
  // it was.
  Oracle oracle(*this, t);
  absl::StatusOr<MemPool::Allocation> a = mp.Allocate(size, oracle);
  if (!a.ok()) return a.status();
  ChargeCall();
  const Position at = AdvancePoint(t, OpKind::kAllocMarker);
  if (checker_) {
    checker_->OnAlloc(a->block->addr(), a->block->size(), t, at, SimAllocReady(t), &oracle,
                      (*prec)->attrs.access);
    CheckerAfterEvent();
  }
  RecordPoolAlloc(pool_handle, **prec, a->block);
  // The stream's frees of this pool can now take the fast path.
  mp.EnsureCache(t, &ordering_.stream_lock(t));
  return AllocInfo{reinterpret_cast<void*>(a->block->addr()), a->rule};
}

absl::Status RuntimeImpl::FreeAsync(void* ptr, uint64_t s) {
  Block* claimed;
  StreamIndex claimed_idx;
  Position claimed_f;
  if (TryFreeFast(ptr, s, &claimed, &claimed_idx, &claimed_f)) return absl::OkStatus();
  if (claimed != nullptr) {
    // Ours already, at its point: only the central free is left, which no
    // check can refuse now.
    MutexLock lock(&mu_);
    FreeClaimed(claimed, claimed_idx, claimed_f);
    return absl::OkStatus();
  }
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (ptr == nullptr) return absl::OkStatus();
  const StreamIndex idx = (*rec)->index;
  if (Block* b = page_map_.Claim(reinterpret_cast<uintptr_t>(ptr))) {
    ChargeCall();
    FreeClaimed(b, idx, AdvancePoint(idx, OpKind::kFreeMarker));
    return absl::OkStatus();
  }
  if (std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr))) {
    if (*device < 0) {
      return absl::InvalidArgumentError("pinned host memory is freed with spFreeHost");
    }
    ChargeCall();
    // Malloc memory goes back to the upstream when the free executes in
    // stream order, not before: earlier work on the stream may still use it.
    DirectMemory::Allocation a = *direct_.Take(reinterpret_cast<uintptr_t>(ptr));
    OpDesc marker;
    marker.kind = OpKind::kFreeMarker;
    if (executor_->blocks_host()) {
      // Runs on a worker thread, outside any API call.
      marker.effect = [this, a]() {
        MutexLock lock(&mu_);
        DirectMemory::Unmap(a);
      };
    } else {
      // Runs inside an API call that already holds the lock.
      marker.effect = [a]() { DirectMemory::Unmap(a); };
    }
    const Position f = EnqueueOp(idx, std::move(marker));
    if (checker_) {
      checker_->OnFree(reinterpret_cast<uintptr_t>(ptr), idx, f, ordering_.clock(idx),
                       SimLastEnd(idx));
      CheckerAfterEvent();
    }
    return absl::OkStatus();
  }
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) {
    return absl::InvalidArgumentError(
        "pointer is not a live allocation of this runtime (double free or foreign pointer)");
  }
  ChargeCall();
  OpDesc marker;
  marker.kind = OpKind::kFreeMarker;
  if (it->second.imported != nullptr) {
    // The importer's free ends its own use only: the exporter's allocation
    // lives on. The mapping stays until the free is known complete.
    std::shared_ptr<ImportedPool> imported = std::move(it->second.imported);
    const uintptr_t base = it->first;
    allocs_.erase(it);
    const Position f = AdvancePoint(idx, OpKind::kFreeMarker);
    if (checker_) {
      checker_->OnFree(base, idx, f, ordering_.PointClock(idx), SimLastEnd(idx));
      CheckerAfterEvent();
    }
    imported->FreeAsync(base, idx, f);
    return absl::OkStatus();
  }
  // A pool block the page map could not hold.
  Block* block = it->second.block;
  allocs_.erase(it);
  FreeClaimed(block, idx, AdvancePoint(idx, OpKind::kFreeMarker));
  return absl::OkStatus();
}

absl::StatusOr<void*> RuntimeImpl::Malloc(uint64_t size, int device) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  return AllocateDirect(size, device);
}

absl::StatusOr<void*> RuntimeImpl::MallocHost(uint64_t size) {
  SP_ENTER();
  return AllocateDirect(size, -1);
}

absl::StatusOr<void*> RuntimeImpl::AllocateDirect(uint64_t size, int device) {
  if (size == 0) return nullptr;
  const bool host = device < 0;
  absl::StatusOr<void*> p = direct_.Allocate(size, device, host ? *host_upstream_ : *upstream_,
                                             host ? host_budget_ : *devices_[device].budget);
  if (!p.ok()) return p.status();
  ChargeCall();
  // No access rights: as in CUDA, every device may touch either kind.
  if (checker_) {
    checker_->OnAlloc(reinterpret_cast<uintptr_t>(*p), size, kNoStream, 0, executor_->Now(),
                      nullptr);
  }
  return *p;
}

absl::Status RuntimeImpl::FreeHost(void* ptr) {
  SP_ENTER();
  if (ptr == nullptr) return absl::OkStatus();
  const std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr));
  if (!device || *device >= 0) {
    return absl::InvalidArgumentError(
        "pointer is not live pinned host memory of this runtime (double free or foreign "
        "pointer)");
  }
  ChargeCall();
  if (checker_) checker_->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), executor_->Now());
  DirectMemory::Unmap(*direct_.Take(reinterpret_cast<uintptr_t>(ptr)));
  return absl::OkStatus();
}

absl::StatusOr<DeviceMemInfo> RuntimeImpl::MemGetInfo(int device) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  const DeviceBudget& budget = *devices_[device].budget;
  return DeviceMemInfo{budget.capacity() - budget.used(), budget.capacity()};
}

absl::Status RuntimeImpl::Free(void* ptr) {
  SP_ENTER();
  if (ptr == nullptr) return absl::OkStatus();
  if (Block* b = page_map_.Claim(reinterpret_cast<uintptr_t>(ptr))) {
    ChargeCall();
    if (checker_) checker_->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), executor_->Now());
    static_cast<MemPool*>(b->chunk->pool)->FreeNow(b);
    return absl::OkStatus();
  }
  if (std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr))) {
    if (*device < 0) {
      return absl::InvalidArgumentError("pinned host memory is freed with spFreeHost");
    }
    ChargeCall();
    if (checker_) checker_->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), executor_->Now());
    DirectMemory::Unmap(*direct_.Take(reinterpret_cast<uintptr_t>(ptr)));
    return absl::OkStatus();
  }
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) {
    return absl::InvalidArgumentError(
        "pointer is not a live allocation of this runtime (double free or foreign pointer)");
  }
  ChargeCall();
  AllocRec r = it->second;
  allocs_.erase(it);
  if (checker_) checker_->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), executor_->Now());
  if (r.imported != nullptr) {
    r.imported->FreeNow(reinterpret_cast<uintptr_t>(ptr));
    pools_.ReapImported();
    return absl::OkStatus();
  }
  r.pool->FreeNow(r.block);
  return absl::OkStatus();
}

absl::StatusOr<PointerAttributes> RuntimeImpl::GetPointerAttributes(const void* ptr) {
  SP_ENTER();
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  PointerAttributes out;
  uintptr_t direct_base;
  if (const DirectMemory::Allocation* a = direct_.Containing(addr, &direct_base)) {
    out.device = a->device;
    out.base = reinterpret_cast<void*>(direct_base);
    out.size = a->requested;
    return out;
  }
  // The start of an allocation (the common question) without walking blocks.
  if (const Block* b = page_map_.Get(addr)) {
    const MemPool& pool = *static_cast<const MemPool*>(b->chunk->pool);
    out.device = pool.props().alloc_type == AllocationType::kPinnedHost ? -1 : pool.props().device;
    out.pool = PoolId{pool.owner_handle()};
    out.base = reinterpret_cast<void*>(addr);
    out.size = b->requested;
    return out;
  }
  if (auto it = allocs_.find(addr); it != allocs_.end() && it->second.pool != nullptr) {
    const AllocRec& r = it->second;
    const AllocationType type = r.pool->props().alloc_type;
    out.device = type == AllocationType::kPinnedHost ? -1 : r.pool->props().device;
    out.pool = PoolId{r.pool_handle};
    out.base = reinterpret_cast<void*>(addr);
    out.size = r.requested;
    return out;
  }
  auto lookup = [&](uint64_t h, MemPool& pool) -> bool {
    if (!pool.Owns(addr)) return false;
    const Block* b = pool.LiveBlockContaining(addr);
    // A block in a front cache is LIVE to the central index but freed.
    if (b == nullptr || (page_map_.Get(b->addr()) != b && !allocs_.contains(b->addr()))) {
      return false;
    }
    out.device = pool.props().alloc_type == AllocationType::kPinnedHost ? -1 : pool.props().device;
    out.pool = PoolId{h};
    out.base = reinterpret_cast<void*>(b->addr());
    out.size = b->requested;
    return true;
  };
  if (pools_.AnyMemPool(lookup)) return out;
  const bool imported = pools_.AnyImported([&](uint64_t h, ImportedPool& pool) {
    const ImportedPool::Import* imp = pool.LiveContaining(addr);
    if (imp == nullptr) return false;
    out.device = pool.header().device;
    out.pool = PoolId{h};
    out.base = reinterpret_cast<void*>(imp->base);
    out.size = imp->requested;
    return true;
  });
  if (imported) return out;
  return absl::InvalidArgumentError("pointer is not inside a live allocation");
}

// ----------------------------------------------------------------- pools

absl::StatusOr<uint64_t> RuntimeImpl::CreatePool(const PoolProps& props,
                                                 std::shared_ptr<PhysicalMemory> upstream) {
  SP_ENTER();
  return CreatePoolLocked(props, std::move(upstream));
}

absl::StatusOr<uint64_t> RuntimeImpl::CreatePoolLocked(
    const PoolProps& props, std::shared_ptr<PhysicalMemory> custom_upstream) {
  if (!pools_.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's pool handles are used up");
  }
  const int type = static_cast<int>(props.alloc_type);
  if (type < 1 || type > 4) return absl::InvalidArgumentError("unknown allocation type");
  const int policy = static_cast<int>(props.page_policy);
  if (policy < 0 || policy > 2) return absl::InvalidArgumentError("unknown page policy");
  if (props.alloc_type != AllocationType::kPinnedHost) {
    if (absl::Status st = CheckDevice(props.device); !st.ok()) return st;
  }
  if ((props.handle_types & ~kHandleTypePosixFileDescriptor) != 0) {
    return absl::InvalidArgumentError("unknown handle type");
  }
  const int growth = static_cast<int>(props.growth);
  if (growth < 0 || growth > 2) return absl::InvalidArgumentError("unknown growth mode");
  const bool exportable = props.handle_types != 0;
  if (exportable) {
    // An exported pool's memory must be real shared pages another process
    // can map: a memfd, which only Host backing has and which we place
    // ourselves (no huge pages, no DVPP window, no user upstream).
    if (config_.backing != Backing::kHost) {
      return absl::UnimplementedError("exportable pools need Host backing");
    }
    if (custom_upstream != nullptr) {
      return absl::UnimplementedError("an exportable pool cannot sit on a caller's upstream");
    }
    if (props.alloc_type != AllocationType::kDevice &&
        props.alloc_type != AllocationType::kPinnedHost) {
      return absl::UnimplementedError("only Device and PinnedHost pools can be exportable");
    }
  }
  const bool touchable = config_.backing == Backing::kHost;
  const bool pinned = !VariantConfig(props.alloc_type)->device_memory;
  std::shared_ptr<PhysicalMemory> upstream = std::move(custom_upstream);
  // The variant's row of src/pool/pool_config.h: size rule, upstream, budget.
  const PoolVariantConfig& variant = *VariantConfig(props.alloc_type);
  if (props.acl_rounding && variant.rule.kind != SizeRule::Kind::kRound) {
    return absl::InvalidArgumentError("the ACL rounding rule applies to device memory only");
  }
  if (props.acl_rounding && !variant.device_memory) {
    return absl::InvalidArgumentError("the ACL rounding rule applies to device memory only");
  }
  const SizeRule rule = RuleOf(props);
  if (!upstream) {
    switch (variant.upstream) {
      case UpstreamKind::kRuntime:
        break;  // upstream_, below
      case UpstreamKind::kHugePage:
        upstream = NewHugePageUpstream(props.page_policy, touchable,
                                       devices_[props.device].huge_budget.get());
        break;
      case UpstreamKind::kDvpp:
        upstream =
            NewDvppUpstream(props.page_policy, touchable, devices_[props.device].huge_budget.get(),
                            process_.dvpp_window());
        break;
    }
  }
  MemfdMemory* memfd = nullptr;
  if (exportable) {
    absl::StatusOr<std::unique_ptr<MemfdMemory>> m = MemfdMemory::Create(
        pinned ? -1 : props.device, static_cast<int>(props.alloc_type), rule.granule);
    if (!m.ok()) return m.status();
    memfd = m->get();
    upstream = std::shared_ptr<PhysicalMemory>(*std::move(m));
  }
  upstream =
      upstream ? std::make_shared<RegisteringUpstream>(std::move(upstream), this) : upstream_;
  if (props.growth == PoolGrowth::kExpandable && !upstream->can_reserve()) {
    return absl::UnimplementedError(
        "expandable growth needs an upstream that can reserve address space");
  }
  // DVPP pools share one 16 GiB window per process: each reservation takes a
  // sixteenth of it, so several pools (and several reservations of one) fit.
  static_assert(kDvppReservationBytes == DvppWindow::kSize / 16);
  const uint64_t reservation = variant.reservation_bytes;
  DeviceBudget* budget = pinned ? &host_budget_ : devices_[props.device].budget.get();
  const uint64_t limit = pinned ? UINT64_MAX : config_.device_capacity;
  const uint64_t max_size = props.max_size == 0 ? limit : std::min<uint64_t>(props.max_size, limit);
  auto pool =
      std::make_unique<MemPool>(props, rule, max_size, std::move(upstream), budget, reservation);
  MemPool& mp = *pool;
  PoolRec rec;
  if (memfd != nullptr) {
    rec.kind = PoolTable::ExportablePool{std::move(pool), memfd};
  } else {
    rec.kind = PoolTable::LocalPool{std::move(pool)};
  }
  rec.attrs.device = pinned ? -1 : props.device;
  rec.attrs.access = NewAccessRights(rec.attrs.device, props.alloc_type);
  absl::StatusOr<uint64_t> h = pools_.Add(std::move(rec));
  if (!h.ok()) return h.status();
  mp.set_owner(*h, memfd);
  return *h;
}

std::shared_ptr<AccessRights> RuntimeImpl::NewAccessRights(int device, AllocationType type) const {
  // Pinned host memory is every device's (as spMallocHost memory is).
  if (type == AllocationType::kPinnedHost) return nullptr;
  auto rights = std::make_shared<AccessRights>();
  rights->flags.assign(config_.device_count, AccessRights::kNone);
  // The resident device always has read-write access (CUDA F.10); a device
  // this runtime does not have (an imported pool's) gives no one access.
  if (device >= 0 && device < config_.device_count)
    rights->flags[device] = AccessRights::kReadWrite;
  return rights;
}

absl::Status RuntimeImpl::DestroyPool(uint64_t pool) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->attrs.is_default)
    return absl::InvalidArgumentError("a device's default pool cannot be destroyed");
  if ((*rec)->imported() == nullptr) {
    for (int i = 0; i < config_.device_count; ++i) {
      Device& d = devices_[i];
      if (d.current_pool.load(std::memory_order_relaxed) == pool) {
        d.current_pool.store(d.default_pool, std::memory_order_release);
      }
    }
  }
  pools_.Remove(pool);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::SetHugePageBudget(int device, uint64_t bytes) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  devices_[device].huge_budget->set_limit(bytes);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RuntimeImpl::DefaultPool(int device) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  return devices_[device].default_pool;
}

absl::StatusOr<uint64_t> RuntimeImpl::CurrentPool(int device) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  return devices_[device].current_pool.load(std::memory_order_relaxed);
}

absl::Status RuntimeImpl::SetCurrentPool(int device, uint64_t pool) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) {
    return absl::InvalidArgumentError("an imported pool cannot be current (CUDA F.11.5)");
  }
  const PoolProps& props = (*rec)->mem()->props();
  if (props.alloc_type == AllocationType::kPinnedHost || props.device != device) {
    return absl::InvalidArgumentError("pool does not live on this device");
  }
  devices_[device].current_pool.store(pool, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status RuntimeImpl::SetPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return SetAttribute(**(*rec)->imported(), attr, value);
  return SetAttribute(*(*rec)->mem(), attr, value);
}

absl::StatusOr<uint64_t> RuntimeImpl::GetPoolAttribute(uint64_t pool, PoolAttr attr) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return GetAttribute(**(*rec)->imported(), attr);
  return GetAttribute(*(*rec)->mem(), attr);
}

absl::Status RuntimeImpl::TrimTo(uint64_t pool, uint64_t min_bytes_to_keep) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  // IPC pools keep their memory (CUDA F.11.4, F.11.5): TrimTo is a no-op.
  if ((*rec)->imported() != nullptr || (*rec)->memfd() != nullptr) return absl::OkStatus();
  (*rec)->mem()->Release(min_bytes_to_keep);
  return absl::OkStatus();
}

absl::StatusOr<PoolStats> RuntimeImpl::GetPoolStats(uint64_t pool) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return (*(*rec)->imported())->Stats();
  return (*rec)->mem()->Stats();
}

absl::Status RuntimeImpl::CheckPoolInvariants(uint64_t pool) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() != nullptr) return absl::OkStatus();  // no blocks of its own
  if (!(*rec)->mem()->CheckInvariants()) return absl::InternalError("pool invariants broken");
  return absl::OkStatus();
}

// ------------------------------------------------- multi-device access

absl::Status RuntimeImpl::SetPeerAccessible(int device, int peer, bool accessible) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  if (absl::Status st = CheckDevice(peer); !st.ok()) return st;
  if (device == peer) return absl::OutOfRangeError("a device is not its own peer");
  if (accessible) {
    peers_[device] |= uint64_t{1} << peer;
  } else {
    peers_[device] &= ~(uint64_t{1} << peer);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RuntimeImpl::CanAccessPeer(int device, int peer) {
  SP_ENTER();
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  if (absl::Status st = CheckDevice(peer); !st.ok()) return st;
  // CUDA answers 0 for a device and itself; so do we.
  return device != peer && (peers_[device] >> peer & 1) != 0;
}

absl::Status RuntimeImpl::SetPoolAccess(uint64_t pool, absl::Span<const MemAccessDesc> descs) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  const PoolRec& p = **rec;
  // Every descriptor is checked before any applies: a failed call changes
  // nothing.
  for (const MemAccessDesc& d : descs) {
    const int flags = static_cast<int>(d.flags);
    if (flags != 0 && flags != 1 && flags != 3) {
      return absl::InvalidArgumentError("unknown access flags");
    }
    if (d.location.type == MemLocationType::kHost) {
      if (p.attrs.access != nullptr) {
        return absl::InvalidArgumentError("host access to a device pool is not modelled");
      }
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("pinned host memory is always read-write");
      }
      continue;
    }
    if (d.location.type != MemLocationType::kDevice) {
      return absl::InvalidArgumentError("unknown location type");
    }
    if (absl::Status st = CheckDevice(d.location.id); !st.ok()) return st;
    if (p.attrs.access == nullptr) {
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("pinned host memory is every device's, read-write");
      }
      continue;
    }
    if (d.location.id == p.attrs.device) {
      if (d.flags != MemAccessFlags::kProtReadWrite) {
        return absl::InvalidArgumentError("the resident device's access cannot be lowered");
      }
      continue;
    }
    // Only a grant needs the peer path; revoking never does. A resident
    // device this runtime does not have (an imported pool's) has no peer
    // information to check against.
    if (d.flags != MemAccessFlags::kProtNone && p.attrs.device >= 0 &&
        p.attrs.device < config_.device_count &&
        (peers_[d.location.id] >> p.attrs.device & 1) == 0) {
      return absl::OutOfRangeError(absl::StrCat(
          "device ", d.location.id, " cannot access memory of device ", p.attrs.device));
    }
  }
  if (p.attrs.access == nullptr) return absl::OkStatus();
  for (const MemAccessDesc& d : descs) {
    if (d.location.type != MemLocationType::kDevice || d.location.id == p.attrs.device) continue;
    p.attrs.access->flags[d.location.id] = static_cast<uint8_t>(d.flags);
  }
  return absl::OkStatus();
}

absl::StatusOr<MemAccessFlags> RuntimeImpl::GetPoolAccess(uint64_t pool, MemLocation location) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  const PoolRec& p = **rec;
  if (location.type == MemLocationType::kHost) {
    return p.attrs.access == nullptr ? MemAccessFlags::kProtReadWrite : MemAccessFlags::kProtNone;
  }
  if (location.type != MemLocationType::kDevice) {
    return absl::InvalidArgumentError("unknown location type");
  }
  if (absl::Status st = CheckDevice(location.id); !st.ok()) return st;
  if (p.attrs.access == nullptr) return MemAccessFlags::kProtReadWrite;
  return static_cast<MemAccessFlags>(p.attrs.access->Get(location.id));
}

// -------------------------------------------------------------------- IPC

absl::StatusOr<int> RuntimeImpl::ExportPool(uint64_t pool) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->memfd() == nullptr) {
    return absl::InvalidArgumentError(
        "the pool is not exportable (create it with handleTypes = "
        "spMemHandleTypePosixFileDescriptor)");
  }
  const int fd = fcntl((*rec)->memfd()->fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("duplicating the pool's descriptor: ", std::strerror(errno)));
  }
  return fd;
}

absl::StatusOr<uint64_t> RuntimeImpl::ImportPool(int fd) {
  SP_ENTER();
  if (absl::Status st = HandleRoom(); !st.ok()) return st;
  if (config_.backing != Backing::kHost) {
    return absl::UnimplementedError("importing a pool needs Host backing");
  }
  absl::StatusOr<PoolFileHeader> header = ReadPoolFileHeader(fd);
  if (!header.ok()) return header.status();
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("duplicating the pool's descriptor: ", std::strerror(errno)));
  }
  ImportedPool::Hooks hooks;
  const uint32_t id = id_;
  Registry& registry = process_.registry();
  hooks.mapped = [id, &registry](uintptr_t base, uint64_t size) {
    registry.AddRange(base, size, id, /*touchable=*/true);
  };
  // Imported pools map and unmap only under the runtime's lock.
  hooks.unmapped = [this, &registry](uintptr_t base, uint64_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    OnUnmapped(base, size);
    registry.RemoveRange(base, size);
  };
  if (!pools_.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's pool handles are used up");
  }
  auto imported = std::make_shared<ImportedPool>(own, *header, std::move(hooks));
  PoolRec rec;
  rec.attrs.device = header->device;
  rec.attrs.access = NewAccessRights(
      header->device, header->alloc_type == static_cast<int>(AllocationType::kPinnedHost)
                          ? AllocationType::kPinnedHost
                          : AllocationType::kDevice);
  rec.kind = PoolTable::ImportedPoolRef{std::move(imported)};
  absl::StatusOr<uint64_t> h = pools_.Add(std::move(rec));
  SP_CHECK(h.ok());  // HasRoom said so, under the same lock
  return *h;
}

absl::StatusOr<PtrExportData> RuntimeImpl::ExportPointer(const void* ptr) {
  SP_ENTER();
  AllocRec r;
  if (Block* b = page_map_.Get(reinterpret_cast<uintptr_t>(ptr))) {
    const MemPool& pool = *static_cast<const MemPool*>(b->chunk->pool);
    r.block = b;
    r.requested = b->requested;
    r.memfd = static_cast<MemfdMemory*>(pool.owner_data());
  } else {
    auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocs_.end()) {
      return absl::InvalidArgumentError("pointer is not the start of a live allocation");
    }
    r = it->second;
  }
  if (r.memfd == nullptr || r.block == nullptr) {
    return absl::InvalidArgumentError("the allocation is not from an exportable pool");
  }
  // What the importer maps: a chunk, or the granules of a reservation the
  // block lies in (file offsets inside a reservation are its own offsets).
  const Chunk& chunk = *r.block->chunk;
  uintptr_t lo = chunk.base(), hi = chunk.base() + chunk.size();
  if (chunk.expandable) {
    lo = chunk.base() + chunk.GranuleOf(r.block->addr()) * Chunk::kGranule;
    hi = chunk.base() + (chunk.GranuleOf(r.block->end() - 1) + 1) * Chunk::kGranule;
  }
  const std::optional<uint64_t> offset = r.memfd->FileOffsetOf(lo);
  SP_CHECK(offset.has_value());
  PtrExportData d;
  d.token = r.memfd->header().token;
  d.chunk_offset = *offset;
  d.chunk_size = hi - lo;
  d.offset_in_chunk = r.block->addr() - lo;
  d.requested = r.requested;
  d.block_size = r.block->size();
  return d;
}

absl::StatusOr<void*> RuntimeImpl::ImportPointer(uint64_t pool, const PtrExportData& data) {
  SP_ENTER();
  absl::StatusOr<PoolRec*> rec = pools_.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() == nullptr) {
    return absl::InvalidArgumentError("pointers are imported into an imported pool");
  }
  absl::StatusOr<ImportedPool::Import> imp = (*(*rec)->imported())->ImportPointer(data);
  if (!imp.ok()) return imp.status();
  AllocRec r;
  r.pool_handle = pool;
  r.device = (*rec)->attrs.device;
  r.requested = imp->requested;
  r.imported = *(*rec)->imported();
  allocs_.emplace(imp->base, std::move(r));
  if (checker_) {
    // The exporter's allocation point is in another process: the importer
    // orders its accesses with an interprocess event, which the checker
    // cannot see, so no order-based check applies.
    checker_->OnAlloc(imp->base, imp->block_size, kNoStream, 0, executor_->Now(), nullptr,
                      (*rec)->attrs.access);
    CheckerAfterEvent();
  }
  return reinterpret_cast<void*>(imp->base);
}

absl::Status RuntimeImpl::GetIpcEventHandle(uint64_t e, unsigned char handle[64]) {
  SP_ENTER();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if ((*ev)->ipc == nullptr) {
    return absl::NotFoundError("the event was not created with spEventInterprocess");
  }
  (*ev)->ipc->WriteHandle(handle);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RuntimeImpl::OpenIpcEvent(const unsigned char handle[64]) {
  SP_ENTER();
  if (absl::Status st = HandleRoom(); !st.ok()) return st;
  absl::StatusOr<std::shared_ptr<IpcEventSegment>> seg = IpcEventSegment::Open(handle);
  if (!seg.ok()) return seg.status();
  ChargeCall();
  EventRec rec;
  rec.flags = kEventDisableTiming | kEventInterprocess;
  rec.ipc = *std::move(seg);
  const uint64_t h = NewHandle(HandleKind::kEvent);
  events_.emplace(h, std::move(rec));
  return h;
}

void RuntimeImpl::OnUnmapped(uintptr_t base, uint64_t size) {
  if (checker_) checker_->OnUnmap(base, size);
}

void RuntimeImpl::OnAddressSpaceReleased(uintptr_t base, uint64_t size) {
  // No block lies in address space given back: its page-map pages can go.
  // (Not at every granule unmap: a pool maps its granules again and again,
  // and each discard would cost page faults and a TLB flush on the next
  // allocation there. The page map's memory is bounded by the address space
  // the runtime holds, at most an eighth of what was ever mapped in it.)
  page_map_.Discard(base, base + size);
}

void RuntimeImpl::CheckCopyAccess(StreamIndex s, Position p, const void* ptr, uint64_t bytes,
                                  bool write) {
  // Copies also move host memory the runtime never saw; only our own memory
  // is the checker's business.
  if (!checker_) return;
  const auto a = reinterpret_cast<uintptr_t>(ptr);
  if (process_.registry().RuntimeOwning(a) != id_) return;
  checker_->OnAccess(s, p, ordering_.clock(s), a, bytes, write);
  CheckerAfterEvent();
}

void RuntimeImpl::CheckerAfterEvent() {
  const auto& reports = checker_->reports();
  // Name a report's streams now: their slots may later hold other streams.
  auto handle_of = [this](StreamIndex s) {
    return s < stream_handles_.size() ? stream_handles_[s] : 0;
  };
  while (report_streams_.size() < reports.size()) {
    const internal::CheckReport& r = reports[report_streams_.size()];
    report_streams_.emplace_back(handle_of(r.stream), handle_of(r.other_stream));
  }
  if (checker_fatal_ && reports.size() > checker_reported_) {
    std::fprintf(stderr, "streampool stream-order checker: %s: %s\n",
                 CheckKindName(reports[checker_reported_].kind),
                 reports[checker_reported_].message.c_str());
    std::abort();
  }
  checker_reported_ = reports.size();
}

RuntimeImpl::Introspection RuntimeImpl::Introspect() {
  MutexLock lock(&mu_);
  Introspection out;
  for (StreamIndex s = 0; s < ordering_.stream_count(); ++s) {
    out.clocks.push_back(ordering_.clock(s));
    out.positions.push_back(ordering_.pos(s));
    if (sim_ != nullptr) out.last_end.push_back(sim_->LastEnd(s));
  }
  out.done = ordering_.done();
  return out;
}

absl::StatusOr<void*> RuntimeImpl::NativeStream(uint64_t s) {
  SP_ENTER();
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  if (adapter_ == nullptr) {
    return absl::FailedPreconditionError("the runtime has no stream adapter");
  }
  return adapter_->native((*rec)->index);
}

absl::StatusOr<StreamIndex> RuntimeImpl::StreamIndexOf(uint64_t s) {
  MutexLock lock(&mu_);
  absl::StatusOr<StreamRec*> rec = FindStream(s);
  if (!rec.ok()) return rec.status();
  return (*rec)->index;
}

void RuntimeImpl::EnableChecker(bool on, bool fatal) {
  if (in_host_callback) return;
  MutexLock lock(&mu_);
  if (on && !checker_) {
    checker_ = std::make_unique<StreamOrderChecker>();
    checker_->set_done(&ordering_.done());
  }
  if (!on) checker_.reset();
  UpdateFastPath();
  checker_fatal_ = on && fatal;
  checker_reported_ = checker_ ? checker_->reports().size() : 0;
  if (!checker_) report_streams_.clear();
}

std::vector<streampool::CheckReport> RuntimeImpl::CheckReports() {
  if (in_host_callback) return {};
  MutexLock lock(&mu_);
  std::vector<streampool::CheckReport> out;
  if (!checker_) return out;
  const auto& reports = checker_->reports();
  for (size_t i = 0; i < reports.size(); ++i) {
    const internal::CheckReport& r = reports[i];
    const bool named = i < report_streams_.size();
    streampool::CheckReport o;
    o.kind = static_cast<streampool::CheckKind>(static_cast<int>(r.kind) + 1);
    o.stream = StreamId{named                               ? report_streams_[i].first
                        : r.stream < stream_handles_.size() ? stream_handles_[r.stream]
                                                            : 0};
    o.op_position = r.position;
    o.ptr = reinterpret_cast<const void*>(r.ptr);
    o.size = r.size;
    o.other_stream =
        StreamId{named                                     ? report_streams_[i].second
                 : r.other_stream < stream_handles_.size() ? stream_handles_[r.other_stream]
                                                           : 0};
    o.other_position = r.other_position;
    o.message = r.message;
    out.push_back(std::move(o));
  }
  return out;
}

void RuntimeImpl::ClearCheckReports() {
  if (in_host_callback) return;
  MutexLock lock(&mu_);
  if (checker_) checker_->ClearReports();
  checker_reported_ = 0;
  report_streams_.clear();
}

void RuntimeImpl::RecordTimeline(bool on) {
  if (in_host_callback) return;
  MutexLock lock(&mu_);
  if (sim_ != nullptr) sim_->set_record_timeline(on);
  UpdateFastPath();
}

std::vector<TimelineEntry> RuntimeImpl::Timeline() {
  if (in_host_callback) return {};
  MutexLock lock(&mu_);
  std::vector<TimelineEntry> out;
  if (sim_ == nullptr) return out;
  out.reserve(sim_->timeline().size());
  for (const SimExecutor::TimelineEntry& e : sim_->timeline()) {
    TimelineEntry t;
    t.stream = StreamId{stream_handles_[e.stream]};
    t.stream_index = e.stream;
    t.device = ordering_.device(e.stream);
    t.position = e.position;
    t.kind = e.kind;
    t.enqueued_ns = e.enqueued;
    t.start_ns = e.start;
    t.end_ns = e.end;
    out.push_back(t);
  }
  return out;
}

}  // namespace streampool::internal
