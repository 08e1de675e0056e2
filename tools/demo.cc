// streampool-demo: what the stream-ordered pool decides, and when work runs,
// shown on small programs in virtual time and on real PyTorch traces
// (usage: kUsage below, or --help).
//
//   (a) a producer/consumer program on the default pool: every op of every
//       stream with its virtual schedule, an ASCII Gantt chart, and the rule
//       that served each allocation; also written as a trace-event timeline
//       (Perfetto, chrome://tracing);
//   (b) one three-stream program under each combination of reuse rules that
//       matters, side by side: allocations by rule, peak reserved bytes,
//       waits the pool inserted, makespan and failed allocations;
//   (c) the pool variants' size rules and page kinds;
//   (d) the bundled PyTorch traces under chunked and default (expandable)
//       growth, against PyTorch's own peak reserved; also an SVG chart;
//   (e) the policy lab's workloads at the smallest device each fits; an SVG.
//
// Only the public C++ API and the replay library are used. All but (c) runs on the simulator
// with address-only backing, so the output is the same on every run and
// machine: pointers are printed as (chunk, offset), never as raw addresses.
//
// Exit status: 0 on success, 1 if an API call fails or a file cannot be
// written, 2 on a bad command line. The out-of-memory results that part (b)
// provokes on purpose are outcomes it reports, not failures.
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/pool/names.h"
#include "src/replay/policy_report.h"
#include "src/replay/replay.h"
#include "src/replay/report.h"
#include "src/replay/timeline.h"
#include "src/replay/trace.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "tools/command_line.h"

ABSL_FLAG(std::string, traces_dir, STREAMPOOL_TRACES_DIR,
          "the PyTorch traces part (d) replays: every *.trace file of this directory");
ABSL_FLAG(std::string, output_dir, "streampool-demo",
          "where the demo writes timeline.json (part (a) as a Chrome trace-event timeline), "
          "traces.svg (part (d)'s bytes over time) and policy_lab.svg (part (e)); created if "
          "missing");

namespace {

constexpr char kUsage[] =
    "shows what the stream-ordered pool decides and when work\n"
    "runs: (a) one producer/consumer program's schedule and the rule behind each allocation,\n"
    "(b) one program under each combination of reuse rules, (c) the pool variants' size\n"
    "rules and page kinds, (d) real PyTorch traces replayed against PyTorch's own figures,\n"
    "(e) multi-stream workloads at the smallest device each fits, per reuse policy set.\n"
    "\n"
    "usage: streampool-demo [--output_dir=DIR] [--traces_dir=DIR]\n"
    "\n"
    "Exit status: 0 on success, 1 if a call fails or a file cannot be written, 2 on a bad\n"
    "command line.";

const streampool::tools::CommandLine kCommandLine = {
    .program = "streampool-demo",
    .synopsis = "streampool-demo [--output_dir=DIR] [--traces_dir=DIR]",
    .usage = kUsage,
    .source_file = "tools/demo.cc",
    .aliases = {},
};

using streampool::Access;
using streampool::AllocInfo;
using streampool::EventId;
using streampool::PoolId;
using streampool::PoolStats;
using streampool::ReuseRule;
using streampool::Runtime;
using streampool::StreamId;
namespace internal = streampool::internal;
namespace rp = streampool::replay;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kUs = 1000;  // virtual ns per µs

// ------------------------------------------------------------ error handling

[[noreturn]] void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "streampool-demo: %s failed: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

void Must(const absl::Status& status, const char* what) {
  if (!status.ok()) Fail(what, status);
}

template <typename T>
T Must(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Fail(what, value.status());
  return *std::move(value);
}

// Names the call in the error message, so a failure says which one broke.
#define MUST(expr) Must((expr), #expr)

std::unique_ptr<Runtime> NewRuntime() {
  streampool::RuntimeConfig config;
  // Nothing is touched, so address space is all the demo needs; it also keeps
  // the demo independent of the machine's memory.
  config.backing = streampool::Backing::kAddressOnly;
  return MUST(Runtime::Create(config));
}

double Us(uint64_t ns) { return static_cast<double>(ns) / kUs; }

// Prints `text` as lines of at most 88 columns, each indented by two spaces.
void PrintWrapped(const std::string& text) {
  constexpr size_t kWidth = 86;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > kWidth) {
      std::printf("  %s\n", line.c_str());
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) std::printf("  %s\n", line.c_str());
}

// Writes `text` to `path`; false, after saying so, if it cannot.
bool WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "streampool-demo: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

// ------------------------------------------------- part (a): one timeline

