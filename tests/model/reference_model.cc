#include "tests/model/reference_model.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace streampool::model {
namespace {

// The unit of growth and release (docs/design.md "Block lifecycle"): a chunk is a
// whole number of them, an expandable pool maps and unmaps them one by one.
constexpr uint64_t kGranule = uint64_t{2} << 20;
// Rule 2's probe bound (MemPool::kCrossStreamProbes).
constexpr size_t kProbes = 32;
// The largest reservation of an expandable pool (MemPool::kMaxReservation),
// and a DVPP pool's (a sixteenth of the 16 GiB window all DVPP pools share).
constexpr uint64_t kMaxReservation = uint64_t{128} << 30;
constexpr uint64_t kDvppReservation = uint64_t{1} << 30;

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

void Coverage::Add(const Coverage& o) {
  for (size_t i = 0; i < by_rule.size(); ++i) by_rule[i] += o.by_rule[i];
  failed += o.failed;
  grew += o.grew;
  remapped += o.remapped;
  new_reservations += o.new_reservations;
  waited_before_growth += o.waited_before_growth;
  joined += o.joined;
  releases += o.releases;
  bound_stops += o.bound_stops;
  low_end += o.low_end;
  observed += o.observed;
  observed_failed += o.observed_failed;
  probe_limited += o.probe_limited;
  slots_reused += o.slots_reused;
  slot_promotions += o.slot_promotions;
  cache_hits += o.cache_hits;
  cache_flushes += o.cache_flushes;
  deferred_frees += o.deferred_frees;
  reclaims += o.reclaims;
  reclaim_rescued += o.reclaim_rescued;
  after_sync_never_used += o.after_sync_never_used;
}

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
  RecycleSlots();
  const StreamKind kind = non_blocking ? StreamKind::kNonBlocking : StreamKind::kBlocking;
  Charge();
  if (free_slots_.empty()) {
    Stream st;
    st.device = device;
    st.kind = kind;
    streams_.push_back(st);
    return static_cast<uint32_t>(streams_.size() - 1);
  }
  // The slot most recently handed back. Its position, clock and last op end
  // continue: every statement about the dead stream's positions stays true
  // (they are complete, and the new stream is ordered after them).
  const uint32_t s = free_slots_.back();
  free_slots_.pop_back();
  streams_[s].device = device;
  streams_[s].kind = kind;
  streams_[s].destroyed = false;
  ++coverage_.slots_reused;
  return s;
}

void ReferenceModel::DestroyStream(uint32_t s) {
  Charge();
  // Its work still runs and its clock still counts (docs/design.md: destroying a
  // stream defers); only the handle goes, and later the slot.
  streams_[s].destroyed = true;
  retired_.push_back(s);
  for (Pool& pool : pools_) {
    if (Pool::Cache* c = CacheOf(pool, s)) FlushCache(pool, *c);
  }
}

void ReferenceModel::RecycleSlots() {
  // As the runtime does at each CreateStream: a few retired slots, round
  // robin, each handed back once the stream's last op is complete and no
  // pool holds a free pending on it.
  constexpr size_t kChecksPerCall = 4;
  const size_t checks = std::min(retired_.size(), kChecksPerCall);
  for (size_t n = 0; n < checks && !retired_.empty(); ++n) {
    if (recycle_cursor_ >= retired_.size()) recycle_cursor_ = 0;
    const uint32_t s = retired_[recycle_cursor_];
    if (SlotIdle(s)) {
      // Its positions are all complete, and the runtime records that, since
      // its executor reports completion by ops and the successor's come next.
      Clock proof(s + 1, 0);
      proof[s] = streams_[s].pos;
      Prove(proof);
      free_slots_.push_back(s);
      // Uses declared by the dead stream are over (the runtime drops them).
      for (auto& [id, a] : live_) std::erase(a.uses, s);
      retired_[recycle_cursor_] = retired_.back();
      retired_.pop_back();
    } else {
      ++recycle_cursor_;
    }
  }
}

