// streampool::Runtime hands each call to a part of RuntimeImpl (through
// RuntimeImpl::Run, as the C API does); handles are the same numbers the C API
// uses, so the two APIs can be mixed on one runtime.
#include "streampool/runtime.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "src/pool/names.h"
#include "src/runtime/guard.h"
#include "src/runtime/handles.h"
#include "src/runtime/runtime_impl.h"

namespace streampool {

spError_t ToCError(const absl::Status& status) {
  if (auto c = status.GetPayload(kCErrorPayload)) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*c), &code)) return static_cast<spError_t>(code);
  }
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
    case absl::StatusCode::kAlreadyExists:
      return spErrorHostMemoryAlreadyRegistered;
    default:
      return spErrorInvalidValue;
  }
}

using internal::Allocator;
using internal::Events;
using internal::IpcService;
using internal::Observation;
using internal::Pools;
using internal::RuntimeImpl;
using internal::Streams;
using internal::Work;

namespace {

// A call handed to a part, with nothing thrown leaving the library.
template <auto Op, typename... A>
auto Call(RuntimeImpl& rt, A&&... args) {
  return internal::Guarded([&] { return rt.Run<Op>(std::forward<A>(args)...); });
}
// The same for an operation that makes or finds a handle, typed as the public
// id of its kind.
template <typename Id, auto Op, typename... A>
absl::StatusOr<Id> Call(RuntimeImpl& rt, A&&... args) {
  return internal::Guarded([&]() -> absl::StatusOr<Id> {
    absl::StatusOr<uint64_t> h = rt.Run<Op>(std::forward<A>(args)...);
    if (!h.ok()) return h.status();
    return Id{*h};
  });
}

}  // namespace

Runtime::Runtime(std::shared_ptr<RuntimeImpl> impl, bool owns)
    : impl_(std::move(impl)), owns_(owns) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeConfig& config) {
  return internal::Guarded([&]() -> absl::StatusOr<std::unique_ptr<Runtime>> {
    absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl =
        RuntimeImpl::Create(config, internal::Process::Default());
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/true));
  });
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::FromC(spRuntime_t rt) {
  const auto h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rt));
  if (internal::KindOf(h) != internal::HandleKind::kRuntime) {
    return absl::NotFoundError("not a runtime handle");
  }
  absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl =
      RuntimeImpl::Find(internal::Process::Default(), h);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/false));
}

Runtime::~Runtime() {
  // Destroying a runtime that the C API already destroyed is a no-op.
  if (owns_) RuntimeImpl::Destroy(impl_->process(), impl_->handle()).IgnoreError();
}

spRuntime_t Runtime::c() const {
  return reinterpret_cast<spRuntime_t>(static_cast<uintptr_t>(impl_->handle()));
}
const RuntimeConfig& Runtime::config() const { return impl_->config(); }

absl::StatusOr<StreamId> Runtime::CreateStream(int device, bool non_blocking) {
  return Call<StreamId, &Streams::CreateStream>(*impl_, device, non_blocking);
}
absl::Status Runtime::DestroyStream(StreamId s) {
  return Call<&Streams::DestroyStream>(*impl_, s.value);
}
absl::StatusOr<StreamId> Runtime::LegacyStream(int device) {
  return Call<StreamId, &Streams::LegacyStream>(*impl_, device);
}
absl::Status Runtime::StreamSynchronize(StreamId s) {
  return Call<&Streams::StreamSynchronize>(*impl_, s.value);
}
absl::Status Runtime::StreamQuery(StreamId s) {
  return Call<&Streams::StreamQuery>(*impl_, s.value);
}
absl::Status Runtime::StreamWaitEvent(StreamId s, EventId e) {
  return Call<&Events::StreamWaitEvent>(*impl_, s.value, e.value);
}
absl::StatusOr<EventId> Runtime::CreateEvent() { return CreateEvent(0); }
absl::StatusOr<EventId> Runtime::CreateEvent(unsigned flags) {
  return Call<EventId, &Events::CreateEvent>(*impl_, flags);
}
absl::Status Runtime::DestroyEvent(EventId e) {
  return Call<&Events::DestroyEvent>(*impl_, e.value);
}
absl::Status Runtime::RecordEvent(EventId e, StreamId s) {
  return Call<&Events::RecordEvent>(*impl_, e.value, s.value);
}
absl::Status Runtime::EventSynchronize(EventId e) {
  return Call<&Events::EventSynchronize>(*impl_, e.value);
}
absl::Status Runtime::EventQuery(EventId e) { return Call<&Events::EventQuery>(*impl_, e.value); }
absl::StatusOr<float> Runtime::EventElapsedMs(EventId start, EventId end) {
  return Call<&Events::EventElapsedMs>(*impl_, start.value, end.value);
}
absl::Status Runtime::DeviceSynchronize(int device) {
  return Call<&Streams::DeviceSynchronize>(*impl_, device);
}

