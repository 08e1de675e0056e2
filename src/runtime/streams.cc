#include "src/runtime/streams.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/runtime/graphs.h"
#include "src/util/check.h"

namespace streampool::internal {

using StreamRec = RuntimeCore::StreamRec;
// Streams alive at once (slots): the widest clock we are willing to keep.
constexpr size_t kMaxStreamsPerRuntime = 1 << 16;

absl::StatusOr<uint64_t> Streams::CreateStream(int device, bool non_blocking) {
  return NewStream(device, non_blocking, /*adopt=*/false, nullptr);
}

absl::StatusOr<uint64_t> Streams::CreateStreamFromNative(int device, void* native) {
  if (absl::Status s = c_.devices.Check(device); !s.ok()) return s;
  {
    MutexLock order_lock(&c_.seq.mu());
    if (c_.seq.adapter() == nullptr) {
      return absl::UnimplementedError(
          "only CUDA and StreamAdapter runtimes have native streams to adopt");
    }
  }
  // CUDA's NULL stream is the device's legacy stream, which exists already.
  if (native == nullptr && c_.cuda != nullptr) return c_.devices[device].legacy_stream;
  if (native == nullptr) return absl::InvalidArgumentError("NULL native stream");
  return NewStream(device, /*non_blocking=*/true, /*adopt=*/true, native);
}

absl::StatusOr<uint64_t> Streams::NewStream(int device, bool non_blocking, bool adopt,
                                            void* native) {
  if (absl::Status s = c_.devices.Check(device); !s.ok()) return s;
  if (!c_.streams.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's stream handles are used up");
  }
  // A destroyed stream's slot once nothing can refer to its positions, else
  // a new one (src/ordering/ordering.h, "Slot reuse").
  RecycleSlots();
  MutexLock order_lock(&c_.seq.mu());
  const StreamIndex idx = c_.seq.ordering().NextSlot();
  if (idx == c_.seq.ordering().stream_count() && idx >= kMaxStreamsPerRuntime) {
    return absl::ResourceExhaustedError(
        "too many streams alive (or destroyed with work not yet proven complete) in this runtime");
  }
  if (adopt && c_.native != nullptr) {
    // The driver says what the stream is (and whether it orders with the
    // legacy stream); an embedder's adapter cannot, so its adopted streams
    // are taken as non-blocking: no order is assumed that may not exist.
    absl::StatusOr<StreamAdapter::NativeStream> wrapped =
        c_.native->Adopt(device, native, &non_blocking);
    if (!wrapped.ok()) return wrapped.status();
    c_.seq.adapter()->BindAdopted(idx, *wrapped, /*wrapped=*/true);
  } else if (adopt) {
    c_.seq.adapter()->BindAdopted(idx, native);
  } else if (c_.seq.adapter() != nullptr) {
    // The native stream first: if the embedder cannot make one, nothing changes.
    absl::Status bound = c_.seq.adapter()->BindStream(idx, device, /*legacy=*/false, non_blocking);
    if (!bound.ok()) return bound;
  }
  try {
    c_.seq.executor()->AddStream(idx);
  } catch (const std::system_error& e) {
    // No thread for the stream's worker: an error, with nothing changed.
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start the stream's worker thread: ", e.what()));
  }
  c_.seq.ChargeCallLocked();
  SP_CHECK(c_.seq.ordering().AddStream(
               device, non_blocking ? StreamKind::kNonBlocking : StreamKind::kBlocking) == idx);
  absl::StatusOr<uint64_t> added = c_.streams.Add([&](StreamRec& r, uint64_t) {
    r.index = idx;
    r.device = device;
    r.legacy = false;
  });
  SP_CHECK(added.ok());  // room was checked above
  const uint64_t h = *added;
  if (idx == c_.stream_handles.size()) {
    c_.stream_handles.push_back(h);
  } else {
    c_.stream_handles[idx] = h;
  }
  return h;
}

absl::Status Streams::DestroyStream(uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if ((*rec)->legacy) return absl::InvalidArgumentError("the legacy stream cannot be destroyed");
  c_.graphs->StreamDestroyed((*rec)->index);
  c_.seq.ChargeCall();
  // Enqueued work still completes and pending frees stay valid; the slot is
  // reused once that work is complete and no pool holds those frees
  // (RecycleSlots). A recorded timeline names streams by slot for the
  // runtime's life, so there slots are never reused.
  const StreamIndex idx = (*rec)->index;
  c_.stream_handles[idx] = 0;
  c_.streams.Remove(s);
  c_.fast.Invalidate();
  // Its frees waiting in front caches go central (where they stay pending on
  // the dead stream until proven or observed complete).
  c_.pools.ForEachMemPool([idx](MemPool& pool) {
    MutexLock pool_lock(&pool.central_mu());
    pool.RetireCache(idx);
  });
  MutexLock order_lock(&c_.seq.mu());
  if (c_.seq.sim() == nullptr || !c_.seq.sim()->record_timeline()) {
    c_.seq.ordering().RetireStream(idx);
    retired_slots_.push_back(idx);
  }
  c_.seq.executor()->RemoveStream(idx);
  return absl::OkStatus();
}

bool Streams::SlotIdle(StreamIndex s) {
  Position last;
  {
    MutexLock order_lock(&c_.seq.mu());
    last = c_.seq.ordering().pos(s);
    if (c_.seq.ExecutedThrough(s) < last) return false;
  }
  // The dead stream's frees are observed complete: pools whose opportunistic
  // switch is on promote them, as rule 3 would; a pool in strict mode keeps
  // them pending (and the slot retired) until a sync proves them.
  auto settle = [s, last](MemPool& pool) {
    MutexLock pool_lock(&pool.central_mu());
    if (pool.HasPendingOn(s) && pool.reuse_allow_opportunistic()) {
      pool.PromoteObservedOn(s, last);
    }
    return !pool.HasPendingOn(s);
  };
  bool idle = true;
  c_.pools.ForEachMemPool([&](MemPool& pool) { idle = settle(pool) && idle; });
  return idle;
}

void Streams::RecycleSlots() {
  // A few checks per call, round robin: CreateStream stays O(1) however many
  // destroyed streams still have work running or frees pending.
  constexpr size_t kChecksPerCall = 4;
  const size_t checks = std::min(retired_slots_.size(), kChecksPerCall);
  for (size_t n = 0; n < checks && !retired_slots_.empty(); ++n) {
    if (recycle_cursor_ >= retired_slots_.size()) recycle_cursor_ = 0;
    const StreamIndex s = retired_slots_[recycle_cursor_];
    if (SlotIdle(s)) {
      // Every position of the old incarnation is complete: say so, since the
      // executor reports completion by ops and its successor's ops come next.
      MutexLock order_lock(&c_.seq.mu());
      VectorClock proof;
      proof.Raise(s, c_.seq.ordering().pos(s));
      c_.seq.ordering().MarkComplete(proof);
      c_.seq.ordering().ReuseSlot(s);
      c_.index.DropUsesOf(s);
      retired_slots_[recycle_cursor_] = retired_slots_.back();
      retired_slots_.pop_back();
    } else {
      ++recycle_cursor_;
    }
  }
}

absl::StatusOr<uint64_t> Streams::LegacyStream(int device) {
  if (absl::Status s = c_.devices.Check(device); !s.ok()) return s;
  return c_.devices[device].legacy_stream;  // a getter: no host time charged
}

absl::Status Streams::RefuseIfCapturing(StreamIndex s) {
  Captures::Session* session = c_.captures.Of(s);
  if (session == nullptr) return c_.captures.CheckUnsafeCall();
  // A capturing stream has nothing to wait for: its work is not enqueued.
  Captures::Invalidate(session);
  return CaptureError(spErrorStreamCaptureUnsupported,
                      "synchronize or query of a capturing stream");
}

absl::Status Streams::StreamSynchronize(uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (absl::Status st = RefuseIfCapturing((*rec)->index); !st.ok()) return st;
  c_.seq.ChargeCall();
  const StreamIndex idx = (*rec)->index;
  return sync_.SyncStreams({&idx, 1});
}

absl::Status Streams::StreamQuery(uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (absl::Status st = RefuseIfCapturing((*rec)->index); !st.ok()) return st;
  c_.seq.ChargeCall();
  const StreamIndex idx = (*rec)->index;
  VectorClock proof;
  {
    MutexLock order_lock(&c_.seq.mu());
    c_.seq.executor()->RunDueEffects();
    if (c_.seq.ExecutedThrough(idx) < c_.seq.ordering().pos(idx)) {
      return absl::UnavailableError("stream has work pending");
    }
    proof = c_.seq.ordering().clock(idx);
  }
  sync_.Proven(proof);
  return absl::OkStatus();
}

absl::Status Streams::DeviceSynchronize(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (absl::Status st = c_.captures.CheckUnsafeCall(); !st.ok()) return st;
  c_.seq.ChargeCall();
  std::vector<StreamIndex> streams;
  {
    MutexLock order_lock(&c_.seq.mu());
    streams = c_.seq.StreamsOfDevice(device);
  }
  return sync_.SyncStreams(streams);
}

absl::StatusOr<void*> Streams::NativeStream(uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  MutexLock order_lock(&c_.seq.mu());
  if (c_.seq.adapter() == nullptr) {
    return absl::UnimplementedError("simulator and threads runtimes have no native streams");
  }
  StreamAdapter::NativeStream native = c_.seq.adapter()->native((*rec)->index);
  return c_.native != nullptr ? c_.native->UserStream(native) : native;
}

absl::StatusOr<StreamIndex> Streams::StreamIndexOf(uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  return (*rec)->index;
}

}  // namespace streampool::internal
