#include "tests/model/program.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/ordering/vector_clock.h"
#include "src/pool/names.h"
#include "src/runtime/process.h"
#include "src/runtime/runtime_impl.h"

namespace streampool::model {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// ------------------------------------------------------------------ names

const char* KindName(StreamKind k) {
  switch (k) {
    case StreamKind::kBlocking:
      return "blocking";
    case StreamKind::kNonBlocking:
      return "nonblocking";
    case StreamKind::kLegacy:
      return "legacy";
  }
  return "?";
}

const char* AttrName(SetAttrKind a) {
  switch (a) {
    case SetAttrKind::kFollow:
      return "follow";
    case SetAttrKind::kOpportunistic:
      return "opportunistic";
    case SetAttrKind::kInternal:
      return "internal";
    case SetAttrKind::kThreshold:
      return "threshold";
    case SetAttrKind::kResetReservedHigh:
      return "reset-reserved-high";
    case SetAttrKind::kResetUsedHigh:
      return "reset-used-high";
    case SetAttrKind::kFrontCache:
      return "cache";
    case SetAttrKind::kWaitBeforeGrowth:
      return "wait";
    case SetAttrKind::kSoftLimit:
      return "soft";
  }
  return "?";
}

std::string Bytes(uint64_t v) { return v == UINT64_MAX ? "max" : absl::StrCat(v); }

const char* GrowthName(PoolGrowth g) {
  switch (g) {
    case PoolGrowth::kDefault:
      return "default";
    case PoolGrowth::kChunked:
      return "chunked";
    case PoolGrowth::kExpandable:
      return "expandable";
  }
  return "?";
}

}  // namespace

const char* GrowthChoiceName(GrowthChoice g) {
  switch (g) {
    case GrowthChoice::kChunked:
      return "chunked";
    case GrowthChoice::kExpandable:
      return "expandable";
    case GrowthChoice::kMixed:
      return "mixed";
  }
  return "?";
}

// --------------------------------------------------------------- printing

PoolAttr PoolAttrOf(SetAttrKind kind) {
  switch (kind) {
    case SetAttrKind::kFollow:
      return PoolAttr::kReuseFollowEventDependencies;
    case SetAttrKind::kOpportunistic:
      return PoolAttr::kReuseAllowOpportunistic;
    case SetAttrKind::kInternal:
      return PoolAttr::kReuseAllowInternalDependencies;
    case SetAttrKind::kThreshold:
      return PoolAttr::kReleaseThreshold;
    case SetAttrKind::kResetReservedHigh:
      return PoolAttr::kReservedMemHigh;
    case SetAttrKind::kResetUsedHigh:
      return PoolAttr::kUsedMemHigh;
    case SetAttrKind::kFrontCache:
      return PoolAttr::kFrontCache;
    case SetAttrKind::kWaitBeforeGrowth:
      return PoolAttr::kWaitBeforeGrowth;
    case SetAttrKind::kSoftLimit:
      return PoolAttr::kSoftReservedLimit;
  }
  return PoolAttr::kReleaseThreshold;
}

std::string ToString(const Instruction& ins) {
  return std::visit(
      Overloaded{
          [](const AllocOp& o) {
            return absl::StrCat("alloc a", o.id, " p", o.pool, " s", o.stream, " ", o.size);
          },
          [](const FreeOp& o) { return absl::StrCat("free a", o.id, " s", o.stream); },
          [](const FreeNowOp& o) { return absl::StrCat("freenow a", o.id); },
          [](const UseOp& o) { return absl::StrCat("use a", o.id, " s", o.stream); },
          [](const KernelOp& o) {
            std::string s = absl::StrCat("kernel s", o.stream, " ", o.duration_ns);
            for (const AccessDecl& a : o.accesses) {
              absl::StrAppend(&s, " ", a.write ? "w" : "r", ":a", a.id, "+", a.offset, "+", a.size);
            }
            return s;
          },
          [](const FillOp& o) {
            return absl::StrCat("fill s", o.stream, " a", o.id, "+", o.offset, "+", o.size);
          },
          [](const RecordOp& o) { return absl::StrCat("record e", o.event, " s", o.stream); },
          [](const WaitOp& o) { return absl::StrCat("wait s", o.stream, " e", o.event); },
          [](const SyncStreamOp& o) { return absl::StrCat("sync-stream s", o.stream); },
          [](const SyncEventOp& o) { return absl::StrCat("sync-event e", o.event); },
          [](const SyncDeviceOp& o) { return absl::StrCat("sync-device ", o.device); },
          [](const QueryStreamOp& o) { return absl::StrCat("query-stream s", o.stream); },
          [](const QueryEventOp& o) { return absl::StrCat("query-event e", o.event); },
          [](const AdvanceOp& o) { return absl::StrCat("advance ", o.ns); },
          [](const TrimOp& o) { return absl::StrCat("trim p", o.pool, " ", Bytes(o.bytes)); },
          [](const SetAttrOp& o) {
            return absl::StrCat("set p", o.pool, " ", AttrName(o.attr), " ", Bytes(o.value));
          },
          [](const DestroyStreamOp& o) { return absl::StrCat("destroy-stream s", o.stream); },
          [](const CreateStreamOp& o) { return absl::StrCat("create-stream s", o.stream); },
          [](const GrantOp& o) {
            return absl::StrCat("grant p", o.pool, " ", o.device, " ",
                                o.flags == 3   ? "rw"
                                : o.flags == 1 ? "r"
                                               : "none");
          },
      },
      ins);
}

std::string ToString(const Program& p) {
  std::string out =
      absl::StrCat("config devices=", p.device_count, " capacity=", p.device_capacity,
                   " backing=", p.backing == Backing::kHost ? "host" : "address",
                   " api-ns=", p.api_call_ns, " copy-bytes-per-us=", p.copy_bytes_per_us,
                   p.checker ? "" : " checker=0", p.oom_reclaim ? " oom-reclaim=1" : "", "\n");
  for (size_t i = 0; i < p.pools.size(); ++i) {
    const ModelPoolProps& q = p.pools[i].props;
    absl::StrAppend(&out, "pool p", i, " ", AllocationTypeName(q.type), " device=", q.device,
                    " max=", q.max_size, " follow=", q.follow ? 1 : 0,
                    " opportunistic=", q.opportunistic ? 1 : 0, " internal=", q.internal ? 1 : 0,
                    " threshold=", Bytes(q.threshold), " growth=", GrowthName(q.growth),
                    q.front_cache || q.wait_before_growth || q.soft_limit != UINT64_MAX
                        ? absl::StrCat(" cache=", q.front_cache ? 1 : 0)
                        : "",
                    q.wait_before_growth || q.soft_limit != UINT64_MAX
                        ? absl::StrCat(" wait=", q.wait_before_growth ? 1 : 0)
                        : "",
                    q.soft_limit != UINT64_MAX ? absl::StrCat(" soft=", q.soft_limit) : "", "\n");
  }
  for (size_t i = 0; i < p.streams.size(); ++i) {
    absl::StrAppend(&out, "stream s", i, " ", KindName(p.streams[i].kind),
                    " device=", p.streams[i].device, "\n");
  }
  absl::StrAppend(&out, "events ", p.events, "\n");
  for (const Instruction& ins : p.code) absl::StrAppend(&out, ToString(ins), "\n");
  return out;
}

// ---------------------------------------------------------------- parsing

namespace {

absl::Status ParseError(size_t line, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, " `", text, "`: ", why));
}

bool ParseU64(absl::string_view s, uint64_t* out) {
  if (s == "max") {
    *out = UINT64_MAX;
    return true;
  }
  return absl::SimpleAtoi(s, out);
}

// "a12" with prefix 'a' -> 12 (into an int, or a trace op's number).
template <typename T>
bool ParseName(absl::string_view s, char prefix, T* out) {
  int n;
  if (s.size() < 2 || s[0] != prefix || !absl::SimpleAtoi(s.substr(1), &n) || n < 0) return false;
  *out = static_cast<T>(n);
  return true;
}

// "key=value" -> value, for the expected key.
bool ParseKey(absl::string_view s, absl::string_view key, absl::string_view* value) {
  if (s.size() <= key.size() || s.substr(0, key.size()) != key || s[key.size()] != '=') {
    return false;
  }
  *value = s.substr(key.size() + 1);
  return true;
}

