// The policy report as one HTML page (FormatPolicyHtml, policy_report.h).
//
// Everything is inline, so that the page opens from a file, a CI artifact or
// a mail with no network: SVG drawn here, a style sheet and a short script
// that sorts tables and shows a point's values. Sizes stay small by drawing
// each memory series at the chart's resolution (a pixel column keeps its
// lowest, highest and last value), never point by point: a long trace costs
// its chart's width, not its ops.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/pool/names.h"
#include "src/replay/policy_report.h"
#include "src/replay/report.h"

namespace streampool::replay {
namespace {

constexpr double kMiBf = 1024.0 * 1024.0;
constexpr double kGiBf = 1024.0 * kMiBf;

// Blocks listed per trace: the largest live at the peak; the per-stream
// totals above them cover every block.
constexpr size_t kPeakBlocks = 15;

std::string Human(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return absl::StrFormat("%.3f GiB", b / kGiBf);
  if (b >= (uint64_t{1} << 20)) return absl::StrFormat("%.1f MiB", b / kMiBf);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%d B", b);
}

std::string Ms(uint64_t ns) { return absl::StrFormat("%.3f", ns / 1e6); }

std::string Esc(absl::string_view s) { return XmlEscape(s); }

std::string NameOf(const CapacityResult& r) {
  return r.settings.allocator == AllocatorKind::kStreampool ? r.settings.Label()
                                                            : r.settings.AllocatorLabel();
}

// ------------------------------------------------------- memory over time

struct Line {
  std::string name;
  const std::vector<SeriesPoint>* series;
  bool used;  // used bytes, else reserved
  const char* colour;
};

// A step path of one series in pixel space, one pixel column at a time.
std::string StepPath(const std::vector<SeriesPoint>& series, bool used, double x0, double w,
                     double y0, double h, uint64_t t_max, double y_max) {
  if (series.empty() || t_max == 0 || y_max <= 0) return "";
  auto px = [&](uint64_t t) { return x0 + w * static_cast<double>(t) / t_max; };
  auto py = [&](uint64_t v) { return y0 + h * (1 - static_cast<double>(v) / y_max); };
  std::string d;
  int column = -1;
  double lo = 0, hi = 0, last = py(0);
  auto flush = [&]() {
    if (column < 0) return;
    const double x = x0 + column;
    absl::StrAppendFormat(&d, "L%.0f %.1fL%.0f %.1fL%.0f %.1f", x, lo, x, hi, x, last);
  };
  absl::StrAppendFormat(&d, "M%.0f %.1f", x0, last);
  for (const SeriesPoint& p : series) {
    const double y = py(used ? p.used : p.reserved);
    const int c = static_cast<int>(px(p.time_ns) - x0);
    if (c != column) {
      flush();
      // The level held until this column.
      absl::StrAppendFormat(&d, "L%d %.1f", static_cast<int>(x0) + c, last);
      column = c;
      lo = hi = last;
    }
    lo = std::max(lo, std::max(y, last));  // screen y grows downwards
    hi = std::min(hi, std::min(y, last));
    last = y;
  }
  flush();
  absl::StrAppendFormat(&d, "L%.0f %.1f", x0 + w, last);
  return d;
}

std::string MemorySvg(const TracePolicyReport& rep, const PolicySummary& sum, double width,
                      double height) {
  constexpr double kLeft = 80, kRight = 20, kTop = 34;
  std::vector<Line> lines;
  const char* kColours[] = {"#0072B2", "#009E73", "#D55E00", "#CC79A7",
                            "#E69F00", "#56B4E9", "#000000", "#F0E442"};
  size_t colour = 0;
  for (const ReplayResult& r : rep.series_runs) {
    const bool is_ref = sum.reference != nullptr &&
                        r.settings.Label() == sum.reference->settings.Label() &&
                        r.settings.use_recorded == (sum.reference->recorded_pools != 0);
    lines.push_back(
        {absl::StrCat(is_ref ? (sum.reference_recorded ? "recorded: " : "default: ") : "ship: ",
                      r.settings.Label(), ", unconstrained"),
         &r.series, false, kColours[colour++ % 8]});
    // A trace of several pools: each pool's reserved bytes too.
    if (r.pool_series.size() > 1) {
      for (const ReplayResult::PoolSeries& p : r.pool_series) {
        lines.push_back({absl::StrCat("  of it, ", p.name, " (reserved)"), &p.points, false,
                         kColours[colour++ % 8]});
      }
    }
  }
  if (rep.capped) {
    const std::string name = absl::StrCat("ship: ", rep.capped->settings.Label(), ", maxSize ",
                                          Human(rep.capped->settings.max_size));
    lines.push_back({name + " (reserved)", &rep.capped->series, false, kColours[colour % 8]});
    lines.push_back({name + " (used)", &rep.capped->series, true, "#999999"});
  }
  // A key line per series under the axis.
  const double bottom = 50 + 14.0 * lines.size();
  // Each key line takes room from the plot; a chart of many pools grows
  // taller instead of squeezing it below its least height.
  constexpr double kLeastPlot = 160;
  height = std::max(height, kTop + bottom + kLeastPlot);
  const double w = width - kLeft - kRight, h = height - kTop - bottom;
  uint64_t t_max = 0, y_max_b = rep.trace->peak_live_bytes;
  for (const Line& l : lines) {
    for (const SeriesPoint& p : *l.series) {
      t_max = std::max(t_max, p.time_ns);
      y_max_b = std::max(y_max_b, l.used ? p.used : p.reserved);
    }
  }
  const uint64_t capacity = sum.ship != nullptr ? sum.ship->min_capacity : 0;
  y_max_b = std::max(y_max_b, capacity);
  const bool gib = y_max_b >= (uint64_t{1} << 30);
  const double unit = gib ? kGiBf : kMiBf;
  const double y_max = y_max_b * 1.08 / unit;
  std::string out = absl::StrFormat(
      "<svg class=\"mem\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
      width, height, width, height);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"22\" font-size=\"14\" font-weight=\"bold\">memory "
                        "over time, %s</text>\n",
                        kLeft,
                        rep.trace->pools.size() > 1
                            ? absl::StrCat("the trace's ", rep.trace->pools.size(), " pools")
                            : std::string("its pool"));
  absl::StrAppendFormat(
      &out,
      "<g stroke=\"black\"><line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
      "y2=\"%.0f\"/><line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/></g>\n",
      kLeft, kTop, kLeft, kTop + h, kLeft, kTop + h, kLeft + w, kTop + h);
  const double ys = NiceStep(y_max, 6);
  for (double v = 0; v <= y_max + 1e-9; v += ys) {
    const double y = kTop + h * (1 - v / y_max);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                          "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          kLeft, y, kLeft + w, y, kLeft - 6, y + 4, v);
  }
  const double t_ms = t_max / 1e6;
  const double xs = NiceStep(t_ms > 0 ? t_ms : 1, 8);
  for (double v = 0; v <= t_ms + 1e-9 && t_ms > 0; v += xs) {
    const double x = kLeft + w * v / t_ms;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", x,
                          kTop + h + 16, v);
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">host virtual time "
                        "(ms)</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 %.0f %.0f)\">bytes (%s)</text>\n",
                        kLeft + w / 2, kTop + h + 32, kLeft - 55, kTop + h / 2, kLeft - 55,
                        kTop + h / 2, gib ? "GiB" : "MiB");
  // Levels: the trace's peak live bytes and the shipped capacity.
  // Peak live is named at the left end, the capacity at the right, so that
  // two close levels keep readable names.
  auto level = [&](uint64_t bytes, const char* colour, const std::string& name, bool at_left) {
    const double y = kTop + h * (1 - bytes / unit / y_max);
    absl::StrAppendFormat(&out,
                          "<g class=\"level\"><title>%s</title><line x1=\"%.0f\" y1=\"%.1f\" "
                          "x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>"
                          "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"%s\">%s</text>"
                          "</g>\n",
                          Esc(name), kLeft, y, kLeft + w, y, colour,
                          at_left ? kLeft + 4 : kLeft + w - 4, y - 4, at_left ? "start" : "end",
                          colour, Esc(name));
  };
  level(rep.trace->peak_live_bytes, "#000000",
        absl::StrCat("peak live ", Human(rep.trace->peak_live_bytes)), /*at_left=*/true);
  if (capacity != 0) {
    level(capacity, "#D55E00", absl::StrCat("ship's capacity ", Human(capacity)),
          /*at_left=*/false);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    absl::StrAppendFormat(&out,
                          "<path class=\"series\" data-series=\"%d\" d=\"%s\" fill=\"none\" "
                          "stroke=\"%s\" stroke-width=\"%s\"><title>%s</title></path>\n",
                          i, StepPath(*l.series, l.used, kLeft, w, kTop, h, t_max, y_max * unit),
                          l.colour, l.used ? "1" : "1.5", Esc(l.name));
    const double ly = kTop + h + 50 + 14.0 * i;
    const double lx = kLeft;
    absl::StrAppendFormat(&out,
                          "<g class=\"key\" data-series=\"%d\"><line x1=\"%.0f\" y1=\"%.0f\" "
                          "x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/><text "
                          "x=\"%.0f\" y=\"%.0f\">%s</text></g>\n",
                          i, lx, ly - 4, lx + 20, ly - 4, l.colour, lx + 26, ly, Esc(l.name));
  }
  if (lines.empty()) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">no run to "
                          "draw</text>\n",
                          kLeft + w / 2, kTop + h / 2);
  }
  out += "</svg>\n";
  return out;
}