absl::Status Runtime::LaunchKernel(StreamId s, uint64_t duration_ns,
                                   absl::Span<const Access> accesses) {
  return Call<&Work::LaunchKernel>(*impl_, s.value, duration_ns, accesses);
}
absl::Status Runtime::LaunchHostFunc(StreamId s, std::function<void()> fn) {
  return Call<&Work::LaunchHostFunc>(*impl_, s.value, std::move(fn));
}
absl::Status Runtime::LaunchWork(StreamId s, std::function<void()> work,
                                 absl::Span<const Access> accesses, uint64_t duration_ns) {
  return Call<&Work::LaunchWork>(*impl_, s.value, duration_ns, std::move(work), accesses);
}
absl::Status Runtime::MemcpyAsync(void* dst, const void* src, uint64_t bytes, StreamId s) {
  return Call<&Work::MemcpyAsync>(*impl_, dst, src, bytes, s.value);
}
absl::Status Runtime::MemsetAsync(void* dst, int value, uint64_t bytes, StreamId s) {
  return Call<&Work::MemsetAsync>(*impl_, dst, value, bytes, s.value);
}
absl::Status Runtime::HostAdvance(uint64_t ns) { return Call<&Work::HostAdvance>(*impl_, ns); }
uint64_t Runtime::HostNow() const { return impl_->HostNow(); }

absl::StatusOr<void*> Runtime::NativeStream(StreamId s) {
  return Call<&Streams::NativeStream>(*impl_, s.value);
}
absl::StatusOr<StreamId> Runtime::CreateStreamFromNative(int device, void* native) {
  return Call<StreamId, &Streams::CreateStreamFromNative>(*impl_, device, native);
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
absl::Status Runtime::RecordUse(void* ptr, StreamId s) {
  return Call<&Allocator::RecordUse>(*impl_, ptr, s.value);
}
absl::StatusOr<void*> Runtime::Malloc(uint64_t size, int device) {
  return Call<&Allocator::Malloc>(*impl_, size, device);
}
absl::Status Runtime::Free(void* ptr) { return Call<&Allocator::Free>(*impl_, ptr); }
absl::StatusOr<void*> Runtime::MallocHost(uint64_t size) {
  return Call<&Allocator::MallocHost>(*impl_, size);
}
absl::Status Runtime::FreeHost(void* ptr) { return Call<&Allocator::FreeHost>(*impl_, ptr); }

absl::StatusOr<void*> Runtime::HostRegister(void* ptr, uint64_t size, unsigned flags) {
  return Call<&Allocator::HostRegister>(*impl_, ptr, size, flags);
}

absl::Status Runtime::HostUnregister(void* ptr) {
  return Call<&Allocator::HostUnregister>(*impl_, ptr);
}

absl::StatusOr<void*> Runtime::HostDevicePointer(const void* ptr) {
  return Call<&Allocator::HostDevicePointer>(*impl_, ptr);
}
absl::StatusOr<DeviceMemInfo> Runtime::MemGetInfo(int device) const {
  return Call<&Allocator::MemGetInfo>(*impl_, device);
}
absl::StatusOr<PointerAttributes> Runtime::GetPointerAttributes(const void* ptr) const {
  return Call<&Allocator::GetPointerAttributes>(*impl_, ptr);
}

absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props) {
  return Call<PoolId, &Pools::CreatePool>(*impl_, props, nullptr);
}
absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props,
                                           std::shared_ptr<PhysicalMemory> upstream) {
  // A null upstream is one that could not be made (NewVmmCallbackMemory
  // with a function missing), never "the default".
  return Call<PoolId, &Pools::CreatePoolOver>(*impl_, props, std::move(upstream));
}
absl::Status Runtime::SetHugePageBudget(int device, uint64_t bytes) {
  return Call<&Pools::SetHugePageBudget>(*impl_, device, bytes);
}
absl::Status Runtime::DestroyPool(PoolId pool) {
  return Call<&Pools::DestroyPool>(*impl_, pool.value);
}
absl::StatusOr<PoolId> Runtime::DefaultPool(int device) const {
  return Call<PoolId, &Pools::DefaultPool>(*impl_, device);
}
absl::StatusOr<PoolId> Runtime::CurrentPool(int device) const {
  return Call<PoolId, &Pools::CurrentPool>(*impl_, device);
}
absl::Status Runtime::SetCurrentPool(int device, PoolId pool) {
  return Call<&Pools::SetCurrentPool>(*impl_, device, pool.value);
}
absl::Status Runtime::SetPoolAttribute(PoolId pool, PoolAttr attr, uint64_t value) {
  return Call<&Pools::SetPoolAttribute>(*impl_, pool.value, attr, value);
}
absl::StatusOr<uint64_t> Runtime::GetPoolAttribute(PoolId pool, PoolAttr attr) const {
  return Call<&Pools::GetPoolAttribute>(*impl_, pool.value, attr);
}
absl::Status Runtime::TrimTo(PoolId pool, uint64_t min_bytes_to_keep) {
  return Call<&Pools::TrimTo>(*impl_, pool.value, min_bytes_to_keep);
}
absl::StatusOr<PoolStats> Runtime::GetPoolStats(PoolId pool) const {
  return Call<&Pools::GetPoolStats>(*impl_, pool.value);
}
absl::StatusOr<PoolSnapshot> Runtime::Snapshot(PoolId pool) const {
  return Call<&Pools::Snapshot>(*impl_, pool.value);
}
absl::StatusOr<std::vector<LiveAllocation>> Runtime::LiveAllocations() const {
  return Call<&Allocator::LiveAllocations>(*impl_);
}
absl::Status Runtime::CheckPoolInvariants(PoolId pool) const {
  return Call<&Pools::CheckPoolInvariants>(*impl_, pool.value);
}

