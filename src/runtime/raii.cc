// Stream, Event, MemPool and AsyncPtr: owners over Runtime handles.
#include "streampool/raii.h"

#include <string>
#include <utility>

namespace streampool {

namespace {

// Status of a call on an empty owner.
absl::Status Empty(const char* what) {
  return absl::FailedPreconditionError(std::string(what) + " owns nothing");
}

}  // namespace

// ------------------------------------------------------------------ Stream

absl::StatusOr<Stream> Stream::Create(Runtime& runtime, int device, bool non_blocking) {
  absl::StatusOr<StreamId> id = runtime.CreateStream(device, non_blocking);
  if (!id.ok()) return id.status();
  return Stream(&runtime, *id);
}

Stream::Stream(Stream&& other) noexcept
    : runtime_(std::exchange(other.runtime_, nullptr)), id_(std::exchange(other.id_, {})) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Destroy().IgnoreError();
    runtime_ = std::exchange(other.runtime_, nullptr);
    id_ = std::exchange(other.id_, {});
  }
  return *this;
}

Stream::~Stream() { Destroy().IgnoreError(); }

absl::Status Stream::Synchronize() const {
  return runtime_ ? runtime_->StreamSynchronize(id_) : Empty("Stream");
}
absl::Status Stream::Query() const {
  return runtime_ ? runtime_->StreamQuery(id_) : Empty("Stream");
}

absl::Status Stream::Destroy() {
  if (runtime_ == nullptr) return absl::OkStatus();
  Runtime* rt = std::exchange(runtime_, nullptr);
  return rt->DestroyStream(std::exchange(id_, {}));
}

StreamId Stream::release() {
  runtime_ = nullptr;
  return std::exchange(id_, {});
}

// ------------------------------------------------------------------- Event

absl::StatusOr<Event> Event::Create(Runtime& runtime) {
  absl::StatusOr<EventId> id = runtime.CreateEvent();
  if (!id.ok()) return id.status();
  return Event(&runtime, *id);
}

Event::Event(Event&& other) noexcept
    : runtime_(std::exchange(other.runtime_, nullptr)), id_(std::exchange(other.id_, {})) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Destroy().IgnoreError();
    runtime_ = std::exchange(other.runtime_, nullptr);
    id_ = std::exchange(other.id_, {});
  }
  return *this;
}

Event::~Event() { Destroy().IgnoreError(); }

absl::Status Event::Record(StreamId stream) const {
  return runtime_ ? runtime_->RecordEvent(id_, stream) : Empty("Event");
}
absl::Status Event::MakeStreamWait(StreamId stream) const {
  return runtime_ ? runtime_->StreamWaitEvent(stream, id_) : Empty("Event");
}
absl::Status Event::Synchronize() const {
  return runtime_ ? runtime_->EventSynchronize(id_) : Empty("Event");
}
absl::Status Event::Query() const { return runtime_ ? runtime_->EventQuery(id_) : Empty("Event"); }

absl::Status Event::Destroy() {
  if (runtime_ == nullptr) return absl::OkStatus();
  Runtime* rt = std::exchange(runtime_, nullptr);
  return rt->DestroyEvent(std::exchange(id_, {}));
}

EventId Event::release() {
  runtime_ = nullptr;
  return std::exchange(id_, {});
}

// ----------------------------------------------------------------- MemPool

absl::StatusOr<MemPool> MemPool::Create(Runtime& runtime, const PoolProps& props) {
  absl::StatusOr<PoolId> id = runtime.CreatePool(props);
  if (!id.ok()) return id.status();
  return MemPool(&runtime, *id);
}

absl::StatusOr<MemPool> MemPool::Create(Runtime& runtime, const PoolProps& props,
                                        std::shared_ptr<PhysicalMemory> upstream) {
  absl::StatusOr<PoolId> id = runtime.CreatePool(props, std::move(upstream));
  if (!id.ok()) return id.status();
  return MemPool(&runtime, *id);
}

MemPool::MemPool(MemPool&& other) noexcept
    : runtime_(std::exchange(other.runtime_, nullptr)), id_(std::exchange(other.id_, {})) {}

MemPool& MemPool::operator=(MemPool&& other) noexcept {
  if (this != &other) {
    Destroy().IgnoreError();
    runtime_ = std::exchange(other.runtime_, nullptr);
    id_ = std::exchange(other.id_, {});
  }
  return *this;
}

MemPool::~MemPool() { Destroy().IgnoreError(); }

absl::StatusOr<PoolStats> MemPool::Stats() const {
  if (runtime_ == nullptr) return Empty("MemPool");
  return runtime_->GetPoolStats(id_);
}

absl::Status MemPool::Destroy() {
  if (runtime_ == nullptr) return absl::OkStatus();
  Runtime* rt = std::exchange(runtime_, nullptr);
  return rt->DestroyPool(std::exchange(id_, {}));
}

PoolId MemPool::release() {
  runtime_ = nullptr;
  return std::exchange(id_, {});
}

// ---------------------------------------------------------------- AsyncPtr

absl::StatusOr<AsyncPtr> AsyncPtr::Allocate(Runtime& runtime, uint64_t size, StreamId stream) {
  absl::StatusOr<AllocInfo> a = runtime.MallocAsync(size, stream);
  if (!a.ok()) return a.status();
  return AsyncPtr(runtime, a->ptr, stream);
}

absl::StatusOr<AsyncPtr> AsyncPtr::AllocateFromPool(Runtime& runtime, uint64_t size, PoolId pool,
                                                    StreamId stream) {
  absl::StatusOr<AllocInfo> a = runtime.MallocFromPoolAsync(size, pool, stream);
  if (!a.ok()) return a.status();
  return AsyncPtr(runtime, a->ptr, stream);
}

AsyncPtr::AsyncPtr(AsyncPtr&& other) noexcept
    : runtime_(other.runtime_), ptr_(std::exchange(other.ptr_, nullptr)), stream_(other.stream_) {}

AsyncPtr& AsyncPtr::operator=(AsyncPtr&& other) noexcept {
  if (this != &other) {
    reset();
    runtime_ = other.runtime_;
    ptr_ = std::exchange(other.ptr_, nullptr);
    stream_ = other.stream_;
  }
  return *this;
}

AsyncPtr::~AsyncPtr() { reset(); }

void AsyncPtr::reset() noexcept {
  if (ptr_ == nullptr) return;
  runtime_->FreeAsync(std::exchange(ptr_, nullptr), stream_).IgnoreError();
}

absl::Status AsyncPtr::Free() {
  if (ptr_ == nullptr) return absl::OkStatus();
  absl::Status st = runtime_->FreeAsync(ptr_, stream_);
  if (st.ok()) ptr_ = nullptr;
  return st;
}

void* AsyncPtr::release() { return std::exchange(ptr_, nullptr); }

}  // namespace streampool