// ------------------------------------------------------ blocks at the peak

struct LiveBlock {
  uint64_t slot = 0, size = 0;
  uint32_t stream = 0, line = 0;
};

// The allocations live when the trace's live bytes first reach their peak.
std::vector<LiveBlock> BlocksAtPeak(const Trace& t) {
  uint64_t live = 0, peak = 0;
  size_t peak_op = 0;
  std::vector<uint64_t> sizes(t.alloc_count, 0);
  for (size_t i = 0; i < t.ops.size(); ++i) {
    if (std::optional<Allocation> a = AllocationOf(t.ops[i].op)) {
      sizes[a->slot] = a->size;
      live += a->size;
      if (live > peak) {
        peak = live;
        peak_op = i;
      }
    } else if (std::optional<uint64_t> slot = FreedSlot(t.ops[i].op)) {
      live -= sizes[*slot];
    }
  }
  std::map<uint64_t, LiveBlock> held;
  for (size_t i = 0; i <= peak_op && i < t.ops.size(); ++i) {
    if (std::optional<Allocation> a = AllocationOf(t.ops[i].op)) {
      held[a->slot] = LiveBlock{a->slot, a->size, a->stream, t.ops[i].line};
    } else if (std::optional<uint64_t> slot = FreedSlot(t.ops[i].op)) {
      held.erase(*slot);
    }
  }
  std::vector<LiveBlock> out;
  for (const auto& [slot, b] : held) out.push_back(b);
  std::stable_sort(out.begin(), out.end(),
                   [](const LiveBlock& a, const LiveBlock& b) { return a.size > b.size; });
  return out;
}

