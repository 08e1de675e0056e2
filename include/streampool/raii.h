/// \file
/// Owners for the runtime's handles and allocations.
///
/// Stream, Event and MemPool each own one handle of a Runtime and destroy it
/// when they go out of scope; AsyncPtr owns one stream-ordered allocation and
/// frees it with FreeAsync on its stream. All four are move-only and made by
/// static factories returning absl::StatusOr, so a failed creation is an error
/// value and an owner always holds a live handle (or nothing, once moved from
/// or released):
///
/// \code
/// absl::StatusOr<streampool::Stream> s = streampool::Stream::Create(*rt);
/// absl::StatusOr<streampool::AsyncPtr> buf =
///     streampool::AsyncPtr::Allocate(*rt, 1 << 20, s->id());
/// // ... launch work on s->id() that uses buf->get() ...
/// // ~AsyncPtr: FreeAsync(buf, s); ~Stream: DestroyStream(s).
/// \endcode
///
/// Destruction order: declare the stream before the allocations freed on it
/// (members and locals are destroyed in reverse order), and keep the Runtime
/// alive longer than every owner. Errors while destroying (the handle was
/// already destroyed through the raw API, say) are ignored; call Destroy() or
/// Free() to see them.
#ifndef STREAMPOOL_RAII_H_
#define STREAMPOOL_RAII_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "streampool/export.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {

/// Owns a stream: DestroyStream at destruction. Enqueued work still completes
/// and frees enqueued on it stay valid (Runtime::DestroyStream).
class STREAMPOOL_EXPORT Stream {
 public:
  /// Runtime::CreateStream(device, non_blocking), owned.
  static absl::StatusOr<Stream> Create(Runtime& runtime, int device = 0, bool non_blocking = false);

  /// An empty owner (owns nothing).
  Stream() = default;
  /// Takes over `other`'s stream; `other` is left empty.
  Stream(Stream&& other) noexcept;
  /// Destroys the stream held, then takes over `other`'s.
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// The stream's id (value 0 when empty).
  StreamId id() const { return id_; }
  /// The C handle of the stream (NULL when empty).
  spStream_t c() const { return id_.c(); }
  /// The owning runtime (null when empty).
  Runtime* runtime() const { return runtime_; }
  /// Whether the owner holds a stream.
  explicit operator bool() const { return runtime_ != nullptr; }

  /// Runtime::StreamSynchronize on the stream.
  absl::Status Synchronize() const;
  /// Runtime::StreamQuery: OK when all its work completed, else kUnavailable.
  absl::Status Query() const;

  /// Destroys the stream now; the owner is empty afterwards, even on error.
  absl::Status Destroy();
  /// Gives up ownership without destroying; returns the id.
  StreamId release();

 private:
  Stream(Runtime* runtime, StreamId id) : runtime_(runtime), id_(id) {}
  Runtime* runtime_ = nullptr;
  StreamId id_;
};

/// Owns an event: DestroyEvent at destruction.
class STREAMPOOL_EXPORT Event {
 public:
  /// Runtime::CreateEvent, owned.
  static absl::StatusOr<Event> Create(Runtime& runtime);

  /// An empty owner (owns nothing).
  Event() = default;
  /// Takes over `other`'s event; `other` is left empty.
  Event(Event&& other) noexcept;
  /// Destroys the event held, then takes over `other`'s.
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  /// The event's id (value 0 when empty).
  EventId id() const { return id_; }
  /// The C handle of the event (NULL when empty).
  spEvent_t c() const { return id_.c(); }
  /// The owning runtime (null when empty).
  Runtime* runtime() const { return runtime_; }
  /// Whether the owner holds an event.
  explicit operator bool() const { return runtime_ != nullptr; }

  /// Runtime::RecordEvent(id(), stream).
  absl::Status Record(StreamId stream) const;
  /// Runtime::StreamWaitEvent(stream, id()): later work on `stream` waits for
  /// this event's latest record.
  absl::Status MakeStreamWait(StreamId stream) const;
  /// Runtime::EventSynchronize.
  absl::Status Synchronize() const;
  /// Runtime::EventQuery: OK when the latest record completed, else kUnavailable.
  absl::Status Query() const;

  /// Destroys the event now; the owner is empty afterwards, even on error.
  absl::Status Destroy();
  /// Gives up ownership without destroying; returns the id.
  EventId release();

 private:
  Event(Runtime* runtime, EventId id) : runtime_(runtime), id_(id) {}
  Runtime* runtime_ = nullptr;
  EventId id_;
};

