#include "src/exec/thread_executor.h"

#include <system_error>
#include <utility>

#include "src/util/check.h"
#include "src/util/fault.h"
#include "src/util/sat_time.h"

namespace streampool::internal {
namespace {

// std::thread, or std::system_error as std::thread throws when the system has
// no thread to give (or a test made it so: src/util/fault.h).
template <typename F>
std::thread StartThread(F&& fn) {
  if (FaultInjection::ShouldFail(Fault::kThreadCreate)) {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "thread creation failed (injected)");
  }
  return std::thread(std::forward<F>(fn));
}

}  // namespace

ThreadExecutor::ThreadExecutor() : start_(std::chrono::steady_clock::now()) {}

ThreadExecutor::~ThreadExecutor() {
  std::vector<Worker*> all;
  {
    MutexLock lock(&workers_mu_);
    for (auto& w : workers_) all.push_back(w.get());
  }
  for (Worker* w : all) {
    {
      MutexLock lock(&w->mu);
      w->stop = true;
    }
    w->cv.SignalAll();
  }
  for (Worker* w : all) {
    if (w->thread.joinable()) w->thread.join();
  }
}

ThreadExecutor::Worker& ThreadExecutor::worker(StreamIndex s) {
  MutexLock lock(&workers_mu_);
  SP_CHECK(s < workers_.size());
  return *workers_[s];
}

void ThreadExecutor::ReapLocked() {
  for (size_t i = 0; i < retiring_.size();) {
    Worker& w = *workers_[retiring_[i]];
    if (w.exited.load(std::memory_order_acquire)) {
      if (w.thread.joinable()) w.thread.join();  // returns at once: it has exited
      retiring_[i] = retiring_.back();
      retiring_.pop_back();
    } else {
      ++i;
    }
  }
}

void ThreadExecutor::AddStream(StreamIndex s) {
  MutexLock lock(&workers_mu_);
  ReapLocked();
  SP_CHECK(s <= workers_.size());
  if (s == workers_.size()) {
    auto w = std::make_unique<Worker>();
    Worker* raw = w.get();
    // The thread first: if it cannot be made, nothing has changed.
    std::thread t = StartThread([this, raw] { Run(raw); });
    workers_.push_back(std::move(w));
    raw->thread = std::move(t);
    return;
  }
  // A reused slot: the old incarnation's work is complete, so its worker has
  // exited or is about to; the Worker object (and its completed position)
  // carries over.
  Worker& w = *workers_[s];
  if (w.thread.joinable()) w.thread.join();
  for (size_t i = 0; i < retiring_.size(); ++i) {
    if (retiring_[i] == s) {
      retiring_[i] = retiring_.back();
      retiring_.pop_back();
      break;
    }
  }
  {
    MutexLock wl(&w.mu);
    SP_CHECK(w.queue.empty());
    w.stop = false;
  }
  w.exited.store(false, std::memory_order_relaxed);
  Worker* raw = &w;
  try {
    w.thread = StartThread([this, raw] { Run(raw); });
  } catch (...) {
    // Leave the slot as a removed stream's: stopped, exited, nothing to join.
    MutexLock wl(&w.mu);
    w.stop = true;
    w.exited.store(true, std::memory_order_release);
    throw;
  }
}

void ThreadExecutor::RemoveStream(StreamIndex s) {
  MutexLock lock(&workers_mu_);
  Worker& w = *workers_[s];
  {
    MutexLock wl(&w.mu);
    w.stop = true;
  }
  w.cv.SignalAll();
  retiring_.push_back(s);
  ReapLocked();
}

TimeNs ThreadExecutor::Enqueue(StreamIndex s, Position position, OpDesc op) {
  Worker& w = worker(s);
  bool advanced = false;
  {
    MutexLock lock(&w.mu);
    if (w.queue.empty() && !w.busy && w.completed.load(std::memory_order_relaxed) < position - 1) {
      // The worker is idle: the points since its last op are complete.
      MutexLock done(&done_mu_);
      w.completed.store(position - 1, std::memory_order_release);
      advanced = true;
    }
    w.queue.push_back(Item{position, std::move(op)});
  }
  w.cv.Signal();
  if (advanced) done_cv_.SignalAll();
  return 0;  // unknown until it runs
}

Position ThreadExecutor::CompletedPosition(StreamIndex s) {
  return worker(s).completed.load(std::memory_order_acquire);
}

bool ThreadExecutor::AwaitPoint(StreamIndex s, Position p, bool interruptible) {
  Worker& w = worker(s);
  if (w.completed.load(std::memory_order_acquire) >= p) return true;
  MutexLock lock(&done_mu_);
  while (w.completed.load(std::memory_order_acquire) < p) {
    if (interruptible && host_waits_interrupted_) return false;
    done_cv_.Wait(&done_mu_);
  }
  return true;
}

void ThreadExecutor::WaitFor(StreamIndex s, Position position) { AwaitPoint(s, position); }

bool ThreadExecutor::HostWaitFor(StreamIndex s, Position position) {
  return AwaitPoint(s, position, /*interruptible=*/true);
}

void ThreadExecutor::InterruptHostWaits(bool on) {
  {
    MutexLock lock(&done_mu_);
    host_waits_interrupted_ = on;
  }
  done_cv_.SignalAll();
}

TimeNs ThreadExecutor::Now() const {
  return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count());
}

void ThreadExecutor::HostAdvance(TimeNs ns) { std::this_thread::sleep_for(ToChronoNs(ns)); }

void ThreadExecutor::Run(Worker* wp) {
  Worker& w = *wp;
  for (;;) {
    Item item;
    {
      MutexLock lock(&w.mu);
      while (!w.stop && w.queue.empty()) w.cv.Wait(&w.mu);
      // Stop only once the queue is drained: enqueued work always completes.
      if (w.queue.empty()) {
        w.exited.store(true, std::memory_order_release);
        return;
      }
      item = std::move(w.queue.front());
      w.queue.pop_front();
      w.busy = true;
    }
    if (item.op.wait_stream != kNoStream) AwaitPoint(item.op.wait_stream, item.op.wait_position);
    for (const auto& [ws, wp] : item.op.implicit_waits) AwaitPoint(ws, wp);
    if (item.op.effect) {
      item.op.effect();
    } else if (item.op.duration_ns != 0) {
      std::this_thread::sleep_for(ToChronoNs(item.op.duration_ns));
    }
    {
      // Positions skip points that are not ops (allocations, frees): those
      // before the next queued op are complete with this one.
      MutexLock wl(&w.mu);
      w.busy = false;
      const Position through = w.queue.empty() ? item.position : w.queue.front().position - 1;
      // Publish under done_mu_ so a waiter cannot miss the notification
      // between its check and its wait.
      MutexLock lock(&done_mu_);
      w.completed.store(through, std::memory_order_release);
    }
    done_cv_.SignalAll();
  }
}

}  // namespace streampool::internal