std::string PeakBlocksHtml(const Trace& t) {
  const std::vector<LiveBlock> blocks = BlocksAtPeak(t);
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> per_stream;  // blocks, bytes
  for (const LiveBlock& b : blocks) {
    per_stream[b.stream].first += 1;
    per_stream[b.stream].second += b.size;
  }
  std::string out = absl::StrFormat(
      "<h3>Blocks live at the peak (%s in %d allocations)</h3>\n<table class=\"streams\">"
      "<thead><tr><th>stream</th><th>blocks</th><th>bytes</th></tr></thead><tbody>\n",
      Human(t.peak_live_bytes), blocks.size());
  for (const auto& [stream, v] : per_stream) {
    absl::StrAppendFormat(&out,
                          "<tr><td>%d</td><td data-v=\"%d\">%d</td><td data-v=\"%d\">%s</td>"
                          "</tr>\n",
                          t.stream_ids[stream], v.first, v.first, v.second, Human(v.second));
  }
  absl::StrAppend(&out,
                  "</tbody></table>\n<table class=\"blocks\"><thead><tr><th>size</th>"
                  "<th>stream</th><th>trace line</th><th>allocated at (top frames)</th></tr>"
                  "</thead><tbody>\n");
  for (size_t i = 0; i < blocks.size() && i < kPeakBlocks; ++i) {
    const LiveBlock& b = blocks[i];
    auto f = t.frames.find(b.slot);
    std::string frames = "-";
    if (f != t.frames.end()) {
      std::vector<std::string> parts;
      for (absl::string_view frame : absl::StrSplit(f->second, '|')) {
        parts.push_back(Esc(absl::StripAsciiWhitespace(frame)));
      }
      frames = absl::StrCat("<span class=\"frame\">",
                            absl::StrJoin(parts, "</span><br><span class=\"frame\">"), "</span>");
    }
    absl::StrAppendFormat(&out,
                          "<tr><td data-v=\"%d\">%s</td><td>%d</td><td data-v=\"%d\">%d</td>"
                          "<td class=\"frames\">%s</td></tr>\n",
                          b.size, Human(b.size), t.stream_ids[b.stream], b.line, b.line, frames);
  }
  absl::StrAppend(&out, "</tbody></table>\n");
  if (blocks.size() > kPeakBlocks) {
    absl::StrAppendFormat(&out, "<p class=\"note\">%d smaller blocks not listed.</p>\n",
                          blocks.size() - kPeakBlocks);
  }
  if (t.frames.empty()) {
    absl::StrAppend(&out,
                    "<p class=\"note\">This trace names no frames; a trace converted from a "
                    "PyTorch snapshot (tools/torch_snapshot_to_trace.py) does.</p>\n");
  }
  return out;
}

