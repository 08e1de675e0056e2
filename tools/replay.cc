// streampool-replay: replays allocation traces through the simulator under
// chosen pool settings and reports what the pool did (usage: kUsage below,
// or --help).
//
// For each trace and setting: peak reserved, peak used, utilization, reuse by
// rule, waits inserted, failed allocations, checker reports and the host cost
// of MallocAsync and FreeAsync calls (wall clock); and, when the trace header
// has PyTorch's figures, the comparison with them (see src/replay/report.h).
// --min-capacity and --policy-report search the smallest device instead
// (src/replay/capacity.h, src/replay/policy_report.h); --compare-executor
// replays on the simulator and a real executor and compares their decisions
// (src/replay/executor_compare.h).
#include "src/replay/replay.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/pool/names.h"
#include "src/replay/capacity.h"
#include "src/replay/decisions.h"
#include "src/replay/executor_compare.h"
#include "src/replay/policy_report.h"
#include "src/replay/report.h"
#include "src/replay/rmm_model.h"
#include "src/replay/timeline.h"
#include "src/replay/torch_validation.h"
#include "src/replay/trace.h"
#include "tools/command_line.h"

namespace rp = streampool::replay;

// Flags whose values are the library's enums: the one table of names
// (src/pool/names.h) reads and prints them.
namespace streampool {
namespace {

template <typename E>
bool ParseEnumFlag(absl::string_view text, E* value, std::string* error) {
  absl::StatusOr<E> parsed = internal::ParseEnumNameOrError<E>(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *value = *parsed;
  return true;
}

}  // namespace

bool AbslParseFlag(absl::string_view text, AllocationType* type, std::string* error) {
  return ParseEnumFlag(text, type, error);
}
std::string AbslUnparseFlag(AllocationType type) { return internal::EnumName(type); }
bool AbslParseFlag(absl::string_view text, Backing* backing, std::string* error) {
  return ParseEnumFlag(text, backing, error);
}
std::string AbslUnparseFlag(Backing backing) { return internal::EnumName(backing); }
bool AbslParseFlag(absl::string_view text, ExecutorKind* executor, std::string* error) {
  return ParseEnumFlag(text, executor, error);
}
std::string AbslUnparseFlag(ExecutorKind executor) { return internal::EnumName(executor); }

}  // namespace streampool

namespace {

// Returns false with *error set from a failed status.
bool Fail(const absl::Status& status, std::string* error) {
  *error = std::string(status.message());
  return false;
}

// The setting flags below know whether the command line gave them: absl
// parses a flag's text only when it is given (on the command line or in a
// --flagfile), never for its default, so `given` is that default's sentinel.
// A recorded trace replays at its own settings unless one of them is given.

// --reuse: which reuse switches are on.
struct ReuseFlag {
  rp::ReplaySettings switches;
  bool given = false;
};
bool AbslParseFlag(absl::string_view text, ReuseFlag* flag, std::string* error) {
  absl::Status st = rp::ParseReuse(text, &flag->switches);
  flag->given = true;
  return st.ok() || Fail(st, error);
}
std::string AbslUnparseFlag(const ReuseFlag& flag) {
  std::vector<std::string> on;
  for (const rp::ReuseSwitch& r : rp::ReuseSwitches()) {
    if (flag.switches.*r.on) on.emplace_back(r.name);
  }
  if (on.empty()) return "none";
  if (on.size() == rp::ReuseSwitches().size()) return "all";
  return absl::StrJoin(on, ",");
}

// --policies: only "all" (or nothing).
struct PoliciesFlag {
  bool all = false;
  bool given = false;
};
bool AbslParseFlag(absl::string_view text, PoliciesFlag* flag, std::string* error) {
  flag->all = text == "all";
  flag->given = true;
  if (flag->all || text.empty()) return true;
  *error = "--policies takes only 'all'";
  return false;
}
std::string AbslUnparseFlag(const PoliciesFlag& flag) { return flag.all ? "all" : ""; }

// A byte count with binary suffixes, printed with the largest that divides it.
struct BytesFlag {
  uint64_t bytes = 0;
  bool zero_allowed = false;
  bool given = false;  // parsed from the command line (see ReuseFlag)
};
bool AbslParseFlag(absl::string_view text, BytesFlag* flag, std::string* error) {
  absl::StatusOr<uint64_t> bytes = rp::ParseBytes(text);
  if (!bytes.ok()) return Fail(bytes.status(), error);
  flag->given = true;
  if (*bytes == 0 && !flag->zero_allowed) {
    *error = "a device has at least one byte";
    return false;
  }
  flag->bytes = *bytes;
  return true;
}
std::string AbslUnparseFlag(const BytesFlag& flag) {
  constexpr const char* kSuffixes[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    const int shift = 40 - 10 * i;
    if (flag.bytes != 0 && flag.bytes % (uint64_t{1} << shift) == 0) {
      return absl::StrCat(flag.bytes >> shift, kSuffixes[i]);
    }
  }
  return absl::StrCat(flag.bytes);
}

// A comma-separated list, each item read by `parse`; no item may be empty.
template <typename T, typename Parse>
bool ParseList(absl::string_view text, std::vector<T>* out, Parse parse, std::string* error) {
  std::vector<T> items;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<T> value = parse(item);
    if (!value.ok()) return Fail(value.status(), error);
    items.push_back(*value);
  }
  *out = std::move(items);
  return true;
}

// --threshold: release thresholds, bytes or "max".
struct ThresholdsFlag {
  std::vector<uint64_t> thresholds;
  bool given = false;
};
bool AbslParseFlag(absl::string_view text, ThresholdsFlag* flag, std::string* error) {
  flag->given = true;
  return ParseList(text, &flag->thresholds, rp::ParseThreshold, error);
}
std::string AbslUnparseFlag(const ThresholdsFlag& flag) {
  return absl::StrJoin(flag.thresholds, ",", [](std::string* out, uint64_t t) {
    absl::StrAppend(out, t == UINT64_MAX ? "max" : absl::StrCat(t));
  });
}

// --wait-before-growth: 0 or 1, and whether it was given.
struct SwitchFlag {
  bool on = true;
  bool given = false;
};
bool AbslParseFlag(absl::string_view text, SwitchFlag* flag, std::string* error) {
  flag->given = true;
  if (text == "1" || text == "on" || text == "true") {
    flag->on = true;
  } else if (text == "0" || text == "off" || text == "false") {
    flag->on = false;
  } else {
    *error = "expected 1 or 0";
    return false;
  }
  return true;
}
std::string AbslUnparseFlag(const SwitchFlag& flag) { return flag.on ? "1" : "0"; }

// --compare-executor: a real-time executor, or none (the flag's default).
struct CompareExecutorFlag {
  std::optional<streampool::ExecutorKind> executor;
};
bool AbslParseFlag(absl::string_view text, CompareExecutorFlag* flag, std::string* error) {
  flag->executor.reset();
  if (text.empty()) return true;
  absl::StatusOr<streampool::ExecutorKind> e =
      streampool::internal::ParseEnumNameOrError<streampool::ExecutorKind>(text);
  if (!e.ok()) return Fail(e.status(), error);
  if (*e == streampool::ExecutorKind::kSimulator) {
    *error = "--compare-executor compares the simulator with threads or cuda";
    return false;
  }
  flag->executor = *e;
  return true;
}
std::string AbslUnparseFlag(const CompareExecutorFlag& flag) {
  return flag.executor ? streampool::internal::EnumName(*flag.executor) : "";
}

// --growth: growth modes.
struct GrowthsFlag {
  std::vector<streampool::PoolGrowth> growths;
  bool given = false;
};
bool AbslParseFlag(absl::string_view text, GrowthsFlag* flag, std::string* error) {
  flag->given = true;
  return ParseList(text, &flag->growths,
                   streampool::internal::ParseEnumNameOrError<streampool::PoolGrowth>, error);
}
std::string AbslUnparseFlag(const GrowthsFlag& flag) {
  return absl::StrJoin(flag.growths, ",", [](std::string* out, streampool::PoolGrowth g) {
    absl::StrAppend(out, streampool::internal::EnumName(g));
  });
}

}  // namespace

