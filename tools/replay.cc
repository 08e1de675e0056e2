// streampool-replay: replays allocation traces through the simulator under
// chosen pool settings and reports what the pool did.
//
//   streampool-replay [options] TRACE...
//
// TRACE is a "streampool trace v1" file (traces/README.md) or an RMM replay
// log (CSV). Options:
//
//   --reuse=LIST       reuse rules on: any of event,opportunistic,internal, or
//                      none or all (default all)
//   --policies=all     replay under all 8 combinations of the reuse rules
//   --threshold=LIST   release threshold(s), bytes or max, comma-separated
//                      (default 0); each is combined with each reuse setting
//   --growth=LIST      pool growth(s): default, chunked or expandable,
//                      comma-separated (default: default, which is expandable
//                      on both backings); each is combined with each threshold
//                      and reuse setting, and a row names its growth when
//                      more than one is given or it is not the default
//   --pool=TYPE        device (default), dvpp, hugepage or pinned
//   --backing=KIND     address (default: nothing is touched) or host
//   --capacity=BYTES   device capacity (default 80GiB); K/M/G/T and KiB/MiB/
//                      GiB/TiB suffixes are binary
//   --no-check         turn the stream-order checker off (on by default; its
//                      lookup is part of the measured host cost)
//   --json             print JSON instead of the table
//   --svg FILE         also write reserved and used over virtual time as SVG
//   --timeline FILE    also write every run's stream ops, allocation lifetimes
//                      and pool bytes as Chrome trace-event JSON (Perfetto,
//                      chrome://tracing), one process per run
//
// For each trace and setting: peak reserved, peak used, utilization, reuse by
// rule, waits inserted, failed allocations, checker reports and the host cost
// of MallocAsync and FreeAsync calls (wall clock); and, when the trace header
// has PyTorch's figures, the comparison with them (see tools/replay/report.h).
//
// Exit status: 0 on success, 1 when a trace is malformed or a replay fails,
// 2 on a bad command line. Out-of-memory allocations are results, not errors.
#include "tools/replay/replay.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/pool/names.h"
#include "tools/replay/report.h"
#include "tools/replay/timeline.h"
#include "tools/replay/trace.h"

