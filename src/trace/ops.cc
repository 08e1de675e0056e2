#include "src/trace/ops.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/pool/names.h"
#include "src/pool/pool_attrs.h"

namespace streampool::internal::trace {
namespace {

template <typename T>
concept PlainFields = requires(T op) {
  op.Tie();
};

// A byte bound: a number, or `max` for none (the others are switches).
bool IsBound(PoolAttr attr) {
  const PoolAttrInfo* a = FindPoolAttr(static_cast<int>(attr));
  return a != nullptr && a->kind == AttrKind::kU64;
}

// ------------------------------------------------------------ printing

// A line printed straight into a buffer the caller has made room in
// (kMaxPrintedLine): the recorder prints on the allocator's fast path,
// where a recording must cost little.
struct Out {
  char* p;
  Out& operator<<(absl::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
    return *this;
  }
  Out& operator<<(const char* s) { return *this << absl::string_view(s); }
  Out& operator<<(char c) {
    *p++ = c;
    return *this;
  }
  Out& operator<<(uint64_t v) {
    char digits[20];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) *p++ = digits[--n];
    return *this;
  }
  Out& Bound(uint64_t v) { return v == UINT64_MAX ? *this << "max" : *this << v; }
  Out& Bit(bool on) { return *this << (on ? '1' : '0'); }
};

template <typename T>
void Print(const T& op, Out& out) {
  static_assert(PlainFields<T>, "an op of its own shape has a Print of its own");
  out << T::kName;
  std::apply([&](const auto&... f) { ((out << ' ' << f), ...); }, op.Tie());
  out << '\n';
}

void Print(const Alloc& op, Out& out) {
  out << "alloc " << op.id << ' ' << op.size << ' ' << op.stream;
  if (op.pool != kNoPool) out << ' ' << op.pool;
  if (op.decision.present && op.decision.graph) {
    out << "  # graph";
  } else if (op.decision.present && op.decision.failed) {
    out << "  # failed";
  } else if (op.decision.present) {
    out << "  # " << ReuseRuleName(op.decision.rule) << ' ' << op.decision.chunk << '+'
        << op.decision.offset;
  }
  out << '\n';
}

void Print(const DeviceSync& op, Out& out) {
  out << "dsync";
  if (op.device != 0) out << ' ' << op.device;
  out << '\n';
}

void Print(const Query& op, Out& out) {
  out << "query " << op.stream << (op.complete ? "\n" : "  # not_ready\n");
}
void Print(const EventQuery& op, Out& out) {
  out << "equery " << op.event << (op.complete ? "\n" : "  # not_ready\n");
}

void Print(const Attr& op, Out& out) {
  out << "attr " << op.pool << ' ' << AttrName(op.attr) << ' ';
  (IsBound(op.attr) ? out.Bound(op.value) : out.Bit(op.value != 0)) << '\n';
}

void Print(const PoolCreate& p, Out& out) {
  out << "pool " << p.pool << ' ' << static_cast<uint64_t>(p.device);
  if (p.line == PoolCreate::Line::kImported) out << " imported=1";
  if (p.line != PoolCreate::Line::kSettings) {
    out << '\n';
    return;
  }
  out << " type=" << EnumName(p.type) << " reuse=";
  const char* sep = "";
  for (const auto& [on, name] :
       {std::pair{p.reuse_event, "event"}, std::pair{p.reuse_opportunistic, "opportunistic"},
        std::pair{p.reuse_internal, "internal"}}) {
    if (!on) continue;
    out << sep << name;
    sep = "+";
  }
  if (*sep == '\0') out << "none";
  out << " threshold=";
  out.Bound(p.release_threshold) << " growth=" << EnumName(p.growth) << " front_cache=";
  out.Bit(p.front_cache) << " wait_before_growth=";
  out.Bit(p.wait_before_growth) << " soft_limit=";
  out.Bound(p.soft_limit) << " default=";
  out.Bit(p.is_default);
  if (p.max_size != 0) out << " max_size=" << p.max_size;
  if (p.type == AllocationType::kHugePage || p.type == AllocationType::kDvpp) {
    out << " page_policy=" << EnumName(p.page_policy);
  }
  if (p.acl_rounding) out << " acl_rounding=1";
  if (p.acl_align32) out << " acl_align32=1";
  if (p.handle_types != 0) out << " handle_types=" << uint64_t{p.handle_types};
  if (p.custom_upstream) out << " upstream=custom";
  out << '\n';
}

void PrintList(absl::Span<const uint64_t> ids, Out& out) {
  for (uint64_t id : ids) out << ' ' << id;
}

void Print(const CaptureToGraph& op, Out& out) {
  out << "capture_to " << op.stream << ' ' << op.graph << ' ' << op.mode;
  PrintList(op.deps, out);
  out << '\n';
}

void Print(const CaptureEnd& op, Out& out) {
  out << "endcapture " << op.stream;
  if (op.graph != kNoGraph) out << ' ' << op.graph;
  out << '\n';
}

void Print(const GraphNode& op, Out& out) {
  out << "gnode " << op.graph << ' ' << op.node << ' ' << EnumName(op.kind);
  switch (op.kind) {
    case GraphNodeType::kKernel:
    case GraphNodeType::kMemcpy:
    case GraphNodeType::kMemset:
      out << ' ' << op.value;
      break;
    case GraphNodeType::kEventRecord:
    case GraphNodeType::kWaitEvent:
    case GraphNodeType::kGraph:
    case GraphNodeType::kMemFree:
      out << ' ' << op.ref;
      break;
    case GraphNodeType::kMemAlloc:
      out << ' ' << op.ref << ' ' << op.device << ' ' << op.value;
      break;
    case GraphNodeType::kHost:
    case GraphNodeType::kEmpty:
      break;
  }
  PrintList(op.deps, out);
  out << '\n';
}

void Print(const GraphEdges& op, Out& out) {
  out << "gedge " << op.graph;
  for (const auto& [from, to] : op.edges) out << ' ' << from << ' ' << to;
  out << '\n';
}

void Print(const GraphMemReset& op, Out& out) {
  out << "greset " << op.device << (op.used ? " used\n" : " reserved\n");
}

// ------------------------------------------------------------- parsing

absl::Status Error(absl::string_view what) { return absl::InvalidArgumentError(what); }

#define TRY_ASSIGN(lhs, expr)                   \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

// A device number as a line gives it (a replay checks it against its
// runtime's device count).
absl::StatusOr<uint64_t> Device(absl::string_view text) {
  TRY_ASSIGN(d, ParseNumber("device", text));
  if (d >= 64) return Error(absl::StrCat("device ", d, " is out of range (0..63)"));
  return d;
}

absl::StatusOr<bool> Switch(absl::string_view key, absl::string_view text) {
  if (text == "0") return false;
  if (text == "1") return true;
  return Error(absl::StrCat(key, " is ", Quote(text), "; expected 0 or 1"));
}

absl::StatusOr<uint64_t> Bound(absl::string_view text) {
  if (text == "max") return UINT64_MAX;
  return ParseNumber("threshold", text);
}

template <typename E>
absl::StatusOr<E> Named(absl::string_view key, absl::string_view text) {
  absl::StatusOr<E> v = ParseEnumNameOrError<E>(text);
  if (!v.ok()) return Error(absl::StrCat(key, ": ", v.status().message()));
  return *v;
}

// The fields after the op's name; `comment` what followed '#'.
using Args = absl::Span<const absl::string_view>;

template <typename T>
absl::Status Parse(Args f, absl::string_view, T* op) {
  static_assert(PlainFields<T>, "an op of its own shape has a Parse of its own");
  absl::Status st;
  size_t i = 0;
  auto read = [&](uint64_t& field) {
    if (!st.ok()) return;
    const absl::string_view what = T::kFields[i];
    absl::StatusOr<uint64_t> v = what == "device" ? Device(f[i]) : ParseNumber(what, f[i]);
    ++i;
    if (v.ok()) {
      field = *v;
    } else {
      st = v.status();
    }
  };
  std::apply([&](auto&... field) { (read(field), ...); }, op->Tie());
  return st;
}

absl::Status Parse(Args f, absl::string_view comment, Alloc* op) {
  TRY_ASSIGN(id, ParseNumber("id", f[0]));
  TRY_ASSIGN(size, ParseNumber("size", f[1]));
  TRY_ASSIGN(stream, ParseNumber("stream", f[2]));
  op->id = id;
  op->size = size;
  op->stream = stream;
  if (f.size() == 4) {
    TRY_ASSIGN(pool, ParseNumber("pool", f[3]));
    op->pool = pool;
  }
  // `# <rule> <chunk>+<offset>` or `# failed`; a comment of another shape
  // is prose.
  const std::vector<absl::string_view> w = Fields(comment);
  if (w.size() == 1 && w[0] == "graph") {
    op->decision = Decision{.present = true, .graph = true};
  } else if (w.size() == 1 && w[0] == "failed") {
    op->decision = Decision{.present = true, .failed = true};
  } else if (w.size() == 2) {
    std::optional<ReuseRule> rule = ParseEnumName<ReuseRule>(w[0]);
    const size_t plus = w[1].find('+');
    if (rule && plus != absl::string_view::npos) {
      std::optional<uint64_t> chunk = ParseUint(w[1].substr(0, plus));
      std::optional<uint64_t> offset = ParseUint(w[1].substr(plus + 1));
      if (chunk && offset) op->decision = Decision{true, false, *rule, *chunk, *offset};
    }
  }
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, DeviceSync* op) {
  if (f.size() == 1) {
    TRY_ASSIGN(device, Device(f[0]));
    op->device = device;
  }
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view comment, Query* op) {
  TRY_ASSIGN(stream, ParseNumber("stream", f[0]));
  op->stream = stream;
  op->complete = Fields(comment) != std::vector<absl::string_view>{"not_ready"};
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view comment, EventQuery* op) {
  TRY_ASSIGN(event, ParseNumber("event", f[0]));
  op->event = event;
  op->complete = Fields(comment) != std::vector<absl::string_view>{"not_ready"};
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view comment, StreamCreate* op) {
  if (absl::Status st = Parse<StreamCreate>(f, comment, op); !st.ok()) return st;
  if (op->flags > 2) {
    return Error(absl::StrCat("stream flags ", op->flags,
                              ": expected 0 (blocking), 1 (non-blocking) or 2 "
                              "(the device's legacy stream)"));
  }
  if (op->stream == 0 && !(op->flags == 2 && op->device == 0)) {
    return Error("stream 0 is device 0's legacy stream");
  }
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, Attr* op) {
  TRY_ASSIGN(pool, ParseNumber("pool", f[0]));
  op->pool = pool;
  const PoolAttrInfo* attr = FindPoolAttrByTraceName(f[1]);
  if (attr == nullptr) {
    return Error(absl::StrCat("attr ", Quote(f[1]), ": expected ", PoolAttrTraceNames()));
  }
  op->attr = attr->attr;
  if (IsBound(op->attr)) {
    TRY_ASSIGN(v, Bound(f[2]));
    op->value = v;
  } else {
    TRY_ASSIGN(on, Switch(f[1], f[2]));
    op->value = on ? 1 : 0;
  }
  return absl::OkStatus();
}

absl::Status ParseReuse(absl::string_view text, PoolCreate* p) {
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
      return Error(absl::StrCat("reuse ", Quote(text),
                                ": expected 'none' or event, opportunistic, internal "
                                "joined by '+'"));
    }
  }
  return absl::OkStatus();
}