// -------------------------------------------------------------- the table

std::string RowsHtml(const TracePolicyReport& rep, const PolicySummary& sum) {
  std::vector<std::pair<std::string, const CapacityResult*>> rows;
  for (const CapacityResult& r : rep.rows) rows.emplace_back("", &r);
  if (rep.cuda_defaults) rows.emplace_back("CUDA defaults: ", &*rep.cuda_defaults);
  if (rep.reference) {
    rows.emplace_back(sum.reference_recorded ? "recorded: " : "default: ", &*rep.reference);
  }
  std::string out =
      "<table class=\"rows\"><thead><tr><th>setting</th><th>peak reserved</th>"
      "<th>min capacity</th><th>peak reserved there</th><th>makespan there (ms)</th>"
      "<th>waits</th><th>syncs</th><th>replays</th></tr></thead><tbody>\n";
  for (const auto& [prefix, r] : rows) {
    std::string cls;
    if (r == sum.ship) cls = "ship";
    if (r == sum.reference) cls += cls.empty() ? "ref" : " ref";
    if (r->lower_fits_found > 0) cls += cls.empty() ? "warn" : " warn";
    absl::StrAppendFormat(&out, "<tr%s><td>%s%s</td><td data-v=\"%d\">%s</td>",
                          cls.empty() ? "" : absl::StrCat(" class=\"", cls, "\""), Esc(prefix),
                          Esc(NameOf(*r)), r->unconstrained.peak_reserved,
                          Human(r->unconstrained.peak_reserved));
    if (r->fits) {
      absl::StrAppendFormat(
          &out,
          "<td data-v=\"%d\">%s%s</td><td data-v=\"%d\">%s</td><td data-v=\"%d\">%s</td>"
          "<td>%d</td><td>%d</td>",
          r->min_capacity, Human(r->min_capacity), r->lower_fits_found > 0 ? " *" : "",
          r->at_min.peak_reserved, Human(r->at_min.peak_reserved), r->at_min.makespan_ns,
          Ms(r->at_min.makespan_ns), r->at_min.counters.waits, r->at_min.synchronizes);
    } else {
      absl::StrAppend(&out,
                      "<td data-v=\"-1\">does not fit</td><td>-</td><td>-</td><td>-</td>"
                      "<td>-</td>");
    }
    absl::StrAppendFormat(&out, "<td>%d</td></tr>\n", r->replays);
  }
  absl::StrAppend(&out, "</tbody></table>\n");
  return out;
}