// Names pool memory as "c<k>+<offset>": chunk k is the k-th chunk the pool
// mapped. Raw addresses differ from run to run; these do not. A growth hands
// out the start of the new chunk, so the chunk's base is the pointer returned
// by the allocation that made upstream_maps go up.
class ChunkNamer {
 public:
  void Observe(const AllocInfo& info, const PoolStats& before, const PoolStats& after) {
    if (after.upstream_maps == before.upstream_maps) return;
    chunks_.push_back(Chunk{reinterpret_cast<uintptr_t>(info.ptr),
                            after.upstream_bytes_mapped - before.upstream_bytes_mapped});
  }
  std::string Name(const void* ptr) const {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    // Latest first: a released chunk's range may be mapped again later.
    for (size_t k = chunks_.size(); k-- > 0;) {
      const Chunk& c = chunks_[k];
      if (addr >= c.base && addr < c.base + c.size) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "c%zu+%" PRIu64 "MiB", k, (addr - c.base) / kMiB);
        return buf;
      }
    }
    return "?";
  }

 private:
  struct Chunk {
    uintptr_t base;
    uint64_t size;
  };
  std::vector<Chunk> chunks_;
};

// The Gantt letter of a zero-length op.
char MarkerOf(streampool::OpKind kind) {
  switch (kind) {
    case streampool::OpKind::kAllocMarker:
      return 'A';
    case streampool::OpKind::kFreeMarker:
      return 'F';
    case streampool::OpKind::kRecord:
      return 'R';
    case streampool::OpKind::kWait:
      return 'W';
    case streampool::OpKind::kInternalWait:
      return 'I';
    case streampool::OpKind::kHostFunc:
      return 'H';
    default:
      return '=';
  }
}

// One row per stream over [0, last end] in 60 columns: kernels as '=',
// zero-length ops as a letter at their time (shifted right when several fall
// in one column), idle as '.'.
void PrintGantt(const std::vector<streampool::TimelineEntry>& timeline,
                const std::vector<uint32_t>& order, const std::map<uint32_t, std::string>& names) {
  constexpr int kWidth = 60;
  uint64_t horizon = 1;
  for (const auto& e : timeline) horizon = std::max(horizon, e.end_ns);
  auto column = [&](uint64_t t) {
    return static_cast<int>(std::min<uint64_t>(kWidth - 1, t * kWidth / horizon));
  };
  for (uint32_t s : order) {
    std::string row(kWidth, '.');
    for (const auto& e : timeline) {
      if (e.stream_index != s || e.end_ns == e.start_ns) continue;
      const int from = column(e.start_ns);
      const int to = std::max(from + 1, column(e.end_ns));
      for (int c = from; c < to && c < kWidth; ++c) row[c] = '=';
    }
    int last_marker = -1;
    for (const auto& e : timeline) {  // already in enqueue order, hence in time order
      if (e.stream_index != s || e.end_ns != e.start_ns) continue;
      const int c = std::max(column(e.start_ns), last_marker + 1);
      if (c >= kWidth) break;
      row[c] = MarkerOf(e.kind);
      last_marker = c;
    }
    std::printf("  %-9s|%s|\n", names.at(s).c_str(), row.c_str());
  }
  std::printf("  %-9s0%*s\n", "", kWidth, (std::to_string(horizon / kUs) + " us").c_str());
  std::printf("  A alloc  F free  R record  W event wait  I inserted wait  = kernel  . idle\n");
}

