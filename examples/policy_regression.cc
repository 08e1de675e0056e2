// A policy regression test, written the way a user of streampool would: a
// fixed scenario in virtual time whose reuse decision is asserted exactly, so
// a change in the pool's policy (or in the settings a framework relies on)
// shows up as a failed check rather than as a memory-usage drift.
//
// The scenario: stream A allocates 4 MiB, runs a 100 us kernel on it and
// frees it; then stream B asks for 4 MiB. Which bytes B gets, and why,
// depends on what B knows about A's free and on the pool's reuse switches:
//
//   scenario                        B gets          reserved  why
//   A done, defaults                A's bytes       4 MiB     rule 3, opportunistic
//   A done, opportunistic off       A's bytes       4 MiB     a wait that delays nothing
//   ... and waiting before growth off new bytes     8 MiB     rule 4, growth (CUDA's order)
//   event after the free            A's bytes       4 MiB     rule 2, event dependency
//   pool full, A still running      A's bytes       4 MiB     rule 5, B waits for A
//   pool full, internal deps off    nothing         4 MiB     rule 6, out of memory
//   ... then A synchronized         A's bytes       4 MiB     READY after sync
//
// Plain C++ and a small CHECK macro, no test framework: exit status 0 when
// every decision is as pinned, 1 otherwise.
#include <cstdint>
#include <cstdio>
#include <memory>

#include "streampool/runtime.h"

namespace {

using streampool::AllocInfo;
using streampool::PoolAttr;
using streampool::PoolId;
using streampool::ReuseRule;
using streampool::Runtime;
using streampool::StreamId;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBytes = 4 * kMiB;
constexpr uint64_t kKernelNs = 100000;  // 100 us

int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "policy_regression: %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
                   #cond);                                                                     \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

// A runtime, two non-blocking streams and the pool under test, with A's
// allocation freed after its kernel.
struct Setup {
  std::unique_ptr<Runtime> rt;
  StreamId a, b;
  PoolId pool;
  void* a_ptr = nullptr;
};

// max_size 0: as large as the device. Returns false if any call failed.
bool MakeSetup(Setup& s, uint64_t max_size) {
  auto rt = Runtime::Create();
  if (!rt.ok()) return false;
  s.rt = *std::move(rt);
  auto a = s.rt->CreateStream(0, /*non_blocking=*/true);
  auto b = s.rt->CreateStream(0, /*non_blocking=*/true);
  streampool::PoolProps props;
  props.max_size = max_size;
  auto pool = s.rt->CreatePool(props);
  if (!a.ok() || !b.ok() || !pool.ok()) return false;
  s.a = *a;
  s.b = *b;
  s.pool = *pool;
  auto alloc = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.a);
  if (!alloc.ok()) return false;
  s.a_ptr = alloc->ptr;
  const streampool::Access write{s.a_ptr, kBytes, true};
  return s.rt->LaunchKernel(s.a, kKernelNs, {&write, 1}).ok() && s.rt->FreeAsync(s.a_ptr, s.a).ok();
}

uint64_t Reserved(const Setup& s) {
  auto v = s.rt->GetPoolAttribute(s.pool, PoolAttr::kReservedMemCurrent);
  return v.ok() ? *v : ~uint64_t{0};
}

void Report(const char* scenario, const absl::StatusOr<AllocInfo>& got, const Setup& s) {
  std::printf("%-34s %-22s %-10s reserved %llu MiB\n", scenario,
              got.ok() ? streampool::ReuseRuleName(got->rule) : "(out of memory)",
              got.ok() ? (got->ptr == s.a_ptr ? "A's bytes" : "new bytes") : "",
              static_cast<unsigned long long>(Reserved(s) / kMiB));
}

void OpportunisticAfterAFinishes() {
  Setup s;
  CHECK(MakeSetup(s, 0));
  if (!s.rt) return;
  CHECK(s.rt->HostAdvance(2 * kKernelNs).ok());  // A's kernel and free are done
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("A done, defaults", got, s);
  CHECK(got.ok() && got->rule == ReuseRule::kOpportunistic && got->ptr == s.a_ptr);
  CHECK(Reserved(s) == kBytes);
}

