// ThreadSanitizer annotations for Debian's prebuilt Abseil synchronization.
//
// Why this file exists: libabsl_synchronization.so from Debian 12 is not
// built with -fsanitize=thread, so the lock and unlock inside absl::Mutex are
// invisible to TSan. It then sees no happens-before edge between two critical
// sections of the same mutex and reports every ABSL_GUARDED_BY member as a
// data race. When Abseil itself is built with TSan, mutex.cc brackets each
// operation with __tsan_mutex_pre_*/post_* calls; this file does the same
// from the outside.
//
// How: in STREAMPOOL_SANITIZE=thread builds only, this file is compiled into
// the streampool library. It defines the public entry points of absl::Mutex,
// CondVar, Notification and BlockingCounter; the linker binds calls
// from our code (and, through the PLT, Abseil's own internal calls) to these
// definitions, which annotate and then call the real function found with
// dlsym(RTLD_NEXT). The symbol names are those of Debian's build (inline
// namespace "debian3"); a missing symbol aborts with a message naming it.
//
// Known gap: Notification::HasBeenNotified() is inline and polls an atomic
// written inside the library, so code that synchronizes only by polling it
// still gets reports; WaitForNotification() is covered.
#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif

#ifdef __SANITIZE_THREAD__

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>

#include "absl/base/internal/raw_logging.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

template <typename Fn>
Fn Real(const char* mangled) {
  void* sym = dlsym(RTLD_NEXT, mangled);
  if (sym == nullptr) {
    ABSL_RAW_LOG(FATAL, "absl_tsan_annotations: %s not found in the Abseil libraries", mangled);
  }
  return reinterpret_cast<Fn>(sym);
}

// The real function, looked up once. `sig` is the member function's type with
// `this` as first parameter (the Itanium C++ ABI passes it that way).
#define SP_REAL(sig, mangled) static const auto real = Real<sig>(mangled)

// absl::Mutex keeps its whole state in one word, its first member; kMuWriter
// (0x08 in mutex.cc) is set while it is held exclusively. Waits release and
// re-acquire in the mode the mutex is held in.
unsigned HeldMode(const absl::Mutex* mu) {
  auto word = reinterpret_cast<const std::atomic<intptr_t>*>(mu)->load(std::memory_order_relaxed);
  return (word & 0x08) != 0 ? 0 : __tsan_mutex_read_lock;
}

void AnnotateLock(void* mu, unsigned flags) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ------------------------------------------------------------------- Mutex

Mutex::~Mutex() {
  SP_REAL(void (*)(Mutex*), "_ZN4absl7debian35MutexD2Ev");
  real(this);
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
}

void Mutex::Lock() {
  SP_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  SP_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::TryLock() {
  SP_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  bool ok = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (ok ? 0 : __tsan_mutex_try_lock_failed), 0);
  return ok;
}

bool Mutex::ReaderTryLock() {
  SP_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  bool ok = real(this);
  __tsan_mutex_post_lock(this, flags | (ok ? 0 : __tsan_mutex_try_lock_failed), 0);
  return ok;
}

void Mutex::Unlock() {
  SP_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  SP_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

// Conditions are evaluated inside the real call, between pre and post, where
// TSan ignores accesses, as in an instrumented Abseil.
void Mutex::LockWhen(const Condition& cond) {
  SP_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  SP_REAL(void (*)(Mutex*, const Condition&),
          "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
          "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_mutex_pre_lock(this, 0);
  bool res = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return res;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
          "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  bool res = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return res;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
          "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  bool res = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return res;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
          "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  bool res = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return res;
}

// Await releases the mutex while it waits and holds it again on return.
void Mutex::Await(const Condition& cond) {
  SP_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  const unsigned mode = HeldMode(this);
  __tsan_mutex_pre_unlock(this, mode);
  real(this, cond);
  __tsan_mutex_post_unlock(this, mode);
  AnnotateLock(this, mode);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
          "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const unsigned mode = HeldMode(this);
  __tsan_mutex_pre_unlock(this, mode);
  bool res = real(this, cond, timeout);
  __tsan_mutex_post_unlock(this, mode);
  AnnotateLock(this, mode);
  return res;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  SP_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
          "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const unsigned mode = HeldMode(this);
  __tsan_mutex_pre_unlock(this, mode);
  bool res = real(this, cond, deadline);
  __tsan_mutex_post_unlock(this, mode);
  AnnotateLock(this, mode);
  return res;
}

// ----------------------------------------------------------------- CondVar

void CondVar::Wait(Mutex* mu) {
  SP_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  const unsigned mode = HeldMode(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  real(this, mu);
  __tsan_mutex_post_unlock(mu, mode);
  AnnotateLock(mu, mode);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  SP_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
          "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  const unsigned mode = HeldMode(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  bool res = real(this, mu, timeout);
  __tsan_mutex_post_unlock(mu, mode);
  AnnotateLock(mu, mode);
  return res;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  SP_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
          "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  const unsigned mode = HeldMode(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  bool res = real(this, mu, deadline);
  __tsan_mutex_post_unlock(mu, mode);
  AnnotateLock(mu, mode);
  return res;
}

// ------------------------------------------- Notification, BlockingCounter
// Each is a one-way hand-off: what happened before the notifying call happens
// before the return of the waiting call. Both also hand off through a plain
// atomic inside the library (Notification's already-notified fast path, the
// non-final BlockingCounter decrements), which the mutex annotations above do
// not see. Barrier needs nothing: it works wholly under its Mutex, whose calls
// from inside the library reach the definitions above through the PLT.

void Notification::Notify() {
  SP_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  SP_REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  SP_REAL(bool (*)(const Notification*, absl::Duration),
          "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  bool res = real(this, timeout);
  if (res) __tsan_acquire(const_cast<Notification*>(this));
  return res;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  SP_REAL(bool (*)(const Notification*, absl::Time),
          "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  bool res = real(this, deadline);
  if (res) __tsan_acquire(const_cast<Notification*>(this));
  return res;
}

bool BlockingCounter::DecrementCount() {
  SP_REAL(bool (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  SP_REAL(void (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter4WaitEv");
  real(this);
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl

#endif  // __SANITIZE_THREAD__