bool ParseKeyU64(absl::string_view s, absl::string_view key, uint64_t* out) {
  absl::string_view v;
  return ParseKey(s, key, &v) && ParseU64(v, out);
}

// "a12+64+256" -> id, offset, size.
bool ParseRange(absl::string_view s, int* id, uint64_t* offset, uint64_t* size) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '+');
  return parts.size() == 3 && ParseName(parts[0], 'a', id) && absl::SimpleAtoi(parts[1], offset) &&
         absl::SimpleAtoi(parts[2], size);
}

}  // namespace

absl::StatusOr<Program> ParseProgram(absl::string_view text) {
  Program p;
  bool have_config = false;
  size_t line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = raw.substr(0, raw.find('#'));
    std::vector<absl::string_view> t = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (t.empty()) continue;
    const absl::string_view op = t[0];
    auto bad = [&](absl::string_view why) { return ParseError(line_no, raw, why); };
    auto want = [&](size_t n) { return t.size() == n; };
    if (op == "config") {
      if (t.size() < 6 || t.size() > 8) {
        return bad("config takes 5 settings (and checker=0, oom-reclaim=1)");
      }
      uint64_t devices;
      absl::string_view backing;
      if (!ParseKeyU64(t[1], "devices", &devices) || devices < 1 || devices > 64 ||
          !ParseKeyU64(t[2], "capacity", &p.device_capacity) ||
          !ParseKey(t[3], "backing", &backing) || !ParseKeyU64(t[4], "api-ns", &p.api_call_ns) ||
          !ParseKeyU64(t[5], "copy-bytes-per-us", &p.copy_bytes_per_us)) {
        return bad("expected devices= capacity= backing= api-ns= copy-bytes-per-us=");
      }
      if (backing != "host" && backing != "address") return bad("backing is host or address");
      for (size_t k = 6; k < t.size(); ++k) {
        uint64_t on;
        if (ParseKeyU64(t[k], "checker", &on) && on <= 1) {
          p.checker = on == 1;
        } else if (ParseKeyU64(t[k], "oom-reclaim", &on) && on <= 1) {
          p.oom_reclaim = on == 1;
        } else {
          return bad("checker=0 or 1, oom-reclaim=0 or 1");
        }
      }
      p.device_count = static_cast<int>(devices);
      p.backing = backing == "host" ? Backing::kHost : Backing::kAddressOnly;
      have_config = true;
      continue;
    }
    if (!have_config) return bad("the program must start with a config line");
    if (op == "pool") {
      int idx;
      if ((!want(9) && !want(10) && !want(11) && !want(12) && !want(13)) ||
          !ParseName(t[1], 'p', &idx) || idx != static_cast<int>(p.pools.size())) {
        return bad(
            "pools are declared in order: pool pN <type> device= max= follow= "
            "opportunistic= internal= threshold= [growth= [cache= [wait= [soft=]]]]");
      }
      ModelPoolProps q;
      // The shared name table, as the printer writes it (aliases too).
      if (std::optional<AllocationType> type = internal::ParseEnumName<AllocationType>(t[2])) {
        q.type = *type;
      } else {
        return bad(absl::StrCat("pool type is one of ", internal::EnumNameList<AllocationType>()));
      }
      uint64_t dev, f, o, i;
      if (!ParseKeyU64(t[3], "device", &dev) || dev >= static_cast<uint64_t>(p.device_count) ||
          !ParseKeyU64(t[4], "max", &q.max_size) || !ParseKeyU64(t[5], "follow", &f) ||
          !ParseKeyU64(t[6], "opportunistic", &o) || !ParseKeyU64(t[7], "internal", &i) ||
          !ParseKeyU64(t[8], "threshold", &q.threshold)) {
        return bad("bad pool settings");
      }
      if (t.size() >= 11) {
        uint64_t c;
        if (!ParseKeyU64(t[10], "cache", &c) || c > 1) return bad("expected cache=0 or cache=1");
        q.front_cache = c != 0;
      }
      if (t.size() >= 12) {
        uint64_t w;
        if (!ParseKeyU64(t[11], "wait", &w) || w > 1) return bad("expected wait=0 or wait=1");
        q.wait_before_growth = w != 0;
      }
      if (t.size() >= 13 && !ParseKeyU64(t[12], "soft", &q.soft_limit)) {
        return bad("expected soft=<bytes>");
      }
      if (t.size() >= 10) {
        absl::string_view g;
        if (!ParseKey(t[9], "growth", &g)) return bad("expected growth=");
        if (g == "default") {
          q.growth = PoolGrowth::kDefault;
        } else if (g == "chunked") {
          q.growth = PoolGrowth::kChunked;
        } else if (g == "expandable") {
          q.growth = PoolGrowth::kExpandable;
        } else {
          return bad("growth is default, chunked or expandable");
        }
      }
      q.device = static_cast<int>(dev);
      q.follow = f != 0;
      q.opportunistic = o != 0;
      q.internal = i != 0;
      p.pools.push_back(PoolDecl{q});
      continue;
    }
    if (op == "stream") {
      int idx;
      uint64_t dev;
      if (!want(4) || !ParseName(t[1], 's', &idx) || idx != static_cast<int>(p.streams.size()) ||
          !ParseKeyU64(t[3], "device", &dev) || dev >= static_cast<uint64_t>(p.device_count)) {
        return bad("streams are declared in order: stream sN <kind> device=");
      }
      StreamDecl d;
      d.device = static_cast<int>(dev);
      if (t[2] == "legacy") {
        d.kind = StreamKind::kLegacy;
        for (const StreamDecl& o : p.streams) {
          if (o.kind == StreamKind::kLegacy && o.device == d.device) {
            return bad("a device has one legacy stream");
          }
        }
      } else if (t[2] == "blocking") {
        d.kind = StreamKind::kBlocking;
      } else if (t[2] == "nonblocking") {
        d.kind = StreamKind::kNonBlocking;
      } else {
        return bad("stream kind is legacy, blocking or nonblocking");
      }
      p.streams.push_back(d);
      continue;
    }
    if (op == "events") {
      uint64_t n;
      if (!want(2) || !absl::SimpleAtoi(t[1], &n) || n > 64) return bad("events N");
      p.events = static_cast<int>(n);
      continue;
    }
    // Instructions: names are checked against the declarations.
    const int streams = static_cast<int>(p.streams.size());
    auto stream = [&](absl::string_view s, auto* out) {
      return ParseName(s, 's', out) && static_cast<int>(*out) < streams;
    };
    auto event = [&](absl::string_view s, auto* out) {
      return ParseName(s, 'e', out) && static_cast<int>(*out) < p.events;
    };
    auto pool = [&](absl::string_view s, auto* out) {
      return ParseName(s, 'p', out) && static_cast<int>(*out) < static_cast<int>(p.pools.size());
    };
    if (op == "alloc") {
      AllocOp o;
      if (!want(5) || !ParseName(t[1], 'a', &o.id) || !pool(t[2], &o.pool) ||
          !stream(t[3], &o.stream) || !absl::SimpleAtoi(t[4], &o.size)) {
        return bad("alloc aN pN sN size");
      }
      p.code.push_back(o);
    } else if (op == "free") {
      FreeOp o;
      if (!want(3) || !ParseName(t[1], 'a', &o.id) || !stream(t[2], &o.stream)) {
        return bad("free aN sN");
      }
      p.code.push_back(o);
    } else if (op == "use") {
      UseOp o;
      if (!want(3) || !ParseName(t[1], 'a', &o.id) || !stream(t[2], &o.stream)) {
        return bad("use aN sN");
      }
      p.code.push_back(o);
    } else if (op == "freenow") {
      FreeNowOp o;
      if (!want(2) || !ParseName(t[1], 'a', &o.id)) return bad("freenow aN");
      p.code.push_back(o);
    } else if (op == "kernel") {
      KernelOp o;
      if (t.size() < 3 || !stream(t[1], &o.stream) || !absl::SimpleAtoi(t[2], &o.duration_ns)) {
        return bad("kernel sN ns [r|w:aN+offset+size ...]");
      }
      for (size_t i = 3; i < t.size(); ++i) {
        AccessDecl a;
        if (t[i].size() < 3 || (t[i][0] != 'r' && t[i][0] != 'w') || t[i][1] != ':' ||
            !ParseRange(t[i].substr(2), &a.id, &a.offset, &a.size)) {
          return bad("an access is r:aN+offset+size or w:aN+offset+size");
        }
        a.write = t[i][0] == 'w';
        o.accesses.push_back(a);
      }
      p.code.push_back(o);
    } else if (op == "fill") {
      FillOp o;
      if (!want(3) || !stream(t[1], &o.stream) || !ParseRange(t[2], &o.id, &o.offset, &o.size)) {
        return bad("fill sN aN+offset+size");
      }
      p.code.push_back(o);
    } else if (op == "record") {
      RecordOp o;
      if (!want(3) || !event(t[1], &o.event) || !stream(t[2], &o.stream)) {
        return bad("record eN sN");
      }
      p.code.push_back(o);
    } else if (op == "wait") {
      WaitOp o;
      if (!want(3) || !stream(t[1], &o.stream) || !event(t[2], &o.event)) {
        return bad("wait sN eN");
      }
      p.code.push_back(o);
    } else if (op == "sync-stream" || op == "query-stream" || op == "destroy-stream" ||
               op == "create-stream") {
      int s;
      if (!want(2) || !stream(t[1], &s)) return bad("expected one stream name");
      if (op == "sync-stream") p.code.push_back(SyncStreamOp{Slot(s)});
      if (op == "query-stream") p.code.push_back(QueryStreamOp{Slot(s)});
      if (op == "destroy-stream") p.code.push_back(DestroyStreamOp{s});
      if (op == "create-stream") p.code.push_back(CreateStreamOp{s});
    } else if (op == "sync-event" || op == "query-event") {
      int e;
      if (!want(2) || !event(t[1], &e)) return bad("expected one event name");
      if (op == "sync-event") p.code.push_back(SyncEventOp{Slot(e)});
      if (op == "query-event") p.code.push_back(QueryEventOp{Slot(e)});
    } else if (op == "sync-device") {
      int d;
      if (!want(2) || !absl::SimpleAtoi(t[1], &d) || d < 0 || d >= p.device_count) {
        return bad("sync-device N");
      }
      p.code.push_back(SyncDeviceOp{Slot(d)});
    } else if (op == "advance") {
      AdvanceOp o;
      if (!want(2) || !absl::SimpleAtoi(t[1], &o.ns)) return bad("advance ns");
      p.code.push_back(o);
    } else if (op == "trim") {
      TrimOp o;
      if (!want(3) || !pool(t[1], &o.pool) || !ParseU64(t[2], &o.bytes))
        return bad("trim pN bytes");
      p.code.push_back(o);
    } else if (op == "set") {
      SetAttrOp o;
      if (!want(4) || !pool(t[1], &o.pool) || !ParseU64(t[3], &o.value)) {
        return bad("set pN attribute value");
      }
      const SetAttrKind kinds[] = {
          SetAttrKind::kFollow,     SetAttrKind::kOpportunistic,     SetAttrKind::kInternal,
          SetAttrKind::kThreshold,  SetAttrKind::kResetReservedHigh, SetAttrKind::kResetUsedHigh,
          SetAttrKind::kFrontCache, SetAttrKind::kWaitBeforeGrowth,  SetAttrKind::kSoftLimit};
      bool found = false;
      for (SetAttrKind k : kinds) {
        if (t[2] == AttrName(k)) {
          o.attr = k;
          found = true;
        }
      }
      if (!found) return bad("unknown attribute");
      p.code.push_back(o);
    } else if (op == "grant") {
      GrantOp o;
      if (!want(4) || !pool(t[1], &o.pool) || !absl::SimpleAtoi(t[2], &o.device) || o.device < 0 ||
          o.device >= p.device_count || (t[3] != "none" && t[3] != "r" && t[3] != "rw")) {
        return bad("grant pN device none|r|rw");
      }
      o.flags = t[3] == "rw" ? 3 : t[3] == "r" ? 1 : 0;
      p.code.push_back(o);
    } else {
      return bad("unknown instruction");
    }
  }
  if (!have_config) return absl::InvalidArgumentError("empty program");
  return p;
}