namespace {

using streampool::AllocationType;
using streampool::Backing;
namespace internal = streampool::internal;
namespace rp = streampool::replay;

constexpr char kUsage[] =
    "usage: streampool-replay [--reuse=event,opportunistic,internal|none|all] [--policies=all]\n"
    "                         [--threshold=N|max[,...]] "
    "[--growth=default|chunked|expandable[,...]]\n"
    "                         [--pool=device|dvpp|hugepage|pinned]\n"
    "                         [--backing=address|host] [--capacity=BYTES] [--no-check]\n"
    "                         [--json] [--svg FILE] [--timeline FILE] TRACE...\n";

[[noreturn]] void UsageError(const std::string& what) {
  std::fprintf(stderr, "streampool-replay: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

bool ParseBytes(absl::string_view s, uint64_t* out) {
  struct Suffix {
    absl::string_view name;
    int shift;
  };
  constexpr Suffix kSuffixes[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
                                  {"K", 10},   {"M", 20},   {"G", 30},   {"T", 40}};
  int shift = 0;
  for (const Suffix& suf : kSuffixes) {
    if (absl::ConsumeSuffix(&s, suf.name)) {
      shift = suf.shift;
      break;
    }
  }
  std::optional<uint64_t> v = rp::ParseUint(s);
  if (!v || (shift && *v > (UINT64_MAX >> shift))) return false;
  *out = *v << shift;
  return true;
}

// A progress bar on stderr, drawn only when stderr is a terminal, so that
// logs and pipes never see carriage returns.
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  void Update(const std::string& label, size_t done, size_t total) {
    if (!enabled_ || total < 2048) return;
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

}  // namespace

int main(int argc, char** argv) {
  rp::ReplaySettings base;
  bool all_policies = false;
  std::vector<uint64_t> thresholds = {0};
  std::vector<streampool::PoolGrowth> growths = {streampool::PoolGrowth::kDefault};
  bool json = false;
  std::string svg_path;
  std::string timeline_path;
  std::vector<std::string> files;

  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    absl::string_view value;
    // "--flag=value" or "--flag value".
    auto take = [&](absl::string_view flag) {
      absl::string_view rest = arg;
      if (!absl::ConsumePrefix(&rest, flag)) return false;
      if (absl::ConsumePrefix(&rest, "=")) {
        value = rest;
        return true;
      }
      if (!rest.empty()) return false;
      if (i + 1 >= argc) UsageError(std::string(flag) + " needs a value");
      value = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--no-check") {
      base.check_stream_order = false;
    } else if (take("--reuse")) {
      base.reuse_event = base.reuse_opportunistic = base.reuse_internal = false;
      if (value == "all") {
        base.reuse_event = base.reuse_opportunistic = base.reuse_internal = true;
      } else if (value != "none") {
        for (absl::string_view r : absl::StrSplit(value, ',')) {
          if (r == "event") {
            base.reuse_event = true;
          } else if (r == "opportunistic") {
            base.reuse_opportunistic = true;
          } else if (r == "internal") {
            base.reuse_internal = true;
          } else {
            UsageError("unknown reuse rule '" + std::string(r) + "'");
          }
        }
      }
    } else if (take("--policies")) {
      if (value != "all") UsageError("--policies takes only 'all'");
      all_policies = true;
    } else if (take("--threshold")) {
      thresholds.clear();
      for (absl::string_view t : absl::StrSplit(value, ',')) {
        uint64_t v = 0;
        if (t == "max") {
          v = UINT64_MAX;
        } else if (!ParseBytes(t, &v)) {
          UsageError("bad threshold '" + std::string(t) + "'");
        }
        thresholds.push_back(v);
      }
    } else if (take("--growth")) {
      growths.clear();
      for (absl::string_view g : absl::StrSplit(value, ',')) {
        std::optional<streampool::PoolGrowth> parsed =
            internal::ParseEnumName<streampool::PoolGrowth>(g);
        if (!parsed) UsageError("unknown growth '" + std::string(g) + "'");
        growths.push_back(*parsed);
      }
    } else if (take("--pool")) {
      std::optional<AllocationType> type = internal::ParseEnumName<AllocationType>(value);
      if (!type) UsageError("unknown pool type '" + std::string(value) + "'");
      base.pool_type = *type;
    } else if (take("--backing")) {
      std::optional<Backing> backing = internal::ParseEnumName<Backing>(value);
      if (!backing) UsageError("unknown backing '" + std::string(value) + "'");
      base.backing = *backing;
    } else if (take("--capacity")) {
      if (!ParseBytes(value, &base.device_capacity) || base.device_capacity == 0) {
        UsageError("bad capacity '" + std::string(value) + "'");
      }
    } else if (take("--svg")) {
      if (value.empty()) UsageError("--svg needs a file name");
      svg_path = std::string(value);
    } else if (take("--timeline")) {
      if (value.empty()) UsageError("--timeline needs a file name");
      timeline_path = std::string(value);
      base.record_timeline = true;
    } else if (!arg.empty() && arg[0] == '-') {
      UsageError("unknown option '" + std::string(arg) + "'");
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.empty()) UsageError("no trace given");

  const std::vector<rp::ReplaySettings> settings =
      rp::SweepSettings(base, thresholds, growths, all_policies);

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

  Progress progress;
  std::vector<rp::TraceReport> reports;
  for (const rp::Trace& t : traces) {
    rp::TraceReport rep;
    rep.trace = &t;
    for (const rp::ReplaySettings& s : settings) {
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
  if (!svg_path.empty() && !WriteFile(svg_path, rp::FormatSvg(reports))) return 1;
  if (!timeline_path.empty()) {
    std::vector<rp::TimelineProcess> processes;
    for (const rp::TraceReport& rep : reports) {
      for (const rp::ReplayResult& r : rep.runs) processes.push_back(*r.timeline);
    }
    if (!WriteFile(timeline_path, rp::FormatChromeTrace(processes))) return 1;
  }
  return 0;
}