bool ReferenceModel::SlotIdle(uint32_t s) {
  if (streams_[s].last_end > now_) return false;
  // Its frees are observed complete: pools with the opportunistic switch on
  // promote them (as rule 3 would); the others keep them pending, and the
  // slot retired, until a proof.
  bool idle = true;
  for (Pool& pool : pools_) {
    auto on_s = [s](const Block& b) { return b.state == State::kPending && b.stream == s; };
    // A deferred free of s, or one waiting for s: not settled here.
    auto deferred_on_s = [s](const Block& b) {
      if (b.state != State::kDeferred) return false;
      if (b.stream == s) return true;
      return std::any_of(b.uses.begin(), b.uses.end(),
                         [s](const UsePoint& u) { return u.stream == s; });
    };
    bool pending = false, deferred = false;
    for (const Reservation& r : pool.res) {
      pending |= std::any_of(r.blocks.begin(), r.blocks.end(), on_s);
      deferred |= std::any_of(r.blocks.begin(), r.blocks.end(), deferred_on_s);
    }
    if (pending && pool.opportunistic) {
      PromoteIf(pool, /*observed=*/true, on_s);
      ++coverage_.slot_promotions;
      pending = false;
    }
    idle &= !pending && !deferred;
  }
  return idle;
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
  // Every built-in upstream can reserve, so only an explicit choice is
  // chunked.
  p.expandable = props.growth != PoolGrowth::kChunked;
  const uint64_t r = props.type == AllocationType::kDvpp ? kDvppReservation
                                                         : std::min(p.max_size, kMaxReservation);
  p.reservation_bytes = std::max(*AlignUp(r, kGranule), kGranule);
  p.scarce = props.type == AllocationType::kDvpp;
  p.follow = props.follow;
  p.opportunistic = props.opportunistic;
  p.internal = props.internal;
  // Chunked pools start in CUDA's order whatever the property says.
  p.wait_before_growth = props.wait_before_growth && p.expandable;
  p.soft_limit = props.soft_limit;
  p.threshold = props.threshold;
  p.front_cache = props.front_cache;
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

uint64_t ReferenceModel::AdvancePoint(uint32_t s) {
  // An allocation or a free: a position, not an op. It joins no legacy
  // clock and leaves the stream's schedule alone; it is reached once the
  // host is past the stream's last op.
  Stream& st = streams_[s];
  ++st.pos;
  if (st.clock.size() <= s) st.clock.resize(s + 1, 0);
  st.clock[s] = st.pos;
  return std::max(now_, st.last_end);
}

void ReferenceModel::AfterCompletion(bool release) {
  ++epoch_;
  for (Pool& pool : pools_) {
    FlushCaches(pool);
    PromoteIf(pool, /*observed=*/false, [this](const Block& b) { return Proven(b.stream, b.f); });
    SettleIf(pool, /*observed=*/false,
             [this](uint32_t st, uint64_t pos, uint64_t) { return Proven(st, pos); });
    if (release) Release(pool, pool.threshold);
  }
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
  // The free covers the declared streams' work too (the checker joins their
  // clocks into the free's).
  Clock next = NextClock(s);
  for (uint32_t u : it->second.uses) Join(next, streams_[u].clock);
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

// ------------------------------------------------------------------ blocks

bool ReferenceModel::Better(const Pool& pool, Ref a, Ref b) {
  const uint64_t sa = At(pool, a).size, sb = At(pool, b).size;
  if (sa != sb) return sa < sb;
  // Ties: the earlier-made reservation, then the lower offset (not the
  // address, which the system chooses differently in every process).
  const uint64_t ra = pool.res[a.r].id, rb = pool.res[b.r].id;
  return ra != rb ? ra < rb : At(pool, a).offset < At(pool, b).offset;
}

std::optional<ReferenceModel::Ref> ReferenceModel::BestFit(
    const Pool& pool, uint64_t need, const std::function<bool(Ref)>& pred) const {
  std::optional<Ref> best;
  for (size_t r = 0; r < pool.res.size(); ++r) {
    for (size_t b = 0; b < pool.res[r].blocks.size(); ++b) {
      const Ref x{r, b};
      if (At(pool, x).size < need || !pred(x)) continue;
      if (!best || Better(pool, x, *best)) best = x;
    }
  }
  return best;
}

uint64_t ReferenceModel::Missing(const Reservation& r, uint64_t offset, uint64_t len) {
  if (!r.expandable || len == 0) return 0;
  uint64_t n = 0;
  for (uint64_t g = offset / kGranule; g <= (offset + len - 1) / kGranule; ++g) {
    n += !r.mapped.contains(g);
  }
  return n;
}

ReuseRule ReferenceModel::ReadyRule(const Pool& pool, Ref x, uint32_t t) const {
  const Block& b = At(pool, x);
  if (b.offset >= pool.res[x.r].handed_out_end) return ReuseRule::kFresh;  // never handed out
  if (Observed(b)) {
    return b.observed_stream == t ? ReuseRule::kSameStream : ReuseRule::kOpportunistic;
  }
  return ReuseRule::kAfterSync;
}

void ReferenceModel::Coalesce(Reservation& r) const {
  std::vector<Block> out;
  for (const Block& b : r.blocks) {
    if (!out.empty()) {
      Block& a = out.back();
      if (a.state == State::kReady && b.state == State::kReady) {
        // Still observed if either part is; by one stream only if every
        // observed part was that stream's.
        const bool oa = Observed(a), ob = Observed(b);
        if (oa && ob) {
          if (a.observed_stream != b.observed_stream) a.observed_stream = kMixed;
        } else if (ob) {
          a.observed_epoch = b.observed_epoch;
          a.observed_stream = b.observed_stream;
        } else if (!oa) {
          a.observed_epoch = 0;
          a.observed_stream = kMixed;
        }
        a.size += b.size;
        continue;
      }
      if (a.state == State::kPending && b.state == State::kPending && a.stream == b.stream) {
        // The later free's point covers both (one stream: positions ascend).
        a.size += b.size;
        a.f = std::max(a.f, b.f);
        a.seq = std::max(a.seq, b.seq);
        a.end = std::max(a.end, b.end);
        continue;
      }
    }
    out.push_back(b);
  }
  r.blocks = std::move(out);
}

void ReferenceModel::PromoteIf(Pool& pool, bool observed,
                               const std::function<bool(const Block&)>& promote) {
  for (Reservation& r : pool.res) {
    for (Block& b : r.blocks) {
      if (b.state != State::kPending || !promote(b)) continue;
      b.state = State::kReady;
      b.observed_epoch = observed ? epoch_ : 0;
      b.observed_stream = observed ? b.stream : kMixed;
    }
    Coalesce(r);
  }
}

bool ReferenceModel::HasFreesToObserve(const Pool& pool) {
  for (const Reservation& r : pool.res) {
    for (const Block& b : r.blocks) {
      if (b.state == State::kPending || b.state == State::kDeferred) return true;
    }
  }
  return false;
}

bool ReferenceModel::PromoteObserved(Pool& pool) {
  // Complete in virtual time, or proven.
  auto complete = [this](uint32_t s, uint64_t pos, uint64_t end) {
    return end <= now_ || Proven(s, pos);
  };
  bool promoted = false;
  PromoteIf(pool, /*observed=*/true, [&](const Block& b) {
    const bool done = complete(b.stream, b.f, b.end);
    promoted |= done;
    return done;
  });
  return SettleIf(pool, /*observed=*/true, complete) || promoted;
}

bool ReferenceModel::SettleIf(Pool& pool, bool observed,
                              const std::function<bool(uint32_t, uint64_t, uint64_t)>& complete) {
  bool any = false;
  for (Reservation& r : pool.res) {
    bool here = false;
    for (Block& b : r.blocks) {
      if (b.state != State::kDeferred || !complete(b.stream, b.f, b.end)) continue;
      if (!std::all_of(b.uses.begin(), b.uses.end(),
                       [&](const UsePoint& u) { return complete(u.stream, u.pos, u.end); })) {
        continue;
      }
      b.state = State::kReady;
      b.uses.clear();
      b.observed_epoch = observed ? epoch_ : 0;
      b.observed_stream = kMixed;
      here = true;
    }
    if (here) Coalesce(r);
    any |= here;
  }
  return any;
}

void ReferenceModel::Carve(Pool& pool, Ref x, uint64_t need) {
  Reservation& r = pool.res[x.r];
  const Block rest = r.blocks[x.b];
  Block live;
  live.offset = rest.offset;
  live.size = need;
  live.state = State::kLive;
  r.blocks[x.b] = live;
  if (rest.size > need) {
    Block high = rest;
    high.offset += need;
    high.size -= need;
    r.blocks.insert(r.blocks.begin() + static_cast<ptrdiff_t>(x.b) + 1, high);
  }
  r.handed_out_end = std::max(r.handed_out_end, live.offset + need);
}

ReferenceModel::Ref ReferenceModel::LiveBlockAt(const Pool& pool, uintptr_t addr) const {
  for (size_t r = 0; r < pool.res.size(); ++r) {
    const Reservation& res = pool.res[r];
    if (addr < res.base || addr >= res.base + res.size) continue;
    for (size_t b = 0; b < res.blocks.size(); ++b) {
      if (res.base + res.blocks[b].offset == addr && res.blocks[b].state == State::kLive) {
        return Ref{r, b};
      }
    }
  }
  ABSL_RAW_LOG(FATAL, "the model has no live block at %p", reinterpret_cast<void*>(addr));
  return Ref{};
}

// ------------------------------------------------------------------ growth

uint64_t ReferenceModel::BudgetRoom(const Pool& pool) const {
  // Pinned pools share the host's unbounded budget, device pools their
  // device's capacity.
  uint64_t used = 0;
  for (const Pool& o : pools_) {
    if (o.pinned == pool.pinned && (pool.pinned || o.props.device == pool.props.device)) {
      used += o.reserved;
    }
  }
  return (pool.pinned ? UINT64_MAX : config_.device_capacity) - used;
}

bool ReferenceModel::MapFits(const Pool& pool, Ref x, uint64_t need) const {
  const uint64_t bytes = Missing(pool.res[x.r], At(pool, x).offset, need) * kGranule;
  if (bytes == 0) return true;
  return bytes <= pool.max_size && pool.reserved <= pool.max_size - bytes &&
         bytes <= BudgetRoom(pool);
}

uint64_t ReferenceModel::MapFor(Pool& pool, Ref x, uint64_t need, bool* remapped) {
  Reservation& r = pool.res[x.r];
  const uint64_t offset = At(pool, x).offset;
  if (!r.expandable) return 0;
  uint64_t bytes = 0;
  bool in_run = false;
  for (uint64_t g = offset / kGranule; g <= (offset + need - 1) / kGranule; ++g) {
    if (r.mapped.contains(g)) {
      in_run = false;
      continue;
    }
    r.mapped.insert(g);
    bytes += kGranule;
    if (g * kGranule < r.handed_out_end) *remapped = true;
    if (!in_run) ++pool.maps;  // one upstream call per run of unmapped granules
    in_run = true;
  }
  if (bytes != 0) {
    pool.reserved += bytes;
    pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
    pool.bytes_mapped += bytes;
  }
  return bytes;
}

absl::Status ReferenceModel::Grow(Pool& pool, uint32_t t, uint64_t need, Decision& d) {
  auto grown = [&](Ref x, bool is_new) {
    d.ok = true;
    d.ref = x;
    d.new_reservation = is_new;
    d.rule = ReadyRule(pool, x, t);
    d.mapped_bytes = MapFor(pool, x, need, &d.remapped);
  };
  const std::optional<uint64_t> whole = AlignUp(need, kGranule);
  if (!pool.expandable) {
    if (!whole || *whole > pool.max_size || pool.reserved > pool.max_size - *whole ||
        *whole > BudgetRoom(pool)) {
      return absl::OkStatus();
    }
    Reservation c;
    c.id = pool.next_id++;
    c.size = *whole;
    c.blocks.push_back(Block{.offset = 0, .size = *whole});
    pool.res.push_back(std::move(c));
    pool.reserved += *whole;
    pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
    ++pool.maps;
    pool.bytes_mapped += *whole;
    grown(Ref{pool.res.size() - 1, 0}, true);
    d.mapped_bytes = *whole;
    return absl::OkStatus();
  }
  // READY blocks spanning unmapped granules serve only here.
  auto unbacked = [&](Ref y) {
    return At(pool, y).state == State::kReady && !Backed(pool.res[y.r], At(pool, y));
  };
  const std::optional<Ref> first = BestFit(pool, need, unbacked);
  if (first && MapFits(pool, *first, need)) {
    grown(*first, false);
    return absl::OkStatus();
  }
  if (first) {
    // maxSize or the device refused: the best block whose shortfall fits.
    // The pool looks at most kProbes blocks far; with more candidates the
    // model could not say which it would reach.
    size_t candidates = 0;
    for (const Reservation& r : pool.res) {
      for (const Block& b : r.blocks) {
        candidates += b.state == State::kReady && b.size >= need && !Backed(r, b);
      }
    }
    if (candidates > kProbes) {
      return Discrepancy("model-limit", absl::StrCat(candidates, " unbacked blocks could serve ",
                                                     need, " bytes; the pool probes ", kProbes));
    }
    const uint64_t room =
        std::min(pool.max_size - std::min(pool.max_size, pool.reserved), BudgetRoom(pool));
    const std::optional<Ref> other = BestFit(pool, need, [&](Ref y) {
      return unbacked(y) && (y.r != first->r || y.b != first->b) &&
             Missing(pool.res[y.r], At(pool, y).offset, need) * kGranule <= room;
    });
    if (other) {
      grown(*other, false);
      return absl::OkStatus();
    }
  }
  // A new reservation (its id is spent even if mapping then fails).
  if (!whole || *whole > pool.max_size || pool.reserved > pool.max_size - *whole) {
    return absl::OkStatus();
  }
  Reservation r;
  r.id = pool.next_id++;
  r.size = std::max(pool.reservation_bytes, *whole);
  r.expandable = true;
  r.blocks.push_back(Block{.offset = 0, .size = r.size});
  pool.res.push_back(std::move(r));
  const Ref x{pool.res.size() - 1, 0};
  if (!MapFits(pool, x, need)) {
    pool.res.pop_back();
    return absl::OkStatus();
  }
  grown(x, true);
  return absl::OkStatus();
}

// ----------------------------------------------------------------- serving

// ------------------------------------------------------------ front caches

ReferenceModel::Pool::Cache* ReferenceModel::CacheOf(Pool& pool, uint32_t s) {
  for (Pool::Cache& c : pool.caches) {
    if (c.stream == s) return &c;
  }
  return nullptr;
}

void ReferenceModel::EnsureCache(Pool& pool, uint32_t s) {
  if (CacheOf(pool, s) == nullptr) pool.caches.push_back(Pool::Cache{s, {}, 0});
}

bool ReferenceModel::CachePush(Pool::Cache& c, const Pool::CacheEntry& e) {
  // 8 sizes x 16 blocks, 64 MiB, blocks of at most 1 MiB; a size's bin is
  // the first holding it, else the first empty one.
  if (e.size > (uint64_t{1} << 20) || c.bytes + e.size > (uint64_t{64} << 20)) return false;
  Pool::CacheBin* bin = nullptr;
  for (Pool::CacheBin& b : c.bins) {
    if (b.size == e.size && !b.entries.empty()) {
      if (b.entries.size() == 16) return false;
      bin = &b;
      break;
    }
    if (b.entries.empty() && bin == nullptr) bin = &b;
  }
  if (bin == nullptr) return false;
  bin->size = e.size;
  bin->entries.push_back(e);
  c.bytes += e.size;
  return true;
}

void ReferenceModel::MakePendingAt(Pool& pool, uintptr_t addr, uint32_t s, uint64_t f,
                                   uint64_t end) {
  const Ref x = LiveBlockAt(pool, addr);
  Block& b = At(pool, x);
  b.cached = false;
  b.state = State::kPending;
  b.stream = s;
  b.f = f;
  b.seq = pool.next_seq++;
  b.end = end;
  Coalesce(pool.res[x.r]);
}

bool ReferenceModel::FlushCache(Pool& pool, Pool::Cache& c) {
  std::vector<Pool::CacheEntry> all;
  for (Pool::CacheBin& b : c.bins) {
    all.insert(all.end(), b.entries.begin(), b.entries.end());
    b.entries.clear();
  }
  c.bytes = 0;
  if (all.empty()) return false;
  std::stable_sort(all.begin(), all.end(),
                   [](const Pool::CacheEntry& a, const Pool::CacheEntry& b) { return a.f < b.f; });
  for (const Pool::CacheEntry& e : all) MakePendingAt(pool, e.addr, c.stream, e.f, e.end);
  ++coverage_.cache_flushes;
  return true;
}

bool ReferenceModel::FlushCaches(Pool& pool) {
  bool any = false;
  for (Pool::Cache& c : pool.caches) any = FlushCache(pool, c) || any;
  return any;
}

absl::Status ReferenceModel::Serve(Pool& pool, uint32_t t, uint64_t need,
                                   const AllocObservation& obs, Decision& d, bool retried) {
  auto choose = [&](Ref x, ReuseRule rule) {
    d.ok = true;
    d.ref = x;
    d.rule = rule;
  };
  auto ready_backed = [&](Ref y) {
    return At(pool, y).state == State::kReady && Backed(pool.res[y.r], At(pool, y));
  };
  // Failing those, a READY block spanning unmapped granules whose low end is
  // mapped far enough serves without growing.
  auto mapped_low_end = [&](std::optional<Ref>* x) -> absl::Status {
    size_t candidates = 0;
    for (const Reservation& r : pool.res) {
      for (const Block& b : r.blocks) {
        candidates += b.state == State::kReady && b.size >= need && !Backed(r, b);
      }
    }
    if (candidates > kProbes) {
      return Discrepancy("model-limit", absl::StrCat(candidates, " unbacked blocks could serve ",
                                                     need, " bytes; the pool probes ", kProbes));
    }
    *x = BestFit(pool, need, [&](Ref y) {
      return At(pool, y).state == State::kReady &&
             Missing(pool.res[y.r], At(pool, y).offset, need) == 0;
    });
    d.low_end = x->has_value();
    return absl::OkStatus();
  };
  // Rule 0: T's front cache, T's most recent free of exactly the size; a
  // miss sends T's other cached frees central first.
  if (Pool::Cache* c = pool.front_cache && !retried ? CacheOf(pool, t) : nullptr) {
    for (Pool::CacheBin& bin : c->bins) {
      if (bin.size != need || bin.entries.empty()) continue;
      const Pool::CacheEntry e = bin.entries.back();
      bin.entries.pop_back();
      c->bytes -= e.size;
      const Ref y = LiveBlockAt(pool, e.addr);
      d.cache_hit = true;
      choose(y, ReuseRule::kSameStream);
      return absl::OkStatus();
    }
    FlushCache(pool, *c);
  }
  const uint64_t flushes_before = coverage_.cache_flushes;
  // Rule 1: READY (mapped) blocks and T's own pending frees.
  std::optional<Ref> x = BestFit(pool, need, [&](Ref y) {
    const Block& b = At(pool, y);
    return ready_backed(y) || (b.state == State::kPending && b.stream == t);
  });
  if (!x) {
    if (absl::Status st = mapped_low_end(&x); !st.ok()) return st;
  }
  if (x) {
    choose(*x,
           At(pool, *x).state == State::kPending ? ReuseRule::kSameStream : ReadyRule(pool, *x, t));
    return absl::OkStatus();
  }
  // Rule 2: other streams' frees T is ordered after.
  if (pool.follow) {
    const Clock next = NextClock(t);
    auto eligible = [&](Ref y) {
      const Block& b = At(pool, y);
      return b.state == State::kPending && b.stream != t && b.f <= Get(next, b.stream);
    };
    std::set<uint32_t> others;
    for (const Reservation& r : pool.res) {
      for (const Block& b : r.blocks) {
        if (b.state == State::kPending && b.stream != t) others.insert(b.stream);
      }
    }
    std::optional<Ref> exact;
    std::set<uint32_t> limited;  // streams whose search the probe bound may cut short
    for (uint32_t s : others) {
      const std::optional<Ref> best =
          BestFit(pool, need, [&](Ref y) { return eligible(y) && At(pool, y).stream == s; });
      if (!best) continue;
      size_t candidates = 0;
      for (const Reservation& r : pool.res) {
        for (const Block& b : r.blocks) {
          candidates += b.state == State::kPending && b.stream == s && b.size >= need;
        }
      }
      if (candidates > kProbes) {
        limited.insert(s);
      } else if (!exact || Better(pool, *best, *exact)) {
        exact = best;
      }
    }
    if (!limited.empty()) {
      ++coverage_.probe_limited;
      if (obs.ok && obs.rule == ReuseRule::kEventDependency) {
        // Any eligible block of a limited stream, unless an exhaustive
        // search offered a better one.
        const std::optional<Ref> got = BestFit(pool, need, [&](Ref y) {
          return Addr(pool, y) == obs.ptr && eligible(y) &&
                 (limited.contains(At(pool, y).stream) ||
                  (exact && y.r == exact->r && y.b == exact->b));
        });
        if (!got || (exact && Better(pool, *exact, *got))) {
          return Discrepancy("decision",
                             absl::StrCat("rule 2 took ", obs.ptr,
                                          ", which is no eligible block the probe bound allows"));
        }
        choose(*got, ReuseRule::kEventDependency);
        return absl::OkStatus();
      }
      // Otherwise the runtime's rule 2 found nothing, which the bound allows
      // for the limited streams.
    }
    if (exact) {
      choose(*exact, ReuseRule::kEventDependency);
      return absl::OkStatus();
    }
  }
  // Rule 3: promotion on observation, then READY blocks again.
  if (pool.opportunistic && HasFreesToObserve(pool)) {
    FlushCaches(pool);
    d.promoted |= PromoteObserved(pool);
    x = BestFit(pool, need, ready_backed);
    if (!x) {
      if (absl::Status st = mapped_low_end(&x); !st.ok()) return st;
    }
    if (x) {
      choose(*x, ReadyRule(pool, *x, t));
      return absl::OkStatus();
    }
  }
  // Front caches never make the pool grow: flushed (here or by rule 3's
  // promotion), rules 1-3 run once more.
  if (!retried && (FlushCaches(pool) || coverage_.cache_flushes != flushes_before)) {
    return Serve(pool, t, need, obs, d, /*retried=*/true);
  }
  // Waiting before growth: frees whose wait delays nothing (they end before
  // T's next op could start anyway), then, once growth would pass the soft
  // limit, any.
  // A join only while the pool holds at most 256 pending blocks
  // (MemPool::kJoinBeforeGrowthBlocks).
  if (pool.internal) {
    size_t pending = 0;
    for (const Reservation& r : pool.res) {
      for (const Block& b : r.blocks) pending += b.state == State::kPending;
    }
    const bool join = pending <= 256;
    const uint64_t by = AllocReady(t);
    bool chosen = pool.wait_before_growth &&
                  (ChooseWait(pool, t, need, by, d) || (join && ChooseJoin(pool, t, need, by, d)));
    if (!chosen && pool.reserved + need > pool.soft_limit) {
      chosen = ChooseWait(pool, t, need, UINT64_MAX, d) ||
               (join && ChooseJoin(pool, t, need, UINT64_MAX, d));
    }
    if (chosen) {
      d.before_growth = true;
      return absl::OkStatus();
    }
  }
  // Rule 4: growth.
  if (absl::Status st = Grow(pool, t, need, d); !st.ok() || d.ok) return st;
  // Rule 5: the other stream's free that came first, after a wait on it;
  // else a join.
  if (pool.internal) {
    (void)(ChooseWait(pool, t, need, UINT64_MAX, d) || ChooseJoin(pool, t, need, UINT64_MAX, d));
  }
  return absl::OkStatus();
}

uint64_t ReferenceModel::AllocReady(uint32_t t) const {
  const Stream& st = streams_[t];
  uint64_t at = std::max(now_, st.last_end);
  if (st.kind == StreamKind::kLegacy) {
    for (uint32_t b = 0; b < streams_.size(); ++b) {
      const Stream& o = streams_[b];
      if (b != t && o.device == st.device && o.kind == StreamKind::kBlocking) {
        at = std::max(at, o.last_end);
      }
    }
  } else if (st.kind == StreamKind::kBlocking) {
    at = std::max(at, streams_[LegacyStream(st.device)].last_end);
  }
  return at;
}

bool ReferenceModel::ChooseWait(Pool& pool, uint32_t t, uint64_t need, uint64_t by, Decision& d) {
  std::optional<Ref> first;
  for (size_t r = 0; r < pool.res.size(); ++r) {
    for (size_t b = 0; b < pool.res[r].blocks.size(); ++b) {
      const Block& x = pool.res[r].blocks[b];
      if (x.state != State::kPending || x.stream == t || x.size < need || x.end > by) continue;
      if (!first || x.seq < At(pool, *first).seq) first = Ref{r, b};
    }
  }
  if (!first) return false;
  const Block& b = At(pool, *first);
  d.ok = true;
  d.ref = *first;
  d.rule = ReuseRule::kInternalDependency;
  d.waits = {{b.stream, b.f}};
  d.wait_ends = {b.end};
  return true;
}

bool ReferenceModel::ChooseJoin(Pool& pool, uint32_t t, uint64_t need, uint64_t by, Decision& d) {
  // Every window of adjacent free blocks (READY wholly mapped, or PENDING of
  // any stream, other streams' only if they end by `by`) that starts at a
  // block and ends at the first block that makes it fit; more than one
  // block, at least one pending on another stream. Fewest other streams,
  // then the earliest latest free of theirs, then the lowest place.
  struct Best {
    Ref ref;
    size_t count = 0, streams = 0;
    uint64_t latest = 0;
  };
  std::optional<Best> best;
  for (size_t r = 0; r < pool.res.size(); ++r) {
    const Reservation& res = pool.res[r];
    auto usable = [&](const Block& x) {
      if (x.state == State::kReady) return Backed(res, x);
      return x.state == State::kPending && (x.stream == t || x.end <= by);
    };
    for (size_t a = 0; a < res.blocks.size(); ++a) {
      uint64_t bytes = 0, latest = 0;
      std::set<uint32_t> streams;
      size_t e = a;
      for (; e < res.blocks.size() && usable(res.blocks[e]) && bytes < need; ++e) {
        const Block& x = res.blocks[e];
        bytes += x.size;
        if (x.state == State::kPending && x.stream != t) {
          streams.insert(x.stream);
          latest = std::max(latest, x.seq);
        }
      }
      if (bytes < need || streams.empty() || e - a < 2) continue;
      const bool better =
          !best || streams.size() < best->streams ||
          (streams.size() == best->streams &&
           (latest < best->latest ||
            (latest == best->latest && (res.id != pool.res[best->ref.r].id
                                            ? res.id < pool.res[best->ref.r].id
                                            : res.blocks[a].offset < At(pool, best->ref).offset))));
      if (better) best = Best{Ref{r, a}, e - a, streams.size(), latest};
    }
  }
  if (!best) return false;
  d.ok = true;
  d.ref = best->ref;
  d.rule = ReuseRule::kInternalDependency;
  d.join_count = best->count;
  d.waits.clear();
  d.wait_ends.clear();
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> latest_of;  // stream -> (f, end)
  const Reservation& res = pool.res[best->ref.r];
  for (size_t i = best->ref.b; i < best->ref.b + best->count; ++i) {
    const Block& x = res.blocks[i];
    if (x.state != State::kPending || x.stream == t) continue;
    auto [it, fresh] = latest_of.emplace(x.stream, std::make_pair(x.f, x.end));
    if (!fresh && x.f > it->second.first) it->second = {x.f, x.end};
  }
  for (const auto& [s, fe] : latest_of) {
    d.waits.emplace_back(s, fe.first);
    d.wait_ends.push_back(fe.second);
  }
  return true;
}

void ReferenceModel::JoinBlocks(Pool& pool, const Decision& d, uint64_t need) {
  Reservation& r = pool.res[d.ref.r];
  const size_t first = d.ref.b, last = d.ref.b + d.join_count - 1;
  uint64_t before_last = 0;
  for (size_t i = first; i < last; ++i) before_last += r.blocks[i].size;
  Block& tail = r.blocks[last];
  const uint64_t from_last = need - before_last;
  Block joined;
  joined.offset = r.blocks[first].offset;
  joined.size = need;
  joined.state = State::kReady;
  if (tail.size > from_last) {
    // The remainder of the last block keeps its state.
    tail.offset += from_last;
    tail.size -= from_last;
    r.blocks.erase(r.blocks.begin() + static_cast<ptrdiff_t>(first),
                   r.blocks.begin() + static_cast<ptrdiff_t>(last));
  } else {
    r.blocks.erase(r.blocks.begin() + static_cast<ptrdiff_t>(first),
                   r.blocks.begin() + static_cast<ptrdiff_t>(last) + 1);
  }
  r.blocks.insert(r.blocks.begin() + static_cast<ptrdiff_t>(first), joined);
}

// -------------------------------------------------------------- allocation

absl::Status ReferenceModel::Alloc(int id, int p, uint32_t t, uint64_t size,
                                   const AllocObservation& obs) {
  Pool& pool = pools_[p];
  // The pool decides at the call, before the call's host cost is charged.
  const uint64_t decided_at = now_;
  const std::optional<uint64_t> rule_size = RuleSize(pool.props.type, size);
  const std::string what = absl::StrCat("alloc a", id, " of ", size, " bytes (rule size ",
                                        rule_size.value_or(0), ") on stream ", t, " from pool ", p);
  Decision d;
  auto serve = [&]() -> absl::Status {
    d = Decision{};
    if (absl::Status st = Serve(pool, t, *rule_size, obs, d); !st.ok()) {
      return Discrepancy(st.message().substr(0, st.message().find(':')),
                         absl::StrCat(what, ": ", st.message().substr(st.message().find(':') + 2),
                                      "\n", DescribePool(p)));
    }
    return absl::OkStatus();
  };
  if (rule_size && *rule_size <= pool.max_size) {
    if (absl::Status st = serve(); !st.ok()) return st;
    // Out of memory: the reclaim, when a release could help at all (the
    // request fits the pool's maximum and the device).
    const bool could_fit = pool.pinned || *rule_size <= config_.device_capacity;
    if (!d.ok && config_.oom_reclaim && could_fit) {
      uint64_t released = Reclaim(pool);
      for (Pool& other : pools_) {
        if (&other != &pool && other.pinned == pool.pinned &&
            (pool.pinned || other.props.device == pool.props.device)) {
          released += Reclaim(other);
        }
      }
      if (released != 0) {
        ++coverage_.reclaims;
        if (absl::Status st = serve(); !st.ok()) return st;
        coverage_.reclaim_rescued += d.ok;
      }
    }
  }
  coverage_.observed += d.promoted;
  // Where the runtime's answer lies, as (reservation, offset).
  auto where = [&](uintptr_t addr) -> std::string {
    for (const Reservation& r : pool.res) {
      if (r.base != 0 && addr >= r.base && addr < r.base + r.size) {
        return absl::StrCat("(r", r.id, ", +", addr - r.base, ")");
      }
    }
    return absl::StrCat(addr, " (in no reservation of the pool)");
  };
  auto model_says = [&]() -> std::string {
    if (!d.ok) return "failure";
    const Reservation& r = pool.res[d.ref.r];
    return absl::StrCat(ReuseRuleName(d.rule), " at (r", r.id, d.new_reservation ? " (new)" : "",
                        ", +", At(pool, d.ref).offset, ")");
  };
  auto mismatch = [&]() {
    return Discrepancy("decision", absl::StrCat(what, ": runtime ",
                                                obs.ok ? absl::StrCat(ReuseRuleName(obs.rule),
                                                                      " at ", where(obs.ptr))
                                                       : "failure",
                                                ", model ", model_says(), "\n", DescribePool(p)));
  };
  if (obs.ok != d.ok) return mismatch();
  if (!d.ok) {
    ++pool.failed;
    ++coverage_.failed;
    coverage_.observed_failed += d.promoted;
    return absl::OkStatus();  // no host time, no op: the call failed
  }
  const uint64_t need = *rule_size;
  Reservation& res = pool.res[d.ref.r];
  if (d.new_reservation) {
    // The runtime chose the address; it must be aligned and clear of every
    // other reservation of the runtime.
    const uint64_t align = res.expandable ? kGranule : pool.granule;
    if (obs.ptr == 0 || obs.ptr % align != 0) {
      return Discrepancy("address",
                         absl::StrCat(what, ": a new ", res.expandable ? "reservation" : "chunk",
                                      " at ", obs.ptr, ", not aligned to ", align));
    }
    for (const Pool& o : pools_) {
      for (const Reservation& r : o.res) {
        if (&r != &res && r.base < obs.ptr + res.size && obs.ptr < r.base + r.size) {
          return mismatch();
        }
      }
    }
    res.base = obs.ptr;
  }
  if (obs.ptr != Addr(pool, d.ref) || obs.rule != d.rule) return mismatch();
  const uintptr_t ptr = obs.ptr;
  const std::string took = absl::StrCat(what, " -> ", ReuseRuleName(d.rule), " at ", where(ptr));
  if (absl::Status st = CheckOccupants(pool, t, ptr, need, d.rule, d.waits, decided_at, took);
      !st.ok()) {
    return st;
  }

  // Accepted: apply it.
  for (size_t i = 0; i < d.waits.size(); ++i) {
    Enqueue(t, 0, d.wait_ends[i]);
    const auto [s, f] = d.waits[i];
    // The ordering core's documented approximation: the wait carries the
    // free's whole clock only when the free is its stream's latest op.
    if (f == streams_[s].pos) {
      Join(streams_[t].clock, streams_[s].clock);
    } else {
      streams_[t].clock[s] = std::max(streams_[t].clock[s], f);
    }
    ++pool.waits;
  }
  pool.waits_before_growth += d.before_growth ? d.waits.size() : 0;
  pool.joined += d.join_count != 0;
  coverage_.waited_before_growth += d.before_growth;
  coverage_.joined += d.join_count != 0;
  Charge();
  AdvancePoint(t);
  // Usable when T's next op could start: after the legacy-stream ordering.
  const uint64_t end = AllocReady(t);
  // The runtime makes the stream's cache at every central allocation.
  EnsureCache(pool, t);
  if (d.cache_hit) {
    At(pool, d.ref).cached = false;
    ++coverage_.cache_hits;
  } else {
    if (d.join_count != 0) JoinBlocks(pool, d, need);
    Carve(pool, d.ref, need);
  }
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
  pool.used += need;
  pool.used_high = std::max(pool.used_high, pool.used);
  ++pool.allocs;
  ++pool.by_rule[static_cast<int>(d.rule)];
  ++coverage_.by_rule[static_cast<int>(d.rule)];
  coverage_.grew += d.mapped_bytes != 0;
  coverage_.remapped += d.remapped;
  coverage_.low_end += d.low_end;
  // (Beyond the pool's first: its reservations' address space ran out.)
  coverage_.new_reservations += d.new_reservation && pool.res.size() > 1;
  return absl::OkStatus();
}

absl::Status ReferenceModel::CheckOccupants(Pool& pool, uint32_t t, uintptr_t ptr, uint64_t need,
                                            ReuseRule rule,
                                            const std::vector<std::pair<uint32_t, uint64_t>>& waits,
                                            uint64_t decided_at, const std::string& took) {
  // No byte may be shared with a live allocation of any pool.
  auto live = live_by_addr_.upper_bound(ptr + need - 1);
  if (live != live_by_addr_.begin()) {
    --live;
    const Live& other = live_.at(live->second);
    if (other.addr + other.size > ptr) {
      return Discrepancy("overlap-live", absl::StrCat(took, " overlaps live a", live->second, " [",
                                                      other.addr, ", +", other.size, ")"));
    }
  }
  // The previous occupants of the bytes handed out.
  std::vector<std::pair<uintptr_t, Freed>> occupants;
  auto it = pool.history.upper_bound(ptr);
  if (it != pool.history.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > ptr) it = prev;
  }
  for (; it != pool.history.end() && it->first < ptr + need; ++it) {
    occupants.emplace_back(it->first, it->second);
  }
  const Clock next = NextClock(t);
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
    const bool waited = std::any_of(waits.begin(), waits.end(), [&](const auto& w) {
      return f.stream == w.first && f.pos <= w.second;
    });
    auto fail = [&](absl::string_view why) {
      return Discrepancy(
          "rule-precondition",
          absl::StrCat(took, ": ", why, ": previous occupant a", f.id, f.now ? " (spFree'd)" : "",
                       " freed at ", Point(f.stream, f.pos), " ending at ", f.end, " ns; VC(T)[",
                       f.stream, "] = ", Get(next, f.stream), ", done[", f.stream,
                       "] = ", Get(done_, f.stream), ", host now ", decided_at));
    };
    // The safety invariant itself, whatever the rule.
    if (!proven && !ordered && !complete && !waited) return fail("unsafe reuse");
    // A free that waited for other streams: each of them too; and only a
    // READY block (after-sync, opportunistic) can have held it.
    for (const UsePoint& u : f.uses) {
      const bool u_proven = Proven(u.stream, u.pos);
      const bool u_complete = u.end <= decided_at;
      if (!u_proven && !u_complete && u.stream != t && Get(next, u.stream) < u.pos) {
        return fail(absl::StrCat("unsafe reuse: the use at ", Point(u.stream, u.pos), " ending at ",
                                 u.end, " is neither proven, complete nor ordered"));
      }
      if (!u_proven && !u_complete) return fail("a use of the free is neither proven nor complete");
    }
    bool consistent = true;
    switch (rule) {
      case ReuseRule::kFresh:
        return fail("fresh memory has a previous occupant");
      case ReuseRule::kAfterSync:
      case ReuseRule::kOpportunistic:
        // READY bytes: proven, spFree'd, or observed complete (counted
        // opportunistic until the next proof, after-sync after it).
        consistent = proven || complete;
        break;
      case ReuseRule::kSameStream:
        consistent = proven || complete || f.stream == t;
        break;
      case ReuseRule::kEventDependency:
        consistent = proven || (f.stream != t && ordered);
        break;
      case ReuseRule::kInternalDependency:
        // A join's READY parts held frees proven or observed complete.
        consistent = proven || ordered || waited || complete;
        break;
    }
    if (!consistent) return fail("the free does not meet the reported rule's condition");
  }
  // The bytes now belong to the new allocation: trim their records.
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
  return absl::OkStatus();
}

