#include "tests/model/from_trace.h"

#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streampool::model {
namespace {

namespace ops = internal::trace;

class Converter {
 public:
  explicit Converter(const replay::Trace& trace) : trace_(trace) {}

  absl::StatusOr<Program> Run() && {
    p_.device_count = static_cast<int>(trace_.HeaderNumber("device_count").value_or(1));
    p_.device_capacity = trace_.HeaderNumber("device_capacity").value_or(p_.device_capacity);
    p_.api_call_ns = trace_.HeaderNumber("api_call_ns").value_or(0);
    p_.copy_bytes_per_us = trace_.HeaderNumber("copy_bytes_per_us").value_or(1000000);
    if (p_.copy_bytes_per_us == 0) p_.copy_bytes_per_us = 1000000;
    p_.oom_reclaim = trace_.HeaderNumber("oom_reclaim").value_or(0) != 0;
    if (auto it = trace_.header.find("backing"); it != trace_.header.end()) {
      p_.backing = it->second == "host" ? Backing::kHost : Backing::kAddressOnly;
    }
    for (const replay::TracePool& pool : trace_.pools) {
      if (absl::Status st = DeclarePool(pool); !st.ok()) return st;
    }
    // Streams the trace makes by using them: blocking, on device 0; stream 0
    // is device 0's legacy stream.
    p_.streams.resize(trace_.stream_ids.size());
    p_.streams[0].kind = StreamKind::kLegacy;
    made_.assign(trace_.stream_ids.size(), false);
    p_.events = static_cast<int>(trace_.event_ids.size());
    for (const replay::TraceOp& op : trace_.ops) {
      line_ = op.line;
      if (ops::IsGraphOp(op.op)) return Unmodelled("a graph op");
      if (absl::Status st = std::visit(*this, op.op); !st.ok()) return st;
    }
    return std::move(p_);
  }

  absl::Status operator()(const ops::Alloc& o) {
    if (o.decision.graph) return Unmodelled("an allocation in a capture");
    int pool = static_cast<int>(o.pool);
    if (o.pool == ops::kNoPool) {
      // The replay's own pool, at the settings a pool is made with.
      if (!own_pool_) {
        own_pool_ = static_cast<int>(p_.pools.size());
        p_.pools.push_back(PoolDecl{});
      }
      pool = *own_pool_;
    }
    return Emit(AllocOp{Id(o.id), pool, Stream(o.stream), o.size});
  }
  // The ops the model's instructions are (program.h), as they are: the
  // trace's dense numbers are the program's slots.
  template <typename T>
  requires std::is_constructible_v<Instruction, T> absl::Status operator()(const T& o) {
    return Emit(o);
  }
  absl::Status operator()(const ops::Kernel& o) {
    return Emit(KernelOp{Stream(o.stream), o.ns, {}});
  }
  absl::Status operator()(const ops::Copy& o) {
    const unsigned __int128 ns =
        static_cast<unsigned __int128>(o.bytes) * 1000 / p_.copy_bytes_per_us;
    return Emit(KernelOp{Stream(o.stream), ns > UINT64_MAX ? UINT64_MAX : uint64_t(ns), {}});
  }
  absl::Status operator()(const ops::Host& o) { return Emit(KernelOp{Stream(o.stream), 0, {}}); }
  absl::Status operator()(const ops::Attr& o) {
    // The kind that sets the attribute (the ops' attributes are all
    // settings, none a watermark's reset).
    for (int k = 0; k <= static_cast<int>(kLastSetAttrKind); ++k) {
      const auto kind = static_cast<SetAttrKind>(k);
      if (PoolAttrOf(kind) == o.attr) {
        return Emit(SetAttrOp{static_cast<int>(o.pool), kind, o.value});
      }
    }
    return Unmodelled("attr of a setting the model does not have");
  }
  absl::Status operator()(const ops::StreamCreate& o) {
    StreamDecl d;
    d.device = static_cast<int>(o.device);
    d.kind = o.flags == 2   ? StreamKind::kLegacy
             : o.flags == 1 ? StreamKind::kNonBlocking
                            : StreamKind::kBlocking;
    if (!made_[o.stream]) {
      made_[o.stream] = true;
      if (o.stream != 0) p_.streams[o.stream] = d;
      return absl::OkStatus();
    }
    const StreamDecl& was = p_.streams[o.stream];
    if (was.device != d.device || was.kind != d.kind) {
      return Unmodelled("a stream made again on another device or of another kind");
    }
    return Emit(CreateStreamOp{Stream(o.stream)});
  }
  absl::Status operator()(const ops::StreamDestroy& o) {
    made_[o.stream] = true;  // a later `stream` line makes it again
    return Emit(DestroyStreamOp{Stream(o.stream)});
  }
  // The model's events are its slots, made up front and never destroyed.
  absl::Status operator()(const ops::EventCreate&) { return absl::OkStatus(); }
  absl::Status operator()(const ops::EventDestroy&) { return absl::OkStatus(); }
  // Its pools too (DeclarePool).
  absl::Status operator()(const ops::PoolCreate&) { return absl::OkStatus(); }
  absl::Status operator()(const ops::PoolDestroy&) { return Unmodelled("pdestroy"); }
  absl::Status operator()(const ops::Malloc&) { return Unmodelled("malloc"); }
  // Graph ops are refused before the visit: the model has no graphs.
  template <typename T>
  requires(!std::is_constructible_v<Instruction, T>) absl::Status operator()(const T&) {
    return Unmodelled("a graph op");
  }

 private:
  static int Id(uint64_t slot) { return static_cast<int>(slot); }
  static int Stream(uint64_t index) { return static_cast<int>(index); }

  absl::Status Emit(Instruction ins) {
    p_.code.push_back(std::move(ins));
    return absl::OkStatus();
  }
  absl::Status Unmodelled(absl::string_view what) const {
    return absl::UnimplementedError(
        absl::StrCat(trace_.name, ":", line_, ": ", what, ": the model has no such op"));
  }

  absl::Status DeclarePool(const replay::TracePool& t) {
    if (t.acl_rounding || t.acl_align32 || t.handle_types != 0 || t.custom_upstream ||
        t.line == replay::TracePool::Line::kImported) {
      return Unmodelled("a pool of ACL, IPC or a custom upstream");
    }
    ModelPoolProps q;
    q.type = t.type;
    q.device = t.device;
    q.max_size = t.max_size;
    q.follow = t.reuse_event;
    q.opportunistic = t.reuse_opportunistic;
    q.internal = t.reuse_internal;
    q.threshold = t.release_threshold;
    q.growth = t.growth;
    q.front_cache = t.front_cache;
    q.wait_before_growth = t.wait_before_growth;
    q.soft_limit = t.soft_limit;
    p_.pools.push_back(PoolDecl{q});
    return absl::OkStatus();
  }

  const replay::Trace& trace_;
  Program p_;
  uint32_t line_ = 0;
  std::vector<bool> made_;  // by stream: its `stream` line came
  std::optional<int> own_pool_;
};

}  // namespace

absl::StatusOr<Program> ProgramFromTrace(const replay::Trace& trace) {
  return Converter(trace).Run();
}

}  // namespace streampool::model