std::string ShipHtml(const TracePolicyReport& rep, const PolicySummary& sum) {
  if (sum.ship == nullptr) return "<p class=\"ship\">Nothing fits: no setting to ship.</p>\n";
  const CapacityResult& ship = *sum.ship;
  const char* ref_name = sum.reference_recorded ? "the recorded setting" : "the default setting";
  std::string out = "<p class=\"ship\"><b>Ship:</b> ";
  if (sum.reference == &ship) {
    absl::StrAppend(&out, Esc(ship.settings.Label()), " (", ref_name,
                    "; no swept setting needs less, or as much in less time)");
  } else {
    absl::StrAppend(&out, Esc(ship.settings.Label()), " instead of ", ref_name,
                    sum.reference != nullptr
                        ? absl::StrCat(" (", Esc(sum.reference->settings.Label()), ")")
                        : "");
  }
  const bool capped_fits = rep.capped && rep.capped->failed_allocs == 0;
  if (ship.min_capacity != 0) {
    if (capped_fits) {
      absl::StrAppendFormat(&out,
                            ", with <b>maxSize %s</b> (%d bytes) on any device. Peak reserved "
                            "%s unconstrained, %s capped; makespan %s ms unconstrained, %s ms "
                            "capped.",
                            Human(ship.min_capacity), ship.min_capacity,
                            Human(ship.unconstrained.peak_reserved),
                            Human(rep.capped->peak_reserved), Ms(ship.unconstrained.makespan_ns),
                            Ms(rep.capped->makespan_ns));
    } else {
      absl::StrAppendFormat(&out,
                            ", on a <b>device of %s</b> (a maxSize of as much alone does not "
                            "fit). Peak reserved %s unconstrained, %s there; makespan %s ms "
                            "there.",
                            Human(ship.min_capacity), Human(ship.unconstrained.peak_reserved),
                            Human(ship.at_min.peak_reserved), Ms(ship.at_min.makespan_ns));
    }
  }
  if (sum.reference != nullptr && sum.reference != &ship && sum.reference->fits) {
    const int64_t saved =
        static_cast<int64_t>(sum.reference->min_capacity) - static_cast<int64_t>(ship.min_capacity);
    absl::StrAppendFormat(&out, " Against %s: %s, saves %s; makespan %s ms there.", ref_name,
                          Human(sum.reference->min_capacity), Human(static_cast<uint64_t>(saved)),
                          Ms(sum.reference->at_min.makespan_ns));
  }
  absl::StrAppend(&out, "</p>\n");
  if (!sum.not_monotone.empty()) {
    std::vector<std::string> names;
    for (const CapacityResult* r : sum.not_monotone) {
      names.push_back(absl::StrCat(Esc(NameOf(*r)), " (", r->lower_fits_found, ")"));
    }
    absl::StrAppend(&out,
                    "<p class=\"warn\">Warning: capacity searches not monotone (a smaller "
                    "capacity fitted below one that failed, so a smaller device may fit; marked "
                    "* in the table): ",
                    absl::StrJoin(names, "; "), ".</p>\n");
  }
  return out;
}

