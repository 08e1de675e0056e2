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
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/pool/names.h"
#include "src/pool/pool_attrs.h"

namespace streampool::replay {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::string_view Trim(absl::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// A field quoted in an error message: cut short, so that an error about a
// 4 KiB token stays one readable line, and with bytes that are not printable
// ASCII escaped (\x1b, \t), so that a binary file given by mistake prints
// no control sequences to the terminal.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 40;
  const bool cut = s.size() > kMax;
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, kMax)), cut ? "...'" : "'");
}

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

// The checks and bookkeeping both formats share: dense stream and event
// indices, allocation ids and their slots, live bytes, virtual time.
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

  absl::StatusOr<uint32_t> Stream(uint64_t id, uint32_t line) {
    auto [it, inserted] = stream_index_.try_emplace(id, trace_.stream_ids.size());
    if (inserted) {
      if (trace_.stream_ids.size() >= kMaxStreams) {
        stream_index_.erase(it);
        return Error(line, absl::StrCat("more than ", kMaxStreams, " streams"));
      }
      trace_.stream_ids.push_back(id);
    }
    return it->second;
  }

  absl::StatusOr<uint32_t> Event(uint64_t id, uint32_t line) {
    auto [it, inserted] = event_index_.try_emplace(id, trace_.event_ids.size());
    if (inserted) {
      if (trace_.event_ids.size() >= kMaxEvents) {
        event_index_.erase(it);
        return Error(line, absl::StrCat("more than ", kMaxEvents, " events"));
      }
      trace_.event_ids.push_back(id);
    }
    return it->second;
  }

  absl::Status Alloc(uint64_t id, uint64_t size, uint32_t stream, uint32_t line,
                     uint32_t pool = TraceOp::kNoPool, TraceOp::Kind kind = TraceOp::Kind::kAlloc,
                     uint32_t device = 0) {
    auto [it, inserted] = ids_.try_emplace(id);
    IdState& st = it->second;
    if (!inserted && st.live) {
      return Error(line, absl::StrCat("alloc of id ", id, ", which is live (allocated at line ",
                                      st.alloc_line, ")"));
    }
    st = IdState{trace_.alloc_count, line, 0, size, true};
    TraceOp op;
    op.kind = kind;
    op.line = line;
    op.stream = stream;
    op.slot = trace_.alloc_count++;
    op.value = size;
    op.pool = pool;
    op.aux = device;
    trace_.ops.push_back(op);
    live_bytes_ += size;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    return absl::OkStatus();
  }

  // Size, when given (RMM logs it), must match the allocation's.
  absl::Status Free(uint64_t id, uint32_t stream, uint32_t line,
                    std::optional<uint64_t> size = std::nullopt,
                    TraceOp::Kind kind = TraceOp::Kind::kFree) {
    auto it = ids_.find(id);
    if (it == ids_.end()) return Error(line, absl::StrCat("free of unknown id ", id));
    IdState& st = it->second;
    if (!st.live) {
      return Error(line, absl::StrCat("double free of id ", id, " (allocated at line ",
                                      st.alloc_line, ", freed at line ", st.free_line, ")"));
    }
    if (size && *size != st.size) {
      return Error(line, absl::StrCat("free of ", *size, " bytes, but the allocation (line ",
                                      st.alloc_line, ") has ", st.size));
    }
    st.live = false;
    st.free_line = line;
    TraceOp op;
    op.kind = kind;
    op.line = line;
    op.stream = stream;
    op.slot = st.slot;
    trace_.ops.push_back(op);
    ++trace_.free_count;
    live_bytes_ -= st.size;
    return absl::OkStatus();
  }

  // record_stream: the live allocation `id` is used on `stream` too.
  absl::Status Use(uint64_t id, uint32_t stream, uint32_t line) {
    auto it = ids_.find(id);
    if (it == ids_.end() || !it->second.live) {
      return Error(line, absl::StrCat("use of id ", id, ", which is not live"));
    }
    TraceOp op;
    op.kind = TraceOp::Kind::kUse;
    op.line = line;
    op.stream = stream;
    op.slot = it->second.slot;
    trace_.ops.push_back(op);
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
  void BlockPlace(uint64_t address, uint64_t size) {
    trace_.initial_blocks.push_back(InitialBlock{trace_.alloc_count - 1, address, size});
  }
  // `# frames ...` belongs to the allocation on the line before it.
  absl::Status Frames(uint32_t line, absl::string_view text) {
    if (trace_.ops.empty() || (trace_.ops.back().kind != TraceOp::Kind::kAlloc &&
                               trace_.ops.back().kind != TraceOp::Kind::kMalloc)) {
      return Error(line, "a frames comment follows the alloc it describes");
    }
    trace_.frames[trace_.ops.back().slot] = std::string(text);
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

  void Push(const TraceOp& op) { trace_.ops.push_back(op); }

  // The decision the recorder wrote for the allocation just added.
  void Decision(const RecordedDecision& d) {
    trace_.decisions.resize(trace_.alloc_count);
    trace_.decisions.back() = d;
  }

  // A `pool` line: a new dense index for the id (an id may be defined again
  // once its pool is destroyed).
  absl::StatusOr<uint32_t> DefinePool(TracePool pool, uint32_t line) {
    auto it = pool_index_.find(pool.id);
    if (it != pool_index_.end()) {
      return Error(line, absl::StrCat("pool ", pool.id, " is already defined (line ",
                                      pool_line_[it->second], "); pdestroy it first"));
    }
    if (trace_.pools.size() >= kMaxPools) {
      return Error(line, absl::StrCat("more than ", kMaxPools, " pools"));
    }
    const uint32_t index = static_cast<uint32_t>(trace_.pools.size());
    pool_index_.emplace(pool.id, index);
    trace_.pools.push_back(pool);
    pool_line_.push_back(line);
    return index;
  }
  absl::StatusOr<uint32_t> Pool(uint64_t id, uint32_t line) const {
    auto it = pool_index_.find(id);
    if (it == pool_index_.end()) {
      return Error(
          line, absl::StrCat("pool ", id, " is not defined (no live `pool ", id, "` line before)"));
    }
    return it->second;
  }
  void UndefinePool(uint64_t id) { pool_index_.erase(id); }

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
  };
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

std::vector<absl::string_view> Fields(absl::string_view line) {
  std::vector<absl::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsBlank(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !IsBlank(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint64_t> ParseHex(absl::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// "what must be an unsigned integer" errors name the field and say why the
// text is not one (sign, range, junk), since that is what a user must fix.
absl::StatusOr<uint64_t> Number(const TraceBuilder& b, uint32_t line, absl::string_view what,
                                absl::string_view text) {
  if (std::optional<uint64_t> v = ParseUint(text)) return *v;
  std::string why = "not an unsigned decimal integer";
  if (!text.empty() && text[0] == '-') {
    why = "negative";
  } else if (!text.empty() &&
             std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    why = "out of range (more than 64 bits)";
  }
  return b.Error(line, absl::StrCat(what, " ", Quote(text), " is ", why));
}

#define TRY_ASSIGN(lhs, expr)                   \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

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

struct OpSpec {
  absl::string_view name;
  TraceOp::Kind kind;
  absl::string_view usage;  // the fields after the op name
  size_t min_fields;
  size_t max_fields;  // SIZE_MAX: any number (pool settings)
};

constexpr OpSpec kOps[] = {
    {"alloc", TraceOp::Kind::kAlloc, "<id> <size> <stream> [<pool>]", 3, 4},
    {"free", TraceOp::Kind::kFree, "<id> <stream>", 2, 2},
    {"kernel", TraceOp::Kind::kKernel, "<stream> <duration_ns>", 2, 2},
    {"record", TraceOp::Kind::kRecord, "<event> <stream>", 2, 2},
    {"wait", TraceOp::Kind::kWait, "<stream> <event>", 2, 2},
    {"sync", TraceOp::Kind::kSync, "<stream>", 1, 1},
    {"esync", TraceOp::Kind::kEventSync, "<event>", 1, 1},
    {"dsync", TraceOp::Kind::kDeviceSync, "[<device>]", 0, 1},
    {"advance", TraceOp::Kind::kAdvance, "<ns>", 1, 1},
    {"stream", TraceOp::Kind::kStream, "<stream> <device> <flags>", 3, 3},
    {"sdestroy", TraceOp::Kind::kStreamDestroy, "<stream>", 1, 1},
    {"event", TraceOp::Kind::kEvent, "<event> <flags>", 2, 2},
    {"edestroy", TraceOp::Kind::kEventDestroy, "<event>", 1, 1},
    {"pool", TraceOp::Kind::kPool, "<pool> <device> <key>=<value>...", 2, SIZE_MAX},
    {"pdestroy", TraceOp::Kind::kPoolDestroy, "<pool>", 1, 1},
    {"malloc", TraceOp::Kind::kMalloc, "<id> <size> <device>", 3, 3},
    {"release", TraceOp::Kind::kRelease, "<id>", 1, 1},
    {"copy", TraceOp::Kind::kCopy, "<stream> <bytes>", 2, 2},
    {"host", TraceOp::Kind::kHost, "<stream>", 1, 1},
    {"query", TraceOp::Kind::kQuery, "<stream>", 1, 1},
    {"equery", TraceOp::Kind::kEventQuery, "<event>", 1, 1},
    {"attr", TraceOp::Kind::kAttr, "<pool> <name> <value>", 3, 3},
    {"trim", TraceOp::Kind::kTrim, "<pool> <bytes>", 2, 2},
    {"use", TraceOp::Kind::kUse, "<id> <stream>", 2, 2},
};

// A device number as a line gives it (the replay checks it against the
// runtime's device count).
absl::StatusOr<uint32_t> Device(const TraceBuilder& b, uint32_t line, absl::string_view text) {
  TRY_ASSIGN(d, Number(b, line, "device", text));
  if (d >= 64) return b.Error(line, absl::StrCat("device ", d, " is out of range (0..63)"));
  return static_cast<uint32_t>(d);
}

absl::StatusOr<bool> Switch(const TraceBuilder& b, uint32_t line, absl::string_view key,
                            absl::string_view text) {
  if (text == "0") return false;
  if (text == "1") return true;
  return b.Error(line, absl::StrCat(key, " is ", Quote(text), "; expected 0 or 1"));
}

absl::StatusOr<uint64_t> Threshold(const TraceBuilder& b, uint32_t line, absl::string_view text) {
  if (text == "max") return UINT64_MAX;
  return Number(b, line, "threshold", text);
}

template <typename E>
absl::StatusOr<E> Named(const TraceBuilder& b, uint32_t line, absl::string_view key,
                        absl::string_view text) {
  absl::StatusOr<E> v = internal::ParseEnumNameOrError<E>(text);
  if (!v.ok()) return b.Error(line, absl::StrCat(key, ": ", v.status().message()));
  return *v;
}

absl::Status ParseReuseSetting(const TraceBuilder& b, uint32_t line, absl::string_view text,
                               TracePool* p) {
  p->reuse_event = p->reuse_opportunistic = p->reuse_internal = false;
  if (text == "none") return absl::OkStatus();
  for (absl::string_view name : absl::StrSplit(text, '+')) {
    if (name == "event") {
      p->reuse_event = true;
    } else if (name == "opportunistic") {
      p->reuse_opportunistic = true;
    } else if (name == "internal") {
      p->reuse_internal = true;
    } else {
      return b.Error(line, absl::StrCat("reuse ", Quote(text),
                                        ": expected 'none' or event, opportunistic, internal "
                                        "joined by '+'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TracePool> ParsePool(const TraceBuilder& b, uint32_t line,
                                    const std::vector<absl::string_view>& f) {
  TracePool p;
  TRY_ASSIGN(id, Number(b, line, "pool", f[1]));
  TRY_ASSIGN(device, Device(b, line, f[2]));
  p.id = id;
  p.device = static_cast<int>(device);
  for (size_t i = 3; i < f.size(); ++i) {
    const size_t eq = f[i].find('=');
    if (eq == absl::string_view::npos) {
      return b.Error(line, absl::StrCat("pool setting ", Quote(f[i]), " is not <key>=<value>"));
    }
    const absl::string_view key = f[i].substr(0, eq);
    const absl::string_view v = f[i].substr(eq + 1);
    absl::Status st;
    if (key == "type") {
      TRY_ASSIGN(t, Named<AllocationType>(b, line, key, v));
      p.type = t;
    } else if (key == "reuse") {
      st = ParseReuseSetting(b, line, v, &p);
    } else if (key == "threshold") {
      TRY_ASSIGN(t, Threshold(b, line, v));
      p.release_threshold = t;
    } else if (key == "growth") {
      TRY_ASSIGN(g, Named<PoolGrowth>(b, line, key, v));
      p.growth = g;
    } else if (key == "page_policy") {
      TRY_ASSIGN(pp, Named<PagePolicy>(b, line, key, v));
      p.page_policy = pp;
    } else if (key == "front_cache") {
      TRY_ASSIGN(on, Switch(b, line, key, v));
      p.front_cache = on;
    } else if (key == "wait_before_growth") {
      TRY_ASSIGN(on, Switch(b, line, key, v));
      p.wait_before_growth = on;
    } else if (key == "soft_limit") {
      TRY_ASSIGN(t, Threshold(b, line, v));
      p.soft_limit = t;
    } else if (key == "default") {
      TRY_ASSIGN(on, Switch(b, line, key, v));
      p.is_default = on;
    } else if (key == "acl_rounding") {
      TRY_ASSIGN(on, Switch(b, line, key, v));
      p.acl_rounding = on;
    } else if (key == "acl_align32") {
      TRY_ASSIGN(on, Switch(b, line, key, v));
      p.acl_align32 = on;
    } else if (key == "max_size") {
      TRY_ASSIGN(n, Number(b, line, "max_size", v));
      p.max_size = n;
    } else if (key == "upstream") {
      p.custom_upstream = v == "custom";
    } else if (key == "handle_types") {
      TRY_ASSIGN(n, Number(b, line, "handle_types", v));
      p.handle_types = static_cast<unsigned>(n);
    }
    // Other keys (imported=1, settings of later versions) are for readers;
    // the replay makes the pool from what it knows.
    if (!st.ok()) return st;
  }
  return p;
}

// `# <rule> <chunk>+<offset>` or `# failed` after a recorded alloc; a comment
// of any other shape is prose.
std::optional<RecordedDecision> ParseDecision(absl::string_view comment) {
  const std::vector<absl::string_view> w = Fields(comment);
  RecordedDecision d;
  d.present = true;
  if (w.size() == 1 && w[0] == "failed") {
    d.failed = true;
    return d;
  }
  if (w.size() != 2) return std::nullopt;
  std::optional<ReuseRule> rule = internal::ParseEnumName<ReuseRule>(w[0]);
  const size_t plus = w[1].find('+');
  if (!rule || plus == absl::string_view::npos) return std::nullopt;
  std::optional<uint64_t> chunk = ParseUint(w[1].substr(0, plus));
  std::optional<uint64_t> offset = ParseUint(w[1].substr(plus + 1));
  if (!chunk || !offset) return std::nullopt;
  d.rule = *rule;
  d.chunk = *chunk;
  d.offset = *offset;
  return d;
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
    TRY_ASSIGN(address, Number(b, line, "address", w[1]));
    TRY_ASSIGN(size, Number(b, line, "size", w[2]));
    TRY_ASSIGN(sid, Number(b, line, "stream", w[3]));
    TRY_ASSIGN(stream, b.Stream(sid, line));
    InitialSegment s{address, size, stream, w[4] == "small", w.size() == 6};
    if (absl::Status st = b.InitialSegmentLine(s, line); !st.ok()) return st;
    return true;
  }
  for (const auto& [name, kind] : kEvents) {
    if (w[0] != name) continue;
    if (w.size() != 4) return b.Error(line, absl::StrCat(name, " takes <address> <size> <stream>"));
    TRY_ASSIGN(address, Number(b, line, "address", w[1]));
    TRY_ASSIGN(size, Number(b, line, "size", w[2]));
    TRY_ASSIGN(sid, Number(b, line, "stream", w[3]));
    TRY_ASSIGN(stream, b.Stream(sid, line));
    b.SegmentHistory(SegmentEvent{kind, 0, address, size, stream});
    return true;
  }
  return false;
}

absl::Status ParseV1Op(TraceBuilder& b, uint32_t line, const std::vector<absl::string_view>& f,
                       absl::string_view comment) {
  const OpSpec* spec = nullptr;
  for (const OpSpec& s : kOps) {
    if (s.name == f[0]) spec = &s;
  }
  if (spec == nullptr) return b.Error(line, absl::StrCat("unknown op ", Quote(f[0])));
  const size_t n = f.size() - 1;
  if (n < spec->min_fields || n > spec->max_fields) {
    std::string count = absl::StrCat(spec->min_fields);
    if (spec->max_fields == SIZE_MAX) {
      absl::StrAppend(&count, " or more");
    } else if (spec->max_fields != spec->min_fields) {
      absl::StrAppend(&count, " or ", spec->max_fields);
    }
    return b.Error(
        line,
        absl::StrCat(spec->name, " takes ", count, " field", spec->max_fields == 1 ? "" : "s",
                     spec->max_fields ? absl::StrCat(" (", spec->usage, ")") : "", ", got ", n));
  }
  TraceOp op;
  op.kind = spec->kind;
  op.line = line;
  switch (spec->kind) {
    case TraceOp::Kind::kAlloc: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      TRY_ASSIGN(size, Number(b, line, "size", f[2]));
      TRY_ASSIGN(sid, Number(b, line, "stream", f[3]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      uint32_t pool = TraceOp::kNoPool;
      if (n == 4) {
        TRY_ASSIGN(pid, Number(b, line, "pool", f[4]));
        TRY_ASSIGN(p, b.Pool(pid, line));
        pool = p;
      }
      if (absl::Status st = b.Alloc(id, size, stream, line, pool); !st.ok()) return st;
      if (std::optional<RecordedDecision> d = ParseDecision(comment)) b.Decision(*d);
      // `# torch_block <address> <size>`: where PyTorch placed it.
      const std::vector<absl::string_view> w = Fields(comment);
      if (w.size() == 3 && w[0] == "torch_block") {
        TRY_ASSIGN(address, Number(b, line, "torch_block address", w[1]));
        TRY_ASSIGN(bytes, Number(b, line, "torch_block size", w[2]));
        if (bytes < size) {
          return b.Error(line, absl::StrCat("torch_block of ", bytes, " bytes holds less than the ",
                                            size, " allocated"));
        }
        b.BlockPlace(address, bytes);
      }
      return absl::OkStatus();
    }
    case TraceOp::Kind::kMalloc: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      TRY_ASSIGN(size, Number(b, line, "size", f[2]));
      TRY_ASSIGN(device, Device(b, line, f[3]));
      return b.Alloc(id, size, 0, line, TraceOp::kNoPool, TraceOp::Kind::kMalloc, device);
    }
    case TraceOp::Kind::kFree: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      TRY_ASSIGN(sid, Number(b, line, "stream", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      return b.Free(id, stream, line);
    }
    case TraceOp::Kind::kRelease: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      return b.Free(id, 0, line, std::nullopt, TraceOp::Kind::kRelease);
    }
    case TraceOp::Kind::kUse: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      TRY_ASSIGN(sid, Number(b, line, "stream", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      return b.Use(id, stream, line);
    }
    case TraceOp::Kind::kKernel: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(ns, Number(b, line, "duration", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      if (absl::Status st = b.AddTime(ns, line); !st.ok()) return st;
      op.stream = stream;
      op.value = ns;
      break;
    }
    case TraceOp::Kind::kCopy: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(bytes, Number(b, line, "bytes", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      op.stream = stream;
      op.value = bytes;
      break;
    }
    case TraceOp::Kind::kRecord: {
      TRY_ASSIGN(eid, Number(b, line, "event", f[1]));
      TRY_ASSIGN(sid, Number(b, line, "stream", f[2]));
      TRY_ASSIGN(event, b.Event(eid, line));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      op.event = event;
      op.stream = stream;
      break;
    }
    case TraceOp::Kind::kWait: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(eid, Number(b, line, "event", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      TRY_ASSIGN(event, b.Event(eid, line));
      op.event = event;
      op.stream = stream;
      break;
    }
    case TraceOp::Kind::kSync:
    case TraceOp::Kind::kStreamDestroy:
    case TraceOp::Kind::kHost:
    case TraceOp::Kind::kQuery: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      op.stream = stream;
      break;
    }
    case TraceOp::Kind::kStream: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(device, Device(b, line, f[2]));
      TRY_ASSIGN(flags, Number(b, line, "flags", f[3]));
      if (flags > 2) {
        return b.Error(line, absl::StrCat("stream flags ", flags,
                                          ": expected 0 (blocking), 1 (non-blocking) or 2 "
                                          "(the device's legacy stream)"));
      }
      if (sid == 0 && !(flags == 2 && device == 0)) {
        return b.Error(line, "stream 0 is device 0's legacy stream");
      }
      TRY_ASSIGN(stream, b.Stream(sid, line));
      op.stream = stream;
      op.aux = device;
      op.value = flags;
      break;
    }
    case TraceOp::Kind::kEvent: {
      TRY_ASSIGN(eid, Number(b, line, "event", f[1]));
      TRY_ASSIGN(flags, Number(b, line, "flags", f[2]));
      TRY_ASSIGN(event, b.Event(eid, line));
      op.event = event;
      op.value = flags;
      break;
    }
    case TraceOp::Kind::kEventSync:
    case TraceOp::Kind::kEventDestroy:
    case TraceOp::Kind::kEventQuery: {
      TRY_ASSIGN(eid, Number(b, line, "event", f[1]));
      TRY_ASSIGN(event, b.Event(eid, line));
      op.event = event;
      break;
    }
    case TraceOp::Kind::kDeviceSync:
      if (n == 1) {
        TRY_ASSIGN(device, Device(b, line, f[1]));
        op.aux = device;
      }
      break;
    case TraceOp::Kind::kAdvance: {
      TRY_ASSIGN(ns, Number(b, line, "advance", f[1]));
      if (absl::Status st = b.AddTime(ns, line); !st.ok()) return st;
      op.value = ns;
      break;
    }
    case TraceOp::Kind::kPool: {
      TRY_ASSIGN(pool, ParsePool(b, line, f));
      TRY_ASSIGN(index, b.DefinePool(pool, line));
      op.pool = index;
      break;
    }
    case TraceOp::Kind::kPoolDestroy: {
      TRY_ASSIGN(pid, Number(b, line, "pool", f[1]));
      TRY_ASSIGN(index, b.Pool(pid, line));
      b.UndefinePool(pid);
      op.pool = index;
      break;
    }
    case TraceOp::Kind::kAttr: {
      TRY_ASSIGN(pid, Number(b, line, "pool", f[1]));
      TRY_ASSIGN(index, b.Pool(pid, line));
      const internal::PoolAttrInfo* attr = internal::FindPoolAttrByTraceName(f[2]);
      if (attr == nullptr) {
        return b.Error(line, absl::StrCat("attr ", Quote(f[2]), ": expected ",
                                          internal::PoolAttrTraceNames()));
      }
      if (attr->kind == internal::AttrKind::kU64) {
        TRY_ASSIGN(v, Threshold(b, line, f[3]));
        op.value = v;
      } else {
        TRY_ASSIGN(on, Switch(b, line, f[2], f[3]));
        op.value = on ? 1 : 0;
      }
      op.pool = index;
      op.aux = static_cast<uint32_t>(attr->attr);
      break;
    }
    case TraceOp::Kind::kTrim: {
      TRY_ASSIGN(pid, Number(b, line, "pool", f[1]));
      TRY_ASSIGN(index, b.Pool(pid, line));
      TRY_ASSIGN(bytes, Number(b, line, "bytes", f[2]));
      op.pool = index;
      op.value = bytes;
      break;
    }
  }
  b.Push(op);
  return absl::OkStatus();
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

std::optional<uint64_t> ParseUint(absl::string_view text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
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
    TRY_ASSIGN(size, Number(b, n, "size", f[column[kSize]]));
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
      TraceOp op;
      op.kind = TraceOp::Kind::kAdvance;
      op.line = n;
      op.value = ns;
      b.Push(op);
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
      if (absl::Status st = b.Alloc(next_id++, size, stream, n); !st.ok()) return st;
    } else {
      auto it = live.find(*ptr);
      if (it == live.end()) {
        return b.Error(
            n, absl::StrCat("free of 0x", absl::Hex(*ptr), ", which is not a live allocation"));
      }
      const uint64_t id = it->second.first;
      live.erase(it);
      if (absl::Status st = b.Free(id, stream, n, size); !st.ok()) return st;
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
