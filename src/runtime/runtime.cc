// streampool::Runtime forwards to RuntimeImpl; handles are the same numbers
// the C API uses, so the two APIs can be mixed on one runtime.
#include "streampool/runtime.h"

#include <cstring>
#include <utility>

#include "src/runtime/guard.h"
#include "src/runtime/handles.h"
#include "src/runtime/runtime_impl.h"

namespace streampool {

spError_t ToCError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return spSuccess;
    case absl::StatusCode::kInvalidArgument:
      return spErrorInvalidValue;
    case absl::StatusCode::kResourceExhausted:
      return spErrorMemoryAllocation;
    case absl::StatusCode::kOutOfRange:
      return spErrorInvalidDevice;
    case absl::StatusCode::kPermissionDenied:
      return spErrorPeerAccessUnsupported;
    case absl::StatusCode::kNotFound:
      return spErrorInvalidResourceHandle;
    case absl::StatusCode::kUnavailable:
      return spErrorNotReady;
    case absl::StatusCode::kUnimplemented:
      return spErrorNotSupported;
    case absl::StatusCode::kInternal:
      return spErrorUnknown;
    default:
      return spErrorInvalidValue;
  }
}

using internal::RuntimeImpl;

Runtime::Runtime(std::shared_ptr<RuntimeImpl> impl, bool owns)
    : impl_(std::move(impl)), owns_(owns) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeConfig& config) {
  return internal::Guarded([&]() -> absl::StatusOr<std::unique_ptr<Runtime>> {
    absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl = RuntimeImpl::Create(config);
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/true));
  });
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::FromC(spRuntime_t rt) {
  const auto h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rt));
  if (internal::KindOf(h) != internal::HandleKind::kRuntime) {
    return absl::NotFoundError("not a runtime handle");
  }
  absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl = RuntimeImpl::Find(h);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/false));
}

Runtime::~Runtime() {
  // Destroying a runtime that the C API already destroyed is a no-op.
  if (owns_) RuntimeImpl::Destroy(impl_->handle()).IgnoreError();
}

spRuntime_t Runtime::c() const {
  return reinterpret_cast<spRuntime_t>(static_cast<uintptr_t>(impl_->handle()));
}
const RuntimeConfig& Runtime::config() const { return impl_->config(); }

absl::StatusOr<StreamId> Runtime::CreateStream(int device, bool non_blocking) {
  return internal::Guarded([&]() -> absl::StatusOr<StreamId> {
    auto h = impl_->CreateStream(device, non_blocking);
    if (!h.ok()) return h.status();
    return StreamId{*h};
  });
}
absl::Status Runtime::DestroyStream(StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->DestroyStream(s.value); });
}
absl::StatusOr<StreamId> Runtime::LegacyStream(int device) {
  return internal::Guarded([&]() -> absl::StatusOr<StreamId> {
    auto h = impl_->LegacyStream(device);
    if (!h.ok()) return h.status();
    return StreamId{*h};
  });
}
absl::Status Runtime::StreamSynchronize(StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->StreamSynchronize(s.value); });
}
absl::Status Runtime::StreamQuery(StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->StreamQuery(s.value); });
}
absl::Status Runtime::StreamWaitEvent(StreamId s, EventId e) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->StreamWaitEvent(s.value, e.value); });
}
absl::StatusOr<EventId> Runtime::CreateEvent() {
  return internal::Guarded([&]() -> absl::StatusOr<EventId> { return CreateEvent(0); });
}
absl::StatusOr<EventId> Runtime::CreateEvent(unsigned flags) {
  return internal::Guarded([&]() -> absl::StatusOr<EventId> {
    auto h = impl_->CreateEvent(flags);
    if (!h.ok()) return h.status();
    return EventId{*h};
  });
}
absl::Status Runtime::DestroyEvent(EventId e) {
  return internal::Guarded([&]() -> absl::Status { return impl_->DestroyEvent(e.value); });
}
absl::Status Runtime::RecordEvent(EventId e, StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->RecordEvent(e.value, s.value); });
}
absl::Status Runtime::EventSynchronize(EventId e) {
  return internal::Guarded([&]() -> absl::Status { return impl_->EventSynchronize(e.value); });
}
absl::Status Runtime::EventQuery(EventId e) {
  return internal::Guarded([&]() -> absl::Status { return impl_->EventQuery(e.value); });
}
absl::StatusOr<float> Runtime::EventElapsedMs(EventId start, EventId end) {
  return internal::Guarded(
      [&]() -> absl::StatusOr<float> { return impl_->EventElapsedMs(start.value, end.value); });
}
absl::Status Runtime::DeviceSynchronize(int device) {
  return internal::Guarded([&]() -> absl::Status { return impl_->DeviceSynchronize(device); });
}

