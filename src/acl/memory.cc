#include "src/acl/memory.h"

#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace streampool::internal::acl {

namespace {

// The pools and streams of one implicit runtime, by its generation: state of
// a runtime that was reset is dropped the first time another is seen.
struct RuntimeState {
  uint64_t generation = 0;
  std::map<std::tuple<int, SyncKind, PagePolicy>, PoolId> pools;
  std::map<int, StreamId> streams;
};

absl::Mutex& StateMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}
RuntimeState& State() ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  static RuntimeState* state = new RuntimeState;
  return *state;
}

std::map<int, int>& DeviceRefs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  static std::map<int, int>* refs = new std::map<int, int>;
  return *refs;
}

RuntimeState& StateFor(compat::ProcessRuntime& rt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  RuntimeState& state = State();
  if (state.generation != rt.generation()) {
    state = RuntimeState();
    state.generation = rt.generation();
  }
  return state;
}

// Made under StateMutex, which is never taken by anything the runtime calls
// back, so holding it across the runtime's lock cannot deadlock.
absl::StatusOr<PoolId> PoolFor(compat::ProcessRuntime& rt, int device, SyncKind kind,
                               PagePolicy policy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  RuntimeState& state = StateFor(rt);
  const auto key = std::make_tuple(device, kind, policy);
  if (auto it = state.pools.find(key); it != state.pools.end()) return it->second;
  PoolProps props;
  props.device = device;
  props.page_policy = policy;
  if (kind == SyncKind::kDvpp) {
    props.alloc_type = AllocationType::kDvpp;
  } else {
    props.alloc_type = AllocationType::kHugePage;
    props.acl_rounding = true;
    props.acl_align32 = kind == SyncKind::kAlign32;
  }
  props.wait_before_growth = false;  // CANN's serving order
  absl::StatusOr<PoolId> pool = rt.cpp().CreatePool(props);
  if (!pool.ok()) return pool.status();
  state.pools.emplace(key, *pool);
  return *pool;
}

absl::StatusOr<StreamId> StreamFor(compat::ProcessRuntime& rt, int device)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  RuntimeState& state = StateFor(rt);
  if (auto it = state.streams.find(device); it != state.streams.end()) return it->second;
  absl::StatusOr<StreamId> s = rt.cpp().CreateStream(device, /*non_blocking=*/true);
  if (!s.ok()) return s.status();
  state.streams.emplace(device, *s);
  return *s;
}

bool IsSyncPool(compat::ProcessRuntime& rt, PoolId pool, bool dvpp)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(StateMutex()) {
  for (const auto& [key, id] : StateFor(rt).pools) {
    if (id == pool && (std::get<1>(key) == SyncKind::kDvpp) == dvpp) return true;
  }
  return false;
}

}  // namespace

bool IsSynchronousPool(compat::ProcessRuntime& rt, PoolId pool) {
  absl::MutexLock lock(&StateMutex());
  return IsSyncPool(rt, pool, /*dvpp=*/false) || IsSyncPool(rt, pool, /*dvpp=*/true);
}

aclError SyncMalloc(Call& call, SyncKind kind, PagePolicy policy, uint64_t size, void** out) {
  int device = 0;
  if (aclError e = call.Device(&device); e != ACL_SUCCESS) return e;
  absl::MutexLock lock(&StateMutex());
  absl::StatusOr<PoolId> pool = PoolFor(call.rt(), device, kind, policy);
  if (!pool.ok()) return FromStatus(pool.status());
  absl::StatusOr<StreamId> stream = StreamFor(call.rt(), device);
  if (!stream.ok()) return FromStatus(stream.status());
  Runtime& rt = call.rt().cpp();
  absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(size, *pool, *stream);
  if (!a.ok()) return FromStatus(a.status());
  // The stream runs nothing, so the allocation point is complete; the query
  // makes the runtime (and the checker) know it before anyone touches it.
  if (!rt.StreamQuery(*stream).ok()) {
    if (absl::Status st = rt.StreamSynchronize(*stream); !st.ok()) {
      rt.Free(a->ptr).IgnoreError();
      return FromStatus(st);
    }
  }
  *out = a->ptr;
  return ACL_SUCCESS;
}

aclError SyncFree(Call& call, bool dvpp, void* ptr) {
  Runtime& rt = call.rt().cpp();
  absl::StatusOr<PointerAttributes> attr = rt.GetPointerAttributes(ptr);
  if (!attr.ok() || attr->base != ptr) return ACL_ERROR_RT_PARAM_INVALID;
  absl::MutexLock lock(&StateMutex());
  if (!IsSyncPool(call.rt(), attr->pool, dvpp)) return ACL_ERROR_RT_PARAM_INVALID;
  if (absl::Status st = rt.Free(ptr); !st.ok()) return FromStatus(st);
  // CANN gives freed memory back to the device at once.
  return FromStatus(rt.TrimTo(attr->pool, 0));
}

void RetainDevice(int device) {
  absl::MutexLock lock(&StateMutex());
  ++DeviceRefs()[device];
}

bool ReleaseDevice(int device, bool* last) {
  absl::MutexLock lock(&StateMutex());
  auto& refs = DeviceRefs();
  auto it = refs.find(device);
  if (it == refs.end()) return false;
  if (--it->second == 0) refs.erase(it);
  *last = refs.empty();
  return true;
}

void ForgetDevices() {
  absl::MutexLock lock(&StateMutex());
  DeviceRefs().clear();
}

}  // namespace streampool::internal::acl
