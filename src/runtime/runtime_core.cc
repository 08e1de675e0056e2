#include "src/runtime/runtime_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/runtime/registry.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

// Keeps the process registry of address ranges in step with what pools and
// Malloc map, so a bare pointer finds its runtime.
class RegisteringUpstream final : public PhysicalMemory {
 public:
  RegisteringUpstream(std::shared_ptr<PhysicalMemory> inner, RuntimeCore* rt)
      : inner_(std::move(inner)), runtime_id_(rt->id), rt_(rt), registry_(rt->process.registry()) {}
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
    rt_->index.Discard(reinterpret_cast<uintptr_t>(mapping.base), mapping.size);
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
    rt_->index.Discard(reinterpret_cast<uintptr_t>(base), bytes);
    registry_.RemoveRange(reinterpret_cast<uintptr_t>(base), bytes);
    inner_->ReleaseReservation(base, bytes);
  }

 private:
  std::shared_ptr<PhysicalMemory> inner_;
  uint32_t runtime_id_;
  RuntimeCore* rt_;
  Registry& registry_;
};

}  // namespace

std::function<void()> AsHostCallback(std::function<void()> fn) {
  return [fn = std::move(fn)]() {
    in_host_callback = true;
    fn();
    in_host_callback = false;
  };
}

absl::Status InvalidHandle(const char* what, uint64_t h) {
  if (h == 0) return absl::InvalidArgumentError(absl::StrCat("NULL ", what, " handle"));
  return absl::NotFoundError(absl::StrCat("invalid or destroyed ", what, " handle"));
}

RuntimeCore::RuntimeCore(const RuntimeConfig& config, uint32_t id, Process& process, Mutex& mu,
                         const CallGate& gate)
    : config(config),
      id(id),
      process(process),
      mu(mu),
      gate(gate),
      seq(config.api_call_ns),
      devices(config.device_count, config.device_capacity),
      streams(HandleKind::kStream, id),
      pools(id),
      obs(stream_handles) {
  // Called under the runtime's lock: the slots are those made so far.
  pools.set_quiesce([this] {
    for (StreamIndex s = 0; s < seq.stream_slots(); ++s) {
      SpinLockHolder pass(&seq.stream_lock(s));
    }
  });
  pools.set_unpublished([this] { fast.Invalidate(); });
}

std::shared_ptr<PhysicalMemory> RuntimeCore::Registering(std::shared_ptr<PhysicalMemory> inner) {
  return std::make_shared<RegisteringUpstream>(std::move(inner), this);
}

absl::Status RuntimeCore::RefuseLegacyOp(const StreamRec& rec) {
  MutexLock order_lock(&seq.mu());
  const Ordering& ordering = seq.ordering();
  const int device = rec.device.load(std::memory_order_relaxed);
  return captures.RefuseLegacyOp([&](StreamIndex s) {
    return ordering.kind(s) == StreamKind::kBlocking && ordering.device(s) == device;
  });
}

absl::Status RuntimeCore::HandleRoom() const {
  // 2^36 handles per runtime: a runtime making a million objects a second
  // runs out after 19 hours; it then refuses to make more instead of aborting.
  if (next_object_id > kMaxObjectId) {
    return absl::ResourceExhaustedError("this runtime has issued every handle it can");
  }
  return absl::OkStatus();
}

uint64_t RuntimeCore::NewHandle(HandleKind kind) {
  SP_CHECK(next_object_id <= kMaxObjectId);
  return MakeHandle(kind, id, next_object_id++);
}

absl::StatusOr<RuntimeCore::StreamRec*> RuntimeCore::FindStream(uint64_t h) {
  StreamRec* rec = streams.Find(h);
  if (rec == nullptr) return InvalidHandle("stream", h);
  return rec;
}

void RuntimeCore::UpdateFastPath() {
  // What the fast path skips: the checker's and the timeline's records, the
  // simulated cost of a call. (An adapter's points need no marker.)
  const bool on = !destroyed && obs.checker() == nullptr && config.api_call_ns == 0 &&
                  (seq.sim() == nullptr || !seq.sim()->record_timeline());
  fast.Set(on);
}

std::shared_ptr<AccessRights> RuntimeCore::NewAccessRights(int device, AllocationType type) const {
  // Pinned host memory is every device's (as spMallocHost memory is).
  if (type == AllocationType::kPinnedHost) return nullptr;
  auto rights = std::make_shared<AccessRights>();
  rights->flags.assign(config.device_count, AccessRights::kNone);
  // The resident device always has read-write access (CUDA F.10); a device
  // this runtime does not have (an imported pool's) gives no one access.
  if (device >= 0 && device < config.device_count) rights->flags[device] = AccessRights::kReadWrite;
  return rights;
}

void RuntimeCore::OnUnmapped(uintptr_t base, uint64_t size) {
  if (obs.checker()) obs.checker()->OnUnmap(base, size);
}

}  // namespace streampool::internal
