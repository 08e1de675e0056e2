#include "tests/model/reference_model.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace streampool::model {
namespace {

// Growth maps whole multiples of this (DESIGN.md "Block lifecycle").
constexpr uint64_t kChunk = uint64_t{2} << 20;

std::optional<uint64_t> AlignUp(uint64_t len, uint64_t k) {
  if (len == 0) return 0;
  uint64_t r;
  if (__builtin_add_overflow((len - 1) / k, uint64_t{1}, &r) || __builtin_mul_overflow(r, k, &r)) {
    return std::nullopt;
  }
  return r;
}

absl::Status Discrepancy(absl::string_view category, absl::string_view detail) {
  return absl::InternalError(absl::StrCat(category, ": ", detail));
}

std::string Point(uint32_t s, uint64_t pos) {
  return absl::StrCat("(stream ", s, ", op ", pos, ")");
}

}  // namespace

const char* ReuseRuleLabel(ReuseRule rule) { return ReuseRuleName(rule); }

std::optional<uint64_t> ReferenceModel::RuleSize(AllocationType type, uint64_t len) {
  switch (type) {
    case AllocationType::kDevice:
    case AllocationType::kHugePage:
      return AlignUp(len, 256);
    case AllocationType::kPinnedHost:
      return AlignUp(len, 64);
    case AllocationType::kDvpp: {
      std::optional<uint64_t> a = AlignUp(len, 32);
      if (!a || *a > UINT64_MAX - 32) return std::nullopt;
      return AlignUp(*a + 32, 128);
    }
  }
  return std::nullopt;
}

ReferenceModel::ReferenceModel(const ModelConfig& config) : config_(config) {
  for (int d = 0; d < config_.device_count; ++d) {
    Stream st;
    st.device = d;
    st.kind = StreamKind::kLegacy;
    streams_.push_back(st);
  }
}

void ReferenceModel::Join(Clock& into, const Clock& other) {
  if (other.size() > into.size()) into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) into[i] = std::max(into[i], other[i]);
}

uint32_t ReferenceModel::CreateStream(int device, bool non_blocking) {
  Charge();
  Stream st;
  st.device = device;
  st.kind = non_blocking ? StreamKind::kNonBlocking : StreamKind::kBlocking;
  streams_.push_back(st);
  return static_cast<uint32_t>(streams_.size() - 1);
}

void ReferenceModel::DestroyStream(uint32_t s) {
  Charge();
  // Its work still runs and its clock still counts (DESIGN.md: destroying a
  // stream defers); only the handle goes.
  streams_[s].destroyed = true;
}

int ReferenceModel::CreateEvent() {
  Charge();
  events_.emplace_back();
  return static_cast<int>(events_.size() - 1);
}

int ReferenceModel::AddPool(const ModelPoolProps& props) {
  Pool p;
  p.props = props;
  p.pinned = props.type == AllocationType::kPinnedHost;
  const uint64_t limit = p.pinned ? UINT64_MAX : config_.device_capacity;
  p.max_size = props.max_size == 0 ? limit : std::min(props.max_size, limit);
  switch (props.type) {
    case AllocationType::kDevice:
    case AllocationType::kHugePage:
      p.granule = 256;
      break;
    case AllocationType::kPinnedHost:
      p.granule = 64;
      break;
    case AllocationType::kDvpp:
      p.granule = 128;
      break;
  }
  p.follow = props.follow;
  p.opportunistic = props.opportunistic;
  p.internal = props.internal;
  p.threshold = props.threshold;
  pools_.push_back(std::move(p));
  return static_cast<int>(pools_.size() - 1);
}

// ------------------------------------------------------------ ordering, time

