// Allocation traces for streampool-replay: what a trace says, and the two
// formats it is read from.
//
// "streampool trace v1" (traces/README.md) is a text file, one op per line:
//
//   # streampool trace v1            optional magic; another version is refused
//   # torch_peak_reserved_bytes N    header comments: `# <key> <value...>`
//   alloc <id> <size> <stream>       MallocAsync(size) on stream
//   free <id> <stream>               FreeAsync of allocation <id> on stream
//   kernel <stream> <duration_ns>    a kernel that touches nothing
//   record <event> <stream>          RecordEvent
//   wait <stream> <event>            StreamWaitEvent
//   sync <stream>                    StreamSynchronize
//   esync <event>                    EventSynchronize
//   dsync                            DeviceSynchronize
//   advance <ns>                     host virtual time moves on
//
// What a recording (Runtime::StartRecording) adds, so that a live program's
// history replays exactly. A file without these ops means what it always did.
//
//   stream <stream> <device> <flags> creates a stream: flags 0 blocking,
//                                    1 non-blocking, 2 the device's legacy
//                                    stream (created by nothing)
//   sdestroy <stream>                DestroyStream; a later `stream` line may
//                                    give the id to a new stream
//   event <event> <flags>            CreateEvent(flags); edestroy <event>
//   pool <pool> <device> <key>=<value>...
//                                    a pool and its settings: type, reuse
//                                    (event+opportunistic+internal | none),
//                                    threshold (bytes | max), growth,
//                                    front_cache, wait_before_growth (0 or 1;
//                                    absent: 0), soft_limit (bytes | max;
//                                    absent: max), default, max_size,
//                                    page_policy, acl_rounding, acl_align32,
//                                    handle_types, upstream=custom; pdestroy <pool>
//   alloc <id> <size> <stream> <pool>
//                                    from that pool; the recorder appends the
//                                    decision as a comment:
//                                    `# <rule> <chunk>+<offset>` or `# failed`
//   malloc <id> <size> <device>      Malloc; release <id> is Free (free <id>
//                                    <stream> is FreeAsync of either kind)
//   copy <stream> <bytes>            a copy or fill, timed by copy_bytes_per_us
//   host <stream>                    a host function
//   query <stream>, equery <event>   StreamQuery, EventQuery (either answer)
//   attr <pool> <name> <value>       reuse_event, reuse_opportunistic,
//                                    reuse_internal, front_cache,
//                                    wait_before_growth (0 or 1), threshold,
//                                    soft_limit (bytes or max)
//   trim <pool> <bytes>              TrimTo
//   dsync [<device>]                 DeviceSynchronize (device 0 by default)
//   use <id> <stream>                the live allocation is used on another
//                                    stream too (record_stream); its free is
//                                    ordered after that stream's work
//
// Graphs (docs/graphs.md), as a recording writes them. Graph and executable
// graph ids are the trace's own; a node is its index in its graph.
//
//   capture <stream> <mode>          BeginCapture (0 global, 1 thread-local,
//                                    2 relaxed); ops on a capturing stream
//                                    are the lines above, captured again
//   capture_to <stream> <graph> <mode> <node>...
//                                    BeginCaptureToGraph after those nodes
//   endcapture <stream> [<graph>]    EndCapture; the graph it handed out
//   alloc <id> <size> <stream> <pool>  # graph
//                                    MallocAsync in a capture: the id names
//                                    the allocation node's address until an
//                                    alloc takes it again; each `free <id>`
//                                    or `release <id>` frees that address
//                                    (in a capture, a free node)
//   gcreate <graph>, gdestroy <graph>, gclone <graph> <from>
//   gnode <graph> <node> <kind> <params>... <dep>...
//                                    a node added by hand: kernel <ns>,
//                                    memcpy <bytes>, memset <bytes>, host,
//                                    event_record <event>, wait_event
//                                    <event>, empty, graph <child>, mem_alloc
//                                    <id> <device> <bytes>, mem_free <id>
//   gedge <graph> <from> <to>...     AddDependencies
//   ginst <exec> <graph> <flags>     Instantiate; gxdestroy <exec>
//   gupload <exec> <stream>, glaunch <exec> <stream>
//   gupdate <exec> <graph>           an ExecUpdate that succeeded
//   gtrim <device>, greset <device> used|reserved
//                                    graph memory trimmed; a watermark reset
//   xrecord <event> <stream>, xwait <stream> <event>
//                                    a record or wait with the external flag
//                                    (in a capture, an event node)
//
// What a converted PyTorch snapshot adds, as comments older readers skip:
//
//   # torch_segment <address> <size> <stream> small|large [expandable]
//                                    a segment PyTorch held when the trace
//                                    began (before the first op)
//   alloc ... # torch_block <address> <size>
//                                    where PyTorch placed that allocation
//                                    (the block's size, rounded or unsplit)
//   # segment_alloc|segment_free|segment_map|segment_unmap <address> <size> <stream>
//                                    PyTorch's own segment history, where it
//                                    happened: before the op that caused it
//
// Header keys a recording writes: executor, device_count, device_capacity,
// backing, api_call_ns, copy_bytes_per_us.
//
// Numbers are unsigned decimal. `#` starts a comment anywhere on a line.
// Stream 0 is the legacy default stream; every other stream and every event
// is created on first use. An id names one allocation from its alloc to its
// free and may be used again after that.
//
// RMM's replay log (rmm::mr::logging_resource_adaptor) is a CSV with the
// header `Thread,Time,Action,Pointer,Size,Stream`; actions are `allocate` and
// `free` (`deallocate` is accepted too), pointers and streams hex or decimal.
// Frees are matched to the allocation live at their pointer. Stream 0 and
// cudaStreamLegacy (1) are the legacy stream. Time stamps ("HH:MM:SS.ffffff"
// or seconds) become `advance` ops where time moves forward.
//
// Malformed input is an error naming the file and line, never a crash: the
// parser checks every id (no free of an unknown or freed id, no alloc of a
// live one), so a parsed Trace always replays without bookkeeping errors.
#ifndef STREAMPOOL_SRC_REPLAY_TRACE_H_
#define STREAMPOOL_SRC_REPLAY_TRACE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/trace/ops.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"