// Also writes the scenario as Chrome trace-event JSON to `timeline_path`
// (Perfetto, chrome://tracing); returns false if it cannot.
bool ScenarioTimeline(const std::filesystem::path& timeline_path) {
  std::printf("== (a) Scenario timeline ==\n");
  std::printf(
      "producer: alloc 8 MiB, 40 us kernel, free, record E. consumer: wait E, alloc 6 MiB,\n"
      "30 us kernel, free. host +5 us. legacy stream: alloc 1 MiB, 10 us kernel, free.\n"
      "device sync. producer: alloc 8 MiB, 20 us kernel, free, alloc 4 MiB, 10 us kernel,\n"
      "free; stream sync. The pool keeps its memory across syncs (threshold = max).\n\n");

  std::unique_ptr<Runtime> rt = NewRuntime();
  const PoolId pool = MUST(rt->DefaultPool(0));
  MUST(rt->SetPoolAttribute(pool, streampool::PoolAttr::kReleaseThreshold, UINT64_MAX));
  const StreamId legacy = MUST(rt->LegacyStream(0));
  const StreamId producer = MUST(rt->CreateStream(0));
  const StreamId consumer = MUST(rt->CreateStream(0));
  const EventId e = MUST(rt->CreateEvent());
  rt->RecordTimeline(true);

  ChunkNamer namer;
  struct Decision {
    const char* stream;
    uint64_t size;
    AllocInfo info;
  };
  std::vector<Decision> decisions;
  rp::TimelineRecorder recorder;
  auto count_bytes = [&](const PoolStats& stats) {
    recorder.PoolBytes(pool.value, "default pool", rt->HostNow(), stats.reserved_bytes,
                       stats.used_bytes);
  };
  count_bytes(MUST(rt->GetPoolStats(pool)));
  auto alloc = [&](uint64_t size, StreamId s, const char* name) {
    const PoolStats before = MUST(rt->GetPoolStats(pool));
    const AllocInfo info = MUST(rt->MallocAsync(size, s));
    const PoolStats after = MUST(rt->GetPoolStats(pool));
    namer.Observe(info, before, after);
    decisions.push_back(Decision{name, size, info});
    recorder.Allocated(s, info.ptr, size, info.rule, rt->HostNow());
    count_bytes(after);
    return info.ptr;
  };
  auto free_async = [&](void* ptr, StreamId s) {
    MUST(rt->FreeAsync(ptr, s));
    recorder.Freed(s, ptr, rt->HostNow());
    count_bytes(MUST(rt->GetPoolStats(pool)));
  };
  auto kernel = [&](StreamId s, uint64_t us, void* p, uint64_t size) {
    const Access access{p, size, /*write=*/true};
    MUST(rt->LaunchKernel(s, us * kUs, {&access, 1}));
  };

  void* p = alloc(8 * kMiB, producer, "producer");
  kernel(producer, 40, p, 8 * kMiB);
  free_async(p, producer);
  MUST(rt->RecordEvent(e, producer));

  MUST(rt->StreamWaitEvent(consumer, e));
  void* c = alloc(6 * kMiB, consumer, "consumer");
  kernel(consumer, 30, c, 6 * kMiB);
  free_async(c, consumer);

  MUST(rt->HostAdvance(5 * kUs));
  void* l = alloc(1 * kMiB, legacy, "legacy");
  kernel(legacy, 10, l, 1 * kMiB);
  free_async(l, legacy);
  MUST(rt->DeviceSynchronize(0));

  void* p2 = alloc(8 * kMiB, producer, "producer");
  kernel(producer, 20, p2, 8 * kMiB);
  free_async(p2, producer);
  void* p3 = alloc(4 * kMiB, producer, "producer");
  kernel(producer, 10, p3, 4 * kMiB);
  free_async(p3, producer);
  MUST(rt->StreamSynchronize(producer));

  const std::vector<streampool::TimelineEntry> timeline = rt->Timeline();
  // Streams in the order the program first used them.
  std::map<uint32_t, std::string> stream_names;
  std::vector<uint32_t> order;
  for (const auto& entry : timeline) {
    std::string name = entry.stream.value == producer.value   ? "producer"
                       : entry.stream.value == consumer.value ? "consumer"
                       : entry.stream.value == legacy.value   ? "legacy"
                                                              : "?";
    if (stream_names.emplace(entry.stream_index, name).second) order.push_back(entry.stream_index);
  }
  std::printf("  %-9s %8s  %-14s %11s %9s %9s\n", "stream", "position", "op", "enqueued us",
              "start us", "end us");
  for (uint32_t s : order) {
    for (const auto& entry : timeline) {
      if (entry.stream_index != s) continue;
      std::printf("  %-9s %8" PRIu64 "  %-14s %11.1f %9.1f %9.1f\n", stream_names[s].c_str(),
                  entry.position, internal::EnumName(entry.kind), Us(entry.enqueued_ns),
                  Us(entry.start_ns), Us(entry.end_ns));
    }
  }
  std::printf("\n");
  PrintGantt(timeline, order, stream_names);

  std::printf("\n  allocation decisions (chunk+offset, rule):\n");
  for (const Decision& d : decisions) {
    std::printf("    %-9s %2" PRIu64 " MiB -> %-9s %s\n", d.stream, d.size / kMiB,
                namer.Name(d.info.ptr).c_str(), internal::EnumName(d.info.rule));
  }
  MUST(rt->CheckPoolInvariants(pool));

  rp::TimelineProcess process =
      recorder.Finish("streampool-demo (a) scenario", timeline, rt->HostNow());
  process.stream_labels = {
      {producer.value, "producer"}, {consumer.value, "consumer"}, {legacy.value, "legacy stream"}};
  return WriteFile(timeline_path, rp::FormatChromeTrace({process}));
}

// ------------------------------------------- part (b): policies side by side

struct Policy {
  const char* name;
  bool follow_events;
  bool opportunistic;
  bool internal_deps;
};

struct Outcome {
  PoolStats stats;
  uint64_t makespan_ns = 0;  // end of the last op, virtual
};