// One `<key>=<value>` of a pool line. Keys it does not know (imported=1,
// settings of later versions) are for readers: a replay makes the pool from
// what it knows.
absl::Status ParsePoolSetting(absl::string_view key, absl::string_view v, PoolCreate* p) {
  auto set = [](auto* field, auto parsed) -> absl::Status {
    if (!parsed.ok()) return parsed.status();
    *field = static_cast<std::remove_pointer_t<decltype(field)>>(*parsed);
    return absl::OkStatus();
  };
  if (key == "type") return set(&p->type, Named<AllocationType>(key, v));
  if (key == "reuse") return ParseReuse(v, p);
  if (key == "threshold") return set(&p->release_threshold, Bound(v));
  if (key == "growth") return set(&p->growth, Named<PoolGrowth>(key, v));
  if (key == "page_policy") return set(&p->page_policy, Named<PagePolicy>(key, v));
  if (key == "front_cache") return set(&p->front_cache, Switch(key, v));
  if (key == "wait_before_growth") return set(&p->wait_before_growth, Switch(key, v));
  if (key == "soft_limit") return set(&p->soft_limit, Bound(v));
  if (key == "default") return set(&p->is_default, Switch(key, v));
  if (key == "acl_rounding") return set(&p->acl_rounding, Switch(key, v));
  if (key == "acl_align32") return set(&p->acl_align32, Switch(key, v));
  if (key == "max_size") return set(&p->max_size, ParseNumber("max_size", v));
  if (key == "handle_types") return set(&p->handle_types, ParseNumber("handle_types", v));
  if (key == "upstream") p->custom_upstream = v == "custom";
  if (key == "imported" && v == "1") p->line = PoolCreate::Line::kImported;
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, PoolCreate* p) {
  TRY_ASSIGN(id, ParseNumber("pool", f[0]));
  TRY_ASSIGN(device, Device(f[1]));
  p->pool = id;
  p->device = static_cast<int>(device);
  if (f.size() == 2) p->line = PoolCreate::Line::kBare;
  for (absl::string_view setting : f.subspan(2)) {
    const size_t eq = setting.find('=');
    if (eq == absl::string_view::npos) {
      return Error(absl::StrCat("pool setting ", Quote(setting), " is not <key>=<value>"));
    }
    absl::Status st = ParsePoolSetting(setting.substr(0, eq), setting.substr(eq + 1), p);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// Node indices (or other numbers) named `what`, at most kMaxListed of them.
absl::StatusOr<std::vector<uint64_t>> List(absl::string_view what, Args f) {
  if (f.size() > kMaxListed) {
    return Error(absl::StrCat("more than ", kMaxListed, " ", what, "s on one line"));
  }
  std::vector<uint64_t> out;
  for (absl::string_view text : f) {
    TRY_ASSIGN(v, ParseNumber(what, text));
    out.push_back(v);
  }
  return out;
}

absl::Status Parse(Args f, absl::string_view, CaptureToGraph* op) {
  TRY_ASSIGN(stream, ParseNumber("stream", f[0]));
  TRY_ASSIGN(graph, ParseNumber("graph", f[1]));
  TRY_ASSIGN(mode, ParseNumber("mode", f[2]));
  TRY_ASSIGN(deps, List("node", f.subspan(3)));
  *op = CaptureToGraph{stream, graph, mode, std::move(deps)};
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, CaptureEnd* op) {
  TRY_ASSIGN(stream, ParseNumber("stream", f[0]));
  op->stream = stream;
  if (f.size() == 2) {
    TRY_ASSIGN(graph, ParseNumber("graph", f[1]));
    if (graph == kNoGraph) return Error("graph is out of range");
    op->graph = graph;
  }
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, GraphNode* op) {
  TRY_ASSIGN(graph, ParseNumber("graph", f[0]));
  TRY_ASSIGN(node, ParseNumber("node", f[1]));
  TRY_ASSIGN(kind, Named<GraphNodeType>("node kind", f[2]));
  op->graph = graph;
  op->node = node;
  op->kind = kind;
  Args rest = f.subspan(3);
  // The kind's params: (field name, where it goes).
  std::vector<std::pair<absl::string_view, uint64_t*>> params;
  switch (kind) {
    case GraphNodeType::kKernel:
      params = {{"duration", &op->value}};
      break;
    case GraphNodeType::kMemcpy:
    case GraphNodeType::kMemset:
      params = {{"bytes", &op->value}};
      break;
    case GraphNodeType::kEventRecord:
    case GraphNodeType::kWaitEvent:
      params = {{"event", &op->ref}};
      break;
    case GraphNodeType::kGraph:
      params = {{"graph", &op->ref}};
      break;
    case GraphNodeType::kMemAlloc:
      params = {{"id", &op->ref}, {"device", &op->device}, {"bytes", &op->value}};
      break;
    case GraphNodeType::kMemFree:
      params = {{"id", &op->ref}};
      break;
    case GraphNodeType::kHost:
    case GraphNodeType::kEmpty:
      break;
  }
  if (rest.size() < params.size()) {
    return Error(
        absl::StrCat("a ", f[2], " node takes ", params.size(), " params, got ", rest.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    absl::StatusOr<uint64_t> v =
        params[i].first == "device" ? Device(rest[i]) : ParseNumber(params[i].first, rest[i]);
    if (!v.ok()) return v.status();
    *params[i].second = *v;
  }
  TRY_ASSIGN(deps, List("node", rest.subspan(params.size())));
  op->deps = std::move(deps);
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, GraphEdges* op) {
  TRY_ASSIGN(graph, ParseNumber("graph", f[0]));
  op->graph = graph;
  if (f.size() % 2 != 1) return Error("gedge lists its edges as <from> <to> pairs");
  TRY_ASSIGN(nodes, List("node", f.subspan(1)));
  for (size_t i = 0; i < nodes.size(); i += 2) op->edges.emplace_back(nodes[i], nodes[i + 1]);
  return absl::OkStatus();
}

absl::Status Parse(Args f, absl::string_view, GraphMemReset* op) {
  TRY_ASSIGN(device, Device(f[0]));
  op->device = device;
  if (f[1] != "used" && f[1] != "reserved") {
    return Error(absl::StrCat("greset ", Quote(f[1]), ": expected used or reserved"));
  }
  op->used = f[1] == "used";
  return absl::OkStatus();
}

#undef TRY_ASSIGN

// How many fields an op takes after its name: (least, most).
template <typename T>
constexpr std::pair<size_t, size_t> FieldCount() {
  if constexpr (std::is_same_v<T, Alloc>) {
    return {3, 4};
  } else if constexpr (std::is_same_v<T, DeviceSync>) {
    return {0, 1};
  } else if constexpr (std::is_same_v<T, PoolCreate>) {
    return {2, SIZE_MAX};
  } else if constexpr (std::is_same_v<T, Attr> || std::is_same_v<T, CaptureToGraph>) {
    return {3, std::is_same_v<T, Attr> ? 3 : SIZE_MAX};
  } else if constexpr (std::is_same_v<T, CaptureEnd>) {
    return {1, 2};
  } else if constexpr (std::is_same_v<T, GraphNode>) {
    return {3, SIZE_MAX};
  } else if constexpr (std::is_same_v<T, GraphEdges>) {
    return {3, SIZE_MAX};
  } else if constexpr (std::is_same_v<T, GraphMemReset>) {
    return {2, 2};
  } else {
    constexpr size_t n = std::tuple_size_v<decltype(std::declval<T&>().Tie())>;
    return {n, n};
  }
}

template <typename T>
absl::StatusOr<Op> ParseAs(Args f, absl::string_view comment) {
  constexpr auto kCount = FieldCount<T>();
  const size_t n = f.size();
  if (n < kCount.first || n > kCount.second) {
    std::string count = absl::StrCat(kCount.first);
    if (kCount.second == SIZE_MAX) {
      absl::StrAppend(&count, " or more");
    } else if (kCount.second != kCount.first) {
      absl::StrAppend(&count, " or ", kCount.second);
    }
    return Error(absl::StrCat(T::kName, " takes ", count, " field", kCount.second == 1 ? "" : "s",
                              " (", T::kUsage, "), got ", n));
  }
  T op;
  if (absl::Status st = Parse(f, comment, &op); !st.ok()) return st;
  return op;
}

template <size_t... I>
absl::StatusOr<Op> ParseNamed(absl::string_view name, Args f, absl::string_view comment,
                              std::index_sequence<I...>) {
  absl::StatusOr<Op> out = Error(absl::StrCat("unknown op ", Quote(name)));
  (void)((std::variant_alternative_t<I, Op>::kName == name
              ? (out = ParseAs<std::variant_alternative_t<I, Op>>(f, comment), true)
              : false) ||
         ...);
  return out;
}

}  // namespace

const char* AttrName(PoolAttr attr) {
  const PoolAttrInfo* a = FindPoolAttr(static_cast<int>(attr));
  return a != nullptr ? a->trace_name : nullptr;
}

bool IsGraphOp(const Op& op) { return op.index() >= Op(CaptureBegin{}).index(); }

char* PrintOp(const Op& op, char* out) {
  Out o{out};
  std::visit([&](const auto& alt) { Print(alt, o); }, op);
  return o.p;
}

void AppendOp(const Op& op, std::string* out) {
  char line[kMaxPrintedLine];
  out->append(line, PrintOp(op, line) - line);
}

std::string ToString(const Op& op) {
  std::string out;
  AppendOp(op, &out);
  return out;
}

absl::StatusOr<Op> ParseOp(absl::Span<const absl::string_view> fields, absl::string_view comment) {
  if (fields.empty()) return Error("an empty line is no op");
  return ParseNamed(fields[0], fields.subspan(1), comment,
                    std::make_index_sequence<std::variant_size_v<Op>>());
}

std::vector<absl::string_view> Fields(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

std::optional<uint64_t> ParseUint(absl::string_view text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

absl::StatusOr<uint64_t> ParseNumber(absl::string_view what, absl::string_view text) {
  if (std::optional<uint64_t> v = ParseUint(text)) return *v;
  std::string why = "not an unsigned decimal integer";
  if (!text.empty() && text[0] == '-') {
    why = "negative";
  } else if (!text.empty() &&
             std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    why = "out of range (more than 64 bits)";
  }
  return Error(absl::StrCat(what, " ", Quote(text), " is ", why));
}

std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 40;
  const bool cut = text.size() > kMax;
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kMax)), cut ? "...'" : "'");
}

}  // namespace streampool::internal::trace