ABSL_FLAG(ReuseFlag, reuse, ReuseFlag{},
          "reuse rules on: a comma-separated list of event, opportunistic and internal, or all "
          "or none. When none of --reuse, --policies, --threshold and --growth is given, a "
          "trace that records its pool settings replays at those (except in --policy-report, "
          "which sweeps its own)");
ABSL_FLAG(PoliciesFlag, policies, PoliciesFlag{},
          "'all' replays under all 8 combinations of the reuse rules instead of --reuse");
ABSL_FLAG(ThresholdsFlag, threshold, ThresholdsFlag{{0}},
          "release thresholds, comma-separated: bytes (K/M/G/T and KiB/MiB/GiB/TiB suffixes are "
          "binary) or max, which never shrinks the pool; --policy-report's default is 0,max");
ABSL_FLAG(GrowthsFlag, growth, GrowthsFlag{{streampool::PoolGrowth::kDefault}},
          "pool growths, comma-separated: default (expandable on both backings), chunked or "
          "expandable; a row names its growth when more than one is given or it is not the "
          "default");
ABSL_FLAG(SwitchFlag, wait_before_growth, SwitchFlag{},
          "with the internal rule on, 1 (the pool's default) serves an allocation from another "
          "stream's pending free before growing when the wait delays nothing (the free "
          "completes before the stream reaches the allocation anyway); 0 grows first, as CUDA "
          "does; also spelled --wait-before-growth");
