#include "src/runtime/work.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"
#include "src/util/sat_time.h"

namespace streampool::internal {

using StreamRec = RuntimeCore::StreamRec;

std::function<void()> Work::MemoryEffect(void* dst, const void* src, int value, uint64_t bytes) {
  // Memory of any runtime is touched only while mapped and touchable; a range
  // that was runtime memory at enqueue and is unmapped since is skipped, as it
  // may belong to someone else by now. Other memory is the caller's.
  const Registry& reg = c_.process.registry();
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  const bool dst_managed = reg.Intersects(d, bytes);
  const bool src_managed = src != nullptr && reg.Intersects(s, bytes);
  return [&reg, dst, src, value, bytes, d, s, dst_managed, src_managed]() {
    const auto ok = [&](uintptr_t p, bool managed) {
      return managed ? reg.Intersects(p, bytes) && reg.SafeToTouch(p, bytes)
                     : reg.SafeToTouch(p, bytes);
    };
    if (!ok(d, dst_managed) || (src != nullptr && !ok(s, src_managed))) return;
    if (src != nullptr) {
      std::memmove(dst, src, bytes);
    } else {
      std::memset(dst, value, bytes);
    }
  };
}

absl::Status Work::LaunchKernel(uint64_t s, uint64_t duration_ns,
                                absl::Span<const Access> accesses) {
  return EnqueueKernel(s, duration_ns, nullptr, /*needs_body=*/false, accesses);
}

absl::Status Work::LaunchWork(uint64_t s, uint64_t duration_ns, std::function<void()> work,
                              absl::Span<const Access> accesses) {
  return EnqueueKernel(s, duration_ns, std::move(work), /*needs_body=*/true, accesses);
}

absl::Status Work::EnqueueKernel(uint64_t s, uint64_t duration_ns, std::function<void()> body,
                                 bool needs_body, absl::Span<const Access> accesses) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (needs_body && !body) return absl::InvalidArgumentError("NULL work function");
  for (const Access& a : accesses) {
    if (a.ptr == nullptr && a.size != 0) {
      return absl::InvalidArgumentError("kernel access with a NULL pointer");
    }
  }
  if (absl::StatusOr<bool> captured =
          Capture(**rec,
                  [&] {
                    return KernelNode{duration_ns, {accesses.begin(), accesses.end()}, body};
                  });
      !captured.ok() || *captured) {
    return captured.status();
  }
  MutexLock order_lock(&c_.seq.mu());
  const StreamIndex idx = (*rec)->index;
  OpDesc op;
  op.kind = OpKind::kKernel;
  op.duration_ns = duration_ns;
  if (body) op.effect = AsHostCallback(std::move(body));
  if (c_.native != nullptr) {
    // On a real device the kernel is the wait kernel; a body (an emulated
    // kernel of a face) runs on the host in stream order, after it.
    if (absl::Status st = c_.native->Kernel(c_.seq.adapter()->native(idx), duration_ns); !st.ok()) {
      return st;
    }
    if (op.effect) {
      if (absl::Status st =
              c_.native->HostFunc(c_.seq.adapter()->native(idx), std::move(op.effect));
          !st.ok()) {
        return st;
      }
    }
  }
  c_.seq.ChargeCallLocked();
  const Position p = c_.seq.EnqueueOp(idx, std::move(op));
  CheckKernelAccess(idx, p, accesses, (*rec)->device);
  return absl::OkStatus();
}

absl::Status Work::LaunchHostFunc(uint64_t s, std::function<void()> fn) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (!fn) return absl::InvalidArgumentError("NULL host function");
  if (absl::StatusOr<bool> captured = Capture(**rec, [&] { return HostNode{fn}; });
      !captured.ok() || *captured) {
    return captured.status();
  }
  MutexLock order_lock(&c_.seq.mu());
  OpDesc op;
  op.kind = OpKind::kHostFunc;
  op.effect = AsHostCallback(std::move(fn));
  if (c_.native != nullptr) {
    if (absl::Status st =
            c_.native->HostFunc(c_.seq.adapter()->native((*rec)->index), std::move(op.effect));
        !st.ok()) {
      return st;
    }
  }
  c_.seq.ChargeCallLocked();
  c_.seq.EnqueueOp((*rec)->index, std::move(op));
  return absl::OkStatus();
}