void WaitBeforeGrowthWhenOpportunisticIsOff() {
  Setup s;
  CHECK(MakeSetup(s, 0));
  if (!s.rt) return;
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  CHECK(s.rt->HostAdvance(2 * kKernelNs).ok());
  // A's free is complete, so a wait of B on it delays nothing: the pool
  // inserts it rather than grow (counted as an internal dependency).
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("A done, opportunistic off", got, s);
  CHECK(got.ok() && got->rule == ReuseRule::kInternalDependency && got->ptr == s.a_ptr);
  CHECK(Reserved(s) == kBytes);
  auto stats = s.rt->GetPoolStats(s.pool);
  CHECK(stats.ok() && stats->waits_before_growth == 1);
}

void GrowthInCudasOrder() {
  Setup s;
  CHECK(MakeSetup(s, 0));
  if (!s.rt) return;
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kWaitBeforeGrowth, 0).ok());
  CHECK(s.rt->HostAdvance(2 * kKernelNs).ok());
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("... and waiting before growth off", got, s);
  CHECK(got.ok() && got->rule == ReuseRule::kFresh && got->ptr != s.a_ptr);
  CHECK(Reserved(s) == 2 * kBytes);
}

void EventDependencyWhileAStillRuns() {
  Setup s;
  CHECK(MakeSetup(s, 0));
  if (!s.rt) return;
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  auto ev = s.rt->CreateEvent();
  CHECK(ev.ok());
  if (!ev.ok()) return;
  CHECK(s.rt->RecordEvent(*ev, s.a).ok());      // after A's free
  CHECK(s.rt->StreamWaitEvent(s.b, *ev).ok());  // B's next op is ordered after it
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("event after the free", got, s);
  CHECK(got.ok() && got->rule == ReuseRule::kEventDependency && got->ptr == s.a_ptr);
  CHECK(Reserved(s) == kBytes);
  CHECK(s.rt->HostNow() == 0);  // nobody waited on the host
}

void InternalDependencyWhenThePoolIsFull() {
  Setup s;
  CHECK(MakeSetup(s, kBytes));  // no room to grow
  if (!s.rt) return;
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("pool full, A still running", got, s);
  CHECK(got.ok() && got->rule == ReuseRule::kInternalDependency && got->ptr == s.a_ptr);
  if (!got.ok()) return;
  // The pool inserted a wait of B on A's free, so B's kernel runs after A's:
  // it ends at 100 us + 10 us, and the checker sees no overlap.
  const streampool::Access write{got->ptr, kBytes, true};
  CHECK(s.rt->LaunchKernel(s.b, 10000, {&write, 1}).ok());
  CHECK(s.rt->StreamSynchronize(s.b).ok());
  CHECK(s.rt->HostNow() == kKernelNs + 10000);
  auto stats = s.rt->GetPoolStats(s.pool);
  CHECK(stats.ok() && stats->waits_inserted == 1);
  CHECK(s.rt->CheckReports().empty());
  CHECK(s.rt->FreeAsync(got->ptr, s.b).ok());
}

void OutOfMemoryWithoutInternalDependencies() {
  Setup s;
  CHECK(MakeSetup(s, kBytes));
  if (!s.rt) return;
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kReuseAllowInternalDependencies, 0).ok());
  // Keep A's chunk across the synchronize below, so the retry reuses it.
  CHECK(s.rt->SetPoolAttribute(s.pool, PoolAttr::kReleaseThreshold, ~uint64_t{0}).ok());
  auto got = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("pool full, internal deps off", got, s);
  CHECK(got.status().code() == absl::StatusCode::kResourceExhausted);
  auto stats = s.rt->GetPoolStats(s.pool);
  CHECK(stats.ok() && stats->failed_alloc_count == 1 && stats->waits_inserted == 0);

  CHECK(s.rt->StreamSynchronize(s.a).ok());  // proves A's free complete: READY
  auto retry = s.rt->MallocFromPoolAsync(kBytes, s.pool, s.b);
  Report("... then A synchronized", retry, s);
  CHECK(retry.ok() && retry->rule == ReuseRule::kAfterSync && retry->ptr == s.a_ptr);
  if (retry.ok()) CHECK(s.rt->FreeAsync(retry->ptr, s.b).ok());
}

}  // namespace

int main() {
  std::printf("%-34s %-22s %-10s\n", "scenario", "rule", "B gets");
  OpportunisticAfterAFinishes();
  WaitBeforeGrowthWhenOpportunisticIsOff();
  GrowthInCudasOrder();
  EventDependencyWhileAStillRuns();
  InternalDependencyWhenThePoolIsFull();
  OutOfMemoryWithoutInternalDependencies();
  if (failures != 0) {
    std::fprintf(stderr, "policy_regression: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("policy_regression: OK\n");
  return 0;
}