constexpr uint64_t kPolicyPoolMax = 10 * kMiB;

// The program of part (b). Two producers and a consumer share one pool whose
// maxSize (10 MiB) is below what the program needs without reuse (16 MiB):
//   P1 (slow): a1 = 2 MiB, a2 = 4 MiB; 30 us kernel on a1; free a1; record E1;
//              100 us kernel on a2; free a2.   (a1 is event-ordered for C but
//              not complete at host 20 us; a2 is neither)
//   P2 (fast): b = 2 MiB; 5 us kernel; free b. (complete at host 20 us, but
//              nothing orders it before C)
//   host +20 us; C waits E1; x = 2 MiB, y = 2 MiB, z = 4 MiB; 30 us kernel;
//   frees them; w = 2 MiB (its own free: same stream); 10 us kernel; free w;
//   device sync; P2: q = 4 MiB (after sync); 10 us kernel; free q; device sync.
Outcome RunPolicyScenario(const Policy& policy) {
  std::unique_ptr<Runtime> rt = NewRuntime();
  streampool::PoolProps props;
  props.max_size = kPolicyPoolMax;
  props.reuse_follow_event_dependencies = policy.follow_events;
  props.reuse_allow_opportunistic = policy.opportunistic;
  props.reuse_allow_internal_dependencies = policy.internal_deps;
  // Keep memory across syncs so that the allocation after the sync can reuse.
  props.release_threshold = UINT64_MAX;
  const PoolId pool = MUST(rt->CreatePool(props));
  const StreamId p1 = MUST(rt->CreateStream(0));
  const StreamId p2 = MUST(rt->CreateStream(0));
  const StreamId c = MUST(rt->CreateStream(0));
  const EventId e1 = MUST(rt->CreateEvent());
  // The makespan is the end of the last op.
  rt->RecordTimeline(true);

  // Returns nullptr when the pool is out of memory (an outcome the table
  // reports); any other error ends the demo.
  auto alloc = [&](uint64_t size, StreamId s) -> void* {
    absl::StatusOr<AllocInfo> info = rt->MallocFromPoolAsync(size, pool, s);
    if (absl::IsResourceExhausted(info.status())) return nullptr;
    return MUST(std::move(info)).ptr;
  };
  auto kernel = [&](StreamId s, uint64_t us, std::vector<std::pair<void*, uint64_t>> buffers) {
    std::vector<Access> accesses;
    for (const auto& [ptr, size] : buffers) {
      if (ptr != nullptr) accesses.push_back(Access{ptr, size, /*write=*/true});
    }
    MUST(rt->LaunchKernel(s, us * kUs, accesses));
  };
  auto free_async = [&](void* ptr, StreamId s) {
    if (ptr != nullptr) MUST(rt->FreeAsync(ptr, s));
  };

  void* a1 = alloc(2 * kMiB, p1);
  void* a2 = alloc(4 * kMiB, p1);
  kernel(p1, 30, {{a1, 2 * kMiB}});
  free_async(a1, p1);
  MUST(rt->RecordEvent(e1, p1));
  kernel(p1, 100, {{a2, 4 * kMiB}});
  free_async(a2, p1);

  void* b = alloc(2 * kMiB, p2);
  kernel(p2, 5, {{b, 2 * kMiB}});
  free_async(b, p2);

  MUST(rt->HostAdvance(20 * kUs));
  MUST(rt->StreamWaitEvent(c, e1));
  void* x = alloc(2 * kMiB, c);
  void* y = alloc(2 * kMiB, c);
  void* z = alloc(4 * kMiB, c);
  kernel(c, 30, {{x, 2 * kMiB}, {y, 2 * kMiB}, {z, 4 * kMiB}});
  free_async(x, c);
  free_async(y, c);
  free_async(z, c);
  void* w = alloc(2 * kMiB, c);
  kernel(c, 10, {{w, 2 * kMiB}});
  free_async(w, c);
  MUST(rt->DeviceSynchronize(0));

  void* q = alloc(4 * kMiB, p2);
  kernel(p2, 10, {{q, 4 * kMiB}});
  free_async(q, p2);
  MUST(rt->DeviceSynchronize(0));

  MUST(rt->CheckPoolInvariants(pool));
  Outcome outcome{MUST(rt->GetPoolStats(pool))};
  for (const auto& entry : rt->Timeline()) {
    outcome.makespan_ns = std::max(outcome.makespan_ns, entry.end_ns);
  }
  return outcome;
}