void ReferenceModel::FreeAsync(int id, uint32_t s) {
  Charge();
  const uint64_t end = AdvancePoint(s);
  auto node = live_.extract(id);
  const Live& a = node.mapped();
  Pool& pool = pools_[a.pool];
  live_by_addr_.erase(a.addr);
  // The declared streams the free is not already ordered after, at their
  // positions now.
  std::vector<UsePoint> uses;
  const Clock next = NextClock(s);
  for (uint32_t u : a.uses) {
    const uint64_t p = streams_[u].pos;
    if (u == s || p == 0 || Get(next, u) >= p || Proven(u, p)) continue;
    uses.push_back(UsePoint{u, p, streams_[u].last_end});
  }
  if (!uses.empty()) {
    Block& b = At(pool, LiveBlockAt(pool, a.addr));
    b.state = State::kDeferred;
    b.stream = s;
    b.f = streams_[s].pos;
    b.end = end;
    b.uses = uses;
    ++coverage_.deferred_frees;
  } else {
    // Into s's front cache (flushed first when full), or central where s
    // has none (which makes one) or the caches are off.
    const Pool::CacheEntry entry{a.addr, a.size, streams_[s].pos, end};
    Pool::Cache* c = pool.front_cache ? CacheOf(pool, s) : nullptr;
    bool cached = c != nullptr && CachePush(*c, entry);
    if (c != nullptr && !cached && FlushCache(pool, *c)) cached = CachePush(*c, entry);
    if (cached) {
      At(pool, LiveBlockAt(pool, a.addr)).cached = true;
    } else {
      MakePendingAt(pool, a.addr, s, entry.f, end);
      EnsureCache(pool, s);
    }
  }
  Freed f;
  f.id = id;
  f.size = a.size;
  f.stream = s;
  f.pos = streams_[s].pos;
  f.end = end;
  f.uses = std::move(uses);
  pool.history.emplace(a.addr, f);
  pool.used -= a.size;
  ++pool.frees;
}

