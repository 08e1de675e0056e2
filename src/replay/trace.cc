#include "src/replay/trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace streampool::replay {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::string_view Trim(absl::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

#define TRY_ASSIGN(lhs, expr)                   \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

using ops::Fields;
using ops::Quote;

// Splits text into lines, dropping one trailing '\r' (CRLF files), and
// refuses lines longer than kMaxLineLength.
class LineReader {
 public:
  LineReader(absl::string_view text, absl::string_view name) : text_(text), name_(name) {}

  // Next line into *line; false at the end of the text. *status is set (and
  // false returned) for a line that is too long.
  bool Next(absl::string_view* line, absl::Status* status) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == absl::string_view::npos) end = text_.size();
    absl::string_view l = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    if (line_ == std::numeric_limits<uint32_t>::max()) {
      *status = absl::InvalidArgumentError(absl::StrCat(name_, ": more than 2^32 lines"));
      return false;
    }
    ++line_;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.size() > kMaxLineLength) {
      *status = absl::InvalidArgumentError(absl::StrCat(
          name_, ":", line_, ": line is ", l.size(), " bytes long; the limit is ", kMaxLineLength));
      return false;
    }
    *line = l;
    return true;
  }
  uint32_t line() const { return line_; }

 private:
  absl::string_view text_;
  absl::string_view name_;
  size_t pos_ = 0;
  uint32_t line_ = 0;
};

// The checks and bookkeeping both formats share: dense stream, event and
// pool indices, allocation ids and their slots, live bytes, virtual time.
class TraceBuilder {
 public:
  TraceBuilder(absl::string_view name, TraceFormat format) {
    trace_.name = std::string(name);
    trace_.format = format;
    stream_index_.emplace(0, 0);
  }

