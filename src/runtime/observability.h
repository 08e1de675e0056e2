// Observability: what watches a runtime's calls without changing their
// results: the stream-order checker and the open recording.
//
// Contract. The checker is on between EnableChecker(true) and
// EnableChecker(false) (null while off). The parts feed it each event as they
// decide it (checker()) and then call CheckerAfterEvent, which names each new
// report's streams by the handles their slots have at that moment (a slot may
// later hold another stream) and, in fatal mode, aborts with the first new
// report; Reports() are the checker's findings with those names. A recording
// is open between StartRecording and TakeRecording; recording() is what the
// allocator's paths without the runtime's lock read, and TakeRecording clears
// it before the recorder goes, so its caller passes every lock such a path
// writes under before closing it. Everything else is read and changed under
// the runtime's lock; it takes no lock itself, and reads the stream handles
// of the table it is given.
#ifndef STREAMPOOL_SRC_RUNTIME_OBSERVABILITY_H_
#define STREAMPOOL_SRC_RUNTIME_OBSERVABILITY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "src/runtime/recorder.h"
#include "src/sim/checker.h"
#include "streampool/checker.h"

namespace streampool::internal {

class Observability {
 public:
  // stream_handles: the handle of each stream index (0 once destroyed).
  explicit Observability(const std::vector<uint64_t>& stream_handles)
      : stream_handles_(stream_handles) {}
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  StreamOrderChecker* checker() const { return checker_.get(); }
  // Off drops the reports; on keeps a running checker's. `done` and
  // `registered` (what synchronize calls proved complete, the registered
  // host ranges) outlive the checker.
  void EnableChecker(bool on, bool fatal, const VectorClock* done,
                     const RegisteredRanges* registered);
  void CheckerAfterEvent();
  std::vector<streampool::CheckReport> Reports() const;
  void ClearReports();

  // The open recording (null: none), read under the runtime's lock ...
  Recorder* recorder() const { return recorder_.get(); }
  // ... and without it, by the allocator's paths.
  Recorder* recording(std::memory_order order = std::memory_order_acquire) const {
    return recording_.load(order);
  }
  void StartRecording(std::unique_ptr<Recorder> recorder) {
    recorder_ = std::move(recorder);
    recording_.store(recorder_.get(), std::memory_order_release);
  }
  std::unique_ptr<Recorder> TakeRecording() {
    // Seq-cst on both sides (here and BeginWrite): a writer either sees the
    // recording gone or is seen here, and waited for.
    recording_.store(nullptr, std::memory_order_seq_cst);
    while (writers_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    return std::move(recorder_);
  }
  // A line written holding no lock the stop passes: the recording, kept from
  // being taken until EndWrite, or null (not recording).
  Recorder* BeginWrite() {
    writers_.fetch_add(1, std::memory_order_seq_cst);
    Recorder* r = recording_.load(std::memory_order_seq_cst);
    if (r == nullptr) EndWrite();
    return r;
  }
  void EndWrite() { writers_.fetch_sub(1, std::memory_order_release); }

 private:
  uint64_t HandleOf(StreamIndex s) const {
    return s < stream_handles_.size() ? stream_handles_[s] : 0;
  }

  const std::vector<uint64_t>& stream_handles_;
  std::unique_ptr<StreamOrderChecker> checker_;
  bool checker_fatal_ = false;
  size_t checker_reported_ = 0;
  // The stream handles of each checker report, taken when it was made.
  std::vector<std::pair<uint64_t, uint64_t>> report_streams_;
  std::unique_ptr<Recorder> recorder_;
  std::atomic<Recorder*> recording_{nullptr};
  std::atomic<int> writers_{0};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_OBSERVABILITY_H_
