#include "src/replay/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/pool/names.h"

namespace streampool::replay {
namespace {

constexpr double kGiBf = 1024.0 * 1024.0 * 1024.0;

std::string Bytes(uint64_t b) { return absl::StrFormat("%d (%.3f GiB)", b, b / kGiBf); }

std::string Cost(const HostCost& c) {
  if (c.calls == 0) return "-";
  return absl::StrFormat("%.0f/%d/%d", c.mean_ns, c.p50_ns, c.p99_ns);
}

}  // namespace

TorchFigures TorchFiguresOf(const Trace& trace) {
  TorchFigures t;
  t.peak_reserved = trace.HeaderNumber("torch_peak_reserved_bytes");
  t.peak_live = trace.HeaderNumber("peak_live_bytes");
  if (t.peak_reserved && t.peak_live && *t.peak_reserved > 0) {
    t.utilization = static_cast<double>(*t.peak_live) / static_cast<double>(*t.peak_reserved);
  }
  return t;
}

std::string XmlEscape(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        out += c < 0x20 && c != '\t' && c != '\n' ? '?' : static_cast<char>(c);
    }
  }
  return out;
}

// ------------------------------------------------------------------- text

std::string FormatText(const std::vector<TraceReport>& reports) {
  std::string out;
  // Pool type, backing and checker are the same for every run; the capacity
  // is the first run's, as replayed (a recording at its own settings runs on
  // its recorded device), and a trace that ran on another says so.
  uint64_t header_capacity = 0;
  if (!reports.empty() && !reports[0].runs.empty()) {
    const ReplaySettings& c = reports[0].runs[0].settings;
    header_capacity = reports[0].runs[0].device_capacity;
    absl::StrAppendFormat(&out,
                          "pool %s, backing %s, device capacity %s, stream-order checker %s\n\n",
                          internal::EnumName(c.pool_type), internal::EnumName(c.backing),
                          Bytes(header_capacity), c.check_stream_order ? "on" : "off");
  }
  for (const TraceReport& rep : reports) {
    const Trace& t = *rep.trace;
    const TorchFigures torch = TorchFiguresOf(t);
    absl::StrAppendFormat(&out,
                          "%s (%s): %d ops, %d allocs, %d frees, %d stream%s, %d event%s, "
                          "%.3f ms of trace time\n",
                          t.name, TraceFormatName(t.format), t.ops.size(), t.alloc_count,
                          t.free_count, t.stream_ids.size(), t.stream_ids.size() == 1 ? "" : "s",
                          t.event_ids.size(), t.event_ids.size() == 1 ? "" : "s",
                          t.total_time_ns / 1e6);
    absl::StrAppend(&out, "  trace peak live bytes (requested sizes): ", Bytes(t.peak_live_bytes));
    if (torch.peak_live) {
      absl::StrAppend(&out, *torch.peak_live == t.peak_live_bytes ? " = header" : " != header ",
                      *torch.peak_live == t.peak_live_bytes ? "" : absl::StrCat(*torch.peak_live));
    }
    absl::StrAppend(&out, "\n");
    for (const ReplayResult& r : rep.runs) {
      if (r.device_capacity == header_capacity) continue;
      absl::StrAppend(&out, "  replayed on a device of ", Bytes(r.device_capacity),
                      r.settings.use_recorded && r.device_capacity != r.settings.device_capacity
                          ? " (the recording's)"
                          : "",
                      "\n");
      break;
    }
    if (torch.peak_reserved) {
      absl::StrAppend(&out, "  PyTorch: peak reserved ", Bytes(*torch.peak_reserved));
      if (torch.utilization) {
        absl::StrAppendFormat(&out, ", utilization %.4f (peak_live_bytes / reserved)",
                              *torch.utilization);
      }
      absl::StrAppend(&out, "\n");
    }
    // Labels grow with a sweep over growths; the column grows with them.
    int label_width = 44;
    for (const ReplayResult& r : rep.runs) {
      label_width = std::max(label_width, static_cast<int>(r.settings.Label().size()));
    }
    absl::StrAppendFormat(&out, "  %-*s %26s %26s %6s %9s %8s  %s  %5s %5s %5s  %s  %s\n",
                          label_width, "setting", "peak reserved", "peak used", "util", "live-util",
                          "vs torch", "reuse same/event/opp/sync/internal/fresh", "waits", "fail",
                          "check", "alloc ns mean/p50/p99", "free ns mean/p50/p99");
    for (const ReplayResult& r : rep.runs) {
      // The trace's peak counts every allocation; with some failed it says
      // nothing about this run.
      std::string live_util = "-";
      if (r.peak_reserved != 0 && r.failed_allocs == 0) {
        live_util =
            absl::StrFormat("%.4f", static_cast<double>(t.peak_live_bytes) / r.peak_reserved);
      }
      std::string vs = "-";
      if (torch.peak_reserved && *torch.peak_reserved > 0) {
        vs = absl::StrFormat("%.4f", static_cast<double>(r.peak_reserved) / *torch.peak_reserved);
      }
      absl::StrAppendFormat(&out, "  %-*s %26s %26s %6.4f %9s %8s  %-40s  %5d %5d %5d  %-21s  %s\n",
                            label_width, r.settings.Label(), Bytes(r.peak_reserved),
                            Bytes(r.peak_used), r.utilization, live_util, vs,
                            ReuseBreakdown(r.stats), r.stats.waits_inserted, r.failed_allocs,
                            r.checker_reports, Cost(r.alloc_cost), Cost(r.free_cost));
      for (const std::string& m : r.first_checker_reports) {
        absl::StrAppend(&out, "    checker: ", m, "\n");
      }
      absl::StrAppend(&out, GraphMemoryText(r, "    "));
      if (r.decisions_checked != 0) {
        absl::StrAppend(&out, "    recorded decisions: ", r.decisions_checked, " compared, ",
                        r.decisions_diverged, " diverged",
                        r.first_divergence.empty() ? "" : "; first: ", r.first_divergence,
                        r.not_reproducible.empty() ? "" : " (need not match: ", r.not_reproducible,
                        r.not_reproducible.empty() ? "" : ")", "\n");
      }
    }
    // Several allocators: what each did, in the terms they share.
    const bool allocators = std::any_of(
        rep.runs.begin(), rep.runs.end(),
        [](const ReplayResult& r) { return r.settings.allocator != AllocatorKind::kStreampool; });
    if (allocators) {
      absl::StrAppendFormat(&out, "  %-*s %26s %10s %8s %12s %6s %6s %8s\n", label_width,
                            "allocator", "peak reserved", "segments", "seg high", "cross-stream",
                            "waits", "syncs", "retries");
      for (const ReplayResult& r : rep.runs) {
        const ModelCounters& c = r.counters;
        absl::StrAppendFormat(&out, "  %-*s %26s %10d %8s %12d %6d %6d %8d\n", label_width,
                              r.settings.AllocatorLabel(), Bytes(r.peak_reserved), c.segments_made,
                              IsModel(r.settings.allocator) ? absl::StrCat(c.segments_high) : "-",
                              c.cross_stream_reuses, c.waits, c.syncs, c.oom_retries);
      }
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out,
                  "util = peak used / peak reserved (used: rule sizes of live allocations); "
                  "live-util = trace peak live bytes / peak reserved (PyTorch's quotient); "
                  "vs torch = peak reserved / torch_peak_reserved_bytes; host ns = wall-clock "
                  "cost of each MallocAsync/FreeAsync call\n");
  return out;
}

// ------------------------------------------------------------------- JSON

namespace {

using Json = nlohmann::ordered_json;

// A ratio, or null where it is undefined (JSON has no NaN or infinity).
Json Ratio(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}

template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json CostJson(const HostCost& c) {
  return {{"calls", c.calls},
          {"mean_ns", Ratio(c.mean_ns)},
          {"p50_ns", c.p50_ns},
          {"p99_ns", c.p99_ns},
          {"max_ns", c.max_ns}};
}

// Where a run's report shows a statistic: the `run` column of
// src/pool/pool_stats.def.
enum RunGroup { kCounts, kUpstream, kAtEnd, kHidden };

// Appends the statistics of `group` to a run's report, each under its
// `run_key`.
void AppendRunStats(RunGroup group, const PoolStats& s, Json& j) {
#define SP_POOL_STAT(c_name, cxx_name, combine, run, run_key, ...) \
  if (run == group) j[run_key] = s.cxx_name;
#define SP_POOL_STAT_CXX(cxx_name, type, combine, run, run_key, ...) \
  if (run == group) j[run_key] = s.cxx_name;
#include "src/pool/pool_stats.def"
}

Json RunJson(const Trace& t, const TorchFigures& torch, const ReplayResult& r) {
  const ReplaySettings& c = r.settings;
  const PoolStats& s = r.stats;
  Json reuse = Json::object();
  for (const ReuseSwitch& sw : ReuseSwitches()) reuse[sw.name] = c.*sw.on;
  // The trace's peak counts every allocation; with some failed it says
  // nothing about this run.
  std::optional<double> live_utilization;
  if (r.peak_reserved != 0 && r.failed_allocs == 0) {
    live_utilization = static_cast<double>(t.peak_live_bytes) / r.peak_reserved;
  }
  std::optional<double> vs_torch;
  if (torch.peak_reserved && *torch.peak_reserved != 0) {
    vs_torch = static_cast<double>(r.peak_reserved) / *torch.peak_reserved;
  }
  Json j = {{"setting", c.Label()},
            {"allocator", c.AllocatorLabel()},
            {"reuse", std::move(reuse)},
            {"release_threshold",
             c.release_threshold == UINT64_MAX ? Json("max") : Json(c.release_threshold)},
            {"growth", internal::EnumName(c.growth)},
            {"pool_growth", internal::EnumName(r.growth)},
            {"pool", internal::EnumName(c.pool_type)},
            {"backing", internal::EnumName(c.backing)},
            {"capacity", r.device_capacity},
            {"peak_reserved_bytes", r.peak_reserved},
            {"peak_used_bytes", r.peak_used},
            {"utilization", Ratio(r.utilization)},
            {"live_utilization", Ratio(live_utilization)},
            {"vs_torch_peak_reserved", Ratio(vs_torch)},
            {"reuse_counts", ReuseCountsJson(s)}};
  AppendRunStats(kCounts, s, j);
  j["failed_allocs"] = r.failed_allocs;
  j["skipped_frees"] = r.skipped_frees;
  AppendRunStats(kUpstream, s, j);
  AppendRunStats(kAtEnd, s, j);
  j.update(Json{
      {"checker_reports", r.checker_reports},
      {"end_time_ns", r.end_time_ns},
      {"makespan_ns", r.makespan_ns},
      {"synchronizes", r.synchronizes},
      {"allocator_counts",
       {{"segments_made", r.counters.segments_made},
        {"segments_freed", r.counters.segments_freed},
        {"segments_high", r.counters.segments_high},
        {"cross_stream_reuses", r.counters.cross_stream_reuses},
        {"waits", r.counters.waits},
        {"syncs", r.counters.syncs},
        {"oom_retries", r.counters.oom_retries}}},
      {"recorded_decisions",
       {{"compared", r.decisions_checked},
        {"diverged", r.decisions_diverged},
        {"first_divergence", r.first_divergence.empty() ? Json(nullptr) : Json(r.first_divergence)},
        {"not_reproducible",
         r.not_reproducible.empty() ? Json(nullptr) : Json(r.not_reproducible)}}},
      {"host_cost", {{"alloc", CostJson(r.alloc_cost)}, {"free", CostJson(r.free_cost)}}}});
  if (!r.graph_memory.empty()) {
    j["graph_memory"] = GraphMemoryJson(r);
    j["failed_launches"] = r.failed_launches;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json GraphMemoryJson(const ReplayResult& r) {
  Json out = Json::array();
  for (const ReplayResult::GraphMemory& g : r.graph_memory) {
    out.push_back({{"device", g.device},
                   {"used_high_bytes", g.used_high},
                   {"used_end_bytes", g.used_end},
                   {"reserved_high_bytes", g.reserved_high},
                   {"reserved_end_bytes", g.reserved_end}});
  }
  return out;
}

std::string GraphMemoryText(const ReplayResult& r, absl::string_view indent) {
  std::string out;
  for (const ReplayResult::GraphMemory& g : r.graph_memory) {
    absl::StrAppend(&out, indent, "graph memory device ", g.device, ": used high ",
                    Bytes(g.used_high), ", end ", Bytes(g.used_end), "; reserved high ",
                    Bytes(g.reserved_high), ", end ", Bytes(g.reserved_end), "\n");
  }
  if (r.failed_launches != 0) {
    absl::StrAppend(&out, indent, "graph launches failed for lack of memory: ", r.failed_launches,
                    "\n");
  }
  return out;
}

nlohmann::ordered_json ReportJson(const std::vector<TraceReport>& reports) {
  Json traces = Json::array();
  for (const TraceReport& rep : reports) {
    const Trace& t = *rep.trace;
    const TorchFigures torch = TorchFiguresOf(t);
    Json runs = Json::array();
    for (const ReplayResult& r : rep.runs) runs.push_back(RunJson(t, torch, r));
    traces.push_back({{"file", t.name},
                      {"format", TraceFormatName(t.format)},
                      {"ops", t.ops.size()},
                      {"allocs", t.alloc_count},
                      {"frees", t.free_count},
                      {"streams", t.stream_ids.size()},
                      {"events", t.event_ids.size()},
                      {"trace_time_ns", t.total_time_ns},
                      {"peak_live_bytes", t.peak_live_bytes},
                      {"live_at_end_bytes", t.live_at_end_bytes},
                      {"torch",
                       {{"peak_reserved_bytes", OrNull(torch.peak_reserved)},
                        {"peak_live_bytes", OrNull(torch.peak_live)},
                        {"utilization", Ratio(torch.utilization)}}},
                      {"runs", std::move(runs)}});
  }
  return {{"traces", std::move(traces)}};
}

std::string FormatJson(const std::vector<TraceReport>& reports) {
  return DumpJson(ReportJson(reports), /*indent=*/2) + "\n";
}

std::string DumpJson(const nlohmann::ordered_json& json, int indent) {
  // A file name or a checker message need not be UTF-8; such bytes become
  // U+FFFD rather than an exception.
  return json.dump(indent, ' ', /*ensure_ascii=*/false,
                   nlohmann::ordered_json::error_handler_t::replace);
}

// -------------------------------------------------------------------- SVG

namespace {

// Colour-blind-safe palette (Okabe-Ito), one per setting.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

// The series as an SVG step polyline, at most one vertical segment per pixel
// column: a column's points collapse to its maximum and its last value, so
// peaks survive however many points fall into one pixel.
template <typename Value, typename ToX, typename ToY>
std::string StepPolyline(const std::vector<SeriesPoint>& series, uint64_t end_ns, Value value,
                         ToX to_x, ToY to_y) {
  std::string pts;
  auto add = [&pts](double x, double y) { absl::StrAppendFormat(&pts, "%.1f,%.1f ", x, y); };
  size_t i = 0;
  double prev_y = 0;
  bool first = true;
  while (i < series.size()) {
    const long col = std::lround(to_x(series[i].time_ns));
    uint64_t max_v = value(series[i]);
    uint64_t last_v = max_v;
    size_t j = i + 1;
    while (j < series.size() && std::lround(to_x(series[j].time_ns)) == col) {
      max_v = std::max(max_v, value(series[j]));
      last_v = value(series[j]);
      ++j;
    }
    const double x = to_x(series[i].time_ns);
    if (!first) add(x, prev_y);
    add(x, to_y(max_v));
    add(x, to_y(last_v));
    prev_y = to_y(last_v);
    first = false;
    i = j;
  }
  add(to_x(end_ns), prev_y);
  return pts;
}

// The chart's layout: panels of kPanelH, one per trace, one above another.
constexpr double kWidth = 960, kPanelH = 340, kLeft = 80, kRight = 20, kTop = 40, kBottom = 50;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kPanelH - kTop - kBottom;

// One trace's panel at y0: its axes, PyTorch's peak reserved where the
// trace names it, and each run's reserved and used bytes over time.
std::string TracePanelSvg(const TraceReport& rep, double y0) {
  const double plot_w = kPlotW, plot_h = kPlotH;
  uint64_t t_max = 1, v_max = 1;
  for (const ReplayResult& r : rep.runs) {
    t_max = std::max(t_max, r.end_time_ns);
    for (const SeriesPoint& s : r.series) {
      t_max = std::max(t_max, s.time_ns);
      v_max = std::max({v_max, s.reserved, s.used});
    }
  }
  const TorchFigures torch = TorchFiguresOf(*rep.trace);
  if (torch.peak_reserved) v_max = std::max(v_max, *torch.peak_reserved);
  const double t_ms = t_max / 1e6;
  const double v_gib = v_max / kGiBf * 1.05;
  auto to_x = [&](uint64_t ns) { return kLeft + plot_w * (ns / 1e6) / t_ms; };
  auto to_y = [&](uint64_t v) { return y0 + kTop + plot_h * (1 - (v / kGiBf) / v_gib); };

  std::string out = ChartFrameSvg(
      rep.trace->name, y0 + 22, kLeft, y0 + kTop, plot_w, plot_h,
      {0, t_ms, [&](double v) { return kLeft + plot_w * v / t_ms; }, "virtual time (ms)"},
      {0, v_gib, [&](double v) { return y0 + kTop + plot_h * (1 - v / v_gib); }, "GiB"}, 50);
  if (torch.peak_reserved) {
    // The line across the plot; its key in the title row, right-aligned,
    // where no series can run over it.
    const double y = to_y(*torch.peak_reserved);
    const double key_y = y0 + 18;
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"gray\" "
        "stroke-dasharray=\"2,3\"/>\n"
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"gray\" "
        "stroke-dasharray=\"2,3\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
        "fill=\"gray\">PyTorch peak reserved</text>\n",
        kLeft, y, kLeft + plot_w, y, kLeft + plot_w - 30, key_y, kLeft + plot_w, key_y,
        kLeft + plot_w - 36, key_y + 4);
  }
  for (size_t k = 0; k < rep.runs.size(); ++k) {
    const ReplayResult& r = rep.runs[k];
    const char* color = kPalette[k % std::size(kPalette)];
    // Reserved thick, used thin, both solid: a dash pattern could hide a
    // one-pixel spike, and spikes are where the peaks are.
    absl::StrAppendFormat(
        &out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"%s\"/>\n", color,
        StepPolyline(
            r.series, r.end_time_ns, [](const SeriesPoint& s) { return s.reserved; }, to_x, to_y));
    absl::StrAppendFormat(
        &out,
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1\" stroke-opacity=\"0.8\" "
        "points=\"%s\"/>\n",
        color,
        StepPolyline(
            r.series, r.end_time_ns, [](const SeriesPoint& s) { return s.used; }, to_x, to_y));
  }
  return out;
}

// The legend at ly: the settings of the first trace (every trace is
// replayed under the same settings).
std::string LegendSvg(const std::vector<TraceReport>& reports, double ly) {
  std::string out = absl::StrFormat(
      "<text x=\"%.0f\" y=\"%.0f\">thick: reserved, thin: used (identical "
      "series overlap; the last setting is drawn on top)</text>\n",
      kLeft, ly);
  if (reports.empty()) return out;
  for (size_t k = 0; k < reports[0].runs.size(); ++k) {
    const double y = ly + 18 * (k + 1);
    const char* color = kPalette[k % std::size(kPalette)];
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"3\"/><text x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                          kLeft, y - 4, kLeft + 30, y - 4, color, kLeft + 38, y,
                          XmlEscape(reports[0].runs[k].settings.Label()));
  }
  return out;
}

}  // namespace

std::string FormatSvg(const std::vector<TraceReport>& reports) {
  size_t max_runs = 0;
  for (const TraceReport& r : reports) max_runs = std::max(max_runs, r.runs.size());
  const double legend_h = 24 + 18.0 * max_runs;
  const double height = kPanelH * reports.size() + legend_h;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);
  for (size_t p = 0; p < reports.size(); ++p) {
    absl::StrAppend(&out, TracePanelSvg(reports[p], p * kPanelH));
  }
  absl::StrAppend(&out, LegendSvg(reports, kPanelH * reports.size() + 16));
  out += "</svg>\n";
  return out;
}

std::string ChartFrameSvg(absl::string_view trace_name, double title_y, double left, double top,
                          double width, double height, const SvgAxis& x, const SvgAxis& y,
                          double y_name_gap) {
  // The file's name, not its path: a title says which trace, and a long
  // absolute path would run into the key beside it.
  std::string out = absl::StrFormat(
      "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", left,
      title_y, XmlEscape(std::filesystem::path(std::string(trace_name)).filename().string()));
  const double bottom = top + height;
  absl::StrAppendFormat(
      &out,
      "<g stroke=\"black\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
      "y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
      left, top, left, bottom, left, bottom, left + width, bottom);
  const double xs = NiceStep(x.hi - x.lo, 8);
  for (double v = std::ceil(x.lo / xs) * xs; v <= x.hi + 1e-9; v += xs) {
    const double px = x.at(v);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                          px, top, px, bottom, px, bottom + 16, v);
  }
  absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                        left + width / 2, bottom + 34, x.name);
  const double ys = NiceStep(y.hi - y.lo, 6);
  for (double v = std::ceil(y.lo / ys) * ys; v <= y.hi + 1e-9; v += ys) {
    const double py = y.at(v);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          left, py, left + width, py, left - 6, py + 4, v);
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                        left - y_name_gap, top + height / 2, left - y_name_gap, top + height / 2,
                        y.name);
  return out;
}