namespace streampool::replay {

// Bounds that keep a hostile trace from exhausting memory rather than from
// describing a real workload: the simulator's clocks are O(streams) per
// stream and per event, and a line longer than any real op is a wrong file.
inline constexpr size_t kMaxLineLength = 4096;
inline constexpr size_t kMaxStreams = 1024;
inline constexpr size_t kMaxEvents = 65536;
inline constexpr size_t kMaxPools = 4096;
// Virtual time is a uint64 in ns; the sum of every advance and kernel
// duration bounds it, so a trace is refused when that sum passes 2^62.
inline constexpr uint64_t kMaxTotalTimeNs = uint64_t{1} << 62;

enum class TraceFormat { kStreampoolV1, kRmmCsv };
const char* TraceFormatName(TraceFormat format);

// The ops of src/trace/ops.h, the recorder's own.
namespace ops = internal::trace;

// An op of a parsed trace and the line it came from. Its numbers are dense
// (ops.h): a stream or event is its index into Trace::stream_ids or
// event_ids (0 = the legacy stream), a pool its index into Trace::pools
// (ops::kNoPool on an alloc that names none: the replay's own pool), and an
// allocation's id its slot, its ordinal among the trace's allocs and
// mallocs (so a replay keeps pointers in a vector indexed by slot).
struct TraceOp {
  uint32_t line = 0;  // 1-based line in the source file
  ops::Op op;
  // ReplayDecision::pool of an allocation from the replay's own pool.
  static constexpr uint32_t kNoPool = UINT32_MAX;
};

// A `pool` line: a pool the replay creates where the line stands (its
// `pool` the number the file gives it).
using TracePool = ops::PoolCreate;

// What an alloc or a malloc makes live: its slot, size and stream (a
// malloc's: 0); nullopt for other ops.
struct Allocation {
  uint64_t slot = 0;
  uint64_t size = 0;
  uint32_t stream = 0;
};
std::optional<Allocation> AllocationOf(const ops::Op& op);
// The slot a free or a release ends; nullopt for other ops.
std::optional<uint64_t> FreedSlot(const ops::Op& op);

// A segment an allocator took or gave back (or an expandable segment's
// mapping changing): from a converted snapshot's history, or a replay
// model's. `line` is the trace line of the op that caused it.
struct SegmentEvent {
  enum class Kind : uint8_t { kAlloc, kFree, kMap, kUnmap };
  Kind kind = Kind::kAlloc;
  uint32_t line = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint32_t stream = 0;  // dense stream index
};
// "segment_alloc", "segment_free", "segment_map", "segment_unmap".
const char* SegmentEventName(SegmentEvent::Kind kind);

// A segment live when a trace starts, and an allocation placed in one.
struct InitialSegment {
  uint64_t address = 0;
  uint64_t size = 0;
  uint32_t stream = 0;
  bool small = false;
  bool expandable = false;
};
struct InitialBlock {
  uint64_t slot = 0;  // the trace allocation living there
  uint64_t address = 0;
  uint64_t size = 0;  // the block's size (rounded, or larger when unsplit)
};

// What the recorder wrote after an alloc: the live run's decision.
using RecordedDecision = ops::Decision;

struct Trace {
  std::string name;  // the file, as given; errors and reports use it
  TraceFormat format = TraceFormat::kStreampoolV1;
  std::vector<TraceOp> ops;
  // Header comments before the first op, `# <key> <rest of line>`, keyed by
  // the first word. The first occurrence of a key wins.
  std::map<std::string, std::string, std::less<>> header;
  // The trace's own names: stream_ids[i] is the number that dense stream i
  // had in the file (stream_ids[0] == 0, the legacy stream); likewise events.
  std::vector<uint64_t> stream_ids{0};
  std::vector<uint64_t> event_ids;
  // The trace's pools, in the order their `pool` lines come (empty: the
  // trace names none, and a replay makes one pool of its settings).
  std::vector<TracePool> pools;
  // From a converted PyTorch snapshot (else empty): the segments live at
  // the start, where allocations sat in them, and PyTorch's segment events.
  std::vector<InitialSegment> initial_segments;
  std::vector<InitialBlock> initial_blocks;
  std::vector<SegmentEvent> segment_history;
  // Where allocations were made, by slot, from `# frames <frame> | <frame>
  // ...` comments after their alloc lines (a converted snapshot's top
  // frames, innermost first); reports show them beside the blocks they name.
  std::map<uint64_t, std::string> frames;

  uint64_t alloc_count = 0;  // == slots
  uint64_t free_count = 0;
  // Peak and final sum of the sizes of live allocations, as the trace asked
  // for them (no rounding): the workload's own footprint.
  uint64_t peak_live_bytes = 0;
  uint64_t live_at_end_bytes = 0;
  uint64_t total_time_ns = 0;  // sum of advances and kernel durations

  // A header value that starts with an unsigned decimal number
  // ("# torch_peak_reserved_bytes 7235174400 (method: ...)"), if any.
  std::optional<uint64_t> HeaderNumber(absl::string_view key) const;
};

// Parses either format (RMM when the first non-empty line is the CSV header).
// `name` prefixes every error: "<name>:<line>: <what>".
absl::StatusOr<Trace> ParseTrace(absl::string_view text, absl::string_view name);
absl::StatusOr<Trace> ParseStreampoolTrace(absl::string_view text, absl::string_view name);
absl::StatusOr<Trace> ParseRmmCsv(absl::string_view text, absl::string_view name);

// Reads and parses a file.
absl::StatusOr<Trace> LoadTrace(const std::string& path);

// Unsigned decimal without sign, spaces or overflow; nullopt otherwise.
using ops::ParseUint;

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_TRACE_H_