// --------------------------------------------------------------- generator

namespace {

class Generator {
 public:
  explicit Generator(const GeneratorOptions& o) : options_(o), rng_(o.seed) {}

  Program Run() {
    Header();
    while (p_.code.size() < options_.length) Step();
    p_.code.resize(options_.length);  // a step may emit a few instructions
    return std::move(p_);
  }

 private:
  struct GenAlloc {
    int id;
    int stream;
    uint64_t size;
    std::vector<int> accessors;  // streams that touched it (its own first)
  };

  uint64_t Uniform(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[Uniform(0, v.size() - 1)];
  }

  void Header() {
    p_.device_count = Chance(0.4) ? 2 : 1;
    p_.backing = options_.backing;
    p_.checker = options_.checker;
    // Small devices, so pools of one device compete for its capacity.
    p_.device_capacity = Uniform(5, 20) * 2 * kMiB;
    p_.api_call_ns = Chance(0.3) ? Uniform(1, 40) : 0;
    p_.copy_bytes_per_us = Chance(0.3) ? 1000 : 1000000;
    p_.oom_reclaim = Chance(0.5);
    const int pools = static_cast<int>(Uniform(1, options_.max_pools));
    for (int i = 0; i < pools; ++i) {
      ModelPoolProps q;
      const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
      q.type = r < 0.55   ? AllocationType::kDevice
               : r < 0.7  ? AllocationType::kDvpp
               : r < 0.85 ? AllocationType::kPinnedHost
                          : AllocationType::kHugePage;
      q.device = static_cast<int>(Uniform(0, p_.device_count - 1));
      // maxSize: the device's capacity, or a few chunks (sometimes not a
      // multiple of the chunk size); pinned pools always get a bound.
      if (q.type != AllocationType::kPinnedHost && Chance(0.35)) {
        q.max_size = 0;
      } else {
        q.max_size = Uniform(1, 6) * 2 * kMiB;
        if (Chance(0.3)) q.max_size += Uniform(1, kMiB);
      }
      q.follow = (options_.policy_mask & 1) != 0;
      q.opportunistic = (options_.policy_mask & 2) != 0;
      q.internal = (options_.policy_mask & 4) != 0;
      // Thresholds between 0 and everything make the release rule stop
      // part-way, where its order and its "never below the bound" matter.
      q.threshold = options_.threshold_max ? UINT64_MAX : Chance(0.3) ? Uniform(1, 6 * kMiB) : 0;
      switch (options_.growth) {
        case GrowthChoice::kChunked:
          q.growth = PoolGrowth::kChunked;
          break;
        case GrowthChoice::kExpandable:
          // The default must mean expandable: spell it both ways.
          q.growth = Chance(0.5) ? PoolGrowth::kDefault : PoolGrowth::kExpandable;
          break;
        case GrowthChoice::kMixed:
          q.growth = Chance(0.5) ? PoolGrowth::kChunked : PoolGrowth::kDefault;
          break;
      }
      // Half the pools with their front caches on: the model mirrors them.
      q.front_cache = Chance(0.5);
      // Waiting before growth on in half the pools, and a soft reserved
      // limit of a few granules (sometimes none at all) in a quarter.
      q.wait_before_growth = Chance(0.5);
      if (Chance(0.25)) q.soft_limit = Chance(0.3) ? 0 : Uniform(1, 8) * 2 * kMiB;
      p_.pools.push_back(PoolDecl{q});
    }
    const int streams = static_cast<int>(Uniform(2, options_.max_streams));
    std::vector<bool> has_legacy(p_.device_count, false);
    for (int i = 0; i < streams; ++i) {
      StreamDecl d;
      d.device = static_cast<int>(Uniform(0, p_.device_count - 1));
      if (!has_legacy[d.device] && Chance(0.3)) {
        d.kind = StreamKind::kLegacy;
        has_legacy[d.device] = true;
      } else {
        d.kind = Chance(0.6) ? StreamKind::kBlocking : StreamKind::kNonBlocking;
      }
      p_.streams.push_back(d);
      bound_.push_back(true);
    }
    p_.events = static_cast<int>(Uniform(2, 6));
  }

  int AnyStream() {
    std::vector<int> b;
    for (int i = 0; i < static_cast<int>(bound_.size()); ++i) {
      if (bound_[i]) b.push_back(i);
    }
    return Pick(b);
  }
  int AnyEvent() { return static_cast<int>(Uniform(0, p_.events - 1)); }