Clock ReferenceModel::NextClock(uint32_t s) const {
  const Stream& st = streams_[s];
  Clock c = st.clock;
  c.resize(streams_.size(), 0);
  if (st.kind == StreamKind::kLegacy) {
    // Ordered after all prior work of every blocking stream of its device,
    // destroyed ones included.
    for (uint32_t b = 0; b < streams_.size(); ++b) {
      const Stream& o = streams_[b];
      if (b != s && o.device == st.device && o.kind == StreamKind::kBlocking && o.pos > 0) {
        Join(c, o.clock);
      }
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const Stream& legacy = streams_[LegacyStream(st.device)];
    if (legacy.pos > 0) Join(c, legacy.clock);
  }
  return c;
}

uint64_t ReferenceModel::Enqueue(uint32_t s, uint64_t duration_ns, uint64_t wait_end) {
  Stream& st = streams_[s];
  uint64_t start = std::max({now_, st.last_end, wait_end});
  if (st.kind == StreamKind::kLegacy) {
    for (uint32_t b = 0; b < streams_.size(); ++b) {
      const Stream& o = streams_[b];
      if (b != s && o.device == st.device && o.kind == StreamKind::kBlocking && o.pos > 0) {
        start = std::max(start, o.last_end);
      }
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const Stream& legacy = streams_[LegacyStream(st.device)];
    if (legacy.pos > 0) start = std::max(start, legacy.last_end);
  }
  Clock c = NextClock(s);
  st.clock = std::move(c);
  ++st.pos;
  st.clock[s] = st.pos;
  st.last_end = start + duration_ns;
  return st.last_end;
}

void ReferenceModel::Prove(const Clock& proof) {
  Join(done_, proof);
  // What is proven complete is no longer pending in any pool (the runtime
  // promotes every pool at each sync action and successful query).
  for (Pool& pool : pools_) {
    for (auto it = pool.unproven_frees.begin(); it != pool.unproven_frees.end();) {
      if (Proven(it->first.first, it->first.second)) {
        it = pool.unproven_frees.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void ReferenceModel::ReleaseAtSync() {
  for (Pool& pool : pools_) pool.release_bound = pool.threshold;
}

uint64_t ReferenceModel::DeviceReserved(int device) const {
  uint64_t sum = 0;
  for (const Pool& p : pools_) {
    if (!p.pinned && p.props.device == device) sum += p.reserved;
  }
  return sum;
}

// --------------------------------------------------------- well-formedness

bool ReferenceModel::MayAccess(uint32_t t, int id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  const Live& a = it->second;
  return a.stream == t || Get(NextClock(t), a.stream) >= a.pos;
}

bool ReferenceModel::MayFreeAsync(int id, uint32_t s) const {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  const Clock next = NextClock(s);
  for (const AccessRec& r : it->second.accesses) {
    if (r.stream != s && Get(next, r.stream) < r.pos) return false;
  }
  return true;
}

bool ReferenceModel::MayFreeNow(int id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  if (it->second.end > now_) return false;
  for (const AccessRec& r : it->second.accesses) {
    if (r.end > now_) return false;
  }
  return true;
}

bool ReferenceModel::LiveAt(uintptr_t addr) const {
  auto it = live_by_addr_.upper_bound(addr);
  if (it == live_by_addr_.begin()) return false;
  --it;
  const Live& a = live_.at(it->second);
  return addr < a.addr + a.size;
}

void ReferenceModel::Touch(int id, uint32_t s, uint64_t end) {
  Live& a = live_.at(id);
  for (AccessRec& r : a.accesses) {
    if (r.stream == s) {
      r.pos = streams_[s].pos;
      r.end = end;
      return;
    }
  }
  a.accesses.push_back(AccessRec{s, streams_[s].pos, end});
}

// -------------------------------------------------------------- allocation

absl::Status ReferenceModel::Alloc(int id, int p, uint32_t t, uint64_t size,
                                   const AllocObservation& obs) {
  Pool& pool = pools_[p];
  // The pool decides at the call, before the call's host cost is charged.
  const uint64_t decided_at = now_;
  const std::optional<uint64_t> rule_size = RuleSize(pool.props.type, size);
  const bool fits_max = rule_size.has_value() && *rule_size <= pool.max_size;
  std::optional<uint64_t> chunk = fits_max ? AlignUp(*rule_size, kChunk) : std::nullopt;
  const bool can_grow =
      chunk.has_value() && *chunk <= pool.max_size && pool.reserved <= pool.max_size - *chunk &&
      (pool.pinned || (*chunk <= config_.device_capacity &&
                       DeviceReserved(pool.props.device) <= config_.device_capacity - *chunk));
  // Rule 1 certainly has a candidate when T has an unproven free in this pool
  // that is large enough and none of whose bytes were handed out since: those
  // bytes sit in a PENDING(T) block at least that large.
  const Freed* own = nullptr;
  uintptr_t own_addr = 0;
  if (fits_max) {
    for (const auto& [addr, f] : pool.history) {
      if (!f.now && f.stream == t && !Proven(f.stream, f.pos) && f.size == f.original_size &&
          f.size >= *rule_size) {
        own = &f;
        own_addr = addr;
        break;
      }
    }
  }
  if (own != nullptr) ++coverage_.own_candidate_checks;
  const std::string what = absl::StrCat("alloc a", id, " of ", size, " bytes (rule size ",
                                        rule_size.value_or(0), ") on stream ", t, " from pool ", p);

  if (!obs.ok) {
    if (can_grow) {
      return Discrepancy(
          "must-not-fail",
          absl::StrCat(what, " failed although a chunk of ", *chunk, " bytes fits: reserved ",
                       pool.reserved, " of maxSize ", pool.max_size, ", device holds ",
                       DeviceReserved(pool.props.device), " of ", config_.device_capacity));
    }
    if (own != nullptr) {
      return Discrepancy("rule1-must",
                         absl::StrCat(what, " failed although the stream's own pending free a",
                                      own->id, " [", own_addr, ", +", own->size, ") fits"));
    }
    ++pool.failed;
    ++coverage_.failed;
    return absl::OkStatus();  // no host time, no op: the call failed
  }
  if (!fits_max) {
    return Discrepancy("maxsize", absl::StrCat(what, " succeeded beyond maxSize ", pool.max_size));
  }
  const uint64_t need = *rule_size;
  const uintptr_t ptr = obs.ptr;
  if (ptr == 0 || ptr % pool.granule != 0) {
    return Discrepancy("address",
                       absl::StrCat(what, " returned ", ptr, ", not aligned to ", pool.granule));
  }
  // No byte may be shared with a live allocation of any pool.
  {
    auto it = live_by_addr_.upper_bound(ptr + need - 1);
    if (it != live_by_addr_.begin()) {
      --it;
      const Live& other = live_.at(it->second);
      if (other.addr + other.size > ptr) {
        return Discrepancy("overlap-live", absl::StrCat(what, " returned [", ptr, ", +", need,
                                                        ") overlapping live a", it->second, " [",
                                                        other.addr, ", +", other.size, ")"));
      }
    }
  }
  const bool grew = obs.reserved_after != pool.reserved;
  const ReuseRule rule = obs.rule;
  const std::string took = absl::StrCat(what, " -> ", ReuseRuleName(rule), " at ", ptr);
  if (grew) {
    if (!can_grow) {
      return Discrepancy("growth", absl::StrCat(took, " grew reserved ", pool.reserved, " -> ",
                                                obs.reserved_after, " although no chunk fits"));
    }
    if (obs.reserved_after != pool.reserved + *chunk) {
      return Discrepancy(
          "growth", absl::StrCat(took, " grew reserved ", pool.reserved, " -> ", obs.reserved_after,
                                 "; expected one chunk of ", *chunk));
    }
    if (rule != ReuseRule::kFresh) {
      return Discrepancy("growth", absl::StrCat(took, " grew the pool but reports a reuse rule"));
    }
  }
  if (own != nullptr && (grew || (rule != ReuseRule::kSameStream && rule != ReuseRule::kAfterSync &&
                                  rule != ReuseRule::kFresh))) {
    return Discrepancy(
        "rule1-must",
        absl::StrCat(took, (grew ? " (grew)" : ""), " although the stream's own pending free a",
                     own->id, " [", own_addr, ", +", own->size, ") freed at ",
                     Point(own->stream, own->pos), " fits"));
  }

  // The previous occupants of the bytes handed out.
  std::vector<std::pair<uintptr_t, Freed>> occupants;
  {
    auto it = pool.history.upper_bound(ptr);
    if (it != pool.history.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.size > ptr) it = prev;
    }
    for (; it != pool.history.end() && it->first < ptr + need; ++it) {
      occupants.emplace_back(it->first, it->second);
    }
  }
  const Clock next = NextClock(t);
  auto describe = [&](const Freed& f) {
    return absl::StrCat("a", f.id, f.now ? " (spFree'd)" : "", " freed at ", Point(f.stream, f.pos),
                        " ending at ", f.end, " ns");
  };
  auto fail_rule = [&](absl::string_view why, const Freed& f) {
    return Discrepancy(
        "rule-precondition",
        absl::StrCat(took, ": ", why, ": previous occupant ", describe(f), "; VC(T)[", f.stream,
                     "] = ", Get(next, f.stream), ", done[", f.stream, "] = ", Get(done_, f.stream),
                     ", host now ", decided_at));
  };
  // The one other stream that unproven occupants must share (rules 2, 3, 5).
  std::optional<uint32_t> other_stream;
  auto same_other = [&](const Freed& f) -> bool {
    if (f.stream == t) return false;
    if (!other_stream) other_stream = f.stream;
    return *other_stream == f.stream;
  };

  // Rule 5: which free point did the pool wait on? The runtime orders T
  // after it by joining S's clock (when the free is S's latest op) or by
  // raising VC(T)[S] alone; find the one candidate that explains T's clock.
  std::optional<std::pair<uint32_t, uint64_t>> waited;
  if (rule == ReuseRule::kInternalDependency) {
    if (!pool.internal) {
      return Discrepancy("rule-precondition", absl::StrCat(took, " with the switch off"));
    }
    if (can_grow) {
      return Discrepancy("rule-precondition",
                         absl::StrCat(took, " although a chunk of ", *chunk, " bytes fits"));
    }
    const uint64_t pos_after = streams_[t].pos + 2;  // the wait, then the marker
    Clock base = next;
    base[t] = pos_after;
    Clock seen = obs.clock_after;
    seen.resize(streams_.size(), 0);
    if (seen != base) {
      for (uint32_t s = 0; s < streams_.size() && !waited; ++s) {
        if (s == t || seen[s] <= base[s] || seen[s] > streams_[s].pos) continue;
        const uint64_t f = seen[s];
        Clock trial = base;
        if (f == streams_[s].pos) {
          Join(trial, streams_[s].clock);
        } else {
          trial[s] = std::max(trial[s], f);
        }
        trial[t] = pos_after;
        if (trial == seen) waited = std::make_pair(s, f);
      }
      if (!waited) {
        return Discrepancy("rule5-wait", absl::StrCat(took,
                                                      ": the stream's clock after the call is not "
                                                      "explained by a wait on any one free point"));
      }
      if (!pool.unproven_frees.contains(*waited)) {
        return Discrepancy("rule5-wait",
                           absl::StrCat(took, " waited on ", Point(waited->first, waited->second),
                                        ", which is not a pending free of this pool"));
      }
    }
  }

  if (rule == ReuseRule::kAfterSync && occupants.empty()) {
    if (config_.strict_fresh) {
      return Discrepancy("fresh-misreported",
                         absl::StrCat(took, ": none of these bytes was handed out before"));
    }
    ++coverage_.after_sync_never_used;
  }
  for (const auto& [addr, f] : occupants) {
    const bool proven = f.now || Proven(f.stream, f.pos);
    const bool ordered = f.stream == t || Get(next, f.stream) >= f.pos;
    const bool complete = f.end <= decided_at;
    switch (rule) {
      case ReuseRule::kFresh:
        return fail_rule("fresh memory has no previous occupant", f);
      case ReuseRule::kAfterSync:
        if (!proven) return fail_rule("after-sync reuse of a free not proven complete", f);
        break;
      case ReuseRule::kSameStream:
        if (!proven && f.stream != t) {
          return fail_rule("same-stream reuse of another stream's unproven free", f);
        }
        break;
      case ReuseRule::kEventDependency:
        if (!pool.follow) return fail_rule("event-dependency reuse with the switch off", f);
        if (!proven && !(same_other(f) && ordered)) {
          return fail_rule("event-dependency reuse of a free not ordered before the stream", f);
        }
        break;
      case ReuseRule::kOpportunistic:
        if (!pool.opportunistic) return fail_rule("opportunistic reuse with the switch off", f);
        if (!proven && !(same_other(f) && complete)) {
          return fail_rule("opportunistic reuse of a free not complete at the call", f);
        }
        break;
      case ReuseRule::kInternalDependency:
        if (!proven) {
          const bool covered = waited ? (f.stream == waited->first && f.pos <= waited->second)
                                      : (same_other(f) && ordered);  // a redundant wait
          if (!covered) return fail_rule("internal-dependency wait does not cover the free", f);
        }
        break;
    }
    // The safety invariant itself, whatever the rule.
    if (!proven && !ordered && !complete &&
        !(waited && f.stream == waited->first && f.pos <= waited->second)) {
      return fail_rule("unsafe reuse", f);
    }
  }

  // Accepted: apply it.
  if (rule == ReuseRule::kInternalDependency) {
    uint64_t wait_end = 0;
    if (waited) wait_end = pool.unproven_frees.at(*waited);
    Enqueue(t, 0, wait_end);
    if (waited) {
      const auto [s, f] = *waited;
      if (f == streams_[s].pos) {
        Join(streams_[t].clock, streams_[s].clock);
      } else {
        streams_[t].clock[s] = std::max(streams_[t].clock[s], f);
      }
    }
    ++pool.waits;
  }
  Charge();
  const uint64_t end = Enqueue(t, 0, 0);
  Live a;
  a.pool = p;
  a.stream = t;
  a.pos = streams_[t].pos;
  a.end = end;
  a.addr = ptr;
  a.size = need;
  a.requested = size;
  live_.emplace(id, std::move(a));
  live_by_addr_.emplace(ptr, id);
  // The bytes now belong to the new allocation: trim its occupants' records.
  for (const auto& [addr, f] : occupants) {
    pool.history.erase(addr);
    if (addr < ptr) {
      Freed left = f;
      left.size = ptr - addr;
      pool.history.emplace(addr, left);
    }
    if (addr + f.size > ptr + need) {
      Freed right = f;
      right.size = addr + f.size - (ptr + need);
      pool.history.emplace(ptr + need, right);
    }
  }
  pool.used += need;
  pool.used_high = std::max(pool.used_high, pool.used);
  ++pool.live;
  ++pool.allocs;
  ++pool.by_rule[static_cast<int>(rule)];
  ++coverage_.by_rule[static_cast<int>(rule)];
  if (grew) {
    pool.reserved += *chunk;
    pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
    ++pool.maps;
    pool.bytes_mapped += *chunk;
    if (pool.chunks_known) pool.chunks.insert(*chunk);
    ++coverage_.grew;
  }
  return absl::OkStatus();
}

void ReferenceModel::FreeAsync(int id, uint32_t s) {
  Charge();
  const uint64_t end = Enqueue(s, 0, 0);
  auto node = live_.extract(id);
  const Live& a = node.mapped();
  Pool& pool = pools_[a.pool];
  live_by_addr_.erase(a.addr);
  Freed f;
  f.id = id;
  f.size = f.original_size = a.size;
  f.stream = s;
  f.pos = streams_[s].pos;
  f.end = end;
  pool.history.emplace(a.addr, f);
  pool.unproven_frees.emplace(std::make_pair(s, f.pos), end);
  pool.used -= a.size;
  --pool.live;
  ++pool.frees;
}

void ReferenceModel::FreeNow(int id) {
  Charge();
  auto node = live_.extract(id);
  const Live& a = node.mapped();
  Pool& pool = pools_[a.pool];
  live_by_addr_.erase(a.addr);
  Freed f;
  f.id = id;
  f.size = f.original_size = a.size;
  f.now = true;
  f.stream = a.stream;
  f.end = now_;
  pool.history.emplace(a.addr, f);
  pool.used -= a.size;
  --pool.live;
  ++pool.frees;
}

// -------------------------------------------------------------------- work

void ReferenceModel::Kernel(uint32_t s, uint64_t duration_ns, const std::vector<int>& accessed) {
  Charge();
  const uint64_t end = Enqueue(s, duration_ns, 0);
  for (int id : accessed) Touch(id, s, end);
}

void ReferenceModel::Fill(uint32_t s, int id, uint64_t bytes) {
  Charge();
  if (bytes == 0) return;  // succeeds, enqueues nothing
  const uint64_t end = Enqueue(s, bytes * 1000 / config_.copy_bytes_per_us, 0);
  Touch(id, s, end);
}

void ReferenceModel::Record(int e, uint32_t s) {
  Charge();
  Event& ev = events_[e];
  ev.end = Enqueue(s, 0, 0);
  ev.recorded = true;
  ev.snapshot = streams_[s].clock;
}

void ReferenceModel::Wait(uint32_t s, int e) {
  const Event& ev = events_[e];
  if (!ev.recorded) return;  // CUDA: waiting on a never-recorded event is a no-op
  Charge();
  Enqueue(s, 0, ev.end);
  Join(streams_[s].clock, ev.snapshot);
}

void ReferenceModel::Advance(uint64_t ns) {
  Charge();
  now_ += ns;
}

void ReferenceModel::SyncStream(uint32_t s) {
  Charge();
  now_ = std::max(now_, streams_[s].last_end);
  Prove(streams_[s].clock);
  ReleaseAtSync();
}

void ReferenceModel::SyncEvent(int e) {
  Charge();
  const Event& ev = events_[e];
  if (!ev.recorded) return;  // nothing to wait for, nothing proven or released
  now_ = std::max(now_, ev.end);
  Prove(ev.snapshot);
  ReleaseAtSync();
}

void ReferenceModel::SyncDevice(int device) {
  Charge();
  for (const Stream& st : streams_) {
    if (st.device != device) continue;
    now_ = std::max(now_, st.last_end);
  }
  for (const Stream& st : streams_) {
    if (st.device == device) Prove(st.clock);
  }
  ReleaseAtSync();
}

absl::Status ReferenceModel::QueryStream(uint32_t s, bool runtime_ready) {
  Charge();
  const bool ready = streams_[s].last_end <= now_;
  if (ready != runtime_ready) {
    return Discrepancy(
        "query",
        absl::StrCat("stream ", s, " query answered ", runtime_ready ? "ready" : "not ready",
                     "; its last op ends at ", streams_[s].last_end, " ns, host now ", now_));
  }
  if (ready) Prove(streams_[s].clock);
  return absl::OkStatus();
}

absl::Status ReferenceModel::QueryEvent(int e, bool runtime_ready) {
  Charge();
  const Event& ev = events_[e];
  const bool ready = !ev.recorded || ev.end <= now_;
  if (ready != runtime_ready) {
    return Discrepancy(
        "query",
        absl::StrCat("event ", e, " query answered ", runtime_ready ? "ready" : "not ready",
                     "; its record ends at ", ev.end, " ns, host now ", now_));
  }
  if (ready && ev.recorded) Prove(ev.snapshot);
  return absl::OkStatus();
}

void ReferenceModel::Trim(int pool, uint64_t min_bytes_to_keep) {
  pools_[pool].release_bound = min_bytes_to_keep;
}

void ReferenceModel::SetAttr(int p, PoolAttr attr, uint64_t value) {
  Pool& pool = pools_[p];
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      pool.follow = value != 0;
      break;
    case PoolAttr::kReuseAllowOpportunistic:
      pool.opportunistic = value != 0;
      break;
    case PoolAttr::kReuseAllowInternalDependencies:
      pool.internal = value != 0;
      break;
    case PoolAttr::kReleaseThreshold:
      pool.threshold = value;
      break;
    case PoolAttr::kReservedMemHigh:
      pool.reserved_high = pool.reserved;
      break;
    case PoolAttr::kUsedMemHigh:
      pool.used_high = pool.used;
      break;
    case PoolAttr::kReservedMemCurrent:
    case PoolAttr::kUsedMemCurrent:
      break;  // read-only; the executor never sets them
  }
}

// ------------------------------------------------------------------ checks

absl::Status ReferenceModel::CheckRelease(Pool& pool, uint64_t bound, const PoolStats& stats,
                                          const std::function<bool(uintptr_t)>& mapped) {
  const uint64_t before = pool.reserved;
  const uint64_t after = stats.reserved_bytes;
  const std::string at =
      absl::StrCat("release to bound ", bound, ": reserved ", before, " -> ", after);
  if (after > before) return Discrepancy("release", absl::StrCat(at, " grew"));
  if (before <= bound && after != before) {
    return Discrepancy("release", absl::StrCat(at, " although reserved was within the bound"));
  }
  if (before > bound && after < bound)
    return Discrepancy("release", absl::StrCat(at, " undershot"));
  const uint64_t unmapped = stats.upstream_unmaps - pool.unmaps;
  bool exact = false;
  if (EntirelyFree(pool)) {
    // Every chunk is one READY block now: the release rule's result is
    // determined by the chunk sizes alone (largest first, skipping any whose
    // release would undershoot).
    if (pool.chunks_known && before > bound) {
      std::vector<uint64_t> sizes(pool.chunks.rbegin(), pool.chunks.rend());
      uint64_t r = before;
      uint64_t count = 0;
      for (uint64_t c : sizes) {
        if (r <= bound) break;
        if (r - c < bound) continue;
        r -= c;
        ++count;
        pool.chunks.erase(pool.chunks.find(c));
      }
      if (after != r || unmapped != count) {
        return Discrepancy("release", absl::StrCat(at, " with ", unmapped,
                                                   " unmaps; the wholly free pool's "
                                                   "chunks should have gone to ",
                                                   r, " with ", count, " unmaps"));
      }
      exact = true;
      ++coverage_.exact_releases;
    } else if (bound == 0 && after != 0) {
      return Discrepancy("release", absl::StrCat(at, " though the pool is wholly free"));
    }
  }
  if (after < before) {
    ++coverage_.releases;
    if (unmapped == 0 || unmapped > (before - after) / kChunk) {
      return Discrepancy("release", absl::StrCat(at, " with ", unmapped, " unmaps"));
    }
    if (!exact) pool.chunks_known = false;
    // Forget what happened in the chunks that went back.
    for (auto it = pool.history.begin(); it != pool.history.end();) {
      if (!mapped(it->first)) {
        it = pool.history.erase(it);
      } else {
        ++it;
      }
    }
  } else if (unmapped != 0) {
    return Discrepancy("release", absl::StrCat(at, " but ", unmapped, " unmaps"));
  }
  pool.unmaps = stats.upstream_unmaps;
  pool.reserved = after;
  if (after == 0) {
    pool.chunks.clear();
    pool.chunks_known = true;
  }
  return absl::OkStatus();
}

absl::Status ReferenceModel::CheckPool(int p, const PoolStats& s, const PoolAttrs& attrs,
                                       const std::function<bool(uintptr_t)>& mapped) {
  Pool& pool = pools_[p];
  if (pool.release_bound) {
    const uint64_t bound = *pool.release_bound;
    pool.release_bound.reset();
    if (absl::Status st = CheckRelease(pool, bound, s, mapped); !st.ok()) return st;
  }
  auto expect = [&](absl::string_view name, uint64_t got, uint64_t want) -> absl::Status {
    if (got == want) return absl::OkStatus();
    return Discrepancy(absl::StrCat("stats"),
                       absl::StrCat("pool ", p, " ", name, " is ", got, ", model says ", want));
  };
  const std::pair<absl::string_view, std::pair<uint64_t, uint64_t>> fields[] = {
      {"reserved", {s.reserved_bytes, pool.reserved}},
      {"reservedHigh", {s.reserved_high, pool.reserved_high}},
      {"used", {s.used_bytes, pool.used}},
      {"usedHigh", {s.used_high, pool.used_high}},
      {"allocCount", {s.alloc_count, pool.allocs}},
      {"freeCount", {s.free_count, pool.frees}},
      {"failedAllocCount", {s.failed_alloc_count, pool.failed}},
      {"fresh", {s.fresh_allocs, pool.by_rule[static_cast<int>(ReuseRule::kFresh)]}},
      {"reuseSameStream",
       {s.reuse_same_stream, pool.by_rule[static_cast<int>(ReuseRule::kSameStream)]}},
      {"reuseEventDependency",
       {s.reuse_event_dependency, pool.by_rule[static_cast<int>(ReuseRule::kEventDependency)]}},
      {"reuseOpportunistic",
       {s.reuse_opportunistic, pool.by_rule[static_cast<int>(ReuseRule::kOpportunistic)]}},
      {"reuseAfterSync",
       {s.reuse_after_sync, pool.by_rule[static_cast<int>(ReuseRule::kAfterSync)]}},
      {"reuseInternalDependency",
       {s.reuse_internal_dependency,
        pool.by_rule[static_cast<int>(ReuseRule::kInternalDependency)]}},
      {"waitsInserted", {s.waits_inserted, pool.waits}},
      {"upstreamMaps", {s.upstream_maps, pool.maps}},
      {"upstreamUnmaps", {s.upstream_unmaps, pool.unmaps}},
      {"upstreamBytesMapped", {s.upstream_bytes_mapped, pool.bytes_mapped}},
      {"huge+thp+normal page bytes",
       {s.huge_page_bytes + s.transparent_huge_page_bytes + s.normal_page_bytes, pool.reserved}},
      {"attr ReuseFollowEventDependencies", {attrs[0], pool.follow ? 1u : 0u}},
      {"attr ReuseAllowOpportunistic", {attrs[1], pool.opportunistic ? 1u : 0u}},
      {"attr ReuseAllowInternalDependencies", {attrs[2], pool.internal ? 1u : 0u}},
      {"attr ReleaseThreshold", {attrs[3], pool.threshold}},
      {"attr ReservedMemCurrent", {attrs[4], pool.reserved}},
      {"attr ReservedMemHigh", {attrs[5], pool.reserved_high}},
      {"attr UsedMemCurrent", {attrs[6], pool.used}},
      {"attr UsedMemHigh", {attrs[7], pool.used_high}},
  };
  for (const auto& [name, v] : fields) {
    if (absl::Status st = expect(name, v.first, v.second); !st.ok()) return st;
  }
  if (s.used_bytes > s.reserved_bytes) {
    return Discrepancy("stats", absl::StrCat("pool ", p, " uses ", s.used_bytes, " of ",
                                             s.reserved_bytes, " reserved bytes"));
  }
  if (s.largest_free_block > s.reserved_bytes - s.used_bytes) {
    return Discrepancy("stats", absl::StrCat("pool ", p, " largest free block ",
                                             s.largest_free_block, " exceeds reserved - used"));
  }
  const double frag =
      s.reserved_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(s.used_bytes) / s.reserved_bytes;
  if (s.fragmentation != frag) {
    return Discrepancy(
        "stats", absl::StrCat("pool ", p, " fragmentation ", s.fragmentation, ", expected ", frag));
  }
  return absl::OkStatus();
}

absl::Status ReferenceModel::CheckOrdering(const std::vector<Clock>& clocks, const Clock& done,
                                           const std::vector<uint64_t>& last_ends,
                                           uint64_t now) const {
  if (now != now_) {
    return Discrepancy("host-time", absl::StrCat("host now is ", now, " ns, model says ", now_));
  }
  if (clocks.size() != streams_.size() || last_ends.size() != streams_.size()) {
    return Discrepancy("streams", absl::StrCat("runtime has ", clocks.size(), " streams, model ",
                                               streams_.size()));
  }
  for (uint32_t s = 0; s < streams_.size(); ++s) {
    for (uint32_t r = 0; r < streams_.size(); ++r) {
      if (Get(clocks[s], r) != Get(streams_[s].clock, r)) {
        return Discrepancy("clock", absl::StrCat("VC(", s, ")[", r, "] is ", Get(clocks[s], r),
                                                 ", model says ", Get(streams_[s].clock, r)));
      }
    }
    if (Get(done, s) != Get(done_, s)) {
      return Discrepancy(
          "done", absl::StrCat("done[", s, "] is ", Get(done, s), ", model says ", Get(done_, s)));
    }
    if (last_ends[s] != streams_[s].last_end) {
      return Discrepancy("virtual-time",
                         absl::StrCat("stream ", s, "'s last op ends at ", last_ends[s],
                                      " ns, model says ", streams_[s].last_end));
    }
  }
  return absl::OkStatus();
}

}  // namespace streampool::model