absl::Status Runtime::LaunchKernel(StreamId s, uint64_t duration_ns,
                                   absl::Span<const Access> accesses) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->LaunchKernel(s.value, duration_ns, accesses); });
}
absl::Status Runtime::LaunchHostFunc(StreamId s, std::function<void()> fn) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->LaunchHostFunc(s.value, std::move(fn)); });
}
absl::Status Runtime::LaunchWork(StreamId s, std::function<void()> work,
                                 absl::Span<const Access> accesses, uint64_t duration_ns) {
  return internal::Guarded([&]() -> absl::Status {
    return impl_->LaunchWork(s.value, duration_ns, std::move(work), accesses);
  });
}
absl::Status Runtime::MemcpyAsync(void* dst, const void* src, uint64_t bytes, StreamId s) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->MemcpyAsync(dst, src, bytes, s.value); });
}
absl::Status Runtime::MemsetAsync(void* dst, int value, uint64_t bytes, StreamId s) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->MemsetAsync(dst, value, bytes, s.value); });
}
absl::Status Runtime::HostAdvance(uint64_t ns) {
  return internal::Guarded([&]() -> absl::Status { return impl_->HostAdvance(ns); });
}
uint64_t Runtime::HostNow() const { return impl_->HostNow(); }

absl::StatusOr<void*> Runtime::NativeStream(StreamId s) {
  return internal::Guarded([&]() -> absl::StatusOr<void*> { return impl_->NativeStream(s.value); });
}
absl::StatusOr<AllocInfo> Runtime::MallocAsync(uint64_t size, StreamId s) {
  return internal::Guarded(
      [&]() -> absl::StatusOr<AllocInfo> { return impl_->MallocAsync(size, 0, s.value); });
}
absl::StatusOr<AllocInfo> Runtime::MallocFromPoolAsync(uint64_t size, PoolId pool, StreamId s) {
  return internal::Guarded([&]() -> absl::StatusOr<AllocInfo> {
    if (pool.value == 0) return absl::NotFoundError("invalid pool handle");
    return impl_->MallocAsync(size, pool.value, s.value);
  });
}
absl::Status Runtime::FreeAsync(void* ptr, StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->FreeAsync(ptr, s.value); });
}
absl::StatusOr<void*> Runtime::Malloc(uint64_t size, int device) {
  return internal::Guarded([&]() -> absl::StatusOr<void*> { return impl_->Malloc(size, device); });
}
absl::Status Runtime::Free(void* ptr) {
  return internal::Guarded([&]() -> absl::Status { return impl_->Free(ptr); });
}
absl::StatusOr<void*> Runtime::MallocHost(uint64_t size) {
  return internal::Guarded([&]() -> absl::StatusOr<void*> { return impl_->MallocHost(size); });
}
absl::Status Runtime::FreeHost(void* ptr) {
  return internal::Guarded([&]() -> absl::Status { return impl_->FreeHost(ptr); });
}
absl::StatusOr<DeviceMemInfo> Runtime::MemGetInfo(int device) const {
  return internal::Guarded(
      [&]() -> absl::StatusOr<DeviceMemInfo> { return impl_->MemGetInfo(device); });
}
absl::StatusOr<PointerAttributes> Runtime::GetPointerAttributes(const void* ptr) const {
  return internal::Guarded(
      [&]() -> absl::StatusOr<PointerAttributes> { return impl_->GetPointerAttributes(ptr); });
}

absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props) {
  return internal::Guarded([&]() -> absl::StatusOr<PoolId> { return CreatePool(props, nullptr); });
}
absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props,
                                           std::shared_ptr<PhysicalMemory> upstream) {
  return internal::Guarded([&]() -> absl::StatusOr<PoolId> {
    auto h = impl_->CreatePool(props, std::move(upstream));
    if (!h.ok()) return h.status();
    return PoolId{*h};
  });
}
absl::Status Runtime::SetHugePageBudget(int device, uint64_t bytes) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->SetHugePageBudget(device, bytes); });
}
absl::Status Runtime::DestroyPool(PoolId pool) {
  return internal::Guarded([&]() -> absl::Status { return impl_->DestroyPool(pool.value); });
}
absl::StatusOr<PoolId> Runtime::DefaultPool(int device) const {
  return internal::Guarded([&]() -> absl::StatusOr<PoolId> {
    auto h = impl_->DefaultPool(device);
    if (!h.ok()) return h.status();
    return PoolId{*h};
  });
}
absl::StatusOr<PoolId> Runtime::CurrentPool(int device) const {
  return internal::Guarded([&]() -> absl::StatusOr<PoolId> {
    auto h = impl_->CurrentPool(device);
    if (!h.ok()) return h.status();
    return PoolId{*h};
  });
}
absl::Status Runtime::SetCurrentPool(int device, PoolId pool) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->SetCurrentPool(device, pool.value); });
}
absl::Status Runtime::SetPoolAttribute(PoolId pool, PoolAttr attr, uint64_t value) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->SetPoolAttribute(pool.value, attr, value); });
}
absl::StatusOr<uint64_t> Runtime::GetPoolAttribute(PoolId pool, PoolAttr attr) const {
  return internal::Guarded(
      [&]() -> absl::StatusOr<uint64_t> { return impl_->GetPoolAttribute(pool.value, attr); });
}
absl::Status Runtime::TrimTo(PoolId pool, uint64_t min_bytes_to_keep) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->TrimTo(pool.value, min_bytes_to_keep); });
}
absl::StatusOr<PoolStats> Runtime::GetPoolStats(PoolId pool) const {
  return internal::Guarded(
      [&]() -> absl::StatusOr<PoolStats> { return impl_->GetPoolStats(pool.value); });
}
absl::Status Runtime::CheckPoolInvariants(PoolId pool) const {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->CheckPoolInvariants(pool.value); });
}

