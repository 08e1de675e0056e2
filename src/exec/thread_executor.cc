#include "src/exec/thread_executor.h"

#include <utility>

#include "src/util/check.h"

namespace streampool::internal {

ThreadExecutor::ThreadExecutor() : start_(std::chrono::steady_clock::now()) {}

ThreadExecutor::~ThreadExecutor() {
  std::vector<Worker*> all;
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    for (auto& w : workers_) all.push_back(w.get());
  }
  for (Worker* w : all) {
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->stop = true;
    }
    w->cv.notify_all();
  }
  for (Worker* w : all) w->thread.join();
}

ThreadExecutor::Worker& ThreadExecutor::worker(StreamIndex s) {
  std::lock_guard<std::mutex> lock(workers_mu_);
  SP_CHECK(s < workers_.size());
  return *workers_[s];
}

void ThreadExecutor::AddStream(StreamIndex s) {
  std::lock_guard<std::mutex> lock(workers_mu_);
  SP_CHECK(s == workers_.size());
  workers_.push_back(std::make_unique<Worker>());
  workers_.back()->thread = std::thread([this, s] { Run(s); });
}

TimeNs ThreadExecutor::Enqueue(StreamIndex s, Position position, OpDesc op) {
  Worker& w = worker(s);
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.queue.push_back(Item{position, std::move(op)});
  }
  w.cv.notify_one();
  return 0;  // unknown until it runs
}

Position ThreadExecutor::CompletedPosition(StreamIndex s) {
  return worker(s).completed.load(std::memory_order_acquire);
}

void ThreadExecutor::AwaitPoint(StreamIndex s, Position p) {
  Worker& w = worker(s);
  if (w.completed.load(std::memory_order_acquire) >= p) return;
  std::unique_lock<std::mutex> lock(done_mu_);
  done_cv_.wait(lock, [&] { return w.completed.load(std::memory_order_acquire) >= p; });
}

void ThreadExecutor::WaitFor(StreamIndex s, Position position) { AwaitPoint(s, position); }

TimeNs ThreadExecutor::Now() const {
  return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count());
}

void ThreadExecutor::HostAdvance(TimeNs ns) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}

void ThreadExecutor::Run(StreamIndex s) {
  Worker& w = worker(s);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
      // Stop only once the queue is drained: enqueued work always completes.
      if (w.queue.empty()) return;
      item = std::move(w.queue.front());
      w.queue.pop_front();
    }
    if (item.op.wait_stream != kNoStream) AwaitPoint(item.op.wait_stream, item.op.wait_position);
    for (const auto& [ws, wp] : item.op.implicit_waits) AwaitPoint(ws, wp);
    if (item.op.effect) {
      item.op.effect();
    } else if (item.op.duration_ns != 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(item.op.duration_ns));
    }
    {
      // Publish under done_mu_ so a waiter cannot miss the notification
      // between its check and its wait.
      std::lock_guard<std::mutex> lock(done_mu_);
      w.completed.store(item.position, std::memory_order_release);
    }
    done_cv_.notify_all();
  }
}

}  // namespace streampool::internal
