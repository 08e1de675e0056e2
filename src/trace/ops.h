// The ops of a streampool trace v1 (traces/README.md; src/replay/trace.h
// lists the lines): one struct per line kind, the variant `Op` of them, and
// the one printer and the one parser of a line. The recorder builds ops and
// prints them; the replay's trace reader parses lines into them; the
// reference model's tests run a parsed trace's (tests/model/from_trace.h).
//
// An op's numbers are the trace's own: in a file, the ids its lines give
// (streams, events, pools, allocations); in a parsed replay::Trace, dense
// indices (Trace::stream_ids and event_ids map them back, `pool` indexes
// Trace::pools, an allocation's `id` is its slot). Either way the printer
// writes a valid line.
//
// An op says with SP_TRACE_FIELDS which of its fields are plain numbers
// (the trace's names of streams, events and pools among them); the printer
// and the parser treat an op of only those alike, and a reader that makes
// the names dense finds them there. An op of another shape (an optional
// field, a comment that carries something, named settings) is printed and
// parsed by functions of its own in ops.cc.
#ifndef STREAMPOOL_SRC_TRACE_OPS_H_
#define STREAMPOOL_SRC_TRACE_OPS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "streampool/graph.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"

namespace streampool::internal::trace {

// An alloc line that names no pool (a replay serves it from a pool of its
// own settings).
inline constexpr uint64_t kNoPool = UINT64_MAX;

// The decision a recording wrote after an alloc, `# <rule> <chunk>+<offset>`
// or `# failed`.
struct Decision {
  bool present = false;
  bool failed = false;
  ReuseRule rule = ReuseRule::kFresh;
  uint64_t chunk = 0;
  uint64_t offset = 0;
  // `# graph`: the stream was capturing, and the id names the allocation
  // node's address (graph memory) rather than a pool block.
  bool graph = false;
};

// An `endcapture` line whose capture handed out no graph (it was begun into
// a graph of the program's, or it failed).
inline constexpr uint64_t kNoGraph = UINT64_MAX;
// The most nodes (or edges) one line lists; the recorder writes a node's
// further dependencies as `gedge` lines.
inline constexpr size_t kMaxListed = 32;

// The line's name, how its fields read in an error message, and its plain
// number fields. `kFields` names each of them in errors ("stream 'x' is
// negative"); a field named "device" must be below 64.
#define SP_TRACE_FIELDS(name, usage, ...)            \
  static constexpr absl::string_view kName = name;   \
  static constexpr absl::string_view kUsage = usage; \
  auto Tie() { return std::tie(__VA_ARGS__); }       \
  auto Tie() const { return std::tie(__VA_ARGS__); }

// MallocAsync(size) on stream, from pool (kNoPool: none named).
struct Alloc {
  static constexpr absl::string_view kName = "alloc";
  static constexpr absl::string_view kUsage = "<id> <size> <stream> [<pool>]";
  uint64_t id = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t pool = kNoPool;
  Decision decision;
};
// FreeAsync of allocation id (from alloc or malloc) on stream.
struct Free {
  static constexpr std::array kFields{"id", "stream"};
  SP_TRACE_FIELDS("free", "<id> <stream>", id, stream)
  uint64_t id = 0;
  uint64_t stream = 0;
};
// A kernel that touches nothing.
struct Kernel {
  static constexpr std::array kFields{"stream", "duration"};
  SP_TRACE_FIELDS("kernel", "<stream> <duration_ns>", stream, ns)
  uint64_t stream = 0;
  uint64_t ns = 0;
};
struct Record {
  static constexpr std::array kFields{"event", "stream"};
  SP_TRACE_FIELDS("record", "<event> <stream>", event, stream)
  uint64_t event = 0;
  uint64_t stream = 0;
};
// StreamWaitEvent.
struct Wait {
  static constexpr std::array kFields{"stream", "event"};
  SP_TRACE_FIELDS("wait", "<stream> <event>", stream, event)
  uint64_t stream = 0;
  uint64_t event = 0;
};
struct Sync {
  static constexpr std::array kFields{"stream"};
  SP_TRACE_FIELDS("sync", "<stream>", stream)
  uint64_t stream = 0;
};
struct EventSync {
  static constexpr std::array kFields{"event"};
  SP_TRACE_FIELDS("esync", "<event>", event)
  uint64_t event = 0;
};
// `dsync` for device 0, `dsync <device>` for another.
struct DeviceSync {
  static constexpr absl::string_view kName = "dsync";
  static constexpr absl::string_view kUsage = "[<device>]";
  uint64_t device = 0;
};
// Host virtual time moves on.
struct Advance {
  static constexpr std::array kFields{"advance"};
  SP_TRACE_FIELDS("advance", "<ns>", ns)
  uint64_t ns = 0;
};
// Flags 0 blocking, 1 non-blocking, 2 the device's legacy stream.
struct StreamCreate {
  static constexpr std::array kFields{"stream", "device", "flags"};
  SP_TRACE_FIELDS("stream", "<stream> <device> <flags>", stream, device, flags)
  uint64_t stream = 0;
  uint64_t device = 0;
  uint64_t flags = 0;
};
struct StreamDestroy {
  static constexpr std::array kFields{"stream"};
  SP_TRACE_FIELDS("sdestroy", "<stream>", stream)
  uint64_t stream = 0;
};
struct EventCreate {
  static constexpr std::array kFields{"event", "flags"};
  SP_TRACE_FIELDS("event", "<event> <flags>", event, flags)
  uint64_t event = 0;
  uint64_t flags = 0;
};
struct EventDestroy {
  static constexpr std::array kFields{"event"};
  SP_TRACE_FIELDS("edestroy", "<event>", event)
  uint64_t event = 0;
};
// A pool and its settings. A line of the pool and device alone (`bare`:
// made while a recording opened, its settings unread) means the settings a
// pool is made with; `imported` (an IPC import) allocates nothing.
struct PoolCreate {
  static constexpr absl::string_view kName = "pool";
  static constexpr absl::string_view kUsage = "<pool> <device> <key>=<value>...";
  enum class Line : uint8_t { kSettings, kBare, kImported };
  Line line = Line::kSettings;
  uint64_t pool = 0;
  int device = 0;
  AllocationType type = AllocationType::kDevice;
  bool reuse_event = true;
  bool reuse_opportunistic = true;
  bool reuse_internal = true;
  uint64_t release_threshold = 0;
  PoolGrowth growth = PoolGrowth::kDefault;
  bool front_cache = true;
  // Absent from a line written before waiting before growth existed: that
  // recording decided in CUDA's order.
  bool wait_before_growth = false;
  uint64_t soft_limit = UINT64_MAX;
  bool is_default = false;
  uint64_t max_size = 0;
  PagePolicy page_policy = PagePolicy::kHugeFirst;
  bool acl_rounding = false;
  bool acl_align32 = false;
  unsigned handle_types = 0;
  // upstream=custom: the program gave the pool an upstream of its own, whose
  // limits and placement a replay does not have (it uses the runtime's).
  bool custom_upstream = false;
};
struct PoolDestroy {
  static constexpr std::array kFields{"pool"};
  SP_TRACE_FIELDS("pdestroy", "<pool>", pool)
  uint64_t pool = 0;
};
// Malloc (the upstream alone); its id is freed by `release` (or `free`).
struct Malloc {
  static constexpr std::array kFields{"id", "size", "device"};
  SP_TRACE_FIELDS("malloc", "<id> <size> <device>", id, size, device)
  uint64_t id = 0;
  uint64_t size = 0;
  uint64_t device = 0;
};
struct Release {
  static constexpr std::array kFields{"id"};
  SP_TRACE_FIELDS("release", "<id>", id)
  uint64_t id = 0;
};
// A copy or fill, timed by the header's copy_bytes_per_us.
struct Copy {
  static constexpr std::array kFields{"stream", "bytes"};
  SP_TRACE_FIELDS("copy", "<stream> <bytes>", stream, bytes)
  uint64_t stream = 0;
  uint64_t bytes = 0;
};
// A host function.
struct Host {
  static constexpr std::array kFields{"stream"};
  SP_TRACE_FIELDS("host", "<stream>", stream)
  uint64_t stream = 0;
};
// StreamQuery and EventQuery; a query that found work left says so in a
// comment (`# not_ready`), which a replay does not need.
struct Query {
  static constexpr std::array kFields{"stream"};
  SP_TRACE_FIELDS("query", "<stream>", stream)
  uint64_t stream = 0;
  bool complete = true;
};
struct EventQuery {
  static constexpr std::array kFields{"event"};
  SP_TRACE_FIELDS("equery", "<event>", event)
  uint64_t event = 0;
  bool complete = true;
};
// A pool setting changed: one of the attributes AttrName names.
struct Attr {
  static constexpr std::array kFields{"pool"};
  SP_TRACE_FIELDS("attr", "<pool> <name> <value>", pool)
  uint64_t pool = 0;
  PoolAttr attr = PoolAttr::kReleaseThreshold;
  uint64_t value = 0;
};
// TrimTo.
struct Trim {
  static constexpr std::array kFields{"pool", "bytes"};
  SP_TRACE_FIELDS("trim", "<pool> <bytes>", pool, bytes)
  uint64_t pool = 0;
  uint64_t bytes = 0;
};
// RecordUse (record_stream): the live allocation is used on stream too.
struct Use {
  static constexpr std::array kFields{"id", "stream"};
  SP_TRACE_FIELDS("use", "<id> <stream>", id, stream)
  uint64_t id = 0;
  uint64_t stream = 0;
};

// Graphs (docs/graphs.md). Graphs and executable graphs have ids of their
// own; a node is named by its index in its graph (the order its nodes were
// added, captured ones included), which a replay's graph reproduces. Ops
// enqueued on a capturing stream are the lines above, on that stream.

// BeginCapture; mode 0 global, 1 thread-local, 2 relaxed.
struct CaptureBegin {
  static constexpr std::array kFields{"stream", "mode"};
  SP_TRACE_FIELDS("capture", "<stream> <mode>", stream, mode)
  uint64_t stream = 0;
  uint64_t mode = 0;
};
// BeginCaptureToGraph: into `graph`, after its nodes `deps`.
struct CaptureToGraph {
  static constexpr absl::string_view kName = "capture_to";
  static constexpr absl::string_view kUsage = "<stream> <graph> <mode> <node>...";
  uint64_t stream = 0;
  uint64_t graph = 0;
  uint64_t mode = 0;
  std::vector<uint64_t> deps;
};
// EndCapture; `graph` the captured graph's new id, kNoGraph when it handed
// out none.
struct CaptureEnd {
  static constexpr absl::string_view kName = "endcapture";
  static constexpr absl::string_view kUsage = "<stream> [<graph>]";
  uint64_t stream = 0;
  uint64_t graph = kNoGraph;
};
struct GraphCreate {
  static constexpr std::array kFields{"graph"};
  SP_TRACE_FIELDS("gcreate", "<graph>", graph)
  uint64_t graph = 0;
};
struct GraphDestroy {
  static constexpr std::array kFields{"graph"};
  SP_TRACE_FIELDS("gdestroy", "<graph>", graph)
  uint64_t graph = 0;
};
struct GraphClone {
  static constexpr std::array kFields{"graph", "from"};
  SP_TRACE_FIELDS("gclone", "<graph> <from>", graph, from)
  uint64_t graph = 0;
  uint64_t from = 0;
};
// A node added by hand: `gnode <graph> <node> <kind> <params> <dep>...`,
// the params by kind: kernel <ns>, memcpy <bytes>, memset <bytes>, host,
// record <event>, wait <event>, empty, graph <child graph>, alloc <id>
// <device> <bytes> (the id names the node's address, as a captured alloc's
// does), free <id>. A replay runs no host function and copies nothing: a
// copy or fill lasts what the trace's bandwidth says, as a `copy` does.
struct GraphNode {
  static constexpr absl::string_view kName = "gnode";
  static constexpr absl::string_view kUsage = "<graph> <node> <kind> <params>... <dep>...";
  uint64_t graph = 0;
  uint64_t node = 0;
  GraphNodeType kind = GraphNodeType::kEmpty;
  // kernel: ns; memcpy, memset, alloc: bytes.
  uint64_t value = 0;
  // record, wait: the event; graph: the child; alloc, free: the id.
  uint64_t ref = 0;
  uint64_t device = 0;  // alloc
  std::vector<uint64_t> deps;
};
// AddDependencies: each (from, to) pair, `to` after `from`.
struct GraphEdges {
  static constexpr absl::string_view kName = "gedge";
  static constexpr absl::string_view kUsage = "<graph> <from> <to> [<from> <to>]...";
  uint64_t graph = 0;
  std::vector<std::pair<uint64_t, uint64_t>> edges;
};
struct GraphInstantiate {
  static constexpr std::array kFields{"exec", "graph", "flags"};
  SP_TRACE_FIELDS("ginst", "<exec> <graph> <flags>", exec, graph, flags)
  uint64_t exec = 0;
  uint64_t graph = 0;
  uint64_t flags = 0;
};
struct GraphUpload {
  static constexpr std::array kFields{"exec", "stream"};
  SP_TRACE_FIELDS("gupload", "<exec> <stream>", exec, stream)
  uint64_t exec = 0;
  uint64_t stream = 0;
};
struct GraphLaunch {
  static constexpr std::array kFields{"exec", "stream"};
  SP_TRACE_FIELDS("glaunch", "<exec> <stream>", exec, stream)
  uint64_t exec = 0;
  uint64_t stream = 0;
};
struct GraphExecDestroy {
  static constexpr std::array kFields{"exec"};
  SP_TRACE_FIELDS("gxdestroy", "<exec>", exec)
  uint64_t exec = 0;
};
// ExecUpdate that succeeded (a refused one changed nothing).
struct GraphExecUpdate {
  static constexpr std::array kFields{"exec", "graph"};
  SP_TRACE_FIELDS("gupdate", "<exec> <graph>", exec, graph)
  uint64_t exec = 0;
  uint64_t graph = 0;
};
// The device's graph memory trimmed.
struct GraphMemTrim {
  static constexpr std::array kFields{"device"};
  SP_TRACE_FIELDS("gtrim", "<device>", device)
  uint64_t device = 0;
};
// A high watermark of the device's graph memory reset.
struct GraphMemReset {
  static constexpr absl::string_view kName = "greset";
  static constexpr absl::string_view kUsage = "<device> used|reserved";
  uint64_t device = 0;
  bool used = true;
};

// RecordEventExternal and StreamWaitEventExternal: record and wait, which a
// capture makes event record and wait nodes of.
struct RecordExternal {
  static constexpr std::array kFields{"event", "stream"};
  SP_TRACE_FIELDS("xrecord", "<event> <stream>", event, stream)
  uint64_t event = 0;
  uint64_t stream = 0;
};
struct WaitExternal {
  static constexpr std::array kFields{"stream", "event"};
  SP_TRACE_FIELDS("xwait", "<stream> <event>", stream, event)
  uint64_t stream = 0;
  uint64_t event = 0;
};

#undef SP_TRACE_FIELDS

using Op =
    std::variant<Alloc, Free, Kernel, Record, Wait, Sync, EventSync, DeviceSync, Advance,
                 StreamCreate, StreamDestroy, EventCreate, EventDestroy, PoolCreate, PoolDestroy,
                 Malloc, Release, Copy, Host, Query, EventQuery, Attr, Trim, Use, CaptureBegin,
                 CaptureToGraph, CaptureEnd, GraphCreate, GraphDestroy, GraphClone, GraphNode,
                 GraphEdges, GraphInstantiate, GraphUpload, GraphLaunch, GraphExecDestroy,
                 GraphExecUpdate, GraphMemTrim, GraphMemReset, RecordExternal, WaitExternal>;

// Whether the op is one of the graph ops above.
bool IsGraphOp(const Op& op);

// The name an `attr` line gives a setting a replay must reproduce
// (src/pool/pool_attrs.def's trace name); null for the others (watermarks
// and read-only values decide nothing).
const char* AttrName(PoolAttr attr);

// The most bytes the printer writes for one op.
inline constexpr size_t kMaxPrintedLine = 1024;
// Prints the op's line, with its '\n', at out, which has room for
// kMaxPrintedLine bytes; returns the end of what it wrote.
char* PrintOp(const Op& op, char* out);
// Appends the op's line, with its '\n', to *out.
void AppendOp(const Op& op, std::string* out);
std::string ToString(const Op& op);

// The op of a line split into fields (Fields), `comment` what followed its
// '#' (for an alloc's decision and a query's answer). An error says what is
// wrong with the line, without its file and number ("free takes 2 fields
// (<id> <stream>), got 1"; "stream '-1' is negative").
absl::StatusOr<Op> ParseOp(absl::Span<const absl::string_view> fields, absl::string_view comment);

// ------------------------------------------------ the words of a line

// The blank-separated words of text (blank: space or tab).
std::vector<absl::string_view> Fields(absl::string_view text);
// Unsigned decimal without sign, spaces or overflow; nullopt otherwise.
std::optional<uint64_t> ParseUint(absl::string_view text);
// A number a line gives as `what`, or an InvalidArgument error that names it
// and says why the text is not one (sign, range, junk).
absl::StatusOr<uint64_t> ParseNumber(absl::string_view what, absl::string_view text);
// A field quoted in an error message: cut at 40 bytes, with bytes that are
// not printable ASCII escaped, so that a binary file given by mistake prints
// no control sequences to the terminal.
std::string Quote(absl::string_view text);

}  // namespace streampool::internal::trace

#endif  // STREAMPOOL_SRC_TRACE_OPS_H_