void ReferenceModel::RecordUse(int id, uint32_t s) {
  std::vector<uint32_t>& uses = live_.at(id).uses;
  if (std::find(uses.begin(), uses.end(), s) == uses.end()) uses.push_back(s);
}

void ReferenceModel::FreeNow(int id) {
  Charge();
  auto node = live_.extract(id);
  const Live& a = node.mapped();
  Pool& pool = pools_[a.pool];
  live_by_addr_.erase(a.addr);
  const Ref x = LiveBlockAt(pool, a.addr);
  Block& b = At(pool, x);
  b.state = State::kReady;
  b.observed_epoch = 0;
  b.observed_stream = kMixed;
  Coalesce(pool.res[x.r]);
  Freed f;
  f.id = id;
  f.size = a.size;
  f.now = true;
  f.stream = a.stream;
  f.end = now_;
  pool.history.emplace(a.addr, f);
  pool.used -= a.size;
  ++pool.frees;
}

// ----------------------------------------------------------------- release

uint64_t ReferenceModel::Reclaim(Pool& pool) {
  const uint64_t before = pool.reserved;
  FlushCaches(pool);
  if (pool.opportunistic && HasFreesToObserve(pool)) PromoteObserved(pool);
  Release(pool, 0);
  return before - pool.reserved;
}

