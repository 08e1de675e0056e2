#include "src/replay/decisions.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/pool/names.h"

namespace streampool::replay {

namespace {

constexpr char kColumns[] = "# op line stream size rule pool place waits";

// The trace's own number for a dense stream index.
uint64_t StreamNumber(const Trace& trace, uint32_t stream) {
  return stream < trace.stream_ids.size() ? trace.stream_ids[stream] : stream;
}

// What the rule column says.
absl::string_view RuleKey(const ReplayDecision& d) {
  if (d.failed) return "failed";
  if (d.model) return "model";
  return ReuseRuleName(d.rule);
}
absl::string_view RuleKey(const std::optional<ReplayDecision>& d) {
  return d ? RuleKey(*d) : absl::string_view("none");
}

// One data line appended to *out, without its newline: a file is written
// into one string, line by line.
void AppendDecisionLine(const Trace& trace, const ReplayDecision& d, std::string* out) {
  absl::StrAppend(out, d.op, " ", d.line, " ", StreamNumber(trace, d.stream), " ", d.size, " ",
                  RuleKey(d), " ");
  if (d.model) {
    out->push_back('-');
  } else if (d.pool == TraceOp::kNoPool) {
    out->append("own");
  } else {
    absl::StrAppend(out, d.pool < trace.pools.size() ? trace.pools[d.pool].pool : d.pool);
  }
  if (d.model && !d.failed) {
    absl::StrAppend(out, " @", absl::Hex(d.address));
  } else if (d.failed || d.chunk == 0) {
    out->append(" -");
  } else {
    absl::StrAppend(out, " ", d.chunk, "+", d.offset);
  }
  if (d.waits.empty()) {
    out->append(" -");
  } else {
    for (size_t k = 0; k < d.waits.size(); ++k) {
      absl::StrAppend(out, k == 0 ? " " : ",", StreamNumber(trace, d.waits[k].stream), "@",
                      d.waits[k].position);
    }
  }
}

// Splits a line at single spaces into at most kMax fields; the count, or
// kMax + 1 when there are more.
template <size_t kMax>
size_t SplitFields(absl::string_view line, std::array<absl::string_view, kMax>* fields) {
  size_t n = 0;
  while (!line.empty()) {
    const size_t space = line.find(' ');
    const absl::string_view field = line.substr(0, space);
    if (!field.empty()) {
      if (n == kMax) return kMax + 1;
      (*fields)[n++] = field;
    }
    if (space == absl::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return n;
}

}  // namespace

std::string DecisionSettingLabel(const ReplaySettings& settings) {
  if (IsModel(settings.allocator)) return settings.AllocatorLabel();
  if (settings.use_recorded && settings.allocator == AllocatorKind::kStreampool) {
    return "recorded settings";
  }
  return settings.Label();
}

std::string FormatDecisionLine(const Trace& trace, const ReplayDecision& d) {
  std::string out;
  AppendDecisionLine(trace, d, &out);
  return out;
}

std::string FormatDecisions(const Trace& trace, absl::string_view setting,
                            absl::Span<const ReplayDecision> decisions) {
  std::string out;
  // About 40 bytes a line: one allocation for a whole file.
  out.reserve(256 + decisions.size() * 48);
  // The trace's file name without its directory: where a checkout lies
  // must not change the file.
  absl::string_view name = trace.name;
  if (size_t slash = name.rfind('/'); slash != absl::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  absl::StrAppend(&out, kDecisionsMagic, "\ntrace ", name, "\nsetting ", setting, "\nops ",
                  trace.ops.size(), "\ndecisions ", decisions.size(), "\n", kColumns, "\n");
  for (const ReplayDecision& d : decisions) {
    AppendDecisionLine(trace, d, &out);
    out.push_back('\n');
  }
  return out;
}

absl::StatusOr<DecisionFile> ParseDecisions(absl::string_view text, absl::string_view name,
                                            const Trace& trace) {
  absl::flat_hash_map<uint64_t, uint32_t> streams, pools;
  for (size_t k = 0; k < trace.stream_ids.size(); ++k) {
    streams.emplace(trace.stream_ids[k], static_cast<uint32_t>(k));
  }
  for (size_t k = 0; k < trace.pools.size(); ++k) {
    pools.emplace(trace.pools[k].pool, static_cast<uint32_t>(k));
  }
  DecisionFile out;
  size_t line_no = 0;
  bool magic = false;
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", line_no, ": ", what));
  };
  auto number = [](absl::string_view s, uint64_t* v) { return absl::SimpleAtoi(s, v); };
  auto stream_of = [&](absl::string_view s, uint32_t* dense) {
    uint64_t id = 0;
    if (!number(s, &id)) return false;
    auto it = streams.find(id);
    if (it == streams.end()) return false;
    *dense = it->second;
    return true;
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (!magic) {
      if (line != kDecisionsMagic) {
        return error(
            absl::StrCat("not a decisions file (its first line is not '", kDecisionsMagic, "')"));
      }
      magic = true;
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    if (!absl::ascii_isdigit(static_cast<unsigned char>(line.front()))) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(line, absl::MaxSplits(' ', 1));
      if (kv.first == "trace") out.trace = std::string(kv.second);
      if (kv.first == "setting") out.setting = std::string(kv.second);
      continue;
    }
    std::array<absl::string_view, 8> f;
    if (const size_t n = SplitFields(line, &f); n != f.size()) {
      return error(absl::StrCat("a decision has 8 fields (", kColumns + 2, "), not ",
                                n > f.size() ? std::string("more") : absl::StrCat(n)));
    }
    ReplayDecision d;
    uint64_t v = 0;
    if (!number(f[0], &v) || v == 0 || v > trace.ops.size()) {
      return error(absl::StrCat("op '", f[0], "' is not an op of ", trace.name, " (1 to ",
                                trace.ops.size(), ")"));
    }
    d.op = static_cast<uint32_t>(v);
    if (!number(f[1], &v) || v > UINT32_MAX) return error(absl::StrCat("bad line '", f[1], "'"));
    d.line = static_cast<uint32_t>(v);
    if (!stream_of(f[2], &d.stream)) {
      return error(absl::StrCat("stream '", f[2], "' is not a stream of ", trace.name));
    }
    if (!number(f[3], &d.size)) return error(absl::StrCat("bad size '", f[3], "'"));
    if (f[4] == "failed") {
      d.failed = true;
    } else if (f[4] == "model") {
      d.model = true;
    } else {
      absl::StatusOr<ReuseRule> rule = internal::ParseEnumNameOrError<ReuseRule>(f[4]);
      if (!rule.ok()) return error(rule.status().message());
      d.rule = *rule;
    }
    if (f[5] == "own") {
      d.pool = TraceOp::kNoPool;
    } else if (f[5] == "-") {
      d.pool = 0;
    } else {
      auto it = number(f[5], &v) ? pools.find(v) : pools.end();
      if (it == pools.end()) {
        return error(absl::StrCat("pool '", f[5], "' is not a pool of ", trace.name));
      }
      d.pool = it->second;
    }
    if (absl::ConsumePrefix(&f[6], "@")) {
      if (!absl::SimpleHexAtoi(f[6], &d.address)) {
        return error(absl::StrCat("bad model address '", f[6], "'"));
      }
    } else if (f[6] != "-") {
      std::pair<absl::string_view, absl::string_view> place =
          absl::StrSplit(f[6], absl::MaxSplits('+', 1));
      if (!number(place.first, &d.chunk) || d.chunk == 0 || !number(place.second, &d.offset)) {
        return error(absl::StrCat("bad place '", f[6], "' (<chunk>+<offset>, - or @<hex>)"));
      }
    }
    if (f[7] != "-") {
      for (absl::string_view w : absl::StrSplit(f[7], ',')) {
        std::pair<absl::string_view, absl::string_view> sp =
            absl::StrSplit(w, absl::MaxSplits('@', 1));
        DecisionWait wait;
        if (!stream_of(sp.first, &wait.stream) || !number(sp.second, &wait.position)) {
          return error(absl::StrCat("bad wait '", w, "' (<stream>@<position>)"));
        }
        d.waits.push_back(wait);
      }
    }
    if (!out.decisions.empty() && out.decisions.back().op >= d.op) {
      return error("decisions are in op order, one per op");
    }
    out.decisions.push_back(std::move(d));
  }
  if (!magic) {
    line_no = 1;
    return error("empty: not a decisions file");
  }
  return out;
}

absl::StatusOr<DecisionFile> LoadDecisions(const std::string& path, const Trace& trace) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseDecisions(text.str(), path, trace);
}

bool SameDecision(const ReplayDecision& a, const ReplayDecision& b) {
  return a.op == b.op && a.stream == b.stream && a.size == b.size && a.failed == b.failed &&
         a.model == b.model && a.pool == b.pool && a.waits == b.waits &&
         (a.failed || (a.rule == b.rule && a.chunk == b.chunk && a.offset == b.offset &&
                       a.address == b.address));
}

std::string RuleBehind(const ReplayDecision& d) {
  if (d.failed) {
    return "failed: no rule served it and the pool could not grow (out of memory, after "
           "reclaiming what the device's pools held READY)";
  }
  if (d.model) return "model: the allocator model's own placement (its header says how)";
  switch (d.rule) {
    case ReuseRule::kFresh:
      return "fresh: bytes never handed out before; the pool grew or took untouched bytes of "
             "its reservation (rule 4)";
    case ReuseRule::kSameStream:
      return "same_stream: a block this stream freed itself, safe by stream order (rule 1)";
    case ReuseRule::kEventDependency:
      return "event_dependency: another stream's free that an event or the legacy stream "
             "ordered before this allocation (rule 2, reuse event)";
    case ReuseRule::kOpportunistic:
      return "opportunistic: another stream's free observed complete (rule 3, reuse "
             "opportunistic)";
    case ReuseRule::kAfterSync:
      return "after_sync: a READY block, its free proven complete by a synchronize or a query";
    case ReuseRule::kInternalDependency:
      return "internal_dependency: another stream's pending free, after inserting a wait on it "
             "(rule 5, reuse internal)";
    default:
      break;
  }
  return ReuseRuleName(d.rule);
}

namespace {

Neighbourhood PlaceBlocks(const ReplayDecision& d, const BlocksAroundFn& around) {
  Neighbourhood n;
  if (d.failed) {
    n.note = "failed: no block";
  } else if (d.model) {
    n.note = "a model's blocks are not shown";
  } else if (d.chunk == 0) {
    n.note = "no block (a size-0 allocation)";
  } else {
    n = around(d.pool, d.chunk, d.offset);
  }
  return n;
}

DecisionDifference Difference(const std::optional<ReplayDecision>& a,
                              const std::optional<ReplayDecision>& b) {
  DecisionDifference diff;
  const ReplayDecision& any = a ? *a : *b;
  diff.op = any.op;
  diff.line = any.line;
  diff.a = a;
  diff.b = b;
  return diff;
}

void AppendBlocks(const Trace& trace, absl::string_view title, const ReplayDecision* d,
                  const Neighbourhood& n, std::string* out) {
  if (d == nullptr) return;
  absl::StrAppend(out, "  blocks around the ", title, " place");
  if (!n.found) {
    absl::StrAppend(out, ": ", n.note.empty() ? "none" : n.note, "\n");
    return;
  }
  absl::StrAppend(out, " (chunk ", d->chunk, ", ", n.segment_size,
                  " bytes), in address order, as the pool had them after the decision:\n");
  for (const NeighbourBlock& b : n.blocks) {
    std::string state = internal::EnumName(b.state);
    if (b.unmapped) state += " (unmapped)";
    absl::StrAppendFormat(out, "    %s +%-12d %12d  %-14s", b.at_place ? ">" : " ", b.offset,
                          b.size, state);
    if (b.stream != NeighbourBlock::kNoStream) {
      absl::StrAppend(out, " stream ", StreamNumber(trace, b.stream));
    }
    if (b.state == BlockState::kLive || b.state == BlockState::kCached) {
      absl::StrAppend(out, " asked ", b.requested);
    }
    if (b.state == BlockState::kPending || b.state == BlockState::kCached ||
        b.state == BlockState::kAwaitingUses) {
      absl::StrAppend(out, " freed at ", b.free_point);
    }
    out->push_back('\n');
  }
}

// The difference in words, each side named by `a_name` and `b_name`.
std::string FormatDifference(const Trace& trace, const DecisionDifference& diff,
                             absl::string_view a_name, absl::string_view a_setting,
                             absl::string_view b_name, absl::string_view b_setting) {
  std::string out;
  const ReplayDecision& any = diff.a ? *diff.a : *diff.b;
  absl::StrAppend(&out, trace.name, ":", diff.line, ": the decision at op ", diff.op,
                  " differs: alloc of ", any.size, " bytes on stream ",
                  StreamNumber(trace, any.stream), "\n");
  absl::StrAppend(&out, "  ", kColumns + 2, "\n");
  auto side = [&](absl::string_view name, absl::string_view setting,
                  const std::optional<ReplayDecision>& d) {
    absl::StrAppendFormat(&out, "  %-9s %s  (%s)\n", absl::StrCat(name, ":"),
                          d ? FormatDecisionLine(trace, *d) : std::string("no decision at this op"),
                          setting);
  };
  side(a_name, a_setting, diff.a);
  side(b_name, b_setting, diff.b);
  if (diff.a)
    absl::StrAppend(&out, "  rule behind the ", a_name, " one: ", RuleBehind(*diff.a), "\n");
  if (diff.b)
    absl::StrAppend(&out, "  rule behind the ", b_name, " one: ", RuleBehind(*diff.b), "\n");
  AppendBlocks(trace, a_name, diff.a ? &*diff.a : nullptr, diff.a_blocks, &out);
  AppendBlocks(trace, b_name, diff.b ? &*diff.b : nullptr, diff.b_blocks, &out);
  return out;
}

}  // namespace

absl::StatusOr<DecisionCheck> CheckDecisions(const Trace& trace, const ReplaySettings& settings,
                                             const DecisionFile& saved) {
  DecisionCheck out;
  out.saved_setting = saved.setting;
  out.replayed_setting = DecisionSettingLabel(settings);
  out.saved = saved.decisions.size();
  const std::vector<ReplayDecision>& want = saved.decisions;
  size_t next = 0;
  DecisionFn on_decision = [&](const ReplayDecision& d, const BlocksAroundFn& around) {
    std::optional<ReplayDecision> a, b;
    if (next < want.size() && want[next].op < d.op) {
      a = want[next];  // the file has a decision where the replay has none
    } else if (next < want.size() && want[next].op == d.op) {
      if (SameDecision(want[next], d)) {
        ++next;
        ++out.agreed;
        return true;
      }
      a = want[next];
      b = d;
    } else {
      b = d;
    }
    DecisionDifference diff = Difference(a, b);
    // The saved place as the replay's pool has it now: what stood there
    // when the replay decided otherwise.
    if (a) diff.a_blocks = PlaceBlocks(*a, around);
    if (b) diff.b_blocks = PlaceBlocks(*b, around);
    out.difference = std::move(diff);
    return false;
  };
  ReplaySettings s = settings;
  s.measure_host_cost = false;
  s.keep_decisions = false;
  absl::StatusOr<ReplayResult> r = Replay(trace, s, {}, on_decision);
  if (!r.ok()) return r.status();
  if (!out.difference && next < want.size()) {
    out.difference = Difference(want[next], std::nullopt);
    out.difference->a_blocks.note = "the replay had ended";
  }
  return out;
}

std::string FormatCheck(const Trace& trace, const DecisionCheck& check) {
  if (!check.difference) {
    return absl::StrCat(trace.name, ": all ", check.agreed,
                        " decisions agree with the saved ones (", check.replayed_setting, ")\n");
  }
  std::string out = FormatDifference(trace, *check.difference, "saved", check.saved_setting,
                                     "replayed", check.replayed_setting);
  absl::StrAppend(&out, "  ", check.agreed, " of ", check.saved,
                  " saved decisions agreed before it\n");
  return out;
}

absl::Status ApplySettingChange(absl::string_view change, ReplaySettings* settings) {
  if (change.empty()) return absl::InvalidArgumentError("an empty setting change");
  for (absl::string_view item : absl::StrSplit(change, '/')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = kv.first, value = kv.second;
    absl::Status st;
    if (key == "reuse") {
      st = ParseReuse(value, settings);
      settings->use_recorded = false;
    } else if (key == "threshold") {
      absl::StatusOr<uint64_t> t = ParseThreshold(value);
      st = t.status();
      if (t.ok()) settings->release_threshold = *t;
      settings->use_recorded = false;
    } else if (key == "growth") {
      absl::StatusOr<PoolGrowth> g = internal::ParseEnumNameOrError<PoolGrowth>(value);
      st = g.status();
      if (g.ok()) settings->growth = *g;
      settings->use_recorded = false;
    } else if (key == "wait-before-growth") {
      if (value != "0" && value != "1") {
        st = absl::InvalidArgumentError("wait-before-growth is 0 or 1");
      } else {
        settings->wait_before_growth = value == "1";
      }
      settings->use_recorded = false;
    } else if (key == "soft-limit") {
      absl::StatusOr<uint64_t> t = ParseThreshold(value);
      st = t.status();
      if (t.ok()) settings->soft_limit = *t;
      settings->use_recorded = false;
    } else if (key == "allocator") {
      absl::StatusOr<AllocatorKind> a = ParseAllocator(value);
      st = a.status();
      if (a.ok()) settings->allocator = *a;
    } else if (key == "capacity") {
      absl::StatusOr<uint64_t> c = ParseBytes(value);
      st = c.status();
      if (c.ok() && *c == 0) st = absl::InvalidArgumentError("a device has at least one byte");
      if (st.ok()) {
        settings->device_capacity = *c;
        settings->recorded_capacity = false;
      }
    } else if (key == "torch-conf") {
      absl::StatusOr<TorchOptions> t = ParseTorchConf(value);
      st = t.status();
      if (t.ok()) settings->torch = *t;
    } else if (key == "rmm-initial" || key == "rmm-max") {
      absl::StatusOr<uint64_t> b = ParseBytes(value);
      st = b.status();
      if (b.ok()) {
        (key == "rmm-initial" ? settings->rmm.initial_pool_size : settings->rmm.maximum_pool_size) =
            *b;
      }
    } else {
      st = absl::InvalidArgumentError(
          absl::StrCat("unknown setting '", key,
                       "' (reuse, threshold, growth, wait-before-growth, soft-limit, allocator, "
                       "capacity, torch-conf, rmm-initial or rmm-max)"));
    }
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "': ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SettingsDiff> DiffSettings(const Trace& trace, const ReplaySettings& a,
                                          const ReplaySettings& b) {
  SettingsDiff out;
  out.a_setting = DecisionSettingLabel(a);
  out.b_setting = DecisionSettingLabel(b);
  ReplaySettings sa = a;
  sa.keep_decisions = true;
  sa.measure_host_cost = false;
  absl::StatusOr<ReplayResult> ra = Replay(trace, sa);
  if (!ra.ok()) return ra.status();
  const std::vector<ReplayDecision>& want = ra->decisions;

  std::map<std::pair<std::string, std::string>, RuleChange> changes;
  auto count = [&](const std::optional<ReplayDecision>& da, const std::optional<ReplayDecision>& db,
                   const BlocksAroundFn* around) {
    ++out.compared;
    if (da && db && SameDecision(*da, *db)) return;
    const uint64_t bytes = da ? da->size : db->size;
    ++out.differing;
    out.differing_bytes += bytes;
    const std::string ka(RuleKey(da)), kb(RuleKey(db));
    if (ka == kb) {
      ++out.same_rule_elsewhere;
    } else {
      ++out.other_rule;
    }
    if (ka == "failed" && kb != "failed") ++out.failed_a_only;
    if (kb == "failed" && ka != "failed") ++out.failed_b_only;
    RuleChange& c = changes[{ka, kb}];
    c.a_rule = ka;
    c.b_rule = kb;
    ++c.decisions;
    c.bytes += bytes;
    if (!out.first) {
      out.first = Difference(da, db);
      if (db && around != nullptr) out.first->b_blocks = PlaceBlocks(*db, *around);
    }
  };
  size_t next = 0;
  DecisionFn on_decision = [&](const ReplayDecision& d, const BlocksAroundFn& around) {
    while (next < want.size() && want[next].op < d.op) count(want[next++], std::nullopt, nullptr);
    if (next < want.size() && want[next].op == d.op) {
      count(want[next++], d, &around);
    } else {
      count(std::nullopt, d, &around);
    }
    return true;
  };
  ReplaySettings sb = b;
  sb.measure_host_cost = false;
  sb.keep_decisions = false;
  absl::StatusOr<ReplayResult> rb = Replay(trace, sb, {}, on_decision);
  if (!rb.ok()) return rb.status();
  while (next < want.size()) count(want[next++], std::nullopt, nullptr);

  // a's blocks are a's pool's at that op: a second run of a, to there.
  if (out.first && out.first->a) {
    const uint32_t op = out.first->op;
    Neighbourhood blocks;
    DecisionFn at_first = [&](const ReplayDecision& d, const BlocksAroundFn& around) {
      if (d.op < op) return true;
      if (d.op == op) blocks = PlaceBlocks(d, around);
      return false;
    };
    sa.keep_decisions = false;
    absl::StatusOr<ReplayResult> again = Replay(trace, sa, {}, at_first);
    if (!again.ok()) return again.status();
    out.first->a_blocks = std::move(blocks);
  }
  for (auto& [key, c] : changes) out.by_rule.push_back(std::move(c));
  std::stable_sort(out.by_rule.begin(), out.by_rule.end(),
                   [](const RuleChange& x, const RuleChange& y) { return x.bytes > y.bytes; });
  return out;
}

std::string FormatSettingsDiff(const Trace& trace, const SettingsDiff& diff) {
  std::string out;
  absl::StrAppend(&out, trace.name, ": a = ", diff.a_setting, "\n", trace.name,
                  ": b = ", diff.b_setting, "\n");
  if (diff.differing == 0) {
    absl::StrAppend(&out, "  all ", diff.compared, " decisions are the same\n");
    return out;
  }
  absl::StrAppend(&out, "  ", diff.differing, " of ", diff.compared, " decisions differ (",
                  diff.differing_bytes, " bytes asked): ", diff.same_rule_elsewhere,
                  " by place or waits under the same rule, ", diff.other_rule,
                  " by rule; failed under a only: ", diff.failed_a_only,
                  ", under b only: ", diff.failed_b_only, "\n");
  absl::StrAppendFormat(&out, "  %-22s %-22s %10s %16s\n", "rule under a", "rule under b",
                        "decisions", "bytes");
  for (const RuleChange& c : diff.by_rule) {
    absl::StrAppendFormat(&out, "  %-22s %-22s %10d %16d\n", c.a_rule, c.b_rule, c.decisions,
                          c.bytes);
  }
  if (diff.first) {
    absl::StrAppend(&out, "  first difference:\n");
    const std::string first =
        FormatDifference(trace, *diff.first, "a", diff.a_setting, "b", diff.b_setting);
    for (absl::string_view line : absl::StrSplit(first, '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
  }
  return out;
}

}  // namespace streampool::replay
