#include "src/replay/torch_validation.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "src/replay/report.h"

namespace streampool::replay {

namespace {

bool Grows(SegmentEvent::Kind k) {
  return k == SegmentEvent::Kind::kAlloc || k == SegmentEvent::Kind::kMap;
}

// "segment_alloc=1" and the like from the `# actions` header.
uint64_t ActionCount(const Trace& trace, absl::string_view action) {
  auto it = trace.header.find("actions");
  if (it == trace.header.end()) return 0;
  uint64_t n = 0;
  for (absl::string_view kv : absl::StrSplit(it->second, ' ', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos || kv.substr(0, eq) != action) continue;
    n += ParseUint(kv.substr(eq + 1)).value_or(0);
  }
  return n;
}

// "... (377 segments))" in the reserved figure's method, as older
// conversions wrote it.
std::optional<uint64_t> EndSegments(const Trace& trace) {
  if (std::optional<uint64_t> n = trace.HeaderNumber("torch_segments_at_end")) return n;
  auto it = trace.header.find("torch_peak_reserved_bytes");
  if (it == trace.header.end()) return std::nullopt;
  const absl::string_view text = it->second;
  const size_t end = text.rfind(" segments)");
  if (end == absl::string_view::npos) return std::nullopt;
  size_t start = end;
  while (start > 0 && text[start - 1] >= '0' && text[start - 1] <= '9') --start;
  if (start == 0 || text[start - 1] != '(') return std::nullopt;
  return ParseUint(text.substr(start, end - start));
}

std::string Describe(const SegmentEvent& e) {
  return absl::StrCat(SegmentEventName(e.kind), " of ", e.size, " bytes");
}

std::optional<double> Error(uint64_t model, std::optional<uint64_t> torch) {
  if (!torch || *torch == 0) return std::nullopt;
  return (static_cast<double>(model) - static_cast<double>(*torch)) / static_cast<double>(*torch);
}

}  // namespace

std::optional<double> TorchValidation::PeakError() const {
  return Error(model_peak_reserved, torch_peak_reserved);
}

std::optional<double> TorchValidation::SegmentCountError() const {
  if (torch_segment_allocs == 0) {
    return model_segment_allocs == 0 ? std::optional<double>(0) : std::nullopt;
  }
  return Error(model_segment_allocs, torch_segment_allocs);
}

absl::StatusOr<Trace> TwoPassTrace(const Trace& trace, uint32_t* line_offset) {
  const uint64_t pretrace = std::min(trace.HeaderNumber("pretrace").value_or(0), trace.alloc_count);
  uint32_t max_line = 0;
  for (const TraceOp& op : trace.ops) max_line = std::max(max_line, op.line);
  if (max_line >= (uint32_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(trace.name, ": too long to run twice"));
  }
  *line_offset = max_line + 1;
  Trace out = trace;
  out.ops.clear();
  out.initial_segments.clear();
  out.initial_blocks.clear();
  // The ops of a pass, without the recorded decisions: the passes are not
  // the recording.
  auto pass_op = [](TraceOp op, uint32_t line, std::optional<uint64_t> slot) {
    op.line = line;
    std::visit(
        [&](auto& o) {
          if constexpr (requires { o.decision; }) o.decision = {};
          if constexpr (requires { o.id; }) o.id = slot.value_or(o.id);
        },
        op.op);
    return op;
  };
  auto slot_of_op = [](const TraceOp& op) -> std::optional<uint64_t> {
    return std::visit(
        [](const auto& o) -> std::optional<uint64_t> {
          if constexpr (requires { o.id; }) {
            return o.id;
          } else {
            return std::nullopt;
          }
        },
        op.op);
  };
  std::vector<const TraceOp*> alloc_of(trace.alloc_count, nullptr);
  std::vector<bool> live(trace.alloc_count, false);
  uint64_t frees = 0;
  for (const TraceOp& op : trace.ops) {
    out.ops.push_back(pass_op(op, op.line, std::nullopt));
    if (std::optional<Allocation> a = AllocationOf(op.op)) {
      live[a->slot] = true;
      alloc_of[a->slot] = &op;
    } else if (std::optional<uint64_t> slot = FreedSlot(op.op)) {
      live[*slot] = false;
      ++frees;
    }
  }
  // Between the passes: what the trace allocated and left live goes, and
  // what it freed of the pre-trace set comes back.
  uint64_t next_slot = trace.alloc_count;
  for (uint64_t slot = pretrace; slot < trace.alloc_count; ++slot) {
    if (!live[slot]) continue;
    const std::optional<Allocation> a = AllocationOf(alloc_of[slot]->op);
    if (std::holds_alternative<ops::Malloc>(alloc_of[slot]->op)) {
      out.ops.push_back(TraceOp{max_line, ops::Release{slot}});
    } else {
      out.ops.push_back(TraceOp{max_line, ops::Free{slot, a->stream}});
    }
    ++frees;
  }
  std::vector<uint64_t> slot_of(trace.alloc_count);
  for (uint64_t slot = 0; slot < trace.alloc_count; ++slot) slot_of[slot] = slot;
  for (uint64_t slot = 0; slot < pretrace; ++slot) {
    if (live[slot]) continue;
    slot_of[slot] = next_slot++;
    out.ops.push_back(pass_op(*alloc_of[slot], max_line, slot_of[slot]));
  }
  for (const TraceOp& op : trace.ops) {
    const std::optional<Allocation> a = AllocationOf(op.op);
    if (a && a->slot < pretrace) continue;
    std::optional<uint64_t> slot = slot_of_op(op);
    if (a) slot_of[a->slot] = next_slot++;
    if (slot) slot = slot_of[*slot];
    if (FreedSlot(op.op)) ++frees;
    out.ops.push_back(pass_op(op, op.line + *line_offset, slot));
  }
  out.alloc_count = next_slot;
  out.free_count = frees;
  return out;
}

namespace {

// The model as a validation runs it: the pytorch allocator keeping its
// segment history, without what a validation does not report.
ReplaySettings ModelSettings(const ReplaySettings& base) {
  ReplaySettings s = base;
  s.allocator = AllocatorKind::kPytorch;
  s.keep_segment_history = true;
  s.measure_host_cost = false;
  s.check_stream_order = false;
  s.record_timeline = false;
  s.stop_at_first_failure = false;
  return s;
}

// PyTorch's history and the model's start from the trace's own segments.
void SeedFromTrace(const Trace& trace, TorchValidation& v) {
  v.seeded = true;
  v.torch_history = trace.segment_history;
  for (const SegmentEvent& e : v.torch_history) {
    ++(Grows(e.kind) ? v.torch_segment_allocs : v.torch_segment_frees);
  }
  for (const InitialSegment& seg : trace.initial_segments) v.model_start_reserved += seg.size;
  v.model_start_segments = trace.initial_segments.size();
}

// The model's events: those of the warm-up pass (lines below `offset`;
// none when seeded) make its start, those of the measured pass, at the
// trace's own lines, its history.
void TakeModelHistory(const std::vector<SegmentEvent>& history, uint32_t offset,
                      TorchValidation& v) {
  uint64_t start_segments = v.model_start_segments;
  for (const SegmentEvent& e : history) {
    if (e.line < offset) {
      if (Grows(e.kind)) {
        v.model_start_reserved += e.size;
        ++start_segments;
      } else {
        v.model_start_reserved -= e.size;
        --start_segments;
      }
      continue;
    }
    SegmentEvent m = e;
    m.line -= offset;
    ++(Grows(m.kind) ? v.model_segment_allocs : v.model_segment_frees);
    v.model_history.push_back(m);
  }
  v.model_start_segments = start_segments;
  v.model_end_segments = start_segments + v.model_segment_allocs - v.model_segment_frees;
}

// Sets v.matched; the index of the first event that differs (0 when only
// counts are known).
size_t MatchHistories(TorchValidation& v) {
  size_t i = 0;
  if (!v.seeded) {
    v.matched = std::min(v.torch_segment_allocs, v.model_segment_allocs);
    return i;
  }
  while (i < v.torch_history.size() && i < v.model_history.size()) {
    const SegmentEvent& a = v.torch_history[i];
    const SegmentEvent& b = v.model_history[i];
    if (a.kind != b.kind || a.size != b.size || a.line != b.line) break;
    ++i;
  }
  v.matched = i;
  return i;
}

// What each side did at the first difference `i`, and the trace's line
// there (0 where neither names one).
struct Divergence {
  std::string torch_side, model_side;
  uint32_t line = 0;
};

Divergence DivergenceAt(const TorchValidation& v, size_t i) {
  Divergence d;
  if (!v.seeded) {
    d.torch_side = absl::StrCat(v.torch_segment_allocs, " segment allocations");
    d.model_side = absl::StrCat(v.model_segment_allocs, " segment allocations");
    if (!v.model_history.empty()) {
      d.line = v.model_history.front().line;
      absl::StrAppend(&d.model_side, ", the first a ", Describe(v.model_history.front()));
    }
    return d;
  }
  d.torch_side = "nothing more";
  if (i < v.torch_history.size()) {
    d.torch_side = Describe(v.torch_history[i]);
    d.line = v.torch_history[i].line;
  }
  d.model_side = "nothing more";
  if (i < v.model_history.size()) {
    d.model_side = Describe(v.model_history[i]);
    if (d.line == 0 || v.model_history[i].line < d.line) d.line = v.model_history[i].line;
  }
  return d;
}

// `start` bytes after the first `n` events of `history`.
uint64_t ReservedAfter(uint64_t start, const std::vector<SegmentEvent>& history, size_t n) {
  for (size_t k = 0; k < n && k < history.size(); ++k) {
    const SegmentEvent& e = history[k];
    start = Grows(e.kind) ? start + e.size : start - e.size;
  }
  return start;
}

}  // namespace

absl::StatusOr<TorchValidation> ValidateTorch(const Trace& trace, const ReplaySettings& base) {
  TorchValidation v;
  v.trace = trace.name;
  v.options = base.torch.ToString();
  v.torch_peak_reserved = trace.HeaderNumber("torch_peak_reserved_bytes");
  v.torch_start_reserved = trace.HeaderNumber("torch_reserved_at_trace_start");
  v.torch_end_segments = EndSegments(trace);

  ReplaySettings s = ModelSettings(base);
  uint32_t offset = 0;  // the measured pass's lines are the trace's plus this
  const Trace* replayed = &trace;
  Trace two_pass;
  s.seed_from_trace = !trace.initial_segments.empty();
  if (s.seed_from_trace) {
    SeedFromTrace(trace, v);
  } else {
    v.torch_segment_allocs =
        ActionCount(trace, "segment_alloc") + ActionCount(trace, "segment_map");
    v.torch_segment_frees =
        ActionCount(trace, "segment_free") + ActionCount(trace, "segment_unmap");
    absl::StatusOr<Trace> t = TwoPassTrace(trace, &offset);
    if (!t.ok()) return t.status();
    two_pass = *std::move(t);
    replayed = &two_pass;
  }
  absl::StatusOr<ReplayResult> r = Replay(*replayed, s);
  if (!r.ok()) return r.status();
  v.model_peak_reserved = r->peak_reserved;
  TakeModelHistory(r->segment_history, offset, v);

  // The first difference, and both sides' state just before it.
  const size_t i = MatchHistories(v);
  const bool differ = v.seeded ? (i < v.torch_history.size() || i < v.model_history.size())
                               : (v.torch_segment_allocs != v.model_segment_allocs ||
                                  v.torch_segment_frees != v.model_segment_frees);
  if (!differ) return v;
  const Divergence d = DivergenceAt(v, i);
  // PyTorch's state before the event: its start plus what came before.
  const uint64_t torch_reserved = ReservedAfter(
      v.seeded ? v.model_start_reserved : v.torch_start_reserved.value_or(0), v.torch_history, i);
  const uint64_t model_reserved = ReservedAfter(v.model_start_reserved, v.model_history, i);
  std::string model_state;
  if (d.line > 1) {
    ReplaySettings upto = s;
    upto.stop_after_line = d.line - 1 + offset;
    upto.keep_segment_history = false;
    absl::StatusOr<ReplayResult> before = Replay(*replayed, upto);
    if (before.ok()) model_state = before->model_state;
  }
  v.first_divergence = absl::StrCat(
      trace.name, ":", d.line, ": PyTorch ", d.torch_side, " (it held ", torch_reserved,
      " bytes before), the model ", d.model_side, " (it held ", model_reserved, " bytes",
      model_state.empty() ? "" : absl::StrCat("; ", model_state), ")");
  return v;
}

std::string FormatValidationText(const std::vector<TorchValidation>& vs) {
  std::string out = "The pytorch model against PyTorch's own segment history\n";
  auto pct = [](std::optional<double> e) {
    return e ? absl::StrFormat("%+.2f%%", *e * 100) : std::string("n/a");
  };
  for (const TorchValidation& v : vs) {
    absl::StrAppend(&out, "\n", v.trace,
                    v.options.empty() ? "" : absl::StrCat(" (", v.options, ")"), "\n  start: ",
                    v.seeded ? "the trace's own segments"
                             : "warm (one pass of the trace first; the trace names no segments)",
                    ", ", v.model_start_reserved, " bytes in ", v.model_start_segments,
                    " segments");
    if (v.torch_start_reserved) {
      absl::StrAppend(&out, " (PyTorch: ", *v.torch_start_reserved, " bytes)");
    }
    absl::StrAppend(&out, "\n  peak reserved: PyTorch ",
                    v.torch_peak_reserved ? absl::StrCat(*v.torch_peak_reserved) : "unknown",
                    ", model ", v.model_peak_reserved, " (", pct(v.PeakError()), ")");
    absl::StrAppend(&out, "\n  segments at the end: PyTorch ",
                    v.torch_end_segments ? absl::StrCat(*v.torch_end_segments) : "unknown",
                    ", model ", v.model_end_segments);
    absl::StrAppend(&out, "\n  segment allocations in the trace: PyTorch ", v.torch_segment_allocs,
                    ", model ", v.model_segment_allocs, " (",
                    v.torch_segment_allocs == 0 && v.model_segment_allocs != 0
                        ? absl::StrCat("+", v.model_segment_allocs)
                        : pct(v.SegmentCountError()),
                    "); frees PyTorch ", v.torch_segment_frees, ", model ", v.model_segment_frees);
    if (v.seeded) {
      absl::StrAppend(&out, "; ", v.matched, " events match in order, size and op");
    }
    absl::StrAppend(&out, "\n  ",
                    v.first_divergence.empty()
                        ? std::string("no divergence")
                        : absl::StrCat("first divergence: ", v.first_divergence),
                    "\n");
  }
  return out;
}

nlohmann::ordered_json ValidationJson(const std::vector<TorchValidation>& vs) {
  nlohmann::ordered_json traces = nlohmann::ordered_json::array();
  auto opt = [](std::optional<double> e) {
    return e ? nlohmann::ordered_json(*e) : nlohmann::ordered_json(nullptr);
  };
  auto events = [](const std::vector<SegmentEvent>& es) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const SegmentEvent& e : es) {
      a.push_back({{"action", SegmentEventName(e.kind)}, {"line", e.line}, {"size", e.size}});
    }
    return a;
  };
  for (const TorchValidation& v : vs) {
    nlohmann::ordered_json j;
    j["file"] = v.trace;
    j["options"] = v.options;
    j["start"] = v.seeded ? "recorded_segments" : "warm";
    j["torch"] = {
        {"peak_reserved_bytes", v.torch_peak_reserved
                                    ? nlohmann::ordered_json(*v.torch_peak_reserved)
                                    : nlohmann::ordered_json(nullptr)},
        {"start_reserved_bytes", v.torch_start_reserved
                                     ? nlohmann::ordered_json(*v.torch_start_reserved)
                                     : nlohmann::ordered_json(nullptr)},
        {"end_segments", v.torch_end_segments ? nlohmann::ordered_json(*v.torch_end_segments)
                                              : nlohmann::ordered_json(nullptr)},
        {"segment_allocs", v.torch_segment_allocs},
        {"segment_frees", v.torch_segment_frees},
        {"history", events(v.torch_history)}};
    j["model"] = {{"peak_reserved_bytes", v.model_peak_reserved},
                  {"start_reserved_bytes", v.model_start_reserved},
                  {"start_segments", v.model_start_segments},
                  {"end_segments", v.model_end_segments},
                  {"segment_allocs", v.model_segment_allocs},
                  {"segment_frees", v.model_segment_frees},
                  {"history", events(v.model_history)}};
    j["peak_error"] = opt(v.PeakError());
    j["segment_count_error"] = opt(v.SegmentCountError());
    j["matched"] = v.matched;
    j["first_divergence"] = v.first_divergence.empty() ? nlohmann::ordered_json(nullptr)
                                                       : nlohmann::ordered_json(v.first_divergence);
    traces.push_back(std::move(j));
  }
  return {{"schema", "streampool-torch-validation/1"}, {"traces", std::move(traces)}};
}

std::string FormatValidationJson(const std::vector<TorchValidation>& vs) {
  return DumpJson(ValidationJson(vs), 2) + "\n";
}

}  // namespace streampool::replay