ABSL_FLAG(ThresholdsFlag, soft_limit, ThresholdsFlag{{UINT64_MAX}},
          "with the internal rule on, a growth that would take the pool's reserved bytes past "
          "this waits for other streams' pending frees first (bytes, suffixes as for "
          "--threshold; max, the default, sets no limit; 0 waits before every growth, as RMM's "
          "pool does); also spelled --soft-limit");
ABSL_FLAG(std::string, allocator, "streampool",
          "allocators to replay each trace under, comma-separated, on identical inputs: "
          "streampool (the pool at the setting flags), pytorch (a model of PyTorch's CUDA "
          "caching allocator, see --torch-conf), rmm-pool (a model of RMM's "
          "pool_memory_resource, see --rmm-initial), cuda (streampool's pool at CUDA's "
          "defaults: chunked growth, every reuse rule, threshold 0), or all");
ABSL_FLAG(std::string, torch_conf, "",
          "the pytorch model's options, as PYTORCH_CUDA_ALLOC_CONF writes them: "
          "max_split_size_mb, roundup_power2_divisions, expandable_segments, "
          "garbage_collection_threshold (against --capacity, as with a memory fraction); "
          "also spelled --torch-conf");
ABSL_FLAG(BytesFlag, rmm_initial, (BytesFlag{0, true}),
          "the rmm-pool model's initial_pool_size (a multiple of 256; default 0: the pool grows "
          "from the first request); also spelled --rmm-initial");
ABSL_FLAG(BytesFlag, rmm_max, (BytesFlag{0, true}),
          "the rmm-pool model's maximum_pool_size (a multiple of 256; default: none); also "
          "spelled --rmm-max");
ABSL_FLAG(bool, validate_torch, false,
          "replay each PyTorch trace through the pytorch model from the trace's own initial "
          "segments (or, for a trace converted without them, from a warm start: one pass of "
          "the trace first) and compare the segment history and peak reserved with PyTorch's "
          "own; also spelled --validate-torch");
ABSL_FLAG(streampool::AllocationType, pool, streampool::AllocationType::kDevice,
          "pool type: device, pinned_host (or pinned), huge_page (or hugepage) or dvpp");
ABSL_FLAG(streampool::Backing, backing, streampool::Backing::kAddressOnly,
          "memory behind the pool: address_only (or address: reserved, never touched) or host");
ABSL_FLAG(BytesFlag, capacity, BytesFlag{80 * rp::kGiB},
          "device capacity in bytes (suffixes as for --threshold); for --min-capacity and "
          "--policy-report, the capacity of the unconstrained run the search starts from. "
          "Given, it holds for a recording replayed at its own settings too (else the "
          "recording's capacity does)");
ABSL_FLAG(streampool::ExecutorKind, executor, streampool::ExecutorKind::kSimulator,
          "how the replay's streams run: simulator (virtual time: every replay decides the "
          "same), threads (a worker thread per stream; kernels and advances take their time) or "
          "cuda (the machine's GPU: kernels run on it for their duration, pools map device "
          "memory; --backing does not apply). Real-time replays are reported, not verified");
ABSL_FLAG(CompareExecutorFlag, compare_executor, CompareExecutorFlag{},
          "threads or cuda: replay each trace on the simulator and on that executor and "
          "report, per trace and setting, how many allocation decisions (rule, pool, chunk, "
          "offset) are equal, the first that differs with both decisions, and whether every "
          "decision before the first one rule 3 (observation) took on either side equals the "
          "simulator's. A trace the machine cannot run (no CUDA driver or device) is reported "
          "as skipped; also spelled --compare-executor");
ABSL_FLAG(bool, check, true,
          "the stream-order checker (--nocheck or --no-check turns it off); its lookup is part "
          "of the measured host cost. Capacity searches run without it");
ABSL_FLAG(bool, min_capacity, false,
          "for every swept setting, search the smallest device capacity, in whole 2 MiB "
          "granules, at which the trace has no failed allocation, and print that table (peak "
          "reserved unconstrained; at the minimum capacity the makespan, inserted waits, "
          "synchronizes and reuse by rule) instead of the report; also spelled --min-capacity");
ABSL_FLAG(bool, policy_report, false,
          "the capacity table for all 8 reuse policy sets x --threshold (default 0,max) x "
          "--growth (and a row per --allocator), and per trace the best set and what it saves "
          "against all reuse off and against CUDA's defaults (every rule on, threshold 0, growth "
          "chunked; searched besides when not swept), and what to ship against the recorded (or "
          "default) setting: the setting, the maxSize or device capacity that realises its "
          "saving, its peak reserved unconstrained and capped; also spelled --policy-report");
ABSL_FLAG(int, threads, 0,
          "threads for --min-capacity and --policy-report searches; 0 is the hardware's "
          "concurrency, and there are never more threads than searches");
