// An example StreamAdapter: a tiny "native runtime" whose streams are worker
// threads, the way an embedder's CUDA or CANN streams would be. Everything
// here uses only the public API: it is what an embedder writes.
//
//   native stream   a worker thread running std::function items in order
//   marker          a flag the worker sets when it reaches the marker
//   wait            an item that blocks the worker until a marker is reached
#ifndef STREAMPOOL_EXAMPLES_THREAD_STREAM_ADAPTER_H_
#define STREAMPOOL_EXAMPLES_THREAD_STREAM_ADAPTER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "streampool/stream_adapter.h"

namespace example {

class ThreadStreams final : public streampool::StreamAdapter {
 public:
  // The native stream type: what the embedder launches its own work on.
  class Stream {
   public:
    Stream() : worker_([this] { Run(); }) {}
    ~Stream() {
      Launch(nullptr);  // the stop item, after everything enqueued
      worker_.join();
    }
    // Enqueues native work (a "kernel").
    void Launch(std::function<void()> fn) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        items_.push_back(std::move(fn));
      }
      cv_.notify_one();
    }

   private:
    void Run() {
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [this] { return !items_.empty(); });
          fn = std::move(items_.front());
          items_.pop_front();
        }
        if (!fn) return;
        fn();
      }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> items_;
    std::thread worker_;  // last: starts once the rest exists
  };

  struct Flag {
    std::mutex mu;
    std::condition_variable cv;
    bool reached = false;
    void Set() {
      {
        std::lock_guard<std::mutex> lock(mu);
        reached = true;
      }
      cv.notify_all();
    }
    void Await() {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [this] { return reached; });
    }
  };

  absl::StatusOr<NativeStream> CreateStream(int, bool, bool) override { return new Stream; }
  void DestroyStream(NativeStream s) override { delete static_cast<Stream*>(s); }

  Marker Record(NativeStream s) override {
    // The worker holds a reference too, so Release before it is reached is fine.
    auto* flag = new std::shared_ptr<Flag>(std::make_shared<Flag>());
    std::shared_ptr<Flag> f = *flag;
    static_cast<Stream*>(s)->Launch([f] { f->Set(); });
    return flag;
  }
  bool Done(Marker m) override {
    Flag& f = **static_cast<std::shared_ptr<Flag>*>(m);
    std::lock_guard<std::mutex> lock(f.mu);
    return f.reached;
  }
  void Wait(NativeStream s, Marker m) override {
    std::shared_ptr<Flag> f = *static_cast<std::shared_ptr<Flag>*>(m);
    static_cast<Stream*>(s)->Launch([f] { f->Await(); });
  }
  void Synchronize(Marker m) override { (*static_cast<std::shared_ptr<Flag>*>(m))->Await(); }
  void Release(Marker m) override { delete static_cast<std::shared_ptr<Flag>*>(m); }
};

static_assert(streampool::kIsStreamAdapter<ThreadStreams>);

}  // namespace example

#endif  // STREAMPOOL_EXAMPLES_THREAD_STREAM_ADAPTER_H_
