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

  absl::Status Alloc(uint64_t id, uint64_t size, uint32_t stream, uint32_t line) {
    auto [it, inserted] = ids_.try_emplace(id);
    IdState& st = it->second;
    if (!inserted && st.live) {
      return Error(line, absl::StrCat("alloc of id ", id, ", which is live (allocated at line ",
                                      st.alloc_line, ")"));
    }
    st = IdState{trace_.alloc_count, line, 0, size, true};
    TraceOp op;
    op.kind = TraceOp::Kind::kAlloc;
    op.line = line;
    op.stream = stream;
    op.slot = trace_.alloc_count++;
    op.value = size;
    trace_.ops.push_back(op);
    live_bytes_ += size;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    return absl::OkStatus();
  }

  // Size, when given (RMM logs it), must match the allocation's.
  absl::Status Free(uint64_t id, uint32_t stream, uint32_t line,
                    std::optional<uint64_t> size = std::nullopt) {
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
    op.kind = TraceOp::Kind::kFree;
    op.line = line;
    op.stream = stream;
    op.slot = st.slot;
    trace_.ops.push_back(op);
    ++trace_.free_count;
    live_bytes_ -= st.size;
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

  void Header(absl::string_view key, absl::string_view value) {
    trace_.header.try_emplace(std::string(key), std::string(value));
  }

  Trace Finish() && {
    // Sizes are uint64 each; their sum is kept in 128 bits so that a trace of
    // absurd sizes cannot wrap it. Such a peak is reported saturated.
    constexpr unsigned __int128 kMax = std::numeric_limits<uint64_t>::max();
    trace_.peak_live_bytes = static_cast<uint64_t>(std::min(peak_live_bytes_, kMax));
    trace_.live_at_end_bytes = static_cast<uint64_t>(std::min(live_bytes_, kMax));
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
  size_t fields;
};

constexpr OpSpec kOps[] = {
    {"alloc", TraceOp::Kind::kAlloc, "<id> <size> <stream>", 3},
    {"free", TraceOp::Kind::kFree, "<id> <stream>", 2},
    {"kernel", TraceOp::Kind::kKernel, "<stream> <duration_ns>", 2},
    {"record", TraceOp::Kind::kRecord, "<event> <stream>", 2},
    {"wait", TraceOp::Kind::kWait, "<stream> <event>", 2},
    {"sync", TraceOp::Kind::kSync, "<stream>", 1},
    {"esync", TraceOp::Kind::kEventSync, "<event>", 1},
    {"dsync", TraceOp::Kind::kDeviceSync, "", 0},
    {"advance", TraceOp::Kind::kAdvance, "<ns>", 1},
};

absl::Status ParseV1Op(TraceBuilder& b, uint32_t line, const std::vector<absl::string_view>& f) {
  const OpSpec* spec = nullptr;
  for (const OpSpec& s : kOps) {
    if (s.name == f[0]) spec = &s;
  }
  if (spec == nullptr) return b.Error(line, absl::StrCat("unknown op ", Quote(f[0])));
  if (f.size() - 1 != spec->fields) {
    return b.Error(line, absl::StrCat(spec->name, " takes ", spec->fields, " field",
                                      spec->fields == 1 ? "" : "s",
                                      spec->fields ? absl::StrCat(" (", spec->usage, ")") : "",
                                      ", got ", f.size() - 1));
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
      return b.Alloc(id, size, stream, line);
    }
    case TraceOp::Kind::kFree: {
      TRY_ASSIGN(id, Number(b, line, "id", f[1]));
      TRY_ASSIGN(sid, Number(b, line, "stream", f[2]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      return b.Free(id, stream, line);
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
    case TraceOp::Kind::kSync: {
      TRY_ASSIGN(sid, Number(b, line, "stream", f[1]));
      TRY_ASSIGN(stream, b.Stream(sid, line));
      op.stream = stream;
      break;
    }
    case TraceOp::Kind::kEventSync: {
      TRY_ASSIGN(eid, Number(b, line, "event", f[1]));
      TRY_ASSIGN(event, b.Event(eid, line));
      op.event = event;
      break;
    }
    case TraceOp::Kind::kDeviceSync:
      break;
    case TraceOp::Kind::kAdvance: {
      TRY_ASSIGN(ns, Number(b, line, "advance", f[1]));
      if (absl::Status st = b.AddTime(ns, line); !st.ok()) return st;
      op.value = ns;
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
    if (absl::Status st = ParseV1Op(b, n, f); !st.ok()) return st;
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
  return ParseTrace(text, path);
}

#undef TRY_ASSIGN

}  // namespace streampool::replay
