// ThreadExecutor: streams run for real. Every stream is a worker thread that
// runs its ops in order; waits block the worker until the awaited position
// has completed; synchronize calls block the host. Kernels run their callable
// if they have one (Runtime::LaunchWork) and otherwise sleep their duration;
// host functions, copies and fills run on the stream's worker when their turn
// comes, which is when their effects happen.
//
// A destroyed stream's worker finishes what is enqueued and exits; it is
// joined later by whichever call next adds or removes a stream (never by the
// destroying caller, which does not wait), or when its slot is reused (by
// then its work is proven complete, so the join returns at once). A Worker
// object lives as long as the executor: other workers may still be reading
// its completed position.
//
// Time is the steady clock since the executor started. Nothing here touches
// the ordering core or the pools.
#ifndef STREAMPOOL_SRC_EXEC_THREAD_EXECUTOR_H_
#define STREAMPOOL_SRC_EXEC_THREAD_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "src/util/mutex.h"
#include "streampool/executor.h"

namespace streampool::internal {

class ThreadExecutor final : public Executor {
 public:
  ThreadExecutor();
  // Finishes every enqueued op, then joins the workers.
  ~ThreadExecutor() override;

  // Starts the worker thread; std::system_error when the system has none to
  // give, with nothing changed.
  void AddStream(StreamIndex s) override;
  void RemoveStream(StreamIndex s) override;
  TimeNs Enqueue(StreamIndex s, Position position, OpDesc op) override;
  Position CompletedPosition(StreamIndex s) override;
  void WaitFor(StreamIndex s, Position position) override;
  TimeNs Now() const override;
  void HostAdvance(TimeNs ns) override;
  void RunDueEffects() override {}  // effects run on the workers, in stream order
  bool blocks_host() const override { return true; }

  // A host thread's wait (a synchronize call), which returns early, false,
  // while host waits are interrupted; true once the position is complete.
  bool HostWaitFor(StreamIndex s, Position position);
  // on: wakes every host wait and makes new ones return at once (the
  // runtime is being destroyed); off: host waits wait again. Workers' own
  // waits for other streams are never interrupted: enqueued work completes.
  void InterruptHostWaits(bool on);

 private:
  struct Item {
    Position position;
    OpDesc op;
  };
  struct Worker {
    Mutex mu{LockRank::kExecQueue};
    CondVar cv;
    std::deque<Item> queue ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
    // An item is popped and running.
    bool busy ABSL_GUARDED_BY(mu) = false;
    std::atomic<Position> completed{0};
    // Set by the worker as it returns; the thread is then joinable at once.
    std::atomic<bool> exited{false};
    std::thread thread;
  };

  Worker& worker(StreamIndex s);
  void Run(Worker* w);
  // False when interrupted (interruptible waits only) before p completed.
  bool AwaitPoint(StreamIndex s, Position p, bool interruptible = false);
  // Joins the workers of destroyed streams that have exited.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_);

  const std::chrono::steady_clock::time_point start_;
  // Workers are created under workers_mu_ and never removed before the
  // destructor, so a pointer read under the lock stays valid.
  Mutex workers_mu_{LockRank::kExecWorkers};
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(workers_mu_);
  // Slots whose stream was destroyed and whose thread is not yet joined.
  std::vector<StreamIndex> retiring_ ABSL_GUARDED_BY(workers_mu_);
  // Completion of any op, for waits across streams (completions are
  // published under it so a waiter cannot miss one).
  Mutex done_mu_{LockRank::kExecDone};
  CondVar done_cv_;
  bool host_waits_interrupted_ ABSL_GUARDED_BY(done_mu_) = false;
};

static_assert(kIsExecutor<ThreadExecutor>);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_EXEC_THREAD_EXECUTOR_H_