absl::Status Work::MemcpyAsync(void* dst, const void* src, uint64_t bytes, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (bytes != 0) {
    if (dst == nullptr || src == nullptr) return absl::InvalidArgumentError("NULL copy pointer");
    if (reinterpret_cast<uintptr_t>(dst) > UINTPTR_MAX - bytes ||
        reinterpret_cast<uintptr_t>(src) > UINTPTR_MAX - bytes) {
      return absl::InvalidArgumentError("copy range wraps the address space");
    }
  }
  if (absl::StatusOr<bool> captured = Capture(**rec,
                                              [&] {
                                                return MemcpyNode{dst, src, bytes};
                                              });
      !captured.ok() || *captured) {
    return captured.status();
  }
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  if (bytes == 0) return absl::OkStatus();
  OpDesc op;
  op.kind = OpKind::kCopy;
  op.duration_ns = TransferNs(bytes);
  if (c_.native != nullptr) {
    if (absl::Status st = c_.native->Copy(c_.seq.adapter()->native((*rec)->index), dst, src, bytes);
        !st.ok()) {
      return st;
    }
  } else {
    op.effect = MemoryEffect(dst, src, 0, bytes);
  }
  const Position p = c_.seq.EnqueueOp((*rec)->index, std::move(op));
  CheckCopyAccess((*rec)->index, p, src, bytes, /*write=*/false);
  CheckCopyAccess((*rec)->index, p, dst, bytes, /*write=*/true);
  return absl::OkStatus();
}

absl::Status Work::MemsetAsync(void* dst, int value, uint64_t bytes, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (bytes != 0) {
    if (dst == nullptr) return absl::InvalidArgumentError("NULL fill pointer");
    if (reinterpret_cast<uintptr_t>(dst) > UINTPTR_MAX - bytes) {
      return absl::InvalidArgumentError("fill range wraps the address space");
    }
  }
  if (absl::StatusOr<bool> captured = Capture(**rec,
                                              [&] {
                                                return MemsetNode{dst, value, bytes};
                                              });
      !captured.ok() || *captured) {
    return captured.status();
  }
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  if (bytes == 0) return absl::OkStatus();
  OpDesc op;
  op.kind = OpKind::kFill;
  op.duration_ns = TransferNs(bytes);
  if (c_.native != nullptr) {
    if (absl::Status st =
            c_.native->Fill(c_.seq.adapter()->native((*rec)->index), dst, value, bytes);
        !st.ok()) {
      return st;
    }
  } else {
    op.effect = MemoryEffect(dst, nullptr, value, bytes);
  }
  const Position p = c_.seq.EnqueueOp((*rec)->index, std::move(op));
  CheckCopyAccess((*rec)->index, p, dst, bytes, /*write=*/true);
  return absl::OkStatus();
}