  absl::Status Error(uint32_t line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(trace_.name, ":", line, ": ", what));
  }
  // A number the line gives as `what`; the error names the field.
  absl::StatusOr<uint64_t> Number(uint32_t line, absl::string_view what,
                                  absl::string_view text) const {
    absl::StatusOr<uint64_t> v = ops::ParseNumber(what, text);
    if (!v.ok()) return Error(line, v.status().message());
    return v;
  }

  absl::StatusOr<uint32_t> Stream(uint64_t id, uint32_t line) {
    return Dense(id, kMaxStreams, "streams", line, &stream_index_, &trace_.stream_ids);
  }
  absl::StatusOr<uint32_t> Event(uint64_t id, uint32_t line) {
    return Dense(id, kMaxEvents, "events", line, &event_index_, &trace_.event_ids);
  }

  // An op of a v1 line, its numbers made dense, with the bookkeeping its
  // kind needs; `comment` is what followed its '#'.
  template <typename T>
  absl::Status Add(uint32_t line, T op, absl::string_view comment) {
    if constexpr (requires { op.Tie(); }) {
      absl::Status st;
      size_t i = 0;
      auto dense = [&](uint64_t& field) {
        const absl::string_view what = T::kFields[i++];
        if (st.ok()) st = Renumber(what, line, &field);
      };
      std::apply([&](auto&... field) { (dense(field), ...); }, op.Tie());
      if (!st.ok()) return st;
    }
    return Book(line, std::move(op), comment);
  }

  // An allocation: its id becomes its slot.
  // Gives id the next slot: a live allocation, or (graph) the address of an
  // allocation node, which stays the id's until another alloc takes it.
  absl::Status Bind(uint32_t line, uint64_t id, uint64_t size, bool graph) {
    auto [it, inserted] = ids_.try_emplace(id);
    IdState& st = it->second;
    if (!inserted && st.live) {
      return Error(line, absl::StrCat("alloc of id ", id, ", which is live (allocated at line ",
                                      st.alloc_line, ")"));
    }
    st = IdState{trace_.alloc_count, line, 0, size, !graph, graph};
    return absl::OkStatus();
  }

  template <typename A>
  absl::Status Alloc(uint32_t line, A op) {
    if (absl::Status st = Bind(line, op.id, op.size, /*graph=*/false); !st.ok()) return st;
    op.id = trace_.alloc_count++;
    trace_.ops.push_back(TraceOp{line, op});
    live_bytes_ += op.size;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    return absl::OkStatus();
  }

  // A free (FreeAsync or Free). Size, when given (RMM logs it), must match
  // the allocation's.
  template <typename F>
  absl::Status Free(uint32_t line, F op, std::optional<uint64_t> size = std::nullopt) {
    auto it = ids_.find(op.id);
    if (it == ids_.end()) return Error(line, absl::StrCat("free of unknown id ", op.id));
    IdState& st = it->second;
    if (st.graph) {
      // A graph allocation is freed once per launch that made it live.
      op.id = st.slot;
      trace_.ops.push_back(TraceOp{line, op});
      return absl::OkStatus();
    }
    if (!st.live) {
      return Error(line, absl::StrCat("double free of id ", op.id, " (allocated at line ",
                                      st.alloc_line, ", freed at line ", st.free_line, ")"));
    }
    if (size && *size != st.size) {
      return Error(line, absl::StrCat("free of ", *size, " bytes, but the allocation (line ",
                                      st.alloc_line, ") has ", st.size));
    }
    st.live = false;
    st.free_line = line;
    op.id = st.slot;
    trace_.ops.push_back(TraceOp{line, op});
    ++trace_.free_count;
    live_bytes_ -= st.size;
    return absl::OkStatus();
  }

  // PyTorch's segment history, from a converted snapshot's comments.
  absl::Status InitialSegmentLine(const InitialSegment& s, uint32_t line) {
    if (!trace_.ops.empty()) {
      return Error(line, "torch_segment lines come before the first op");
    }
    if (s.size == 0 || s.address + s.size < s.address) {
      return Error(line, "a torch_segment has a size and fits in 64 bits");
    }
    trace_.initial_segments.push_back(s);
    return absl::OkStatus();
  }
  void SegmentHistory(SegmentEvent e) {
    e.line = 0;
    history_op_.push_back(trace_.ops.size());
    trace_.segment_history.push_back(e);
  }
  // `# frames ...` belongs to the allocation on the line before it.
  absl::Status Frames(uint32_t line, absl::string_view text) {
    const ops::Op* last = trace_.ops.empty() ? nullptr : &trace_.ops.back().op;
    const ops::Alloc* alloc = last ? std::get_if<ops::Alloc>(last) : nullptr;
    const ops::Malloc* malloc = last ? std::get_if<ops::Malloc>(last) : nullptr;
    if (alloc == nullptr && malloc == nullptr) {
      return Error(line, "a frames comment follows the alloc it describes");
    }
    trace_.frames[alloc ? alloc->id : malloc->id] = std::string(text);
    return absl::OkStatus();
  }

  // Kernel durations and advances: both move virtual time.
  absl::Status AddTime(uint64_t ns, uint32_t line) {
    if (ns > kMaxTotalTimeNs - trace_.total_time_ns) {
      return Error(line, absl::StrCat("total virtual time would pass 2^62 ns"));
    }
    trace_.total_time_ns += ns;
    return absl::OkStatus();
  }

  void Push(TraceOp op) { trace_.ops.push_back(std::move(op)); }

  void Header(absl::string_view key, absl::string_view value) {
    trace_.header.try_emplace(std::string(key), std::string(value));
  }

  Trace Finish() && {
    // Sizes are uint64 each; their sum is kept in 128 bits so that a trace of
    // absurd sizes cannot wrap it. Such a peak is reported saturated.
    constexpr unsigned __int128 kMax = std::numeric_limits<uint64_t>::max();
    trace_.peak_live_bytes = static_cast<uint64_t>(std::min(peak_live_bytes_, kMax));
    trace_.live_at_end_bytes = static_cast<uint64_t>(std::min(live_bytes_, kMax));
    // A segment event belongs to the op after it (PyTorch writes it before
    // the allocation that caused it); after the last op, to none (line 0).
    for (size_t i = 0; i < history_op_.size(); ++i) {
      if (history_op_[i] < trace_.ops.size()) {
        trace_.segment_history[i].line = trace_.ops[history_op_[i]].line;
      }
    }
    return std::move(trace_);
  }

 private:
  struct IdState {
    uint64_t slot = 0;
    uint32_t alloc_line = 0;
    uint32_t free_line = 0;
    uint64_t size = 0;
    bool live = false;
    bool graph = false;
  };

  absl::StatusOr<uint32_t> Dense(uint64_t id, size_t most, absl::string_view what, uint32_t line,
                                 absl::flat_hash_map<uint64_t, uint32_t>* index,
                                 std::vector<uint64_t>* ids) {
    auto [it, inserted] = index->try_emplace(id, ids->size());
    if (inserted) {
      if (ids->size() >= most) {
        index->erase(it);
        return Error(line, absl::StrCat("more than ", most, " ", what));
      }
      ids->push_back(id);
    }
    return it->second;
  }

  absl::StatusOr<uint32_t> Pool(uint64_t id, uint32_t line) const {
    auto it = pool_index_.find(id);
    if (it == pool_index_.end()) {
      return Error(
          line, absl::StrCat("pool ", id, " is not defined (no live `pool ", id, "` line before)"));
    }
    return it->second;
  }

  // A field the file names a stream, an event or a pool by, as its index.
  absl::Status Renumber(absl::string_view what, uint32_t line, uint64_t* field) {
    absl::StatusOr<uint32_t> index = *field;
    if (what == "stream") {
      index = Stream(*field, line);
    } else if (what == "event") {
      index = Event(*field, line);
    } else if (what == "pool") {
      index = Pool(*field, line);
    } else {
      return absl::OkStatus();
    }
    if (!index.ok()) return index.status();
    *field = *index;
    return absl::OkStatus();
  }

  // What an op adds to the trace beyond its renumbered fields; each pushes
  // the op.
  template <typename T>
  absl::Status Book(uint32_t line, T op, absl::string_view) {
    if constexpr (std::is_same_v<T, ops::Kernel> || std::is_same_v<T, ops::Advance>) {
      if (absl::Status st = AddTime(op.ns, line); !st.ok()) return st;
    }
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }
  absl::Status Book(uint32_t line, ops::Free op, absl::string_view) { return Free(line, op); }
  absl::Status Book(uint32_t line, ops::Release op, absl::string_view) { return Free(line, op); }
  absl::Status Book(uint32_t line, ops::Malloc op, absl::string_view) { return Alloc(line, op); }
  // record_stream: the live allocation is used on another stream too.
  absl::Status Book(uint32_t line, ops::Use op, absl::string_view) {
    auto it = ids_.find(op.id);
    if (it == ids_.end() || !it->second.live) {
      return Error(line, absl::StrCat("use of id ", op.id, ", which is not live"));
    }
    op.id = it->second.slot;
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }
  absl::Status Book(uint32_t line, ops::Alloc op, absl::string_view comment) {
    TRY_ASSIGN(stream, Stream(op.stream, line));
    op.stream = stream;
    if (op.pool != ops::kNoPool) {
      TRY_ASSIGN(pool, Pool(op.pool, line));
      op.pool = pool;
    }
    const uint64_t size = op.size;
    if (op.decision.graph) {
      if (absl::Status st = Bind(line, op.id, size, /*graph=*/true); !st.ok()) return st;
      op.id = trace_.alloc_count++;
      trace_.ops.push_back(TraceOp{line, op});
      return absl::OkStatus();
    }
    if (absl::Status st = Alloc(line, op); !st.ok()) return st;
    // `# torch_block <address> <size>`: where PyTorch placed it.
    const std::vector<absl::string_view> w = Fields(comment);
    if (w.size() == 3 && w[0] == "torch_block") {
      TRY_ASSIGN(address, Number(line, "torch_block address", w[1]));
      TRY_ASSIGN(bytes, Number(line, "torch_block size", w[2]));
      if (bytes < size) {
        return Error(line, absl::StrCat("torch_block of ", bytes, " bytes holds less than the ",
                                        size, " allocated"));
      }
      trace_.initial_blocks.push_back(InitialBlock{trace_.alloc_count - 1, address, bytes});
    }
    return absl::OkStatus();
  }
  // Graph ops: their streams and events dense, a memory node's id its slot.
  absl::Status Book(uint32_t line, ops::CaptureToGraph op, absl::string_view) {
    TRY_ASSIGN(stream, Stream(op.stream, line));
    op.stream = stream;
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }
  absl::Status Book(uint32_t line, ops::CaptureEnd op, absl::string_view) {
    TRY_ASSIGN(stream, Stream(op.stream, line));
    op.stream = stream;
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }
  absl::Status Book(uint32_t line, ops::GraphNode op, absl::string_view) {
    if (op.kind == GraphNodeType::kEventRecord || op.kind == GraphNodeType::kWaitEvent) {
      TRY_ASSIGN(event, Event(op.ref, line));
      op.ref = event;
    } else if (op.kind == GraphNodeType::kMemAlloc) {
      if (absl::Status st = Bind(line, op.ref, op.value, /*graph=*/true); !st.ok()) return st;
      op.ref = trace_.alloc_count++;
    } else if (op.kind == GraphNodeType::kMemFree) {
      auto it = ids_.find(op.ref);
      if (it == ids_.end() || !it->second.graph) {
        return Error(line,
                     absl::StrCat("free node of id ", op.ref, ", which names no graph allocation"));
      }
      op.ref = it->second.slot;
    }
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }

  // A `pool` line: a new dense index for the id (an id may be defined again
  // once its pool is destroyed).
  absl::Status Book(uint32_t line, ops::PoolCreate op, absl::string_view) {
    auto it = pool_index_.find(op.pool);
    if (it != pool_index_.end()) {
      return Error(line, absl::StrCat("pool ", op.pool, " is already defined (line ",
                                      pool_line_[it->second], "); pdestroy it first"));
    }
    if (trace_.pools.size() >= kMaxPools) {
      return Error(line, absl::StrCat("more than ", kMaxPools, " pools"));
    }
    const uint32_t index = static_cast<uint32_t>(trace_.pools.size());
    pool_index_.emplace(op.pool, index);
    trace_.pools.push_back(op);
    pool_line_.push_back(line);
    op.pool = index;
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }
  absl::Status Book(uint32_t line, ops::PoolDestroy op, absl::string_view) {
    // Renumbered already: the id its index was defined with goes.
    pool_index_.erase(trace_.pools[op.pool].pool);
    trace_.ops.push_back(TraceOp{line, op});
    return absl::OkStatus();
  }

  Trace trace_;
  absl::flat_hash_map<uint64_t, uint32_t> stream_index_;
  absl::flat_hash_map<uint64_t, uint32_t> event_index_;
  absl::flat_hash_map<uint64_t, IdState> ids_;
  absl::flat_hash_map<uint64_t, uint32_t> pool_index_;  // live pools by id
  std::vector<uint32_t> pool_line_;
  std::vector<size_t> history_op_;  // per segment_history entry: ops before it
  unsigned __int128 live_bytes_ = 0;
  unsigned __int128 peak_live_bytes_ = 0;
};