void ReferenceModel::Release(Pool& pool, uint64_t bound) {
  FlushCaches(pool);
  const uint64_t before = pool.reserved;
  if (pool.expandable) {
    ReleaseGranules(pool, bound);
  } else {
    ReleaseChunks(pool, bound);
  }
  coverage_.releases += pool.reserved != before;
  if (pool.reserved <= bound) return;
  // Did the bound stop it with releasable memory left?
  bool left = false;
  for (const Reservation& r : pool.res) {
    for (const Block& b : r.blocks) {
      if (b.state != State::kReady) continue;
      if (!r.expandable) {
        left |= r.blocks.size() == 1;
        continue;
      }
      for (uint64_t g = (b.offset + kGranule - 1) / kGranule; g < (b.offset + b.size) / kGranule;
           ++g) {
        left |= r.mapped.contains(g);
      }
    }
  }
  coverage_.bound_stops += left;
}

void ReferenceModel::ReleaseChunks(Pool& pool, uint64_t bound) {
  if (pool.reserved <= bound) return;
  // Wholly free chunks, largest first, then oldest.
  std::vector<size_t> order;
  for (size_t r = 0; r < pool.res.size(); ++r) {
    const Reservation& c = pool.res[r];
    if (c.blocks.size() == 1 && c.blocks[0].state == State::kReady) order.push_back(r);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Reservation &x = pool.res[a], &y = pool.res[b];
    return x.size != y.size ? x.size > y.size : x.id < y.id;
  });
  std::vector<size_t> gone;
  for (size_t r : order) {
    if (pool.reserved <= bound) break;
    if (pool.reserved - pool.res[r].size < bound) continue;  // would undershoot: skip
    pool.reserved -= pool.res[r].size;
    ++pool.unmaps;
    gone.push_back(r);
  }
  std::sort(gone.rbegin(), gone.rend());
  for (size_t r : gone) DropReservation(pool, r);
}