void PoliciesSideBySide() {
  std::printf("\n== (b) Reuse rules side by side ==\n");
  std::printf(
      "P1 (slow): 2 MiB a1 + 4 MiB a2; 30 us kernel on a1, free a1, record E1; 100 us on a2,\n"
      "free a2. P2 (fast): 2 MiB b, 5 us kernel, free. Host +20 us. C: wait E1; x, y = 2 MiB,\n"
      "z = 4 MiB; 30 us kernel; free them; 2 MiB w; 10 us; free. Sync. P2: 4 MiB q; 10 us; free.\n"
      "Pool maxSize %" PRIu64 " MiB; without reuse the program needs 16 MiB.\n\n",
      kPolicyPoolMax / kMiB);
  // Named as streampool-replay --reuse names them.
  const Policy policies[] = {
      {"none", false, false, false},
      {"event", true, false, false},
      {"opportunistic", false, true, false},
      {"internal", false, false, true},
      {"event+opportunistic", true, true, false},
      {"all (the default)", true, true, true},
  };
  // Two header rows, so that no column is wider than its longest word.
  constexpr char kRow[] = "  %-19s %6s %10s %13s %10s %5s %5s %6s %8s %8s %11s\n";
  std::printf(kRow, "reuse rules on", "same", "event", "opportunistic", "internal", "after",
              "fresh", "peak", "inserted", "makespan", "failed");
  std::printf(kRow, "", "stream", "dependency", "", "dependency", "sync", "", "MiB", "waits", "us",
              "allocations");
  for (const Policy& policy : policies) {
    const Outcome o = RunPolicyScenario(policy);
    const PoolStats& s = o.stats;
    std::printf("  %-19s %6" PRIu64 " %10" PRIu64 " %13" PRIu64 " %10" PRIu64 " %5" PRIu64
                " %5" PRIu64 " %6.1f %8" PRIu64 " %8.1f %11" PRIu64 "\n",
                policy.name, s.reuse_same_stream, s.reuse_event_dependency, s.reuse_opportunistic,
                s.reuse_internal_dependency, s.reuse_after_sync, s.fresh_allocs,
                static_cast<double>(s.reserved_high) / kMiB, s.waits_inserted, Us(o.makespan_ns),
                s.failed_alloc_count);
  }
  std::printf(
      "\n  Columns same stream..fresh: allocations served by each rule; peak: reserved bytes.\n"
      "  Opportunistic reuse takes b (complete, though nothing orders it before C). Internal\n"
      "  dependencies serve z from P1's pending memory by making C wait for P1's 100 us\n"
      "  kernel: no failure, but a longer makespan. Event dependencies find nothing: a1 is\n"
      "  ordered by E1, but a1 and a2 are neighbours in the pool's reservation, both pending\n"
      "  on P1, so they merge into one block pending at a2's free, which E1 does not order\n"
      "  (a chunked pool keeps them in separate chunks, and there rule 2 reuses a1).\n");
}

// ------------------------------------------------------ (c) pool variants