uint64_t ReuseCount(const PoolStats& s, ReuseRule rule) {
  switch (rule) {
    case ReuseRule::kFresh:
      return s.fresh_allocs;
    case ReuseRule::kSameStream:
      return s.reuse_same_stream;
    case ReuseRule::kEventDependency:
      return s.reuse_event_dependency;
    case ReuseRule::kOpportunistic:
      return s.reuse_opportunistic;
    case ReuseRule::kAfterSync:
      return s.reuse_after_sync;
    case ReuseRule::kInternalDependency:
      return s.reuse_internal_dependency;
  }
  return 0;
}

Json ReuseCountsJson(const PoolStats& s) {
  Json counts = Json::object();
  for (const internal::NamedValue<ReuseRule>& rule : internal::EnumNames<ReuseRule>()) {
    counts[rule.name] = ReuseCount(s, rule.value);
  }
  return counts;
}

std::string ReuseBreakdown(const PoolStats& s) {
  std::string out;
  for (const internal::NamedValue<ReuseRule>& rule : internal::EnumNames<ReuseRule>()) {
    if (rule.value != ReuseRule::kFresh) absl::StrAppend(&out, ReuseCount(s, rule.value), "/");
  }
  return absl::StrCat(out, s.fresh_allocs);
}

double NiceStep(double range, int want) {
  if (range <= 0) return 1;
  const double raw = range / want;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

}  // namespace streampool::replay
