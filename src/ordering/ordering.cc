#include "src/ordering/ordering.h"

#include "src/util/check.h"

namespace streampool::internal {

StreamIndex Ordering::NextSlot() const {
  return free_slots_.empty() ? static_cast<StreamIndex>(streams_.size()) : free_slots_.back();
}

StreamIndex Ordering::AddStream(int device, StreamKind kind) {
  SP_CHECK(device >= 0);
  const StreamIndex s = NextSlot();
  if (s == streams_.size()) {
    streams_.emplace_back(device, kind);
  } else {
    // A reused slot keeps its position and clock (the epoch tag; see the
    // header); everything else is the new stream's.
    SP_CHECK(kind != StreamKind::kLegacy && streams_[s].retired);
    free_slots_.pop_back();
    StreamState& st = streams_[s];
    st.device = device;
    st.kind = kind;
    st.legacy_seen = 0;
    st.retired = false;
  }
  if (kind == StreamKind::kLegacy) {
    if (legacy_by_device_.size() <= static_cast<size_t>(device)) {
      legacy_by_device_.resize(device + 1, kNoStream);
    }
    SP_CHECK(legacy_by_device_[device] == kNoStream);
    legacy_by_device_[device] = s;
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

StreamIndex Ordering::LegacyOf(int device) const {
  return static_cast<size_t>(device) < legacy_by_device_.size() ? legacy_by_device_[device]
                                                                : kNoStream;
}

Position Ordering::Enqueue(StreamIndex s,
                           absl::InlinedVector<std::pair<StreamIndex, Position>, 2>* joined) {
  SP_DCHECK(s < streams_.size());
  StreamState& st = streams_[s];
  if (st.kind == StreamKind::kLegacy) {
    // The legacy stream's op waits for all prior work of every blocking
    // stream of its device (destroyed ones included: their work still runs).
    for (StreamIndex b = 0; b < streams_.size(); ++b) {
      const StreamState& other = streams_[b];
      if (b == s || other.device != st.device || other.kind != StreamKind::kBlocking) continue;
      const Position other_pos = pos(b);
      if (other_pos > st.clock.Get(b)) {
        if (joined != nullptr) joined->emplace_back(b, other_pos);
        JoinClockOf(b, st.clock);
      }
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) {
      const Position legacy_pos = pos(legacy);
      if (legacy_pos > st.legacy_seen) {
        if (joined != nullptr) joined->emplace_back(legacy, legacy_pos);
        JoinClockOf(legacy, st.clock);
        st.legacy_seen = legacy_pos;
      }
    }
  }
  const Position p = st.pos.load(std::memory_order_relaxed) + 1;
  st.pos.store(p, std::memory_order_release);
  st.clock.Raise(s, p);
  return p;
}

void Ordering::JoinInto(StreamIndex s, const VectorClock& snapshot) {
  streams_[s].clock.Join(snapshot);
}

void Ordering::OrderAfterPoint(StreamIndex s, StreamIndex on, Position at) {
  // Only the one component is known without keeping every op's clock; the
  // missing transitive entries make later reuse decisions conservative, never
  // unsafe.
  streams_[s].clock.Raise(on, at);
}

VectorClock Ordering::PointClock(StreamIndex t) const {
  const StreamState& st = streams_[t];
  VectorClock out = clock(t);
  if (st.kind == StreamKind::kLegacy) {
    for (StreamIndex b = 0; b < streams_.size(); ++b) {
      const StreamState& other = streams_[b];
      if (b == t || other.device != st.device || other.kind != StreamKind::kBlocking) continue;
      JoinClockOf(b, out);
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) JoinClockOf(legacy, out);
  }
  return out;
}

Position Ordering::OrderedAfter(StreamIndex t, StreamIndex s) const {
  const StreamState& st = streams_[t];
  Position known = Entry(t, s);
  if (st.kind == StreamKind::kLegacy) {
    for (StreamIndex b = 0; b < streams_.size(); ++b) {
      const StreamState& other = streams_[b];
      if (b == t || other.device != st.device || other.kind != StreamKind::kBlocking) continue;
      known = std::max(known, Entry(b, s));
    }
  } else if (st.kind == StreamKind::kBlocking) {
    const StreamIndex legacy = LegacyOf(st.device);
    if (legacy != kNoStream) known = std::max(known, Entry(legacy, s));
  }
  return known;
}

}  // namespace streampool::internal