void ReferenceModel::ReleaseGranules(Pool& pool, uint64_t bound) {
  std::optional<uint64_t> was_empty;  // at most one: see the end
  for (const Reservation& r : pool.res) {
    if (r.mapped.empty()) was_empty = r.id;
  }
  std::vector<uint64_t> processed;  // reservations in the order their blocks were
  if (pool.reserved > bound) {
    // READY blocks holding a whole mapped granule, largest first, then older
    // reservation, then lower address.
    std::vector<Ref> order;
    for (size_t r = 0; r < pool.res.size(); ++r) {
      const Reservation& res = pool.res[r];
      for (size_t b = 0; b < res.blocks.size(); ++b) {
        const Block& x = res.blocks[b];
        if (x.state != State::kReady) continue;
        bool any = false;
        for (uint64_t g = (x.offset + kGranule - 1) / kGranule; g < (x.offset + x.size) / kGranule;
             ++g) {
          any |= res.mapped.contains(g);
        }
        if (any) order.push_back(Ref{r, b});
      }
    }
    std::sort(order.begin(), order.end(), [&](Ref a, Ref b) {
      const uint64_t sa = At(pool, a).size, sb = At(pool, b).size;
      if (sa != sb) return sa > sb;
      if (pool.res[a.r].id != pool.res[b.r].id) return pool.res[a.r].id < pool.res[b.r].id;
      return At(pool, a).offset < At(pool, b).offset;
    });
    for (Ref x : order) {
      if (pool.reserved - bound < kGranule) break;  // one more granule would undershoot
      processed.push_back(pool.res[x.r].id);
      Reservation& r = pool.res[x.r];
      const Block& b = At(pool, x);
      const uint64_t lo = (b.offset + kGranule - 1) / kGranule;
      uint64_t hi = (b.offset + b.size) / kGranule;
      // From the top down, each run of mapped granules one upstream call.
      while (hi > lo && pool.reserved - bound >= kGranule) {
        if (!r.mapped.contains(hi - 1)) {
          --hi;
          continue;
        }
        const uint64_t allowed = (pool.reserved - bound) / kGranule;
        uint64_t start = hi - 1;
        while (start > lo && r.mapped.contains(start - 1) && hi - start < allowed) --start;
        for (uint64_t g = start; g < hi; ++g) r.mapped.erase(g);
        pool.reserved -= (hi - start) * kGranule;
        ++pool.unmaps;
        hi = start;
      }
    }
  }
  // A reservation with nothing mapped (so nothing in it) goes back, but for
  // the pool's last one, which stays reserved to save a reserve per sync
  // cycle, except where address space is scarce (DVPP). When every
  // reservation ends up empty, the one kept is the one already empty before
  // (there is at most one: every release leaves at most one), else the
  // first this release unmapped.
  bool all_empty = true;
  for (const Reservation& r : pool.res) all_empty &= r.mapped.empty();
  std::optional<uint64_t> keep;
  if (all_empty && !pool.scarce && !pool.res.empty()) {
    keep = was_empty ? *was_empty : processed.front();
  }
  for (size_t r = pool.res.size(); r-- > 0;) {
    if (pool.res[r].mapped.empty() && pool.res[r].id != keep) DropReservation(pool, r);
  }
}