void PoolVariants() {
  std::printf("\n== (c) Pool variants (Host backing: real memory, as the system gives it) ==\n");
  constexpr char kHeader[] = "  %-22s %9s %7s %7s %7s %7s %10s %16s %12s\n";
  std::printf(kHeader, "variant", "alignment", "1 B", "100 B", "1000 B", "4 KiB", "huge pages",
              "transparent huge", "normal pages");
  std::printf(kHeader, "", "", "", "", "", "", "MiB", "pages MiB", "MiB");
  struct Variant {
    const char* name;
    streampool::AllocationType type;
    streampool::PagePolicy policy;
    bool acl;      // aclrtMalloc's rule: ALIGN_UP(ALIGN_UP(len, 32) + 32, 64)
    bool align32;  // aclrtMallocAlign32's: ALIGN_UP(len, 64)
  };
  const Variant variants[] = {
      {"device", streampool::AllocationType::kDevice, streampool::PagePolicy::kHugeFirst, false,
       false},
      {"device, aclrtMalloc", streampool::AllocationType::kDevice,
       streampool::PagePolicy::kHugeFirst, true, false},
      {"device, Align32", streampool::AllocationType::kDevice, streampool::PagePolicy::kHugeFirst,
       true, true},
      {"pinned host", streampool::AllocationType::kPinnedHost, streampool::PagePolicy::kHugeFirst,
       false, false},
      {"huge page, HugeFirst", streampool::AllocationType::kHugePage,
       streampool::PagePolicy::kHugeFirst, false, false},
      {"huge page, HugeOnly", streampool::AllocationType::kHugePage,
       streampool::PagePolicy::kHugeOnly, false, false},
      {"huge page, NormalOnly", streampool::AllocationType::kHugePage,
       streampool::PagePolicy::kNormalOnly, false, false},
      {"dvpp", streampool::AllocationType::kDvpp, streampool::PagePolicy::kHugeFirst, false, false},
  };
  streampool::RuntimeConfig config;  // Host backing: page kinds are real
  std::unique_ptr<Runtime> rt = MUST(Runtime::Create(config));
  const StreamId s = MUST(rt->CreateStream(0));
  for (const Variant& v : variants) {
    streampool::PoolProps props;
    props.alloc_type = v.type;
    props.page_policy = v.policy;
    props.acl_rounding = v.acl;
    props.acl_align32 = v.align32;
    const streampool::PoolId pool = MUST(rt->CreatePool(props));
    // Bytes used by each request size, measured as the UsedMem step it causes;
    // alignment as the largest power of two dividing every distance between
    // the starts (consecutive blocks of a fresh chunk are packed back to back).
    uint64_t used_by[4] = {};
    uintptr_t first = 0;
    uint64_t offsets = 0;
    const uint64_t sizes[4] = {1, 100, 1000, 4096};
    bool failed = false;
    for (int i = 0; i < 4 && !failed; ++i) {
      const uint64_t before =
          MUST(rt->GetPoolAttribute(pool, streampool::PoolAttr::kUsedMemCurrent));
      absl::StatusOr<streampool::AllocInfo> a = rt->MallocFromPoolAsync(sizes[i], pool, s);
      if (!a.ok()) {
        failed = true;
        break;
      }
      const auto p = reinterpret_cast<uintptr_t>(a->ptr);
      if (i == 0) first = p;
      offsets |= p - first;
      used_by[i] = MUST(rt->GetPoolAttribute(pool, streampool::PoolAttr::kUsedMemCurrent)) - before;
    }
    if (failed) {
      std::printf("  %-22s  no memory of this kind here: allocation fails cleanly\n", v.name);
      continue;
    }
    const PoolStats st = MUST(rt->GetPoolStats(pool));
    std::printf("  %-22s %9" PRIu64 " %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %7" PRIu64
                " %10.1f %16.1f %12.1f\n",
                v.name, offsets & -offsets, used_by[0], used_by[1], used_by[2], used_by[3],
                static_cast<double>(st.huge_page_bytes) / kMiB,
                static_cast<double>(st.transparent_huge_page_bytes) / kMiB,
                static_cast<double>(st.normal_page_bytes) / kMiB);
  }
  std::printf(
      "\n  Columns 1 B..4 KiB: bytes each request occupies (UsedMem). alignment: the largest\n"
      "  power of two dividing the distances between block starts. Page kinds of the reserved 2 "
      "MiB\n"
      "  (explicit huge pages, transparent huge pages, normal pages) are read back from the\n"
      "  system (smaps), not assumed.\n");
}

// ------------------------------------------------- (d) real PyTorch traces

// The share of held memory that live allocations should fill at the peak for
// a pool to count as tight: at most 5% held but unused.
constexpr double kTightUtilization = 0.95;

// One growth mode's figures on one trace.
struct GrowthFigures {
  double gib = 0;
  // Our peak reserved / PyTorch's; 0 when the trace does not say PyTorch's.
  double vs_pytorch = 0;
  double utilization = 0;
};

GrowthFigures FiguresOf(const rp::ReplayResult& r, const rp::TorchFigures& torch) {
  GrowthFigures f;
  f.gib = static_cast<double>(r.peak_reserved) / (1 << 30);
  if (torch.peak_reserved && *torch.peak_reserved > 0) {
    f.vs_pytorch = static_cast<double>(r.peak_reserved) / static_cast<double>(*torch.peak_reserved);
  }
  f.utilization = r.utilization;
  return f;
}