std::optional<uint64_t> ParseHex(absl::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// `# key value` → (key, value); key is the first word without a trailing ':'
// and must be an identifier, otherwise the comment is prose.
bool HeaderEntry(absl::string_view comment, absl::string_view* key, absl::string_view* value) {
  comment = Trim(comment);
  size_t end = 0;
  while (end < comment.size() && !IsBlank(comment[end])) ++end;
  absl::string_view k = comment.substr(0, end);
  if (!k.empty() && k.back() == ':') k.remove_suffix(1);
  if (k.empty()) return false;
  for (char c : k) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  *key = k;
  *value = Trim(comment.substr(end));
  return true;
}

// `# torch_segment <address> <size> <stream> small|large [expandable]` (a
// segment live when the trace starts) and `# segment_alloc|segment_free|
// segment_map|segment_unmap <address> <size> <stream>` (PyTorch's own
// history): true when the comment is one of them.
absl::StatusOr<bool> ParseSegmentComment(TraceBuilder& b, uint32_t line,
                                         absl::string_view comment) {
  const std::vector<absl::string_view> w = Fields(comment);
  if (w.empty()) return false;
  constexpr std::pair<absl::string_view, SegmentEvent::Kind> kEvents[] = {
      {"segment_alloc", SegmentEvent::Kind::kAlloc},
      {"segment_free", SegmentEvent::Kind::kFree},
      {"segment_map", SegmentEvent::Kind::kMap},
      {"segment_unmap", SegmentEvent::Kind::kUnmap}};
  if (w[0] == "frames") {
    absl::string_view text = Trim(comment);
    absl::ConsumePrefix(&text, "frames");
    if (absl::Status st = b.Frames(line, Trim(text)); !st.ok()) return st;
    return true;
  }
  if (w[0] == "torch_segment") {
    if ((w.size() != 5 && w.size() != 6) || (w[4] != "small" && w[4] != "large") ||
        (w.size() == 6 && w[5] != "expandable")) {
      return b.Error(line,
                     "torch_segment takes <address> <size> <stream> small|large [expandable]");
    }
    TRY_ASSIGN(address, b.Number(line, "address", w[1]));
    TRY_ASSIGN(size, b.Number(line, "size", w[2]));
    TRY_ASSIGN(sid, b.Number(line, "stream", w[3]));
    TRY_ASSIGN(stream, b.Stream(sid, line));
    InitialSegment s{address, size, stream, w[4] == "small", w.size() == 6};
    if (absl::Status st = b.InitialSegmentLine(s, line); !st.ok()) return st;
    return true;
  }
  for (const auto& [name, kind] : kEvents) {
    if (w[0] != name) continue;
    if (w.size() != 4) return b.Error(line, absl::StrCat(name, " takes <address> <size> <stream>"));
    TRY_ASSIGN(address, b.Number(line, "address", w[1]));
    TRY_ASSIGN(size, b.Number(line, "size", w[2]));
    TRY_ASSIGN(sid, b.Number(line, "stream", w[3]));
    TRY_ASSIGN(stream, b.Stream(sid, line));
    b.SegmentHistory(SegmentEvent{kind, 0, address, size, stream});
    return true;
  }
  return false;
}

// A line of ops: parsed into its op, then its numbers made dense.
absl::Status ParseV1Op(TraceBuilder& b, uint32_t line, const std::vector<absl::string_view>& f,
                       absl::string_view comment) {
  absl::StatusOr<ops::Op> op = ops::ParseOp(f, comment);
  if (!op.ok()) return b.Error(line, op.status().message());
  return std::visit([&](auto& o) { return b.Add(line, std::move(o), comment); }, *op);
}

// RMM time stamps: "HH:MM:SS.ffffff" (the logging adaptor's pattern),
// "HH:MM:SS:ffffff" (older logs) or seconds "1634567890.234567"; in ns.
std::optional<uint64_t> ParseRmmTime(absl::string_view s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, ':');
  absl::string_view frac;
  absl::string_view secs = parts.back();
  if (parts.size() == 4) {
    frac = parts[3];
    secs = parts[2];
    parts.pop_back();
  } else if (const size_t dot = secs.find('.'); dot != absl::string_view::npos) {
    frac = secs.substr(dot + 1);
    secs = secs.substr(0, dot);
  }
  if (parts.size() != 1 && parts.size() != 3) return std::nullopt;
  std::optional<uint64_t> sec = ParseUint(secs);
  if (!sec) return std::nullopt;
  uint64_t total = *sec;
  if (parts.size() == 3) {
    std::optional<uint64_t> h = ParseUint(parts[0]);
    std::optional<uint64_t> m = ParseUint(parts[1]);
    if (!h || !m || *h > 1000000 || *m >= 60 || *sec >= 61) return std::nullopt;
    total = *h * 3600 + *m * 60 + *sec;
  }
  // Seconds since the epoch fit in 2^34 for centuries; refuse what would
  // overflow the ns count.
  if (total > (uint64_t{1} << 40)) return std::nullopt;
  uint64_t ns = 0;
  if (!frac.empty()) {
    if (frac.size() > 9) return std::nullopt;
    std::optional<uint64_t> f = ParseUint(frac);
    if (!f) return std::nullopt;
    ns = *f;
    for (size_t i = frac.size(); i < 9; ++i) ns *= 10;
  }
  return total * 1000000000 + ns;
}