ABSL_FLAG(bool, json, false,
          "print JSON instead of the table (with --min-capacity or --policy-report: the schema "
          "streampool-policy-report/1, src/replay/policy_report.h)");
ABSL_FLAG(std::string, html, "",
          "with --policy-report or --min-capacity, also write one self-contained HTML page "
          "(inline SVG, no network): per trace what to ship, memory over time of the recorded "
          "(or default) and shipped settings with peak live bytes and the shipped capacity, "
          "minimum capacity against makespan, the table, and the blocks live at the peak with "
          "their streams and, from a converted PyTorch snapshot, their top frames");
ABSL_FLAG(std::string, svg, "",
          "also write reserved and used bytes over virtual time as SVG (with --min-capacity or "
          "--policy-report: minimum capacity against the makespan there, a point per setting)");
ABSL_FLAG(bool, verify, false,
          "replay each trace at its recorded settings and compare every allocation's decision "
          "(rule, pool, chunk, offset) with the one the recording wrote; exit 3 when one differs "
          "in a recording made in virtual time, or when a trace with allocations has no recorded "
          "decision (a recording in real time, threads or adapter, or one with a pool on the "
          "program's own upstream, is replayed and reported: its decisions depended on what a "
          "replay does not have). Takes no setting flag");
ABSL_FLAG(std::string, save_decisions, "",
          "also write every allocation's decision (op, stream, size, rule, pool, chunk and "
          "offset, waits inserted, failure) to this file, in the format "
          "streampool-decisions/1 (docs/design.md, \"Decisions as data\"); one trace under "
          "one setting; also spelled --save-decisions");
ABSL_FLAG(std::string, check_decisions, "",
          "replay the trace under the setting flags and compare each allocation's decision "
          "with this file's (--save-decisions): stop at the first that differs and print its "
          "op, both decisions, the rule behind each and the blocks around them, exit 3; exit "
          "0 when all agree. One trace under one setting; also spelled --check-decisions");
ABSL_FLAG(std::string, diff, "",
          "compare the setting flags' decisions (a) with another setting's or allocator's (b) "
          "on one trace, every allocation, and summarise the differences by rule and by "
          "bytes, with the first one as --check-decisions prints it; exit 3 when any differs. "
          "b is a's with key=value changes separated by '/': reuse, threshold, growth, "
          "wait-before-growth, soft-limit, "
          "allocator, capacity, torch-conf, rmm-initial, rmm-max (--diff=reuse=none, "
          "--diff=threshold=max/growth=chunked, --diff=allocator=rmm-pool)");
ABSL_FLAG(std::string, timeline, "",
          "also write every run's stream ops, allocation lifetimes and pool bytes as Chrome "
          "trace-event JSON (Perfetto, chrome://tracing), one process per run");