int ReplayBundledTraces(const std::string& traces_dir, const std::filesystem::path& svg_path) {
  std::printf("\n== (d) Real PyTorch allocation traces, replayed in virtual time ==\n");
  std::printf(
      "Each trace holds a PyTorch run's allocations and frees as its caching allocator saw\n"
      "them, with that allocator's peak reserved bytes; the pool serves the same requests\n"
      "(all reuse rules on, release threshold 0) once per growth mode.\n\n");
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(traces_dir, ec)) {
    if (entry.path().extension() == ".trace") files.push_back(entry.path().string());
  }
  if (ec || files.empty()) {
    std::fprintf(stderr, "streampool-demo: no traces in %s (--traces_dir)\n", traces_dir.c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());

  // The replay tool's defaults: all reuse rules on, threshold 0, an
  // address-only 80 GiB device. Chunked first, then the default growth.
  rp::ReplaySettings chunked;
  chunked.growth = streampool::PoolGrowth::kChunked;
  chunked.label_growth = true;
  rp::ReplaySettings by_default;
  by_default.label_growth = true;

  std::vector<rp::Trace> traces;
  traces.reserve(files.size());
  std::vector<rp::TraceReport> reports;
  struct Row {
    std::string trace;
    GrowthFigures figures;
  };
  std::vector<Row> default_rows;
  const char* default_name = "?";
  constexpr char kGroups[] = "  %-32s %-19s | %-30s | %s\n";
  constexpr char kColumns[] = "  %-32s %7s %11s | %7s %10s %11s | %7s %10s %11s\n";
  std::string rows;
  for (const std::string& f : files) {
    traces.push_back(MUST(rp::LoadTrace(f)));
    const rp::Trace& t = traces.back();
    const rp::TorchFigures torch = rp::TorchFiguresOf(t);
    rp::ReplayResult c = MUST(rp::Replay(t, chunked));
    rp::ReplayResult d = MUST(rp::Replay(t, by_default));
    default_name = internal::EnumName(d.growth);
    for (const rp::ReplayResult* r : {&c, &d}) {
      if (r->checker_reports != 0 || r->failed_allocs != 0) {
        std::fprintf(stderr, "streampool-demo: %s under %s: %zu checker reports, %llu failures\n",
                     f.c_str(), r->settings.Label().c_str(), r->checker_reports,
                     static_cast<unsigned long long>(r->failed_allocs));
        return 1;
      }
    }
    const GrowthFigures cf = FiguresOf(c, torch);
    const GrowthFigures df = FiguresOf(d, torch);
    const std::string name = std::filesystem::path(f).stem().string();
    absl::StrAppendFormat(
        &rows, "  %-32s %7.2f %11.3f | %7.2f %10.3f %11.3f | %7.2f %10.3f %11.3f\n", name,
        torch.peak_reserved ? static_cast<double>(*torch.peak_reserved) / (1 << 30) : 0.0,
        torch.utilization.value_or(0), cf.gib, cf.vs_pytorch, cf.utilization, df.gib, df.vs_pytorch,
        df.utilization);
    default_rows.push_back(Row{name, df});
    reports.push_back(rp::TraceReport{&t, {std::move(c), std::move(d)}});
  }
  std::printf(kGroups, "", "PyTorch", "chunked growth",
              absl::StrCat("default growth (", default_name, ")").c_str());
  std::printf(kColumns, "trace", "GiB", "utilization", "GiB", "vs PyTorch", "utilization", "GiB",
              "vs PyTorch", "utilization");
  std::fputs(rows.c_str(), stdout);

  std::printf(
      "\n  GiB: peak reserved, the device memory held at the peak. vs PyTorch: ours / PyTorch's;\n"
      "  below 1, the pool held less memory than PyTorch's caching allocator for the same\n"
      "  requests. utilization: peak used / peak reserved (PyTorch's: peak live bytes / its\n"
      "  peak reserved), the share of held memory live allocations filled at the peak.\n\n");
  size_t less = 0, tight = 0;
  std::string not_less, not_tight;
  for (const Row& row : default_rows) {
    if (row.figures.vs_pytorch > 0 && row.figures.vs_pytorch < 1) {
      ++less;
    } else {
      absl::StrAppendFormat(&not_less, "%s %s (%.3f of PyTorch's)", not_less.empty() ? "" : ",",
                            row.trace, row.figures.vs_pytorch);
    }
    if (row.figures.utilization >= kTightUtilization) {
      ++tight;
    } else {
      absl::StrAppendFormat(&not_tight, "%s %s (%.4f)", not_tight.empty() ? "" : ",", row.trace,
                            row.figures.utilization);
    }
  }
  PrintWrapped(absl::StrFormat(
      "With default growth the pool held less memory than PyTorch on %d of %d traces%s%s%s, and "
      "left at most %.0f%% of what it held unused at the peak (utilization %.2f or more) on %d "
      "of %d%s%s.",
      less, default_rows.size(), not_less.empty() ? "" : " (not on:", not_less,
      not_less.empty() ? "" : ")", 100 * (1 - kTightUtilization), kTightUtilization, tight,
      default_rows.size(), not_tight.empty() ? "" : "; not on:", not_tight));
  std::printf(
      "  Chunked growth strands free bytes at chunk boundaries (every growth maps its own\n"
      "  ALIGN_UP(size, 2 MiB) chunk and blocks never span chunks); expandable growth maps\n"
      "  granules into one reservation, so free blocks coalesce across growths and a growth\n"
      "  maps only the shortfall above the topmost free block.\n");
  if (!WriteFile(svg_path, rp::FormatSvg(reports))) return 1;
  return 0;
}