void ReferenceModel::DropReservation(Pool& pool, size_t r) {
  const Reservation& res = pool.res[r];
  // Only a wholly free reservation or chunk can lose its last mapped byte.
  ABSL_RAW_CHECK(res.blocks.size() == 1 && res.blocks[0].state == State::kReady,
                 "the model released a reservation or chunk that is not wholly free");
  // Its history goes with it: the address range may come back as anything.
  pool.history.erase(pool.history.lower_bound(res.base),
                     pool.history.lower_bound(res.base + res.size));
  pool.res.erase(pool.res.begin() + static_cast<ptrdiff_t>(r));
}

uint64_t ReferenceModel::LargestFree(const Pool& pool) const {
  uint64_t largest = 0;
  for (const Reservation& r : pool.res) {
    for (const Block& b : r.blocks) {
      if ((b.state == State::kLive && !b.cached) || b.state == State::kDeferred) continue;
      uint64_t usable = b.size;
      if (b.state == State::kReady && !Backed(r, b)) {
        // What it can serve without growing: its mapped low end.
        uint64_t g = b.offset / kGranule;
        while (r.mapped.contains(g)) ++g;
        usable = g * kGranule > b.offset ? std::min(b.size, g * kGranule - b.offset) : 0;
      }
      largest = std::max(largest, usable);
    }
  }
  return largest;
}