namespace {

constexpr char kUsage[] =
    "replays allocation traces through the simulator under\n"
    "chosen pool settings and reports what the pool did: peak reserved and used bytes,\n"
    "utilization, reuse by rule, waits inserted, failed allocations, checker reports and\n"
    "the host cost of each call, and PyTorch's own figures when a trace's header has them.\n"
    "\n"
    "usage: streampool-replay [flags] TRACE...\n"
    "\n"
    "TRACE is a \"streampool trace v1\" file (traces/README.md) or an RMM replay log\n"
    "(CSV). Each threshold (bytes, or max: never shrink the pool) is combined with each\n"
    "growth and each reuse setting. A recording (spRuntimeStartRecording,\n"
    "STREAMPOOL_RECORD) replays at its own settings when no setting flag is given, and its\n"
    "decisions are compared with the replay's.\n"
    "\n"
    "--min-capacity and --policy-report search instead the smallest device each setting\n"
    "runs in (in 2 MiB granules) and report the trace at that capacity.\n"
    "\n"
    "--allocator replays each trace under other allocators too, on identical inputs:\n"
    "models of PyTorch's caching allocator and RMM's pool, and CUDA's defaults.\n"
    "--validate-torch compares the PyTorch model with a trace's own segment history.\n"
    "\n"
    "--executor=threads|cuda replays in real time instead of virtual time, and\n"
    "--compare-executor=threads|cuda replays each trace both ways and compares the\n"
    "pool's decisions, the first that differs and whether all before the first\n"
    "observation-dependent one (rule 3) agree.\n"
    "\n"
    "--save-decisions=FILE writes every allocation's decision, --check-decisions=FILE\n"
    "replays and stops at the first that differs from the file's, and --diff=CHANGE\n"
    "compares the decisions of two settings or allocators on one trace.\n"
    "\n"
    "Exit status: 0 on success, 1 when a trace is malformed or a replay fails, 2 on a\n"
    "bad command line, 3 when --verify, --check-decisions or --diff finds a decision\n"
    "the replay took otherwise.\n"
    "Out-of-memory allocations are results, not errors.\n"
    "\n"
    "  streampool-replay --threshold=0,max traces/*.trace\n"
    "  streampool-replay --policies=all --json traces/torch-medium-512-inference.trace\n"
    "  streampool-replay --policy-report --html lab.html traces/lab/*.trace\n"
    "  streampool-replay --policy-report --allocator=all traces/lab/pipeline.trace\n"
    "  streampool-replay --verify traces/lab/server.trace\n"
    "  streampool-replay --allocator=all --min-capacity traces/lab/*.trace\n"
    "  streampool-replay --validate-torch traces/*.trace\n"
    "  streampool-replay --compare-executor=cuda traces/lab/*.trace\n"
    "  streampool-replay --save-decisions=server.decisions traces/lab/server.trace\n"
    "  streampool-replay --check-decisions=server.decisions traces/lab/server.trace\n"
    "  streampool-replay --reuse=all --diff=reuse=event,opportunistic traces/lab/fsdp.trace";

const streampool::tools::CommandLine kCommandLine = {
    .program = "streampool-replay",
    .synopsis = "streampool-replay [flags] TRACE...",
    .usage = kUsage,
    .source_file = "tools/replay.cc",
    .aliases = {{"--no-check", "--nocheck"},
                {"--min-capacity", "--min_capacity"},
                {"--policy-report", "--policy_report"},
                {"--torch-conf", "--torch_conf"},
                {"--rmm-initial", "--rmm_initial"},
                {"--rmm-max", "--rmm_max"},
                {"--validate-torch", "--validate_torch"},
                {"--compare-executor", "--compare_executor"},
                {"--save-decisions", "--save_decisions"},
                {"--check-decisions", "--check_decisions"},
                {"--wait-before-growth", "--wait_before_growth"},
                {"--soft-limit", "--soft_limit"}},
};

// A progress bar on stderr, drawn only when stderr is a terminal, so that
// logs and pipes never see carriage returns.
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  // `min_total`: smaller totals finish too soon to need a bar.
  void Update(const std::string& label, size_t done, size_t total, size_t min_total = 2048) {
    if (!enabled_ || total < min_total) return;
    constexpr int kBar = 30;
    const int filled = static_cast<int>(kBar * done / total);
    std::fprintf(stderr, "\r[%s%s] %3d%% %.60s", std::string(filled, '=').c_str(),
                 std::string(kBar - filled, ' ').c_str(), static_cast<int>(100 * done / total),
                 label.c_str());
    std::fflush(stderr);
    dirty_ = true;
  }
  void Clear() {
    if (!dirty_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    dirty_ = false;
  }

 private:
  bool enabled_;
  bool dirty_ = false;
};

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "streampool-replay: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

// --min-capacity and --policy-report: searches in parallel, then their table,
// JSON or SVG.
int Search(const std::vector<rp::Trace>& traces, const std::vector<rp::ReplaySettings>& settings,
           bool with_cuda_defaults, bool json, const std::string& svg_path,
           const std::string& html_path) {
  Progress progress;
  absl::StatusOr<std::vector<rp::TracePolicyReport>> reports = rp::BuildPolicyReports(
      traces, settings, with_cuda_defaults, absl::GetFlag(FLAGS_threads),
      [&](size_t done, size_t total) {
        progress.Update(absl::StrCat("capacity searches: ", done, " of ", total), done, total,
                        /*min_total=*/2);
      });
  progress.Clear();
  if (!reports.ok()) {
    std::fprintf(stderr, "streampool-replay: %s\n",
                 std::string(reports.status().message()).c_str());
    return 1;
  }
  const std::string text = json ? rp::FormatPolicyJson(*reports) : rp::FormatPolicyText(*reports);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!svg_path.empty() && !WriteFile(svg_path, rp::FormatPolicySvg(*reports))) return 1;
  if (!html_path.empty()) {
    if (absl::Status st = rp::AddPolicySeries(*reports); !st.ok()) {
      std::fprintf(stderr, "streampool-replay: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    if (!WriteFile(html_path, rp::FormatPolicyHtml(*reports))) return 1;
  }
  return 0;
}

// --check-decisions and --diff: one trace, one setting, a verdict.
int CompareDecisions(const rp::Trace& trace, const rp::ReplaySettings& settings,
                     const std::string& check_path, const std::string& diff_change) {
  if (!check_path.empty()) {
    absl::StatusOr<rp::DecisionFile> saved = rp::LoadDecisions(check_path, trace);
    if (!saved.ok()) {
      std::fprintf(stderr, "streampool-replay: %s\n",
                   std::string(saved.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<rp::DecisionCheck> check = rp::CheckDecisions(trace, settings, *saved);
    if (!check.ok()) {
      std::fprintf(stderr, "streampool-replay: %s\n",
                   std::string(check.status().message()).c_str());
      return 1;
    }
    const std::string text = rp::FormatCheck(trace, *check);
    std::fprintf(check->difference ? stderr : stdout, "%s%s",
                 check->difference ? "streampool-replay: " : "", text.c_str());
    return check->difference ? 3 : 0;
  }
  rp::ReplaySettings b = settings;
  if (absl::Status st = rp::ApplySettingChange(diff_change, &b); !st.ok()) {
    streampool::tools::UsageError(kCommandLine, absl::StrCat("--diff: ", st.message()));
  }
  absl::StatusOr<rp::SettingsDiff> diff = rp::DiffSettings(trace, settings, b);
  if (!diff.ok()) {
    std::fprintf(stderr, "streampool-replay: %s\n", std::string(diff.status().message()).c_str());
    return 1;
  }
  const std::string text = rp::FormatSettingsDiff(trace, *diff);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return diff->differing != 0 ? 3 : 0;
}

// The command line with each alias also spelled with its value attached
// ("--compare-executor=cuda"), which the shared parser matches only alone.
std::vector<std::string> WithAttachedAliases(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    for (const auto& [alias, flag] : kCommandLine.aliases) {
      if (absl::StartsWith(args[i], absl::StrCat(alias, "="))) {
        args[i] = absl::StrCat(flag, args[i].substr(alias.size()));
      }
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> spelled = WithAttachedAliases(argc, argv);
  std::vector<char*> spelled_argv;
  for (std::string& arg : spelled) spelled_argv.push_back(arg.data());
  const std::vector<std::string> files = streampool::tools::ParseCommandLine(
      static_cast<int>(spelled_argv.size()), spelled_argv.data(), kCommandLine);
  if (files.empty()) streampool::tools::UsageError(kCommandLine, "no trace given");
  if (absl::GetFlag(FLAGS_threads) < 0) {
    streampool::tools::UsageError(kCommandLine, "--threads is 0 (the hardware's) or more");
  }
  const bool min_capacity = absl::GetFlag(FLAGS_min_capacity);
  const bool policy_report = absl::GetFlag(FLAGS_policy_report);
  if (min_capacity && policy_report) {
    streampool::tools::UsageError(
        kCommandLine,
        "--min-capacity and --policy-report exclude each other (the policy report "
        "has the capacity table)");
  }

  rp::ReplaySettings base = absl::GetFlag(FLAGS_reuse).switches;
  base.pool_type = absl::GetFlag(FLAGS_pool);
  base.backing = absl::GetFlag(FLAGS_backing);
  base.device_capacity = absl::GetFlag(FLAGS_capacity).bytes;
  // A capacity on the command line holds for a recording replayed at its
  // own settings too.
  base.recorded_capacity = !absl::GetFlag(FLAGS_capacity).given;
  base.check_stream_order = absl::GetFlag(FLAGS_check);
  const std::string svg_path = absl::GetFlag(FLAGS_svg);
  const std::string timeline_path = absl::GetFlag(FLAGS_timeline);
  if ((min_capacity || policy_report) && !timeline_path.empty()) {
    streampool::tools::UsageError(kCommandLine,
                                  "--timeline records one run; a capacity search has many");
  }
  base.record_timeline = !timeline_path.empty();
  const bool json = absl::GetFlag(FLAGS_json);
  std::vector<uint64_t> thresholds = absl::GetFlag(FLAGS_threshold).thresholds;
  const std::vector<streampool::PoolGrowth> growths = absl::GetFlag(FLAGS_growth).growths;
  const bool all_policies = absl::GetFlag(FLAGS_policies).all;
  // A recorded trace's own settings are the ones to replay it at, unless the
  // command line names others. The policy report sweeps the policy sets
  // itself, so it never replays at the recorded ones.
  const bool thresholds_given = absl::GetFlag(FLAGS_threshold).given;
  const bool settings_given =
      absl::GetFlag(FLAGS_reuse).given || absl::GetFlag(FLAGS_policies).given || thresholds_given ||
      absl::GetFlag(FLAGS_growth).given || absl::GetFlag(FLAGS_wait_before_growth).given ||
      absl::GetFlag(FLAGS_soft_limit).given;
  base.wait_before_growth = absl::GetFlag(FLAGS_wait_before_growth).on;
  if (absl::GetFlag(FLAGS_soft_limit).thresholds.size() != 1) {
    streampool::tools::UsageError(kCommandLine, "--soft-limit takes one value");
  }
  base.soft_limit = absl::GetFlag(FLAGS_soft_limit).thresholds.front();
  base.use_recorded = !settings_given && !policy_report;
  const bool verify = absl::GetFlag(FLAGS_verify);
  if (verify && (settings_given || min_capacity || policy_report)) {
    streampool::tools::UsageError(kCommandLine,
                                  "--verify replays at the recorded settings: no --reuse, "
                                  "--policies, --threshold, --growth, --wait-before-growth, "
                                  "--soft-limit, --min-capacity or --policy-report with it");
  }

  absl::StatusOr<std::vector<rp::AllocatorKind>> allocators =
      rp::ParseAllocatorList(absl::GetFlag(FLAGS_allocator));
  if (!allocators.ok()) {
    streampool::tools::UsageError(kCommandLine, std::string(allocators.status().message()));
  }
  absl::StatusOr<rp::TorchOptions> torch = rp::ParseTorchConf(absl::GetFlag(FLAGS_torch_conf));
  if (!torch.ok())
    streampool::tools::UsageError(kCommandLine, std::string(torch.status().message()));
  base.torch = *torch;
  base.rmm.initial_pool_size = absl::GetFlag(FLAGS_rmm_initial).bytes;
  base.rmm.maximum_pool_size = absl::GetFlag(FLAGS_rmm_max).bytes;
  if (base.rmm.initial_pool_size % rp::kRmmAlignment != 0 ||
      base.rmm.maximum_pool_size % rp::kRmmAlignment != 0 ||
      (base.rmm.maximum_pool_size != 0 &&
       base.rmm.initial_pool_size > base.rmm.maximum_pool_size)) {
    streampool::tools::UsageError(kCommandLine,
                                  "--rmm-initial and --rmm-max are multiples of 256, the initial "
                                  "size no more than the maximum");
  }
  const bool validate = absl::GetFlag(FLAGS_validate_torch);
  if (validate && (min_capacity || policy_report || verify)) {
    streampool::tools::UsageError(kCommandLine,
                                  "--validate-torch is a report of its own: no --min-capacity, "
                                  "--policy-report or --verify with it");
  }
  const bool other_allocators =
      allocators->size() != 1 || allocators->front() != rp::AllocatorKind::kStreampool;
  if (other_allocators && verify) {
    streampool::tools::UsageError(kCommandLine,
                                  "--verify is about streampool's pool: no --allocator with it");
  }
  const std::string html_path = absl::GetFlag(FLAGS_html);
  if (!html_path.empty() && !min_capacity && !policy_report) {
    streampool::tools::UsageError(kCommandLine,
                                  "--html draws a capacity search: give --policy-report or "
                                  "--min-capacity");
  }

  const streampool::ExecutorKind executor = absl::GetFlag(FLAGS_executor);
  const std::optional<streampool::ExecutorKind> compare =
      absl::GetFlag(FLAGS_compare_executor).executor;
  if (executor != streampool::ExecutorKind::kSimulator &&
      (min_capacity || policy_report || validate)) {
    streampool::tools::UsageError(kCommandLine,
                                  "--executor replays each setting once, in real time: no "
                                  "--min-capacity, --policy-report or --validate-torch with it");
  }
  if (compare && (min_capacity || policy_report || validate || verify || other_allocators ||
                  executor != streampool::ExecutorKind::kSimulator || !svg_path.empty() ||
                  !timeline_path.empty())) {
    streampool::tools::UsageError(
        kCommandLine,
        "--compare-executor is a report of its own, of streampool's pool against the "
        "simulator: no --min-capacity, --policy-report, --validate-torch, --verify, "
        "--allocator, --executor, --svg or --timeline with it");
  }
  base.executor = executor;

  // streampool's rows are the sweep; every other allocator is one row. The
  // policy report's sweep is the one Python's report="policy" takes too.
  const std::vector<rp::ReplaySettings> settings =
      policy_report ? rp::PolicySweep(base, thresholds, thresholds_given, growths, *allocators)
                    : rp::AllocatorRows(*allocators,
                                        rp::SweepSettings(base, thresholds, growths, all_policies));

  const std::string save_path = absl::GetFlag(FLAGS_save_decisions);
  const std::string check_path = absl::GetFlag(FLAGS_check_decisions);
  const std::string diff_change = absl::GetFlag(FLAGS_diff);
  const int decision_flags = static_cast<int>(!save_path.empty()) +
                             static_cast<int>(!check_path.empty()) +
                             static_cast<int>(!diff_change.empty());
  if (decision_flags > 1) {
    streampool::tools::UsageError(
        kCommandLine, "--save-decisions, --check-decisions and --diff exclude each other");
  }
  if (decision_flags == 1) {
    if (min_capacity || policy_report || validate || verify || compare ||
        executor != streampool::ExecutorKind::kSimulator) {
      streampool::tools::UsageError(
          kCommandLine,
          "--save-decisions, --check-decisions and --diff replay in virtual time, once: no "
          "--min-capacity, --policy-report, --validate-torch, --verify, --compare-executor or "
          "--executor with them");
    }
    if (files.size() != 1 || settings.size() != 1) {
      streampool::tools::UsageError(
          kCommandLine,
          "--save-decisions, --check-decisions and --diff take one trace under one setting "
          "(one --threshold, one --growth, one --allocator, no --policies)");
    }
  }

  // Every trace is parsed before anything runs, so a malformed one costs no
  // replay time.
  std::vector<rp::Trace> traces;
  for (const std::string& f : files) {
    absl::StatusOr<rp::Trace> t = rp::LoadTrace(f);
    if (!t.ok()) {
      std::fprintf(stderr, "streampool-replay: %s\n", std::string(t.status().message()).c_str());
      return 1;
    }
    traces.push_back(*std::move(t));
  }
  if (!check_path.empty() || !diff_change.empty()) {
    return CompareDecisions(traces.front(), settings.front(), check_path, diff_change);
  }
  if (min_capacity || policy_report) {
    return Search(traces, settings, /*with_cuda_defaults=*/policy_report, json, svg_path,
                  html_path);
  }
  if (compare) {
    std::vector<rp::ExecutorComparison> comparisons;
    for (const rp::Trace& t : traces) {
      for (const rp::ReplaySettings& s : settings) {
        absl::StatusOr<rp::ExecutorComparison> c = rp::CompareExecutors(t, s, *compare);
        if (!c.ok()) {
          std::fprintf(stderr, "streampool-replay: %s: %s\n", t.name.c_str(),
                       std::string(c.status().message()).c_str());
          return 1;
        }
        comparisons.push_back(*std::move(c));
      }
    }
    const std::string text =
        json ? rp::FormatComparisonJson(comparisons) : rp::FormatComparisonText(comparisons);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (validate) {
    std::vector<rp::TorchValidation> validations;
    for (const rp::Trace& t : traces) {
      absl::StatusOr<rp::TorchValidation> v = rp::ValidateTorch(t, base);
      if (!v.ok()) {
        std::fprintf(stderr, "streampool-replay: %s\n", std::string(v.status().message()).c_str());
        return 1;
      }
      validations.push_back(*std::move(v));
    }
    const std::string text =
        json ? rp::FormatValidationJson(validations) : rp::FormatValidationText(validations);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }

  Progress progress;
  std::vector<rp::TraceReport> reports;
  for (const rp::Trace& t : traces) {
    rp::TraceReport rep;
    rep.trace = &t;
    for (rp::ReplaySettings s : settings) {
      s.keep_decisions = s.keep_decisions || !save_path.empty();
      const std::string label = t.name + ": " + s.Label();
      absl::StatusOr<rp::ReplayResult> r =
          rp::Replay(t, s, [&](size_t done, size_t total) { progress.Update(label, done, total); });
      progress.Clear();
      if (!r.ok()) {
        std::fprintf(stderr, "streampool-replay: %s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      rep.runs.push_back(*std::move(r));
    }
    reports.push_back(std::move(rep));
  }

  const std::string text = json ? rp::FormatJson(reports) : rp::FormatText(reports);
  std::fwrite(text.data(), 1, text.size(), stdout);
  int verdict = 0;
  if (verify) {
    for (const rp::TraceReport& rep : reports) {
      for (const rp::ReplayResult& r : rep.runs) {
        const bool pool_allocs = std::any_of(
            rep.trace->ops.begin(), rep.trace->ops.end(),
            [](const rp::TraceOp& op) { return std::holds_alternative<rp::ops::Alloc>(op.op); });
        if (r.decisions_checked == 0 && pool_allocs) {
          std::fprintf(stderr, "streampool-replay: %s: no recorded decision to compare\n",
                       rep.trace->name.c_str());
          verdict = 3;
        } else if (r.decisions_diverged != 0 && r.not_reproducible.empty()) {
          std::fprintf(
              stderr, "streampool-replay: %s: %llu of %llu decisions differ; first: %s\n",
              rep.trace->name.c_str(), static_cast<unsigned long long>(r.decisions_diverged),
              static_cast<unsigned long long>(r.decisions_checked), r.first_divergence.c_str());
          verdict = 3;
        }
      }
    }
  }
  if (!save_path.empty()) {
    const rp::ReplayResult& r = reports.front().runs.front();
    if (!WriteFile(save_path,
                   rp::FormatDecisions(traces.front(), rp::DecisionSettingLabel(r.settings),
                                       r.decisions))) {
      return 1;
    }
  }
  if (!svg_path.empty() && !WriteFile(svg_path, rp::FormatSvg(reports))) return 1;
  if (!timeline_path.empty()) {
    std::vector<rp::TimelineProcess> processes;
    for (const rp::TraceReport& rep : reports) {
      for (const rp::ReplayResult& r : rep.runs) processes.push_back(*r.timeline);
    }
    if (!WriteFile(timeline_path, rp::FormatChromeTrace(processes))) return 1;
  }
  return verdict;
}