// The legacy stream is 0 in a log; cudaStreamLegacy (1) is the same stream.
std::optional<uint64_t> ParseRmmStream(absl::string_view s) {
  std::optional<uint64_t> v;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    v = ParseHex(s);
  } else {
    v = ParseUint(s);
  }
  if (v && *v == 1) v = 0;
  return v;
}

}  // namespace

const char* SegmentEventName(SegmentEvent::Kind kind) {
  switch (kind) {
    case SegmentEvent::Kind::kAlloc:
      return "segment_alloc";
    case SegmentEvent::Kind::kFree:
      return "segment_free";
    case SegmentEvent::Kind::kMap:
      return "segment_map";
    case SegmentEvent::Kind::kUnmap:
      return "segment_unmap";
  }
  return "?";
}

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kStreampoolV1:
      return "streampool-v1";
    case TraceFormat::kRmmCsv:
      return "rmm-csv";
  }
  return "?";
}

std::optional<Allocation> AllocationOf(const ops::Op& op) {
  if (const auto* a = std::get_if<ops::Alloc>(&op)) {
    return Allocation{a->id, a->size, static_cast<uint32_t>(a->stream)};
  }
  if (const auto* m = std::get_if<ops::Malloc>(&op)) return Allocation{m->id, m->size, 0};
  return std::nullopt;
}

