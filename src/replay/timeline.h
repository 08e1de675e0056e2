// A runtime's schedule as Chrome trace-event JSON, the format Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// Runtime::Timeline() knows the stream ops and when they ran; it does not know
// which allocation an alloc or free point was, nor what the pools held. The
// layer that makes the calls does, so it tells a TimelineRecorder as it goes
// (streampool-replay's replayer and the Python binding both do), and the
// recorder joins the two when the timeline is written. Both users share this
// one writer, so a timeline from Python and one from the command line read
// the same.
//
// What the JSON holds, per process (one runtime, or one replay run):
//   - a thread (track) per stream, named after it, with each op as a complete
//     event ("ph": "X"): kernels, copies, fills, host functions, records,
//     waits, the waits the pool inserted (rule 5) and the zero-length alloc
//     and free points; "args" has the op's position and enqueue time;
//   - an async slice ("ph": "b"/"e", category "allocation") per allocation,
//     from its alloc point to its free point in stream order (to the end of
//     the timeline if never freed), with its size, pointer, reuse rule and
//     streams in "args";
//   - a counter ("ph": "C") per pool with its reserved and used bytes.
// Times are microseconds ("ts", "dur"), exact to the nanosecond for the
// first 2^53 ns of virtual time.
#ifndef STREAMPOOL_SRC_REPLAY_TIMELINE_H_
#define STREAMPOOL_SRC_REPLAY_TIMELINE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"

namespace streampool::replay {

// Reserved and used bytes of a pool after a call, at a host time.
struct SeriesPoint {
  uint64_t time_ns = 0;
  uint64_t reserved = 0;
  uint64_t used = 0;
};

// One allocation from its alloc point to its free point.
struct AllocationSpan {
  uintptr_t ptr = 0;
  uint64_t size = 0;
  ReuseRule rule = ReuseRule::kFresh;
  StreamId alloc_stream;
  StreamId free_stream;  // value 0 while live
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;  // the process's end_ns while live
  bool freed = false;
};

// One pool's counter track.
struct PoolCounter {
  std::string name;
  std::vector<SeriesPoint> points;
};

// What one process of the trace viewer shows.
struct TimelineProcess {
  std::string name;
  std::vector<TimelineEntry> ops;
  // Thread names by StreamId value, for streams the caller can name ("legacy");
  // others are "stream <index>".
  std::map<uint64_t, std::string> stream_labels;
  std::vector<AllocationSpan> allocations;
  std::vector<PoolCounter> pools;
  uint64_t end_ns = 0;
};

// Everything a caller tells while the runtime records its timeline.
// Not thread-safe: calls come in the order the runtime saw them, which is
// what lets Finish pair them with the runtime's alloc and free points.
class TimelineRecorder {
 public:
  // After a successful MallocAsync of a non-zero size (size 0 makes no point).
  void Allocated(StreamId s, const void* ptr, uint64_t size, ReuseRule rule, uint64_t host_ns);
  // After a successful FreeAsync of a non-null pointer, whatever it was.
  void Freed(StreamId s, const void* ptr, uint64_t host_ns);
  // The pool's bytes after a call; kept only when they changed. `pool` is any
  // key stable for the pool's life; `name` labels its counter.
  void PoolBytes(uint64_t pool, absl::string_view name, uint64_t host_ns, uint64_t reserved,
                 uint64_t used);
  // Forgets everything (a new recording starts).
  void Clear();

  // Joins what was told with `ops` (Runtime::Timeline(), in enqueue order):
  // the n-th alloc or free point of `ops` is the n-th call told, so a span
  // begins and ends when its points completed on their streams. If the two
  // disagree (the runtime was also driven through another API, or recording
  // started between a call and its point), every later span falls back to
  // the host times of its calls. Live allocations end at `end_ns`.
  TimelineProcess Finish(std::string name, std::vector<TimelineEntry> ops, uint64_t end_ns) const;

 private:
  struct Point {
    bool alloc = false;
    StreamId stream;
    uintptr_t ptr = 0;
    uint64_t size = 0;
    ReuseRule rule = ReuseRule::kFresh;
    uint64_t host_ns = 0;
  };
  std::vector<Point> points_;
  std::vector<PoolCounter> pools_;
  std::map<uint64_t, size_t> pool_index_;
};

// The processes as one Chrome trace-event JSON document, process i with pid
// i + 1.
std::string FormatChromeTrace(const std::vector<TimelineProcess>& processes);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_TIMELINE_H_