absl::Status Runtime::SetPeerAccessible(int device, int peer_device, bool accessible) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->SetPeerAccessible(device, peer_device, accessible); });
}
absl::StatusOr<bool> Runtime::CanAccessPeer(int device, int peer_device) const {
  return internal::Guarded(
      [&]() -> absl::StatusOr<bool> { return impl_->CanAccessPeer(device, peer_device); });
}
absl::Status Runtime::SetPoolAccess(PoolId pool, absl::Span<const MemAccessDesc> descs) {
  return internal::Guarded(
      [&]() -> absl::Status { return impl_->SetPoolAccess(pool.value, descs); });
}
absl::StatusOr<MemAccessFlags> Runtime::GetPoolAccess(PoolId pool, MemLocation location) const {
  return internal::Guarded([&]() -> absl::StatusOr<MemAccessFlags> {
    return impl_->GetPoolAccess(pool.value, location);
  });
}
absl::StatusOr<int> Runtime::ExportPool(PoolId pool) {
  return internal::Guarded([&]() -> absl::StatusOr<int> { return impl_->ExportPool(pool.value); });
}
absl::StatusOr<PoolId> Runtime::ImportPool(int fd) {
  return internal::Guarded([&]() -> absl::StatusOr<PoolId> {
    auto h = impl_->ImportPool(fd);
    if (!h.ok()) return h.status();
    return PoolId{*h};
  });
}
absl::StatusOr<spMemPoolPtrExportData> Runtime::ExportPointer(const void* ptr) {
  return internal::Guarded([&]() -> absl::StatusOr<spMemPoolPtrExportData> {
    auto d = impl_->ExportPointer(ptr);
    if (!d.ok()) return d.status();
    static_assert(sizeof(spMemPoolPtrExportData) == sizeof(internal::PtrExportData));
    spMemPoolPtrExportData out;
    std::memcpy(&out, &*d, sizeof out);
    return out;
  });
}
absl::StatusOr<void*> Runtime::ImportPointer(PoolId pool, const spMemPoolPtrExportData& data) {
  return internal::Guarded([&]() -> absl::StatusOr<void*> {
    internal::PtrExportData d;
    std::memcpy(static_cast<void*>(&d), &data, sizeof d);  // trivially copyable
    return impl_->ImportPointer(pool.value, d);
  });
}
absl::StatusOr<spIpcEventHandle> Runtime::GetIpcEventHandle(EventId e) {
  return internal::Guarded([&]() -> absl::StatusOr<spIpcEventHandle> {
    spIpcEventHandle h;
    if (absl::Status st = impl_->GetIpcEventHandle(e.value, h.reserved); !st.ok()) return st;
    return h;
  });
}
absl::StatusOr<EventId> Runtime::OpenIpcEvent(const spIpcEventHandle& handle) {
  return internal::Guarded([&]() -> absl::StatusOr<EventId> {
    auto h = impl_->OpenIpcEvent(handle.reserved);
    if (!h.ok()) return h.status();
    return EventId{*h};
  });
}

void Runtime::RecordTimeline(bool on) { impl_->RecordTimeline(on); }
void Runtime::EnableChecker(bool on) { impl_->EnableChecker(on, /*fatal=*/false); }
std::vector<CheckReport> Runtime::CheckReports() const { return impl_->CheckReports(); }
void Runtime::ClearCheckReports() { impl_->ClearCheckReports(); }
std::vector<TimelineEntry> Runtime::Timeline() const { return impl_->Timeline(); }

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kKernel:
      return "kernel";
    case OpKind::kCopy:
      return "copy";
    case OpKind::kFill:
      return "fill";
    case OpKind::kHostFunc:
      return "host-func";
    case OpKind::kRecord:
      return "record";
    case OpKind::kWait:
      return "wait";
    case OpKind::kInternalWait:
      return "internal-wait";
    case OpKind::kAllocMarker:
      return "alloc";
    case OpKind::kFreeMarker:
      return "free";
  }
  return "unknown";
}

}  // namespace streampool