std::optional<uint64_t> FreedSlot(const ops::Op& op) {
  if (const auto* f = std::get_if<ops::Free>(&op)) return f->id;
  if (const auto* r = std::get_if<ops::Release>(&op)) return r->id;
  return std::nullopt;
}

std::optional<uint64_t> Trace::HeaderNumber(absl::string_view key) const {
  auto it = header.find(key);
  if (it == header.end()) return std::nullopt;
  absl::string_view v = it->second;
  size_t end = 0;
  while (end < v.size() && !IsBlank(v[end])) ++end;
  return ParseUint(v.substr(0, end));
}

absl::StatusOr<Trace> ParseStreampoolTrace(absl::string_view text, absl::string_view name) {
  TraceBuilder b(name, TraceFormat::kStreampoolV1);
  LineReader reader(text, name);
  absl::string_view line;
  absl::Status status;
  bool in_header = true;
  while (reader.Next(&line, &status)) {
    const uint32_t n = reader.line();
    absl::string_view body = line;
    absl::string_view comment;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      body = line.substr(0, hash);
      comment = line.substr(hash + 1);
    }
    const std::vector<absl::string_view> f = Fields(body);
    if (f.empty()) {
      if (absl::StatusOr<bool> seg = ParseSegmentComment(b, n, comment); !seg.ok()) {
        return seg.status();
      } else if (*seg) {
        continue;
      }
      if (in_header && !comment.empty()) {
        absl::string_view c = Trim(comment);
        if (absl::ConsumePrefix(&c, "streampool trace ")) {
          if (c != "v1") {
            return b.Error(
                n, absl::StrCat("unsupported trace version ", Quote(c), " (this tool reads v1)"));
          }
          continue;
        }
        absl::string_view key, value;
        if (HeaderEntry(comment, &key, &value)) b.Header(key, value);
      }
      continue;
    }
    in_header = false;
    if (absl::Status st = ParseV1Op(b, n, f, comment); !st.ok()) return st;
  }
  if (!status.ok()) return status;
  return std::move(b).Finish();
}