std::string ReferenceModel::DescribePool(int p) const {
  const Pool& pool = pools_[p];
  std::string out = absl::StrCat("  model's pool ", p, ": reserved ", pool.reserved, "\n");
  for (const Reservation& r : pool.res) {
    absl::StrAppend(&out, "  r", r.id, r.expandable ? " reservation" : " chunk", " of ", r.size,
                    " at ", r.base, ", handed out below +", r.handed_out_end);
    if (r.expandable) {
      absl::StrAppend(&out, ", mapped granules {", absl::StrJoin(r.mapped, ","), "}");
    }
    absl::StrAppend(&out, ":");
    for (const Block& b : r.blocks) {
      absl::StrAppend(&out, " [+", b.offset, " ", b.size, " ");
      switch (b.state) {
        case State::kLive:
          absl::StrAppend(&out, "LIVE]");
          break;
        case State::kReady:
          absl::StrAppend(&out, "READY");
          if (Observed(b)) {
            absl::StrAppend(&out, " observed(",
                            b.observed_stream == kMixed ? "mixed" : absl::StrCat(b.observed_stream),
                            ")");
          }
          absl::StrAppend(&out, "]");
          break;
        case State::kPending:
          absl::StrAppend(&out, "PENDING", Point(b.stream, b.f), " #", b.seq, " ends ", b.end, "]");
          break;
        case State::kDeferred:
          absl::StrAppend(&out, "DEFERRED", Point(b.stream, b.f), " ends ", b.end);
          for (const UsePoint& u : b.uses) {
            absl::StrAppend(&out, " use", Point(u.stream, u.pos), " ends ", u.end);
          }
          absl::StrAppend(&out, "]");
          break;
      }
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
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
  AfterCompletion(/*release=*/true);
}

void ReferenceModel::SyncEvent(int e) {
  Charge();
  const Event& ev = events_[e];
  if (!ev.recorded) return;  // nothing to wait for, nothing proven or released
  now_ = std::max(now_, ev.end);
  Prove(ev.snapshot);
  AfterCompletion(/*release=*/true);
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
  AfterCompletion(/*release=*/true);
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
  if (ready) {
    Prove(streams_[s].clock);
    AfterCompletion(/*release=*/false);
  }
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
  if (ready && ev.recorded) {
    Prove(ev.snapshot);
    AfterCompletion(/*release=*/false);
  }
  return absl::OkStatus();
}

void ReferenceModel::Trim(int pool, uint64_t min_bytes_to_keep) {
  // Observes no completion: only what is READY can go.
  Release(pools_[pool], min_bytes_to_keep);
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
    case PoolAttr::kFrontCache:
      pool.front_cache = value != 0;
      if (!pool.front_cache) FlushCaches(pool);
      break;
    case PoolAttr::kWaitBeforeGrowth:
      pool.wait_before_growth = value != 0;
      break;
    case PoolAttr::kSoftReservedLimit:
      pool.soft_limit = value;
      break;
    case PoolAttr::kReservedMemCurrent:
    case PoolAttr::kUsedMemCurrent:
    case PoolAttr::kGrowth:
    case PoolAttr::kAllocationType:
    case PoolAttr::kExportHandleTypes:
    case PoolAttr::kLocationId:
    case PoolAttr::kLocationType:
    case PoolAttr::kMaxPoolSize:
    case PoolAttr::kHwDecompressEnabled:
      break;  // read-only; the executor never sets them
  }
}

// ------------------------------------------------------------------ checks

absl::Status ReferenceModel::CheckPool(int p, const PoolStats& s, const PoolAttrs& attrs,
                                       const std::function<bool(uintptr_t)>& owned) const {
  const Pool& pool = pools_[p];
  auto field = [&](absl::string_view name, uint64_t got, uint64_t want) -> absl::Status {
    if (got == want) return absl::OkStatus();
    return Discrepancy("stats", absl::StrCat("pool ", p, " ", name, " is ", got, ", model says ",
                                             want, "\n", DescribePool(p)));
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
      {"waitsBeforeGrowth", {s.waits_before_growth, pool.waits_before_growth}},
      {"joinedReuses", {s.joined_reuses, pool.joined}},
      {"upstreamMaps", {s.upstream_maps, pool.maps}},
      {"upstreamUnmaps", {s.upstream_unmaps, pool.unmaps}},
      {"upstreamBytesMapped", {s.upstream_bytes_mapped, pool.bytes_mapped}},
      {"largestFreeBlock", {s.largest_free_block, LargestFree(pool)}},
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
      {"attr Growth",
       {attrs[8],
        static_cast<uint64_t>(pool.expandable ? PoolGrowth::kExpandable : PoolGrowth::kChunked)}},
  };
  for (const auto& [name, v] : fields) {
    if (absl::Status st = field(name, v.first, v.second); !st.ok()) return st;
  }
  const double frag =
      s.reserved_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(s.used_bytes) / s.reserved_bytes;
  if (s.fragmentation != frag) {
    return Discrepancy(
        "stats", absl::StrCat("pool ", p, " fragmentation ", s.fragmentation, ", expected ", frag));
  }
  // The runtime holds exactly the model's reservations and chunks (the
  // released ones are checked by their absence from the stats above; their
  // addresses may already belong to another pool).
  for (const Reservation& r : pool.res) {
    if (!owned(r.base) || !owned(r.base + r.size - 1)) {
      return Discrepancy("reservations", absl::StrCat("pool ", p, " r", r.id, " [", r.base, ", +",
                                                      r.size, ") is not the runtime's"));
    }
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