constexpr char kStyle[] = R"(
body{font-family:sans-serif;font-size:13px;margin:16px;max-width:1400px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-top:1px solid #ccc;padding-top:12px}
h3{font-size:14px}.charts{display:flex;flex-wrap:wrap;gap:12px}
svg{font-family:sans-serif;font-size:12px;background:#fff}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ddd;padding:2px 6px}
td{text-align:right}td:first-child,td.frames{text-align:left}th{background:#f4f4f4;cursor:pointer}
tr.ship{background:#fde8dc}tr.ref td:first-child{font-weight:bold}tr.warn td:nth-child(3){color:#a60}
p.ship{background:#fde8dc;padding:6px}p.warn{color:#a60}.note{color:#666}
.frame{font-family:monospace;font-size:11px}g.place:hover text{font-weight:bold}
g.key{cursor:pointer}g.key.off{opacity:.35}path.series.off{display:none}
)";

// Sorting by a column (numbers by their data-v), and series shown or hidden
// from their key; the counts it leaves on <html> let a test check what was
// drawn without reading pixels.
constexpr char kScript[] = R"(
(function () {
  'use strict';
  function value(td) {
    var v = td.getAttribute('data-v');
    return v === null ? td.textContent : parseFloat(v);
  }
  document.querySelectorAll('table').forEach(function (table) {
    var head = table.tHead;
    if (!head) return;
    Array.prototype.forEach.call(head.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
        th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = value(a.cells[col]), y = value(b.cells[col]);
          return (x < y ? -1 : x > y ? 1 : 0) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll('svg.mem').forEach(function (svg) {
    svg.querySelectorAll('g.key').forEach(function (key) {
      key.addEventListener('click', function () {
        var i = key.getAttribute('data-series');
        var path = svg.querySelector('path.series[data-series="' + i + '"]');
        key.classList.toggle('off');
        if (path) path.classList.toggle('off');
      });
    });
  });
  var drawn = {
    traces: document.querySelectorAll('section.trace').length,
    series: document.querySelectorAll('svg.mem path.series').length,
    levels: document.querySelectorAll('svg.mem g.level').length,
    points: document.querySelectorAll('svg.scatter g.pt').length,
    labels: document.querySelectorAll('svg.scatter text.lbl').length,
    rows: document.querySelectorAll('table.rows tbody tr').length,
    blocks: document.querySelectorAll('table.blocks tbody tr').length,
    frames: document.querySelectorAll('table.blocks .frame').length
  };
  document.documentElement.setAttribute('data-drawn', JSON.stringify(drawn));
})();
)";

}  // namespace

std::string FormatPolicyHtml(const std::vector<TracePolicyReport>& reports) {
  constexpr double kChartW = 680, kMemH = 400, kScatterH = 400;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>streampool policy report</title><style>";
  absl::StrAppend(&out, kStyle, "</style></head><body>\n<h1>streampool policy report</h1>\n");
  const CapacityResult* first = nullptr;
  for (const TracePolicyReport& rep : reports) {
    if (first == nullptr && !rep.rows.empty()) first = &rep.rows[0];
  }
  if (first != nullptr) {
    absl::StrAppendFormat(&out,
                          "<p>Minimum device capacity in whole 2 MiB granules; pool %s, backing "
                          "%s, searched down from %s. For each trace: what to ship against the "
                          "recorded setting (or the default one), memory over time, minimum "
                          "capacity against makespan, every setting searched, and the blocks "
                          "live at the trace's peak.</p>\n",
                          internal::EnumName(first->settings.pool_type),
                          internal::EnumName(first->settings.backing),
                          Human(first->settings.device_capacity));
  }
  absl::StrAppend(&out, "<ul class=\"toc\">");
  for (size_t i = 0; i < reports.size(); ++i) {
    absl::StrAppendFormat(&out, "<li><a href=\"#t%d\">%s</a></li>", i,
                          Esc(std::filesystem::path(reports[i].trace->name).filename().string()));
  }
  absl::StrAppend(&out, "</ul>\n");
  std::vector<std::string> groups;
  for (size_t i = 0; i < reports.size(); ++i) {
    const TracePolicyReport& rep = reports[i];
    const PolicySummary sum = SummarizePolicies(rep);
    for (const CapacityResult& r : rep.rows) {
      if (r.settings.allocator != AllocatorKind::kStreampool) continue;
      const std::string g = absl::StrCat("threshold ", r.settings.ThresholdLabel(), ", growth ",
                                         internal::EnumName(r.settings.growth));
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    absl::StrAppendFormat(&out,
                          "<section class=\"trace\" id=\"t%d\"><h2>%s</h2>\n<p>%d ops, peak live "
                          "%s (%d bytes).</p>\n",
                          i, Esc(rep.trace->name), rep.trace->ops.size(),
                          Human(rep.trace->peak_live_bytes), rep.trace->peak_live_bytes);
    absl::StrAppend(&out, ShipHtml(rep, sum), "<div class=\"charts\">\n",
                    MemorySvg(rep, sum, kChartW, kMemH));
    absl::StrAppendFormat(&out,
                          "<svg class=\"scatter\" xmlns=\"http://www.w3.org/2000/svg\" "
                          "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
                          kChartW, kScatterH, kChartW, kScatterH);
    absl::StrAppend(&out, PolicyScatterSvg(rep, kChartW, kScatterH), "</svg>\n</div>\n",
                    RowsHtml(rep, sum), PeakBlocksHtml(*rep.trace), "</section>\n");
  }
  const double legend_h = 30 + 18.0 * (8 + groups.size() + 3);
  absl::StrAppendFormat(&out,
                        "<h2>Legend</h2><svg class=\"legend\" xmlns=\"http://www.w3.org/2000/svg\" "
                        "width=\"900\" height=\"%.0f\">\n",
                        legend_h);
  absl::StrAppend(&out, PolicyLegendSvg(groups, 10, 16), "</svg>\n<script>", kScript,
                  "</script>\n</body></html>\n");
  return out;
}

}  // namespace streampool::replay