absl::StatusOr<Trace> ParseRmmCsv(absl::string_view text, absl::string_view name) {
  TraceBuilder b(name, TraceFormat::kRmmCsv);
  LineReader reader(text, name);
  absl::string_view line;
  absl::Status status;

  // Columns by name, as RMM's own log parser finds them.
  enum Column { kThread, kTime, kAction, kPointer, kSize, kStream, kColumns };
  constexpr absl::string_view kNames[kColumns] = {"Thread",  "Time", "Action",
                                                  "Pointer", "Size", "Stream"};
  size_t column[kColumns];
  size_t width = 0;
  bool have_header = false;

  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // ptr -> (id, line)
  uint64_t next_id = 0;
  std::optional<uint64_t> last_time;
  uint64_t failures = 0, null_rows = 0;

  while (reader.Next(&line, &status)) {
    const uint32_t n = reader.line();
    if (Trim(line).empty()) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    for (absl::string_view& s : f) s = Trim(s);
    if (!have_header) {
      width = f.size();
      for (int c = 0; c < kColumns; ++c) {
        auto it = std::find(f.begin(), f.end(), kNames[c]);
        if (it == f.end()) {
          return b.Error(n, absl::StrCat("not an RMM log: the header has no ", kNames[c],
                                         " column (expected Thread,Time,Action,Pointer,Size,"
                                         "Stream)"));
        }
        column[c] = it - f.begin();
      }
      have_header = true;
      continue;
    }
    if (f.size() != width) {
      return b.Error(n,
                     absl::StrCat("expected ", width, " comma-separated fields, got ", f.size()));
    }
    const absl::string_view action = f[column[kAction]];
    const bool is_alloc = action == "allocate";
    const bool is_free = action == "free" || action == "deallocate";
    if (action == "allocate failure") {
      // The allocation failed in the logged run: nothing became live.
      ++failures;
      continue;
    }
    if (!is_alloc && !is_free) {
      return b.Error(
          n, absl::StrCat("unknown action ", Quote(action), " (expected allocate or free)"));
    }
    std::optional<uint64_t> ptr = ParseHex(f[column[kPointer]]);
    if (!ptr) {
      return b.Error(
          n, absl::StrCat("pointer ", Quote(f[column[kPointer]]), " is not a hexadecimal address"));
    }
    TRY_ASSIGN(size, b.Number(n, "size", f[column[kSize]]));
    std::optional<uint64_t> sid = ParseRmmStream(f[column[kStream]]);
    if (!sid) {
      return b.Error(n, absl::StrCat("stream ", Quote(f[column[kStream]]),
                                     " is not a number or hexadecimal handle"));
    }
    std::optional<uint64_t> t = ParseRmmTime(f[column[kTime]]);
    if (!t) {
      return b.Error(
          n, absl::StrCat("time ", Quote(f[column[kTime]]), " is not HH:MM:SS.ffffff or seconds"));
    }
    TRY_ASSIGN(stream, b.Stream(*sid, n));
    // Time that goes backwards (threads interleaving in the log, a day
    // boundary) moves nothing.
    if (last_time && *t > *last_time) {
      const uint64_t ns = *t - *last_time;
      if (absl::Status st = b.AddTime(ns, n); !st.ok()) return st;
      b.Push(TraceOp{n, ops::Advance{ns}});
    }
    if (!last_time || *t > *last_time) last_time = t;
    if (*ptr == 0) {
      // A null pointer is neither allocated nor freed (free(nullptr) is a
      // no-op; a null result is a failure).
      ++null_rows;
      continue;
    }
    if (is_alloc) {
      auto [it, inserted] = live.try_emplace(*ptr, next_id, n);
      if (!inserted) {
        return b.Error(n,
                       absl::StrCat("allocate at 0x", absl::Hex(*ptr),
                                    ", which is live (allocated at line ", it->second.second, ")"));
      }
      if (absl::Status st = b.Alloc(n, ops::Alloc{next_id++, size, stream, ops::kNoPool, {}});
          !st.ok())
        return st;
    } else {
      auto it = live.find(*ptr);
      if (it == live.end()) {
        return b.Error(
            n, absl::StrCat("free of 0x", absl::Hex(*ptr), ", which is not a live allocation"));
      }
      const uint64_t id = it->second.first;
      live.erase(it);
      if (absl::Status st = b.Free(n, ops::Free{id, stream}, size); !st.ok()) return st;
    }
  }
  if (!status.ok()) return status;
  if (!have_header) return b.Error(1, "empty RMM log (no header line)");
  b.Header("rmm_allocate_failures", absl::StrCat(failures));
  b.Header("rmm_null_pointer_rows", absl::StrCat(null_rows));
  return std::move(b).Finish();
}