absl::Status Runtime::SetPeerAccessible(int device, int peer_device, bool accessible) {
  return Call<&Pools::SetPeerAccessible>(*impl_, device, peer_device, accessible);
}
absl::StatusOr<bool> Runtime::CanAccessPeer(int device, int peer_device) const {
  return Call<&Pools::CanAccessPeer>(*impl_, device, peer_device);
}
absl::Status Runtime::SetPoolAccess(PoolId pool, absl::Span<const MemAccessDesc> descs) {
  return Call<&Pools::SetPoolAccess>(*impl_, pool.value, descs);
}
absl::StatusOr<MemAccessFlags> Runtime::GetPoolAccess(PoolId pool, MemLocation location) const {
  return Call<&Pools::GetPoolAccess>(*impl_, pool.value, location);
}
absl::StatusOr<int> Runtime::ExportPool(PoolId pool) {
  return Call<&IpcService::ExportPool>(*impl_, pool.value);
}
absl::StatusOr<PoolId> Runtime::ImportPool(int fd) {
  return Call<PoolId, &IpcService::ImportPool>(*impl_, fd);
}
absl::StatusOr<spMemPoolPtrExportData> Runtime::ExportPointer(const void* ptr) {
  return internal::Guarded([&]() -> absl::StatusOr<spMemPoolPtrExportData> {
    auto d = impl_->Run<&IpcService::ExportPointer>(ptr);
    if (!d.ok()) return d.status();
    static_assert(sizeof(spMemPoolPtrExportData) == sizeof(internal::PtrExportData));
    spMemPoolPtrExportData out;
    std::memcpy(&out, &*d, sizeof out);
    return out;
  });
}
absl::StatusOr<void*> Runtime::ImportPointer(PoolId pool, const spMemPoolPtrExportData& data) {
  internal::PtrExportData d;
  std::memcpy(static_cast<void*>(&d), &data, sizeof d);  // trivially copyable
  return Call<&IpcService::ImportPointer>(*impl_, pool.value, d);
}
absl::StatusOr<spIpcEventHandle> Runtime::GetIpcEventHandle(EventId e) {
  return internal::Guarded([&]() -> absl::StatusOr<spIpcEventHandle> {
    spIpcEventHandle h;
    absl::Status st = impl_->Run<&Events::GetIpcEventHandle>(e.value, h.reserved);
    if (!st.ok()) return st;
    return h;
  });
}
absl::StatusOr<EventId> Runtime::OpenIpcEvent(const spIpcEventHandle& handle) {
  return Call<EventId, &Events::OpenIpcEvent>(*impl_, handle.reserved);
}

void Runtime::RecordTimeline(bool on) { impl_->Run<&Observation::RecordTimeline>(on); }
void Runtime::SetOomHandler(std::function<bool(PoolId pool, uint64_t size)> handler) {
  std::function<bool(uint64_t, uint64_t)> raw;
  if (handler) {
    raw = [handler = std::move(handler)](uint64_t pool, uint64_t size) {
      return handler(PoolId{pool}, size);
    };
  }
  impl_->Run<&Observation::SetOomHandler>(std::move(raw));
}
absl::Status Runtime::StartRecording(const std::string& path) {
  return Call<&Observation::StartRecording>(*impl_, path);
}
absl::Status Runtime::StopRecording() { return Call<&Observation::StopRecording>(*impl_); }
void Runtime::EnableChecker(bool on) {
  impl_->Run<&Observation::EnableChecker>(on, /*fatal=*/false);
}
std::vector<CheckReport> Runtime::CheckReports() const {
  return impl_->Run<&Observation::CheckReports>();
}
void Runtime::ClearCheckReports() { impl_->Run<&Observation::ClearCheckReports>(); }
std::vector<TimelineEntry> Runtime::Timeline() const {
  return impl_->Run<&Observation::Timeline>();
}

const char* OpKindName(OpKind kind) { return internal::EnumName(kind); }

}  // namespace streampool