  uint64_t AllocSize() {
    // The size of a recent free, as a training step re-makes its tensors:
    // what front caches serve.
    if (!recent_sizes_.empty() && Chance(0.2)) {
      return recent_sizes_[Uniform(0, recent_sizes_.size() - 1)];
    }
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.01) return 0;
    if (r < 0.09) {
      // Sizes on the boundaries of the size rules and of the 2 MiB chunks.
      static constexpr uint64_t kRound[] = {
          1,        64,           96,       97,      128, 256, 4096, 65536, kMiB, 2 * kMiB - 256,
          2 * kMiB, 2 * kMiB + 1, 4 * kMiB, 6 * kMiB};
      return kRound[Uniform(0, std::size(kRound) - 1)];
    }
    if (r < 0.5) return Uniform(1, 8192);
    if (r < 0.78) return Uniform(8193, 256 * 1024);
    if (r < 0.95) return Uniform(256 * 1024 + 1, 2 * kMiB + kMiB / 4);
    return Uniform(2 * kMiB + kMiB / 4, 7 * kMiB);
  }

  // A FreeAsync of live_[i]: mostly on its own stream or one that touched
  // it, mostly ordered after every access.
  void FreeLive(size_t i) {
    GenAlloc a = live_[i];
    live_.erase(live_.begin() + i);
    freed_.push_back(a.id);
    if (recent_sizes_.size() == 8) recent_sizes_.erase(recent_sizes_.begin());
    recent_sizes_.push_back(a.size);
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    const int s = r < 0.45 ? a.stream : r < 0.75 ? Pick(a.accessors) : AnyStream();
    if (Chance(0.7)) {
      for (int from : a.accessors) Order(from, s);
    } else if (Chance(0.5)) {
      // Not ordered after the other streams' accesses: declared instead, so
      // the free covers them and the pool holds the bytes until they end.
      for (int from : a.accessors) {
        if (from != s) p_.code.push_back(UseOp{Slot(a.id), Slot(from)});
      }
    }
    p_.code.push_back(FreeOp{Slot(a.id), Slot(s)});
  }

  // Orders `to` after the current work of `from` by an event.
  void Order(int from, int to) {
    if (from == to) return;
    const int e = AnyEvent();
    p_.code.push_back(RecordOp{Slot(e), Slot(from)});
    p_.code.push_back(WaitOp{Slot(to), Slot(e)});
  }

  void EmitAccessTo(GenAlloc& a, int s, std::vector<AccessDecl>* out) {
    if (a.size == 0) return;
    if (a.stream != s && Chance(0.4)) Order(a.stream, s);
    AccessDecl d;
    d.id = a.id;
    d.offset = Uniform(0, a.size - 1);
    d.size = Uniform(1, std::min<uint64_t>(a.size - d.offset, 64 * 1024));
    d.write = Chance(0.5);
    out->push_back(d);
    if (std::find(a.accessors.begin(), a.accessors.end(), s) == a.accessors.end()) {
      a.accessors.push_back(s);
    }
  }

  void Step() {
    // Weights of: alloc, free, freenow, kernel, fill, record, wait, advance,
    // sync-stream, sync-event, sync-device, query-stream, query-event, trim,
    // set, destroy-stream, create-stream, grant, drain, use.
    std::vector<double> w = {26,  20,  1.5, 16,  2, 7,   7,   6,   2,
                             1.5, 0.7, 2.5, 2.5, 1, 1.2, 0.3, 0.5, p_.device_count > 1 ? 1.0 : 0.0,
                             0.4, 1.5};
    if (live_.empty()) w[1] = w[2] = w[3] = w[4] = w[18] = w[19] = 0;
    if (live_.size() > 48) w[0] = 0;
    bool any_unbound = false;
    for (int i = 0; i < static_cast<int>(bound_.size()); ++i) {
      any_unbound |= !bound_[i] && p_.streams[i].kind != StreamKind::kLegacy;
    }
    if (!any_unbound) w[16] = 0;
    const int op = std::discrete_distribution<int>(w.begin(), w.end())(rng_);
    switch (op) {
      case 0: {  // alloc
        const int s = AnyStream();
        const int pool = static_cast<int>(Uniform(0, p_.pools.size() - 1));
        const uint64_t size = AllocSize();
        const int id = next_id_++;
        p_.code.push_back(AllocOp{id, pool, s, size});
        if (size > 0) live_.push_back(GenAlloc{id, s, size, {s}});
        break;
      }
      case 1:
      case 2: {  // free, freenow
        if (op == 1 && !freed_.empty() && Chance(0.02)) {
          p_.code.push_back(FreeOp{Slot(Pick(freed_)), Slot(AnyStream())});  // a double free
          break;
        }
        const size_t i = Uniform(0, live_.size() - 1);
        if (op == 2) {
          p_.code.push_back(FreeNowOp{Slot(live_[i].id)});
          freed_.push_back(live_[i].id);
          live_.erase(live_.begin() + i);
          break;
        }
        FreeLive(i);
        break;
      }
      case 3: {  // kernel
        KernelOp k;
        k.stream = AnyStream();
        k.duration_ns = Chance(0.3) ? 0 : Uniform(1, 3000);
        const int n = static_cast<int>(live_.empty() ? 0 : Uniform(0, 3));
        for (int i = 0; i < n; ++i) {
          std::vector<size_t> own;
          for (size_t j = 0; j < live_.size(); ++j) {
            if (live_[j].stream == k.stream) own.push_back(j);
          }
          const size_t j = !own.empty() && Chance(0.6) ? Pick(own) : Uniform(0, live_.size() - 1);
          EmitAccessTo(live_[j], k.stream, &k.accesses);
        }
        p_.code.push_back(std::move(k));
        break;
      }
      case 4: {  // fill
        const int s = AnyStream();
        GenAlloc& a = live_[Uniform(0, live_.size() - 1)];
        std::vector<AccessDecl> acc;
        EmitAccessTo(a, s, &acc);
        if (!acc.empty()) {
          p_.code.push_back(FillOp{s, a.id, acc[0].offset, Chance(0.05) ? 0 : acc[0].size});
        }
        break;
      }
      case 5:
        p_.code.push_back(RecordOp{Slot(AnyEvent()), Slot(AnyStream())});
        break;
      case 6:
        p_.code.push_back(WaitOp{Slot(AnyStream()), Slot(AnyEvent())});
        break;
      case 7:
        p_.code.push_back(AdvanceOp{Chance(0.7) ? Uniform(1, 2000) : Uniform(2000, 20000)});
        break;
      case 8:
        p_.code.push_back(SyncStreamOp{Slot(AnyStream())});
        break;
      case 9:
        p_.code.push_back(SyncEventOp{Slot(AnyEvent())});
        break;
      case 10:
        p_.code.push_back(SyncDeviceOp{Uniform(0, p_.device_count - 1)});
        break;
      case 11:
        p_.code.push_back(QueryStreamOp{Slot(AnyStream())});
        break;
      case 12:
        p_.code.push_back(QueryEventOp{Slot(AnyEvent())});
        break;
      case 13: {
        const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
        const uint64_t keep = r < 0.4 ? 0 : r < 0.85 ? Uniform(1, 6 * kMiB) : UINT64_MAX;
        p_.code.push_back(TrimOp{Uniform(0, p_.pools.size() - 1), keep});
        break;
      }
      case 14: {
        SetAttrOp o;
        o.pool = static_cast<int>(Uniform(0, p_.pools.size() - 1));
        const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
        if (r < 0.3) {
          // Toggling a reuse switch moves the program off its policy
          // combination, so it is rarer than the other settings.
          const SetAttrKind k[] = {SetAttrKind::kFollow, SetAttrKind::kOpportunistic,
                                   SetAttrKind::kInternal};
          o.attr = k[Uniform(0, 2)];
          o.value = Uniform(0, 1);
        } else if (r < 0.6) {
          o.attr = SetAttrKind::kThreshold;
          const double v = std::uniform_real_distribution<double>(0, 1)(rng_);
          o.value = v < 0.4 ? 0 : v < 0.7 ? UINT64_MAX : Uniform(0, 8 * kMiB);
        } else if (r < 0.7) {
          o.attr = SetAttrKind::kFrontCache;
          o.value = Uniform(0, 1);
        } else if (r < 0.8) {
          o.attr = Chance(0.5) ? SetAttrKind::kWaitBeforeGrowth : SetAttrKind::kSoftLimit;
          o.value = o.attr == SetAttrKind::kWaitBeforeGrowth ? Uniform(0, 1)
                    : Chance(0.3)                            ? UINT64_MAX
                                                             : Uniform(0, 8) * 2 * kMiB;
        } else {
          o.attr = Chance(0.5) ? SetAttrKind::kResetReservedHigh : SetAttrKind::kResetUsedHigh;
          o.value = 0;
        }
        p_.code.push_back(o);
        break;
      }
      case 15: {
        std::vector<int> c;
        int bound = 0;
        for (int i = 0; i < static_cast<int>(bound_.size()); ++i) {
          bound += bound_[i];
          if (bound_[i] && p_.streams[i].kind != StreamKind::kLegacy) c.push_back(i);
        }
        if (c.empty() || bound < 2) break;
        const int s = Pick(c);
        bound_[s] = false;
        p_.code.push_back(DestroyStreamOp{s});
        break;
      }
      case 16: {
        std::vector<int> c;
        for (int i = 0; i < static_cast<int>(bound_.size()); ++i) {
          if (!bound_[i] && p_.streams[i].kind != StreamKind::kLegacy) c.push_back(i);
        }
        const int s = Pick(c);
        bound_[s] = true;
        p_.code.push_back(CreateStreamOp{s});
        break;
      }
      case 17: {
        // Mostly grants, so that kernels on the other device get to touch
        // the pool; sometimes a refused one (the resident device, pinned).
        static constexpr int kFlags[] = {0, 1, 3, 3};
        p_.code.push_back(GrantOp{static_cast<int>(Uniform(0, p_.pools.size() - 1)),
                                  static_cast<int>(Uniform(0, p_.device_count - 1)),
                                  kFlags[Uniform(0, 3)]});
        break;
      }
      case 19: {  // use: a stream declared to use a live allocation
        GenAlloc& a = live_[Uniform(0, live_.size() - 1)];
        const int s = AnyStream();
        p_.code.push_back(UseOp{Slot(a.id), Slot(s)});
        if (std::find(a.accessors.begin(), a.accessors.end(), s) == a.accessors.end()) {
          a.accessors.push_back(s);
        }
        break;
      }
      case 18: {
        // Drain: free much of what is live and synchronize, so the pools
        // hold many READY blocks between live ones; then perhaps trim part
        // of them. This is where the release rule's order and its "never
        // below the bound" show.
        for (size_t i = live_.size(); i-- > 0;) {
          if (Chance(0.6)) FreeLive(i);
        }
        for (int d = 0; d < p_.device_count; ++d) p_.code.push_back(SyncDeviceOp{Slot(d)});
        if (Chance(0.5)) {
          p_.code.push_back(TrimOp{Uniform(0, p_.pools.size() - 1), Uniform(1, 6 * kMiB)});
        }
        break;
      }
    }
  }

