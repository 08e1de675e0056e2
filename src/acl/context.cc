#include "src/acl/context.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace streampool::internal::acl {
namespace {

struct ContextRec {
  int device;
  bool is_default;
};

// Handles are numbers never reused, so a thread still holding a destroyed
// context as current finds it dead rather than finding another.
struct Contexts {
  absl::Mutex mu;
  uintptr_t next ABSL_GUARDED_BY(mu) = 0x1000;
  absl::flat_hash_map<aclrtContext, ContextRec> live ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<int, aclrtContext> defaults ABSL_GUARDED_BY(mu);
};

// Leaked: threads that exit late in the process may still ask.
Contexts& All() {
  static Contexts* contexts = new Contexts;
  return *contexts;
}

aclrtContext Add(Contexts& c, int device, bool is_default) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
  auto handle = reinterpret_cast<aclrtContext>(c.next);
  c.next += 0x10;
  c.live.emplace(handle, ContextRec{device, is_default});
  return handle;
}

}  // namespace

aclrtContext NewContext(int device) {
  Contexts& c = All();
  absl::MutexLock lock(&c.mu);
  return Add(c, device, /*is_default=*/false);
}

bool ContextDevice(aclrtContext context, int* device) {
  Contexts& c = All();
  absl::MutexLock lock(&c.mu);
  auto it = c.live.find(context);
  if (it == c.live.end()) return false;
  *device = it->second.device;
  return true;
}

aclrtContext DefaultContext(int device) {
  Contexts& c = All();
  absl::MutexLock lock(&c.mu);
  auto [it, inserted] = c.defaults.try_emplace(device, nullptr);
  if (inserted) it->second = Add(c, device, /*is_default=*/true);
  return it->second;
}

aclError DestroyContext(aclrtContext context) {
  Contexts& c = All();
  absl::MutexLock lock(&c.mu);
  auto it = c.live.find(context);
  if (it == c.live.end()) return ACL_ERROR_RT_PARAM_INVALID;
  if (it->second.is_default) return ACL_ERROR_INVALID_PARAM;
  c.live.erase(it);
  // Other threads that had it current find it dead (handles are not reused).
  if (CurrentContext() == context) CurrentContext() = nullptr;
  return ACL_SUCCESS;
}

aclrtContext& CurrentContext() {
  static thread_local aclrtContext current = nullptr;
  return current;
}

void ForgetContexts() {
  Contexts& c = All();
  absl::MutexLock lock(&c.mu);
  c.live.clear();
  c.defaults.clear();
  CurrentContext() = nullptr;
}

}  // namespace streampool::internal::acl