absl::Status Work::EnqueueNodes(uint64_t s, absl::Span<const PlanStep> steps) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  const StreamIndex idx = (*rec)->index;
  MutexLock order_lock(&c_.seq.mu());
  OpDesc op;
  op.kind = OpKind::kKernel;
  std::vector<std::function<void()>> effects;
  for (const PlanStep& step : steps) {
    if (const auto* k = std::get_if<KernelNode>(step.params)) {
      op.duration_ns = SatAddNs(op.duration_ns, k->duration_ns);
      if (k->body) effects.push_back(AsHostCallback(k->body));
    } else if (const auto* m = std::get_if<MemcpyNode>(step.params); m && m->bytes != 0) {
      op.duration_ns = SatAddNs(op.duration_ns, TransferNs(m->bytes));
      effects.push_back(MemoryEffect(m->dst, m->src, 0, m->bytes));
    } else if (const auto* f = std::get_if<MemsetNode>(step.params); f && f->bytes != 0) {
      op.duration_ns = SatAddNs(op.duration_ns, TransferNs(f->bytes));
      effects.push_back(MemoryEffect(f->dst, nullptr, f->value, f->bytes));
    }
  }
  if (steps.size() == 1 && !std::holds_alternative<KernelNode>(*steps[0].params)) {
    op.kind = std::holds_alternative<MemcpyNode>(*steps[0].params) ? OpKind::kCopy : OpKind::kFill;
  }
  if (effects.size() == 1) {
    op.effect = std::move(effects[0]);
  } else if (!effects.empty()) {
    op.effect = [effects = std::move(effects)]() {
      for (const auto& e : effects) e();
    };
  }
  c_.seq.ChargeCallLocked();
  const Position p = c_.seq.EnqueueOp(idx, std::move(op));
  if (c_.obs.checker()) {
    for (const PlanStep& step : steps) {
      if (const auto* k = std::get_if<KernelNode>(step.params)) {
        CheckKernelAccess(idx, p, k->accesses, (*rec)->device);
      } else if (const auto* m = std::get_if<MemcpyNode>(step.params); m && m->bytes != 0) {
        CheckCopyAccess(idx, p, m->src, m->bytes, /*write=*/false);
        CheckCopyAccess(idx, p, m->dst, m->bytes, /*write=*/true);
      } else if (const auto* f = std::get_if<MemsetNode>(step.params); f && f->bytes != 0) {
        CheckCopyAccess(idx, p, f->dst, f->bytes, /*write=*/true);
      }
    }
  }
  return absl::OkStatus();
}

uint64_t Work::TransferNs(uint64_t bytes) const {
  // Saturates rather than refusing: a copy too long for representable time is
  // a valid op that never completes by host time advancing (as a kernel of
  // such a duration), and the bytes it names passed the range checks.
  return SatMulDiv(bytes, 1000, c_.config.copy_bytes_per_us);
}

absl::Status Work::HostAdvance(uint64_t ns) {
  MutexLock order_lock(&c_.seq.mu());
  // Refused rather than saturated: the caller asked for a time that is not
  // representable, and silently spending less would leave it reasoning about
  // a host time it does not have. (The per-call cost, a setting rather than a
  // request, saturates instead: see SimExecutor::HostAdvance.)
  if (!AdvanceFits(c_.seq.executor()->Now(), ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host advance of ", ns, " ns from ", c_.seq.executor()->Now(),
                     " ns would reach the end of representable time"));
  }
  c_.seq.ChargeCallLocked();
  c_.seq.executor()->HostAdvance(ns);
  return absl::OkStatus();
}

void Work::CheckKernelAccess(StreamIndex s, Position p, absl::Span<const Access> accesses,
                             int device) {
  if (!c_.obs.checker()) return;
  for (const Access& a : accesses) {
    c_.obs.checker()->OnAccess(s, p, c_.seq.ordering().clock(s), reinterpret_cast<uintptr_t>(a.ptr),
                               a.size, a.write, device);
  }
  c_.obs.CheckerAfterEvent();
}

void Work::CheckCopyAccess(StreamIndex s, Position p, const void* ptr, uint64_t bytes, bool write) {
  // Copies also move host memory the runtime never saw; only our own memory
  // is the checker's business.
  if (!c_.obs.checker()) return;
  const auto a = reinterpret_cast<uintptr_t>(ptr);
  if (c_.process.registry().RuntimeOwning(a) != c_.id) return;
  c_.obs.checker()->OnAccess(s, p, c_.seq.ordering().clock(s), a, bytes, write);
  c_.obs.CheckerAfterEvent();
}

}  // namespace streampool::internal