absl::StatusOr<Trace> ParseTrace(absl::string_view text, absl::string_view name) {
  // The format is told by the first non-empty line.
  absl::string_view rest = text;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    absl::string_view line = Trim(rest.substr(0, nl));
    if (!line.empty() && line.back() == '\r') line = Trim(line.substr(0, line.size() - 1));
    if (!line.empty()) {
      if (line.substr(0, 7) == "Thread," || line.find(",Action,") != absl::string_view::npos) {
        return ParseRmmCsv(text, name);
      }
      break;
    }
    if (nl == absl::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return ParseStreampoolTrace(text, name);
}

absl::StatusOr<Trace> LoadTrace(const std::string& path) {
  // The status says why the file cannot be read (NotFound, PermissionDenied,
  // FailedPrecondition for a directory), so that a caller can tell a missing
  // file from a malformed one.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": is a directory"));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, file.get())) > 0) text.append(buf, n);
  if (std::ferror(file.get())) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": read error"));
  }
  const absl::string_view name = path;
  // A file of neither format: nothing in it (a text may be empty, a file
  // named as a trace may not), or control bytes; saying so beats an
  // "unknown op" of its bytes.
  if (absl::string_view(text).find_first_not_of(" \t\r\n") == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a trace (the file is empty)"));
  }
  for (const char c : absl::string_view(text).substr(0, 4096)) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0x7f || (u < 0x20 && c != '\n' && c != '\r' && c != '\t')) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": not a trace (binary data, not the text of a trace)"));
    }
  }
  return ParseTrace(text, path);
}

#undef TRY_ASSIGN

}  // namespace streampool::replay