  GeneratorOptions options_;
  std::mt19937_64 rng_;
  Program p_;
  std::vector<bool> bound_;
  std::vector<GenAlloc> live_;
  std::vector<int> freed_;
  std::vector<uint64_t> recent_sizes_;  // of the last frees, oldest first
  int next_id_ = 0;
};

}  // namespace

Program Generate(const GeneratorOptions& options) { return Generator(options).Run(); }

// ----------------------------------------------------------------- executor

namespace {

Clock ToClock(const internal::VectorClock& vc, size_t n) {
  Clock c(n);
  for (size_t i = 0; i < n; ++i) c[i] = vc.Get(static_cast<StreamIndex>(i));
  return c;
}

absl::Status Fail(absl::string_view category, absl::string_view detail) {
  return absl::InternalError(absl::StrCat(category, ": ", detail));
}

// Every statistic but failed_alloc_count, for "a failed allocation changes
// nothing". Not the largest free block: rule 3 may have promoted frees
// observed complete, which merge (the model checks that value itself).
std::string StatsWithoutFailures(const PoolStats& s) {
  return absl::StrCat(s.reserved_bytes, "/", s.reserved_high, "/", s.used_bytes, "/", s.used_high,
                      "/", s.alloc_count, "/", s.free_count, "/", s.reuse_same_stream, "/",
                      s.reuse_event_dependency, "/", s.reuse_opportunistic, "/", s.reuse_after_sync,
                      "/", s.reuse_internal_dependency, "/", s.fresh_allocs, "/", s.waits_inserted,
                      "/", s.upstream_maps, "/", s.upstream_unmaps, "/", s.huge_page_bytes, "/",
                      s.transparent_huge_page_bytes, "/", s.normal_page_bytes, "/",
                      s.upstream_bytes_mapped);
}

class Runner {
 public:
  Runner(const Program& p, const ExecuteOptions& options)
      : p_(p),
        model_(ModelConfig{p.device_count, p.device_capacity, p.api_call_ns, p.copy_bytes_per_us,
                           options.strict_fresh, p.oom_reclaim}) {}

  ExecuteResult Run() {
    ExecuteResult result;
    if (absl::Status st = Setup(); !st.ok()) {
      result.ok = false;
      result.failed_at = p_.code.size();
      result.failure = std::string(st.message());
      return result;
    }
    for (size_t i = 0; i < p_.code.size(); ++i) {
      ++result.executed;
      absl::Status st = Step(p_.code[i]);
      if (st.ok()) st = PostCheck();
      if (!st.ok()) {
        result.ok = false;
        result.failed_at = i;
        result.failure =
            absl::StrCat(st.message(), "\n  at instruction ", i, ": ", ToString(p_.code[i]));
        break;
      }
    }
    result.skipped = skipped_;
    result.double_frees = double_frees_;
    result.coverage = model_.coverage();
    for (PoolId pool : pools_) {
      absl::StatusOr<PoolStats> stats = rt_->GetPoolStats(pool);
      result.stats.push_back(stats.ok() ? *stats : PoolStats{});
    }
    return result;
  }

 private:
  absl::Status Setup() {
    RuntimeConfig cfg;
    cfg.device_count = p_.device_count;
    cfg.device_capacity = p_.device_capacity;
    cfg.oom_reclaim = p_.oom_reclaim;
    cfg.backing = p_.backing;
    cfg.api_call_ns = p_.api_call_ns;
    cfg.copy_bytes_per_us = p_.copy_bytes_per_us;
    absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
    if (!rt.ok()) return Fail("setup", rt.status().ToString());
    rt_ = std::move(*rt);
    // Non-fatal even under STREAMPOOL_CHECK_STREAM_ORDER=fatal: a report is
    // a discrepancy to minimise, not a crash. Off when the program says so.
    rt_->EnableChecker(p_.checker);
    for (int d = 0; d < p_.device_count; ++d) {
      absl::StatusOr<StreamId> s = rt_->LegacyStream(d);
      if (!s.ok()) return Fail("setup", s.status().ToString());
      legacy_.push_back(*s);
    }
    // The model's clock starts where looking up the legacy streams left it
    // (regression_test.cc pins what that lookup costs).
    model_.SetNow(rt_->HostNow());
    for (const PoolDecl& d : p_.pools) {
      PoolProps props;
      props.alloc_type = d.props.type;
      props.device = d.props.device;
      props.max_size = d.props.max_size;
      props.reuse_follow_event_dependencies = d.props.follow;
      props.reuse_allow_opportunistic = d.props.opportunistic;
      props.reuse_allow_internal_dependencies = d.props.internal;
      props.release_threshold = d.props.threshold;
      props.growth = d.props.growth;
      props.wait_before_growth = d.props.wait_before_growth;
      props.soft_reserved_limit = d.props.soft_limit;
      absl::StatusOr<PoolId> pool = rt_->CreatePool(props);
      if (!pool.ok()) return Fail("setup", pool.status().ToString());
      // The runtime's default is on; a program says cache=1 for it.
      if (!d.props.front_cache) {
        if (absl::Status st = rt_->SetPoolAttribute(*pool, PoolAttr::kFrontCache, 0); !st.ok()) {
          return Fail("setup", st.ToString());
        }
      }
      pools_.push_back(*pool);
      model_.AddPool(d.props);
      // Access: the resident device reads and writes; pinned host memory is
      // every device's.
      std::vector<int> rights(p_.device_count, 0);
      for (int dev = 0; dev < p_.device_count; ++dev) {
        if (d.props.type == AllocationType::kPinnedHost || dev == d.props.device) rights[dev] = 3;
      }
      rights_.push_back(std::move(rights));
    }
    for (size_t i = 0; i < p_.streams.size(); ++i) {
      handles_.emplace_back();
      index_.push_back(0);
      if (absl::Status st = Bind(static_cast<int>(i)); !st.ok()) return st;
    }
    for (int e = 0; e < p_.events; ++e) {
      absl::StatusOr<EventId> ev = rt_->CreateEvent();
      if (!ev.ok()) return Fail("setup", ev.status().ToString());
      events_.push_back(*ev);
      model_.CreateEvent();
    }
    return PostCheck();
  }

