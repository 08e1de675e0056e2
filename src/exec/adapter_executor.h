// AdapterExecutor: the Executor over an embedder's StreamAdapter. Every op
// streampool enqueues (except allocation points, which nothing waits for)
// becomes a native marker; completion is marker completion, waits are native
// waits on the marker of the awaited position (or of the first later one:
// waiting a little longer is always safe).
#ifndef STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_
#define STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "src/util/mutex.h"
#include "streampool/executor.h"
#include "streampool/stream_adapter.h"

namespace streampool::internal {

class AdapterExecutor final : public Executor {
 public:
  explicit AdapterExecutor(std::shared_ptr<StreamAdapter> adapter);
  ~AdapterExecutor() override;  // releases markers, destroys native streams

  // Binds stream `s` to a native stream (AddStream would have no device to
  // ask for); must precede any other call for `s`.
  absl::Status BindStream(StreamIndex s, int device, bool legacy, bool non_blocking);
  StreamAdapter::NativeStream native(StreamIndex s);

  void AddStream(StreamIndex s) override {}
  TimeNs Enqueue(StreamIndex s, Position position, OpDesc op) override;
  Position CompletedPosition(StreamIndex s) override;
  void WaitFor(StreamIndex s, Position position) override;
  TimeNs Now() const override;
  void HostAdvance(TimeNs ns) override;
  void RunDueEffects() override;
  bool blocks_host() const override { return true; }

 private:
  // Owns one native marker; a waiter that blocks outside the lock holds a
  // reference, so the marker is released only when nobody can still use it.
  class MarkerRef {
   public:
    MarkerRef(StreamAdapter* adapter, StreamAdapter::Marker m) : adapter_(adapter), m_(m) {}
    ~MarkerRef() { adapter_->Release(m_); }
    StreamAdapter::Marker get() const { return m_; }

   private:
    StreamAdapter* adapter_;
    StreamAdapter::Marker m_;
  };
  struct Mark {
    Position position;
    std::shared_ptr<MarkerRef> marker;
  };
  struct Stream {
    StreamAdapter::NativeStream native = nullptr;
    Position last = 0;       // last position enqueued
    Position completed = 0;  // highest position known reached
    std::deque<Mark> marks;  // not yet known reached, in position order
  };
  struct Effect {
    StreamIndex stream;
    Position position;
    std::function<void()> fn;
  };

  // The marker of the last op at or before p on s (every op is marked).
  // Null when p is already complete.
  std::shared_ptr<MarkerRef> MarkerAtOrBefore(StreamIndex s, Position p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Mark NewMark(Stream& st, Position p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Poll(Stream& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<StreamAdapter> adapter_;
  const std::chrono::steady_clock::time_point start_;
  Mutex mu_{LockRank::kExecQueue};
  std::vector<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::deque<Effect> effects_ ABSL_GUARDED_BY(mu_);  // in enqueue order
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_
