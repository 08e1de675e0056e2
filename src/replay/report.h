// What streampool-replay prints: a text table, JSON, or an SVG chart of
// reserved and used bytes over virtual time, for one or more traces each
// replayed under one or more settings.
//
// When a trace's header carries PyTorch's own figures
// (torch_peak_reserved_bytes, peak_live_bytes), each run is compared with
// them: our peak reserved against PyTorch's, and PyTorch's utilization
// (peak_live_bytes / torch_peak_reserved_bytes) against ours. Ours is given
// twice: peak used / peak reserved (used counts rule sizes, 256-B rounded on
// device pools) and the trace's raw peak live bytes / peak reserved, which is
// the same quotient PyTorch's figure is.
#ifndef STREAMPOOL_SRC_REPLAY_REPORT_H_
#define STREAMPOOL_SRC_REPLAY_REPORT_H_

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {

struct TraceReport {
  const Trace* trace = nullptr;
  std::vector<ReplayResult> runs;
};

// PyTorch's figures from a trace header, when present.
struct TorchFigures {
  std::optional<uint64_t> peak_reserved;  // torch_peak_reserved_bytes
  std::optional<uint64_t> peak_live;      // peak_live_bytes
  std::optional<double> utilization;      // peak_live / peak_reserved
};
TorchFigures TorchFiguresOf(const Trace& trace);

std::string FormatText(const std::vector<TraceReport>& reports);
// The reports as one JSON document: {"traces": [{"file", "ops", ...,
// "torch": {...}, "runs": [{"setting", "reuse", "peak_reserved_bytes",
// "reuse_counts", ..., "host_cost"}]}]}. Ratios that are undefined are null.
nlohmann::ordered_json ReportJson(const std::vector<TraceReport>& reports);
// ReportJson as text, indented, with a final newline.
std::string FormatJson(const std::vector<TraceReport>& reports);
// A self-contained SVG: one panel per trace, one colour per setting, reserved
// thick and used thin, axes in ms and GiB, and a legend.
std::string FormatSvg(const std::vector<TraceReport>& reports);

// JSON text of `json` (indent < 0: one line), bytes that are not UTF-8
// replaced by U+FFFD.
std::string DumpJson(const nlohmann::ordered_json& json, int indent);

// For SVG text.
std::string XmlEscape(absl::string_view s);

// The allocations a rule served, from the pool's statistics.
uint64_t ReuseCount(const PoolStats& s, ReuseRule rule);
// Each rule's count under its name, as the JSON reports give them.
nlohmann::ordered_json ReuseCountsJson(const PoolStats& s);
// The counts as the text reports' "reuse same/event/opp/sync/internal/fresh"
// column gives them: the rules in their enum's order, fresh last.
std::string ReuseBreakdown(const PoolStats& s);
// A run's graph memory per device (ReplayResult::graph_memory): JSON
// [{"device", "used_high_bytes", "used_end_bytes", "reserved_high_bytes",
// "reserved_end_bytes"}...], and a text line per device ("graph memory
// device 0: used high N, end N; reserved high N, end N"), each line after
// `indent`. Reports show them only for a trace with graph ops.
nlohmann::ordered_json GraphMemoryJson(const ReplayResult& r);
std::string GraphMemoryText(const ReplayResult& r, absl::string_view indent);
// An axis tick step of 1, 2 or 5 times a power of ten giving about `want`
// ticks over `range`.
double NiceStep(double range, int want);

// One axis of an SVG chart over [lo, hi]: a grid line with its value at
// each multiple of a NiceStep, placed by `at`, and the axis's name.
struct SvgAxis {
  double lo, hi;
  absl::FunctionRef<double(double)> at;
  absl::string_view name;
};

// An SVG chart's frame: the trace file's name as its title at `title_y`,
// the axes of the plot area (left, top, width, height) with about 8 grid
// lines across and 6 up, and the y axis's name `y_name_gap` left of it.
std::string ChartFrameSvg(absl::string_view trace_name, double title_y, double left, double top,
                          double width, double height, const SvgAxis& x, const SvgAxis& y,
                          double y_name_gap);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_REPORT_H_