  absl::Status Bind(int slot) {
    const StreamDecl& d = p_.streams[slot];
    if (d.kind == StreamKind::kLegacy) {
      handles_[slot] = legacy_[d.device];
      index_[slot] = model_.LegacyStream(d.device);
      return absl::OkStatus();
    }
    absl::StatusOr<StreamId> s = rt_->CreateStream(d.device, d.kind == StreamKind::kNonBlocking);
    if (!s.ok()) return Fail("api", absl::StrCat("CreateStream: ", s.status().ToString()));
    handles_[slot] = *s;
    index_[slot] = model_.CreateStream(d.device, d.kind == StreamKind::kNonBlocking);
    // The model numbers streams in creation order, as the ordering core does.
    absl::StatusOr<StreamIndex> idx = rt_->impl().StreamIndexOf(s->value);
    if (!idx.ok() || *idx != index_[slot]) {
      return Fail("stream-index",
                  absl::StrCat("stream slot ", slot, " got index ",
                               idx.ok() ? absl::StrCat(*idx) : idx.status().ToString(),
                               ", model says ", index_[slot]));
    }
    return absl::OkStatus();
  }

  bool Bound(int slot) const { return handles_[slot].has_value(); }

  absl::Status Expect(const absl::Status& st, absl::string_view call) {
    if (st.ok()) return st;
    return Fail("api", absl::StrCat(call, " failed: ", st.ToString()));
  }

  absl::Status Step(const Instruction& ins) {
    return std::visit(
        Overloaded{
            [&](const AllocOp& o) { return DoAlloc(o); },
            [&](const FreeOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              if (!model_.IsLive(o.id)) return DoubleFree(o);
              if (!model_.MayFreeAsync(o.id, index_[o.stream])) return Skip();
              void* ptr = reinterpret_cast<void*>(model_.Address(o.id));
              if (absl::Status st = Expect(rt_->FreeAsync(ptr, *handles_[o.stream]), "FreeAsync");
                  !st.ok()) {
                return st;
              }
              model_.FreeAsync(o.id, index_[o.stream]);
              return absl::OkStatus();
            },
            [&](const UseOp& o) -> absl::Status {
              if (!Bound(o.stream) || !model_.IsLive(o.id)) return Skip();
              void* ptr = reinterpret_cast<void*>(model_.Address(o.id));
              if (absl::Status st = Expect(rt_->RecordUse(ptr, *handles_[o.stream]), "RecordUse");
                  !st.ok()) {
                return st;
              }
              model_.RecordUse(o.id, index_[o.stream]);
              return absl::OkStatus();
            },
            [&](const FreeNowOp& o) -> absl::Status {
              if (!model_.IsLive(o.id) || !model_.MayFreeNow(o.id)) return Skip();
              void* ptr = reinterpret_cast<void*>(model_.Address(o.id));
              if (absl::Status st = Expect(rt_->Free(ptr), "Free"); !st.ok()) return st;
              model_.FreeNow(o.id);
              return absl::OkStatus();
            },
            [&](const KernelOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              const uint32_t t = index_[o.stream];
              std::vector<Access> accesses;
              std::vector<int> ids;
              const int device = p_.streams[o.stream].device;
              for (const AccessDecl& a : o.accesses) {
                if (!model_.MayAccess(t, a.id)) continue;
                const int need = a.write ? 3 : 1;  // what the pool must grant the device
                if ((rights_[model_.PoolOf(a.id)][device] & need) != need) continue;
                const uint64_t req = model_.Requested(a.id);
                if (a.offset >= req || a.size == 0) continue;
                accesses.push_back(
                    Access{reinterpret_cast<const void*>(model_.Address(a.id) + a.offset),
                           std::min(a.size, req - a.offset), a.write});
                ids.push_back(a.id);
              }
              if (absl::Status st =
                      Expect(rt_->LaunchKernel(*handles_[o.stream], o.duration_ns, accesses),
                             "LaunchKernel");
                  !st.ok()) {
                return st;
              }
              model_.Kernel(t, o.duration_ns, ids);
              return absl::OkStatus();
            },
            [&](const FillOp& o) -> absl::Status {
              if (!Bound(o.stream) || !model_.MayAccess(index_[o.stream], o.id)) return Skip();
              const uint64_t req = model_.Requested(o.id);
              if (o.offset >= req) return Skip();
              const uint64_t bytes = std::min(o.size, req - o.offset);
              void* dst = reinterpret_cast<void*>(model_.Address(o.id) + o.offset);
              if (absl::Status st = Expect(rt_->MemsetAsync(dst, 0x5a, bytes, *handles_[o.stream]),
                                           "MemsetAsync");
                  !st.ok()) {
                return st;
              }
              model_.Fill(index_[o.stream], o.id, bytes);
              return absl::OkStatus();
            },
            [&](const RecordOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              if (absl::Status st = Expect(rt_->RecordEvent(events_[o.event], *handles_[o.stream]),
                                           "RecordEvent");
                  !st.ok()) {
                return st;
              }
              model_.Record(o.event, index_[o.stream]);
              return absl::OkStatus();
            },
            [&](const WaitOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              if (absl::Status st =
                      Expect(rt_->StreamWaitEvent(*handles_[o.stream], events_[o.event]),
                             "StreamWaitEvent");
                  !st.ok()) {
                return st;
              }
              model_.Wait(index_[o.stream], o.event);
              return absl::OkStatus();
            },
            [&](const SyncStreamOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              if (absl::Status st =
                      Expect(rt_->StreamSynchronize(*handles_[o.stream]), "StreamSynchronize");
                  !st.ok()) {
                return st;
              }
              model_.SyncStream(index_[o.stream]);
              return absl::OkStatus();
            },
            [&](const SyncEventOp& o) -> absl::Status {
              if (absl::Status st =
                      Expect(rt_->EventSynchronize(events_[o.event]), "EventSynchronize");
                  !st.ok()) {
                return st;
              }
              model_.SyncEvent(o.event);
              return absl::OkStatus();
            },
            [&](const SyncDeviceOp& o) -> absl::Status {
              if (absl::Status st = Expect(rt_->DeviceSynchronize(o.device), "DeviceSynchronize");
                  !st.ok()) {
                return st;
              }
              model_.SyncDevice(o.device);
              return absl::OkStatus();
            },
            [&](const QueryStreamOp& o) -> absl::Status {
              if (!Bound(o.stream)) return Skip();
              const absl::Status st = rt_->StreamQuery(*handles_[o.stream]);
              if (!st.ok() && !absl::IsUnavailable(st)) return Expect(st, "StreamQuery");
              return model_.QueryStream(index_[o.stream], st.ok());
            },
            [&](const QueryEventOp& o) -> absl::Status {
              const absl::Status st = rt_->EventQuery(events_[o.event]);
              if (!st.ok() && !absl::IsUnavailable(st)) return Expect(st, "EventQuery");
              return model_.QueryEvent(o.event, st.ok());
            },
            [&](const AdvanceOp& o) -> absl::Status {
              if (absl::Status st = Expect(rt_->HostAdvance(o.ns), "HostAdvance"); !st.ok()) {
                return st;
              }
              model_.Advance(o.ns);
              return absl::OkStatus();
            },
            [&](const TrimOp& o) -> absl::Status {
              if (absl::Status st = Expect(rt_->TrimTo(pools_[o.pool], o.bytes), "TrimTo");
                  !st.ok()) {
                return st;
              }
              model_.Trim(o.pool, o.bytes);
              return absl::OkStatus();
            },
            [&](const SetAttrOp& o) -> absl::Status {
              const PoolAttr attr = PoolAttrOf(o.attr);
              uint64_t value = o.value;
              if (o.attr == SetAttrKind::kResetReservedHigh ||
                  o.attr == SetAttrKind::kResetUsedHigh) {
                value = 0;
              } else if (o.attr == SetAttrKind::kFrontCache ||
                         o.attr == SetAttrKind::kWaitBeforeGrowth) {
                value = value != 0;
              }
              if (absl::Status st = Expect(rt_->SetPoolAttribute(pools_[o.pool], attr, value),
                                           "SetPoolAttribute");
                  !st.ok()) {
                return st;
              }
              model_.SetAttr(o.pool, attr, value);
              return absl::OkStatus();
            },
            [&](const DestroyStreamOp& o) -> absl::Status {
              if (!Bound(o.stream) || p_.streams[o.stream].kind == StreamKind::kLegacy) {
                return Skip();
              }
              if (absl::Status st =
                      Expect(rt_->DestroyStream(*handles_[o.stream]), "DestroyStream");
                  !st.ok()) {
                return st;
              }
              model_.DestroyStream(index_[o.stream]);
              handles_[o.stream].reset();
              return absl::OkStatus();
            },
            [&](const CreateStreamOp& o) -> absl::Status {
              if (Bound(o.stream)) return Skip();
              return Bind(o.stream);
            },
            [&](const GrantOp& o) -> absl::Status {
              MemAccessDesc d;
              d.location = MemLocation{MemLocationType::kDevice, o.device};
              d.flags = static_cast<MemAccessFlags>(o.flags);
              const absl::Status st = rt_->SetPoolAccess(pools_[o.pool], {&d, 1});
              const ModelPoolProps& q = p_.pools[o.pool].props;
              const bool pinned = q.type == AllocationType::kPinnedHost;
              if (o.flags != 3 && (pinned || o.device == q.device)) {
                // Pinned memory and the resident device keep read-write.
                if (absl::IsInvalidArgument(st)) return absl::OkStatus();
                return Fail("api", absl::StrCat("lowering fixed access answered ", st.ToString()));
              }
              if (absl::Status e = Expect(st, "SetPoolAccess"); !e.ok()) return e;
              if (!pinned && o.device != q.device) rights_[o.pool][o.device] = o.flags;
              return absl::OkStatus();
            },
        },
        ins);
  }