/// Owns an explicitly created pool: DestroyPool at destruction (live
/// allocations stay valid; their memory goes back as they are freed).
class STREAMPOOL_EXPORT MemPool {
 public:
  /// Runtime::CreatePool(props), owned.
  static absl::StatusOr<MemPool> Create(Runtime& runtime, const PoolProps& props);
  /// Runtime::CreatePool(props, upstream), owned: a pool over a caller's
  /// upstream.
  static absl::StatusOr<MemPool> Create(Runtime& runtime, const PoolProps& props,
                                        std::shared_ptr<PhysicalMemory> upstream);

  /// An empty owner (owns nothing).
  MemPool() = default;
  /// Takes over `other`'s pool; `other` is left empty.
  MemPool(MemPool&& other) noexcept;
  /// Destroys the pool held, then takes over `other`'s.
  MemPool& operator=(MemPool&& other) noexcept;
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;
  ~MemPool();

  /// The pool's id (value 0 when empty).
  PoolId id() const { return id_; }
  /// The C handle of the pool (NULL when empty).
  spMemPool_t c() const { return id_.c(); }
  /// The owning runtime (null when empty).
  Runtime* runtime() const { return runtime_; }
  /// Whether the owner holds a pool.
  explicit operator bool() const { return runtime_ != nullptr; }

  /// Runtime::GetPoolStats.
  absl::StatusOr<PoolStats> Stats() const;

  /// Destroys the pool now; the owner is empty afterwards, even on error.
  absl::Status Destroy();
  /// Gives up ownership without destroying; returns the id.
  PoolId release();

 private:
  MemPool(Runtime* runtime, PoolId id) : runtime_(runtime), id_(id) {}
  Runtime* runtime_ = nullptr;
  PoolId id_;
};

/// Owns one stream-ordered allocation, like std::unique_ptr with a deleter
/// that is FreeAsync(ptr, stream()). The stream may be changed (set_stream) to
/// free on the stream that uses the memory last; the caller orders that
/// stream after every other use, as with FreeAsync itself.
class STREAMPOOL_EXPORT AsyncPtr {
 public:
  /// Runtime::MallocAsync(size, stream) from the stream's device's current
  /// pool, freed on `stream`. size 0 gives an empty AsyncPtr.
  static absl::StatusOr<AsyncPtr> Allocate(Runtime& runtime, uint64_t size, StreamId stream);
  /// Runtime::MallocFromPoolAsync(size, pool, stream), freed on `stream`.
  static absl::StatusOr<AsyncPtr> AllocateFromPool(Runtime& runtime, uint64_t size, PoolId pool,
                                                   StreamId stream);

  /// An empty owner (owns nothing).
  AsyncPtr() = default;
  /// Adopts `ptr` (an allocation of `runtime`, or null), to be freed on
  /// `stream`.
  AsyncPtr(Runtime& runtime, void* ptr, StreamId stream)
      : runtime_(&runtime), ptr_(ptr), stream_(stream) {}
  /// Takes over `other`'s allocation; `other` is left empty.
  AsyncPtr(AsyncPtr&& other) noexcept;
  /// Frees the allocation held, then takes over `other`'s.
  AsyncPtr& operator=(AsyncPtr&& other) noexcept;
  AsyncPtr(const AsyncPtr&) = delete;
  AsyncPtr& operator=(const AsyncPtr&) = delete;
  /// reset().
  ~AsyncPtr();

  /// The allocation (null when empty).
  void* get() const { return ptr_; }
  /// The allocation as a T*.
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  /// The stream the allocation will be freed on.
  StreamId stream() const { return stream_; }
  /// Frees on `stream` instead (e.g. the consumer's stream, once the caller
  /// has ordered it after every other use).
  void set_stream(StreamId stream) { stream_ = stream; }
  /// The runtime the allocation belongs to (null when default-constructed).
  Runtime* runtime() const { return runtime_; }
  /// Whether the owner holds an allocation.
  explicit operator bool() const { return ptr_ != nullptr; }

  /// FreeAsync(get(), stream()) now and becomes empty; errors are ignored.
  void reset() noexcept;
  /// FreeAsync(get(), stream()) now. On success the owner becomes empty; on
  /// failure it keeps the allocation (nothing was freed) and returns the
  /// error. OK when empty.
  absl::Status Free();
  /// Gives up ownership without freeing; returns the pointer.
  [[nodiscard]] void* release();

 private:
  Runtime* runtime_ = nullptr;
  void* ptr_ = nullptr;
  StreamId stream_;
};

}  // namespace streampool

#endif  // STREAMPOOL_RAII_H_