// Part (e): the lab's workloads (traces/lab/) under every reuse policy set and
// both thresholds at the smallest device each fits: the best set, its saving.
int PolicyLab(const std::string& traces_dir, const std::filesystem::path& svg_path) {
  std::printf("\n== (e) Policy lab: multi-stream workloads, the smallest device each fits ==\n");
  std::printf(
      "Seven CUDA programs (FSDP, offload, 1F1B pipeline, inference server, data loader,\n"
      "gradient buckets, data-parallel steps) recorded their own histories; each replays under\n"
      "all 8 reuse policy sets x thresholds 0 and max; a bisection finds the smallest device.\n\n");
  const std::filesystem::path lab = std::filesystem::path(traces_dir) / "lab";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(lab, ec)) {
    if (entry.path().extension() == ".trace") files.push_back(entry.path().string());
  }
  if (ec || files.empty()) {
    std::fprintf(stderr, "streampool-demo: no traces in %s\n", lab.c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());
  std::vector<rp::Trace> traces;
  for (const std::string& f : files) traces.push_back(MUST(rp::LoadTrace(f)));
  rp::ReplaySettings base;
  base.check_stream_order = false;
  const std::vector<rp::ReplaySettings> settings =
      rp::SweepSettings(base, {0, UINT64_MAX}, {streampool::PoolGrowth::kDefault}, true);
  const std::vector<rp::TracePolicyReport> reports =
      MUST(rp::BuildPolicyReports(traces, settings, /*with_cuda_defaults=*/true));
  auto mib = [](const rp::CapacityResult* r) {
    return r != nullptr && r->fits ? absl::StrFormat("%.0f", r->min_capacity / double{1 << 20})
                                   : std::string("-");
  };
  std::printf("  %-12s %-44s %9s %9s %9s %9s\n", "workload", "best policy set (min capacity)",
              "best MiB", "none MiB", "CUDA MiB", "waits");
  for (const rp::TracePolicyReport& rep : reports) {
    const rp::PolicySummary sum = rp::SummarizePolicies(rep);
    const std::string name = std::filesystem::path(rep.trace->name).stem().string();
    const bool all_equal = std::all_of(rep.rows.begin(), rep.rows.end(), [&](const auto& r) {
      return sum.best != nullptr && r.fits && r.min_capacity == sum.best->min_capacity;
    });  // then no set is best
    std::printf(
        "  %-12s %-44s %9s %9s %9s %9s\n", name.c_str(),
        all_equal             ? "any (all equal)"
        : sum.best != nullptr ? sum.best->settings.Label().c_str()
                              : "nothing fits",
        mib(sum.best).c_str(), mib(sum.none).c_str(), mib(sum.cuda_defaults).c_str(),
        sum.best != nullptr ? absl::StrCat(sum.best->at_min.stats.waits_inserted).c_str() : "-");
  }
  std::printf(
      "\n  best: the policy set and threshold that fit the smallest device (ties: shorter\n"
      "  makespan). none: every reuse rule off, at the best's threshold. CUDA: every rule on,\n"
      "  threshold 0, chunked growth. waits: waits the pool inserted (rule 5) at the best's\n"
      "  capacity. streampool-replay --policy-report prints the whole table.\n");
  return WriteFile(svg_path, rp::FormatPolicySvg(reports)) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      streampool::tools::ParseCommandLine(argc, argv, kCommandLine);
  if (!args.empty()) {
    streampool::tools::UsageError(
        kCommandLine, absl::StrCat("unexpected argument '", args[0],
                                   "' (directories are --traces_dir and --output_dir)"));
  }
  const std::filesystem::path output_dir = absl::GetFlag(FLAGS_output_dir);
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) {
    std::fprintf(stderr, "streampool-demo: cannot create %s: %s\n", output_dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const std::filesystem::path timeline_path = output_dir / "timeline.json";
  const std::filesystem::path svg_path = output_dir / "traces.svg";
  if (!ScenarioTimeline(timeline_path)) return 1;
  PoliciesSideBySide();
  PoolVariants();
  if (ReplayBundledTraces(absl::GetFlag(FLAGS_traces_dir), svg_path) != 0) return 1;
  const std::filesystem::path lab_svg_path = output_dir / "policy_lab.svg";
  if (PolicyLab(absl::GetFlag(FLAGS_traces_dir), lab_svg_path) != 0) return 1;
  std::printf(
      "\nWritten to %s/:\n"
      "  timeline.json  part (a) as a trace-event timeline (ui.perfetto.dev, chrome://tracing)\n"
      "  traces.svg     part (d): reserved and used bytes over virtual time, both growths\n"
      "  policy_lab.svg part (e): minimum capacity against makespan, a point per policy set\n",
      output_dir.c_str());
  return 0;
}
