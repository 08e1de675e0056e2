#include "src/ordering/ordering.h"

#include <algorithm>

#include "src/util/check.h"

namespace streampool::internal {

StreamIndex Ordering::NextSlot() const {
  return free_slots_.empty() ? static_cast<StreamIndex>(streams_.size()) : free_slots_.back();
}

StreamIndex Ordering::AddStream(int device, StreamKind kind) {
  SP_CHECK(device >= 0);
  const StreamIndex s = NextSlot();
  if (devices_.size() <= static_cast<size_t>(device)) devices_.resize(device + 1);
  if (s == streams_.size()) {
    streams_.emplace_back(device, kind);
  } else {
    // A reused slot keeps its position and clock (the epoch tag; see the
    // header); everything else is the new stream's.
    SP_CHECK(kind != StreamKind::kLegacy && streams_[s].retired);
    free_slots_.pop_back();
    StreamState& st = streams_[s];
    if (st.kind == StreamKind::kBlocking) {
      // The old incarnation's work is complete (the caller checked): no
      // legacy op of its device needs to wait for the slot any more.
      std::vector<BlockingStream>& old = devices_[st.device].blocking;
      auto it =
          std::lower_bound(old.begin(), old.end(), s,
                           [](const BlockingStream& b, StreamIndex k) { return b.stream < k; });
      SP_CHECK(it != old.end() && it->stream == s);
      old.erase(it);
    }
    st.device = device;
    st.kind = kind;
    st.legacy_seen = 0;
    st.retired = false;
  }
  DeviceState& d = devices_[device];
  if (kind == StreamKind::kLegacy) {
    SP_CHECK(d.legacy == kNoStream);
    d.legacy = s;
  } else if (kind == StreamKind::kBlocking) {
    auto it = std::lower_bound(d.blocking.begin(), d.blocking.end(), s,
                               [](const BlockingStream& b, StreamIndex k) { return b.stream < k; });
    d.blocking.insert(it, BlockingStream{s, 0});
  }
  return s;
}

void Ordering::RetireStream(StreamIndex s) {
  StreamState& st = streams_[s];
  SP_CHECK(st.kind != StreamKind::kLegacy && !st.retired);
  st.retired = true;
}

void Ordering::ReuseSlot(StreamIndex s) {
  SP_CHECK(streams_[s].retired);
  free_slots_.push_back(s);
}

void Ordering::RaiseLegacy(DeviceState& d, StreamIndex s, Position p) {
  // The own entry is pos(legacy), never stored.
  if (s != d.legacy && d.legacy_clock.Raise(s, p)) ++d.version;
}

void Ordering::FoldSharedIntoLegacy(DeviceState& d, const SharedClock& shared) {
  if (shared.owner == d.legacy) return;  // an earlier version of this very clock
  SharedClock* before = nullptr;
  for (SharedClock& f : d.folded) {
    if (f.owner == shared.owner) before = &f;
  }
  if (before == nullptr || shared.version > before->version) {
    // Only what changed since the last snapshot joined: the legacy clock
    // holds that one already.
    ClockTrie::ForEachChanged(shared.table, before != nullptr ? before->table : ClockTrie(),
                              [&](StreamIndex s, Position p) { RaiseLegacy(d, s, p); });
    if (before == nullptr) {
      d.folded.push_back(shared);
    } else {
      before->table = shared.table;
      before->version = shared.version;
    }
  }
  RaiseLegacy(d, shared.owner, shared.at);
}

void Ordering::FoldIntoLegacy(DeviceState& d, const VectorClock& c) {
  for (const SharedClock& sh : c.shared()) FoldSharedIntoLegacy(d, sh);
  c.ForEachOwn([&](StreamIndex s, Position p) { RaiseLegacy(d, s, p); });
}

Position Ordering::Enqueue(StreamIndex s,
                           absl::InlinedVector<std::pair<StreamIndex, Position>, 2>* joined) {
  SP_DCHECK(s < streams_.size());
  StreamState& st = streams_[s];
  if (st.kind == StreamKind::kLegacy) {
    // The legacy stream's op waits for all prior work of every blocking
    // stream of its device (destroyed ones included: their work still runs).
    DeviceState& d = devices_[st.device];
    for (BlockingStream& b : d.blocking) {
      const Position other_pos = pos(b.stream);
      if (other_pos <= b.seen) continue;
      b.seen = other_pos;
      if (other_pos <= d.legacy_clock.Get(b.stream)) continue;
      if (joined != nullptr) joined->emplace_back(b.stream, other_pos);
      FoldIntoLegacy(d, streams_[b.stream].clock);
      RaiseLegacy(d, b.stream, other_pos);
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) {
      const Position legacy_pos = pos(legacy);
      if (legacy_pos > st.legacy_seen) {
        if (joined != nullptr) joined->emplace_back(legacy, legacy_pos);
        st.clock.JoinShared(LegacySnapshot(devices_[st.device]));
        st.legacy_seen = legacy_pos;
      }
    }
  }
  const Position p = st.pos.load(std::memory_order_relaxed) + 1;
  st.pos.store(p, std::memory_order_release);
  return p;
}

void Ordering::JoinInto(StreamIndex s, const VectorClock& snapshot) {
  StreamState& st = streams_[s];
  if (st.kind == StreamKind::kLegacy) {
    FoldIntoLegacy(devices_[st.device], snapshot);
  } else {
    st.clock.Join(snapshot);
  }
}

void Ordering::OrderAfterPoint(StreamIndex s, StreamIndex on, Position at) {
  // Only the one component is known without keeping every op's clock; the
  // missing transitive entries make later reuse decisions conservative, never
  // unsafe.
  StreamState& st = streams_[s];
  if (st.kind == StreamKind::kLegacy) {
    RaiseLegacy(devices_[st.device], on, at);
  } else {
    st.clock.Raise(on, at);
  }
}

VectorClock Ordering::clock(StreamIndex s) const {
  const StreamState& st = streams_[s];
  if (st.kind == StreamKind::kLegacy) {
    VectorClock c;
    c.JoinShared(LegacySnapshot(devices_[st.device]));
    return c;
  }
  VectorClock c = st.clock;
  c.Raise(s, pos(s));
  return c;
}

VectorClock Ordering::PointClock(StreamIndex t) const {
  const StreamState& st = streams_[t];
  VectorClock out = clock(t);
  if (st.kind == StreamKind::kLegacy) {
    for (const BlockingStream& b : devices_[st.device].blocking) {
      out.Join(streams_[b.stream].clock);
      out.Raise(b.stream, pos(b.stream));
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) out.JoinShared(LegacySnapshot(devices_[st.device]));
  }
  return out;
}

Position Ordering::OrderedAfter(StreamIndex t, StreamIndex s) const {
  if (t == s) return pos(t);
  const StreamState& st = streams_[t];
  if (st.kind == StreamKind::kLegacy) {
    const DeviceState& d = devices_[st.device];
    Position known = d.legacy_clock.Get(s);
    const StreamState& other = streams_[s];
    if (other.kind == StreamKind::kBlocking && other.device == st.device) {
      // The next legacy op joins pos(s), and no clock holds more of s.
      return std::max(known, pos(s));
    }
    for (const BlockingStream& b : d.blocking) {
      known = std::max(known, streams_[b.stream].clock.Get(s));
    }
    return known;
  }
  Position known = st.clock.Get(s);
  if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) {
      known = std::max(known, s == legacy ? pos(legacy) : devices_[st.device].legacy_clock.Get(s));
    }
  }
  return known;
}

size_t Ordering::ClockEntries() const {
  ClockFootprint footprint;
  for (size_t s = 0; s < streams_.size(); ++s) footprint.Add(streams_[s].clock);
  for (const DeviceState& d : devices_) {
    footprint.Add(d.legacy_clock);
    for (const SharedClock& f : d.folded) footprint.Add(f.table);
  }
  footprint.Add(done_);
  return footprint.entries();
}

}  // namespace streampool::internal