  absl::Status Skip() {
    ++skipped_;
    return absl::OkStatus();
  }

  // A FreeAsync of an allocation already freed, while no live allocation
  // holds its address: bad input, rejected with nothing changed (no host
  // time, no op, no statistic; the post-instruction checks see to that).
  absl::Status DoubleFree(const FreeOp& o) {
    auto it = freed_addr_.find(o.id);
    if (it == freed_addr_.end() || model_.LiveAt(it->second)) return Skip();
    const absl::Status st =
        rt_->FreeAsync(reinterpret_cast<void*>(it->second), *handles_[o.stream]);
    if (!absl::IsInvalidArgument(st)) {
      return Fail("api", absl::StrCat("a double free answered ", st.ToString()));
    }
    ++double_frees_;
    return absl::OkStatus();
  }

  absl::Status DoAlloc(const AllocOp& o) {
    if (!Bound(o.stream) || !used_ids_.insert(o.id).second) return Skip();
    const PoolId pool = pools_[o.pool];
    const StreamId s = *handles_[o.stream];
    const uint32_t t = index_[o.stream];
    if (o.size == 0) {
      // CUDA: a zero-byte request succeeds with NULL and does nothing.
      absl::StatusOr<AllocInfo> r = rt_->MallocFromPoolAsync(0, pool, s);
      if (!r.ok()) return Expect(r.status(), "MallocFromPoolAsync(0)");
      if (r->ptr != nullptr) return Fail("api", "a zero-byte allocation returned a pointer");
      return absl::OkStatus();
    }
    absl::StatusOr<PoolStats> before = rt_->GetPoolStats(pool);
    if (!before.ok()) return Expect(before.status(), "GetPoolStats");
    absl::StatusOr<AllocInfo> r = rt_->MallocFromPoolAsync(o.size, pool, s);
    absl::StatusOr<PoolStats> after = rt_->GetPoolStats(pool);
    if (!after.ok()) return Expect(after.status(), "GetPoolStats");
    AllocObservation obs;
    obs.ok = r.ok();
    if (r.ok()) {
      obs.ptr = reinterpret_cast<uintptr_t>(r->ptr);
      obs.rule = r->rule;
    } else {
      if (!absl::IsResourceExhausted(r.status())) return Expect(r.status(), "MallocFromPoolAsync");
      // The out-of-memory reclaim may have released memory before the call
      // failed (the model checks what it released after the instruction).
      if ((!p_.oom_reclaim && StatsWithoutFailures(*before) != StatsWithoutFailures(*after)) ||
          after->failed_alloc_count != before->failed_alloc_count + 1) {
        return Fail(
            "failed-alloc-changed",
            absl::StrCat("a failed allocation changed the pool's statistics: ",
                         StatsWithoutFailures(*before), " -> ", StatsWithoutFailures(*after)));
      }
    }
    if (absl::Status st = model_.Alloc(o.id, o.pool, t, o.size, obs); !st.ok() || !r.ok()) {
      return st;
    }
    freed_addr_[o.id] = obs.ptr;  // kept for double frees once freed
    // The pointer's attributes, from its first and last byte.
    const PoolDecl& decl = p_.pools[o.pool];
    const int device = decl.props.type == AllocationType::kPinnedHost ? -1 : decl.props.device;
    for (uintptr_t at : {obs.ptr, obs.ptr + o.size - 1}) {
      absl::StatusOr<PointerAttributes> attr =
          rt_->GetPointerAttributes(reinterpret_cast<const void*>(at));
      if (!attr.ok() || attr->device != device || !(attr->pool == pool) || attr->base != r->ptr ||
          attr->size != o.size) {
        return Fail("pointer-attributes",
                    absl::StrCat("a", o.id, " at ", obs.ptr, ": attributes of ", at, " are ",
                                 attr.ok() ? absl::StrCat("device ", attr->device, " pool ",
                                                          attr->pool.value, " base ",
                                                          reinterpret_cast<uintptr_t>(attr->base),
                                                          " size ", attr->size)
                                           : attr.status().ToString()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status PostCheck() {
    const std::vector<CheckReport> reports = rt_->CheckReports();
    if (!reports.empty()) {
      const CheckReport& r = reports.front();
      return Fail(absl::StrCat("checker-", static_cast<int>(r.kind)), r.message);
    }
    const uint32_t id = rt_->impl().id();
    const auto owned = [id](uintptr_t addr) {
      return internal::Process::Default().registry().RuntimeOwning(addr) == id;
    };
    for (size_t i = 0; i < pools_.size(); ++i) {
      if (absl::Status st = rt_->CheckPoolInvariants(pools_[i]); !st.ok()) {
        return Fail("pool-invariants", absl::StrCat("pool ", i, ": ", st.ToString()));
      }
      absl::StatusOr<PoolStats> stats = rt_->GetPoolStats(pools_[i]);
      if (!stats.ok()) return Expect(stats.status(), "GetPoolStats");
      PoolAttrs attrs;
      // CUDA's attributes 1-8, then the growth mode (streampool's own).
      for (size_t k = 0; k < attrs.size(); ++k) {
        const PoolAttr a = k + 1 < attrs.size() ? static_cast<PoolAttr>(k + 1) : PoolAttr::kGrowth;
        absl::StatusOr<uint64_t> v = rt_->GetPoolAttribute(pools_[i], a);
        if (!v.ok()) return Expect(v.status(), "GetPoolAttribute");
        attrs[k] = *v;
      }
      if (absl::Status st = model_.CheckPool(static_cast<int>(i), *stats, attrs, owned); !st.ok()) {
        return st;
      }
      for (int dev = 0; dev < p_.device_count; ++dev) {
        absl::StatusOr<MemAccessFlags> f =
            rt_->GetPoolAccess(pools_[i], MemLocation{MemLocationType::kDevice, dev});
        if (!f.ok()) return Expect(f.status(), "GetPoolAccess");
        if (static_cast<int>(*f) != rights_[i][dev]) {
          return Fail("access", absl::StrCat("pool ", i, " grants device ", dev, " flags ",
                                             static_cast<int>(*f), ", expected ", rights_[i][dev]));
        }
      }
    }
    // The ordering core's and the simulator's state, which the API does not
    // show, against the model's.
    const internal::RuntimeImpl::Introspection in = rt_->impl().Introspect();
    const size_t n = in.clocks.size();
    std::vector<Clock> clocks;
    for (const internal::VectorClock& c : in.clocks) clocks.push_back(ToClock(c, n));
    return model_.CheckOrdering(clocks, ToClock(in.done, n), in.last_end, rt_->HostNow());
  }

  const Program& p_;
  ReferenceModel model_;
  std::unique_ptr<Runtime> rt_;
  std::vector<StreamId> legacy_;
  std::vector<std::optional<StreamId>> handles_;  // by slot; empty once destroyed
  std::vector<uint32_t> index_;                   // by slot: the stream index
  std::vector<EventId> events_;
  std::vector<PoolId> pools_;
  std::vector<std::vector<int>> rights_;  // by pool, by device: 0, 1 (read) or 3
  absl::flat_hash_set<int> used_ids_;
  absl::flat_hash_map<int, uintptr_t> freed_addr_;  // every successful allocation's address
  size_t skipped_ = 0;
  size_t double_frees_ = 0;
};

}  // namespace

ExecuteResult Execute(const Program& program, const ExecuteOptions& options) {
  return Runner(program, options).Run();
}

// --------------------------------------------------------------- minimiser

namespace {

// Renames a program's pools, stream slots and events: `map(kind, i)` gives
// the new index, or -1 to drop the declaration and every instruction that
// names it. kind is 'p', 's' or 'e'.
Program Rename(const Program& p, const std::function<int(char, int)>& map) {
  Program out = p;
  out.pools.clear();
  out.streams.clear();
  out.code.clear();
  for (int i = 0; i < static_cast<int>(p.pools.size()); ++i) {
    if (map('p', i) >= 0) out.pools.push_back(p.pools[i]);
  }
  for (int i = 0; i < static_cast<int>(p.streams.size()); ++i) {
    if (map('s', i) >= 0) out.streams.push_back(p.streams[i]);
  }
  out.events = 0;
  for (int i = 0; i < p.events; ++i) out.events += map('e', i) >= 0;
  for (Instruction ins : p.code) {
    bool keep = true;
    auto re = [&](char kind, auto& name) {
      const int renamed = map(kind, static_cast<int>(name));
      keep = keep && renamed >= 0;
      name = static_cast<std::remove_reference_t<decltype(name)>>(renamed);
    };
    std::visit(Overloaded{
                   [&](AllocOp& o) {
                     re('p', o.pool);
                     re('s', o.stream);
                   },
                   [&](FreeOp& o) { re('s', o.stream); },
                   [&](FreeNowOp&) {},
                   [&](UseOp& o) { re('s', o.stream); },
                   [&](KernelOp& o) { re('s', o.stream); },
                   [&](FillOp& o) { re('s', o.stream); },
                   [&](RecordOp& o) {
                     re('e', o.event);
                     re('s', o.stream);
                   },
                   [&](WaitOp& o) {
                     re('s', o.stream);
                     re('e', o.event);
                   },
                   [&](SyncStreamOp& o) { re('s', o.stream); },
                   [&](SyncEventOp& o) { re('e', o.event); },
                   [&](SyncDeviceOp&) {},
                   [&](QueryStreamOp& o) { re('s', o.stream); },
                   [&](QueryEventOp& o) { re('e', o.event); },
                   [&](AdvanceOp&) {},
                   [&](TrimOp& o) { re('p', o.pool); },
                   [&](SetAttrOp& o) { re('p', o.pool); },
                   [&](DestroyStreamOp& o) { re('s', o.stream); },
                   [&](CreateStreamOp& o) { re('s', o.stream); },
                   [&](GrantOp& o) { re('p', o.pool); },
               },
               ins);
    if (keep) out.code.push_back(std::move(ins));
  }
  return out;
}

// Without declaration `k` of `kind`, the rest renumbered down.
Program Without(const Program& p, char kind, int k) {
  return Rename(p, [kind, k](char c, int i) {
    return c != kind ? i : i == k ? -1 : i > k ? i - 1 : i;
  });
}

// Allocation names a0, a1, ... in order of first appearance: only names.
Program Renumbered(const Program& p) {
  Program out = p;
  absl::flat_hash_map<int, int> ids;
  auto id = [&](auto& name) {
    auto [it, fresh] = ids.emplace(static_cast<int>(name), static_cast<int>(ids.size()));
    name = it->second;
  };
  for (Instruction& ins : out.code) {
    std::visit(Overloaded{
                   [&](AllocOp& o) { id(o.id); },
                   [&](FreeOp& o) { id(o.id); },
                   [&](FreeNowOp& o) { id(o.id); },
                   [&](UseOp& o) { id(o.id); },
                   [&](KernelOp& o) {
                     for (AccessDecl& a : o.accesses) id(a.id);
                   },
                   [&](FillOp& o) { id(o.id); },
                   [](auto&) {},
               },
               ins);
  }
  return out;
}

}  // namespace

Program Minimise(const Program& program, const ExecuteResult& failure, size_t max_runs,
                 const std::function<ExecuteResult(const Program&)>& run) {
  const std::string category = failure.category();
  Program best = program;
  if (failure.failed_at < best.code.size()) best.code.resize(failure.failed_at + 1);
  size_t runs = 0;
  // A candidate is kept when it fails the same way; it is then cut after its
  // own failing instruction, which is all that can matter.
  auto try_candidate = [&](Program& cand) {
    ++runs;
    const ExecuteResult r = run(cand);
    if (r.ok || r.category() != category) return false;
    if (r.failed_at < cand.code.size()) cand.code.resize(r.failed_at + 1);
    return true;
  };
  // Delta debugging over the instructions: drop chunks of halving size.
  size_t n = 2;
  while (best.code.size() >= 2 && runs < max_runs) {
    const size_t size = best.code.size();
    const size_t chunk = (size + n - 1) / n;
    bool reduced = false;
    for (size_t start = 0; start < size && runs < max_runs; start += chunk) {
      Program cand = best;
      cand.code.erase(cand.code.begin() + start, cand.code.begin() + std::min(start + chunk, size));
      if (try_candidate(cand)) {
        best = std::move(cand);
        n = std::max<size_t>(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (chunk == 1) break;
      n = std::min(size, 2 * n);
    }
  }
  // Then the header: declarations the failure does not need, a second
  // device, the per-call cost and the copy bandwidth.
  for (char kind : {'p', 's', 'e'}) {
    for (int k = 0;; ++k) {
      const int count = kind == 'p'   ? static_cast<int>(best.pools.size())
                        : kind == 's' ? static_cast<int>(best.streams.size())
                                      : best.events;
      if (k >= count || runs >= max_runs) break;
      if (kind == 'p' && count == 1) break;
      Program cand = Without(best, kind, k);
      if (try_candidate(cand)) {
        best = std::move(cand);
        --k;
      }
    }
  }
  if (best.device_count > 1 && runs < max_runs) {
    bool uses_other = false;
    for (const PoolDecl& d : best.pools) uses_other |= d.props.device != 0;
    for (const StreamDecl& d : best.streams) uses_other |= d.device != 0;
    for (const Instruction& ins : best.code) {
      if (const auto* s = std::get_if<SyncDeviceOp>(&ins)) uses_other |= s->device != 0;
      if (const auto* g = std::get_if<GrantOp>(&ins)) uses_other |= g->device != 0;
    }
    Program cand = best;
    cand.device_count = 1;
    if (!uses_other && try_candidate(cand)) best = std::move(cand);
  }
  if (best.api_call_ns != 0 && runs < max_runs) {
    Program cand = best;
    cand.api_call_ns = 0;
    if (try_candidate(cand)) best = std::move(cand);
  }
  if (best.copy_bytes_per_us != 1000000 && runs < max_runs) {
    Program cand = best;
    cand.copy_bytes_per_us = 1000000;
    if (try_candidate(cand)) best = std::move(cand);
  }
  return Renumbered(best);
}

}  // namespace streampool::model
