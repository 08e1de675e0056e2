// AdapterExecutor: the Executor over a StreamAdapter, an embedder's or the
// CUDA executor's. Markers are made only when someone must learn where a
// stream is: an event record (eagerly: waits and queries name it), a wait on
// a point no marker covers yet, a query or synchronize past the last marker.
// Allocations and frees are points the executor is never told about, so a
// same-stream pair makes no native call; a marker recorded later than a
// point stands for it (it is reached only after the point is).
//
// Marker lifetime (stream_adapter.h): a marker is released once it is known
// reached and every stream that waited on it is known past that wait, or at
// teardown after every stream was synchronized; never while a native Wait on
// it may still be queued.
#ifndef STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_
#define STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/exec/native_work.h"
#include "src/util/mutex.h"
#include "streampool/executor.h"
#include "streampool/stream_adapter.h"

namespace streampool::internal {

class AdapterExecutor final : public Executor {
 public:
  // `native` (may be null; owned by the caller, outliving the executor) runs
  // the work the runtime enqueues; without it the embedder runs its own.
  explicit AdapterExecutor(std::shared_ptr<StreamAdapter> adapter, NativeWork* native = nullptr);
  ~AdapterExecutor() override;  // synchronizes, releases markers, destroys owned streams

  // Binds stream `s` to a new native stream; must precede any other call for
  // `s`. A reused slot's old native stream (all its work observed complete)
  // is destroyed first.
  absl::Status BindStream(StreamIndex s, int device, bool legacy, bool non_blocking);
  // Binds `s` to a native stream the embedder made and keeps. `wrapped`: the
  // handle is the executor's own wrapper of it (NativeWork::Adopt), given
  // back through DestroyStream like a stream of its own.
  void BindAdopted(StreamIndex s, StreamAdapter::NativeStream native, bool wrapped = false);
  StreamAdapter::NativeStream native(StreamIndex s);

  void AddStream(StreamIndex s) override {}
  void RemoveStream(StreamIndex s) override;
  TimeNs Enqueue(StreamIndex s, Position position, OpDesc op) override;
  // What markers already reached say; points after the last marker are not
  // known complete until ObserveThrough marks them.
  Position CompletedPosition(StreamIndex s) override;
  // As CompletedPosition, after marking `p` (a point or an op of s) if no
  // marker covers it yet.
  Position ObserveThrough(StreamIndex s, Position p);
  // `position` may be a point: the first marker at or after it stands for it.
  void WaitFor(StreamIndex s, Position position) override;
  TimeNs Now() const override;
  void HostAdvance(TimeNs ns) override;
  void RunDueEffects() override;
  bool blocks_host() const override { return true; }

  // The timed marker of the event record enqueued at `position` of `s` (null
  // without native work), kept alive for EventElapsedMs by its holder.
  std::shared_ptr<void> RecordMarker(StreamIndex s, Position position);
  absl::StatusOr<float> ElapsedMs(const std::shared_ptr<void>& start,
                                  const std::shared_ptr<void>& end);

 private:
  // Owns one native marker; whoever may still use it holds a reference.
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
  // The position of the marker a removed stream gets: past every position of
  // its incarnation (the runtime's next one starts after its last point, which
  // the executor may never have been told of).
  static constexpr Position kRemovedMark = ~Position{0};
  struct Stream {
    StreamAdapter::NativeStream native = nullptr;
    bool bound = false;         // usable: ops may be enqueued and marked
    bool owned = false;         // streampool made `native` and destroys it
    bool native_live = false;   // `native` not yet given back
    bool reap_pending = false;  // removed, its final marker not yet reached
    Position last = 0;          // last op or point the executor was told of
    Position completed = 0;     // highest position known reached
    std::deque<Mark> marks;     // not yet known reached, in position order
    // Markers this stream waited on, kept until the stream is past the wait.
    std::deque<Mark> waited;
  };
  struct Effect {
    StreamIndex stream;
    Position position;
    std::function<void()> fn;
  };

  // A marker reached only once p of s is: the first at or after p, or a new
  // one. Null when p is known complete.
  std::shared_ptr<MarkerRef> MarkerCovering(StreamIndex s, Position p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Poll(Stream& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys the native streams of removed streams whose work is all reached.
  void ReapRemoved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives back an owned native stream, whose work is all reached.
  void DestroyNative(Stream& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Binds slot s to `native` (a reused slot: the runtime proved every
  // position of the old incarnation complete).
  void Bind(StreamIndex s, StreamAdapter::NativeStream native, bool owned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<StreamAdapter> adapter_;
  NativeWork* const native_;
  const std::chrono::steady_clock::time_point start_;
  mutable Mutex mu_{LockRank::kExecQueue};
  std::vector<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::deque<Effect> effects_ ABSL_GUARDED_BY(mu_);  // in enqueue order
  size_t reap_pending_count_ ABSL_GUARDED_BY(mu_) = 0;
};

static_assert(kIsExecutor<AdapterExecutor>);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_EXEC_ADAPTER_EXECUTOR_H_
