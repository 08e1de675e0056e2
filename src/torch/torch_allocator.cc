// The C functions of libstreampool-torch (include/streampool/
// torch_allocator.h): each turns its arguments over to the process's
// AllocatorState or a report, keeps the thread's failure message, and lets no
// exception out.
#include "streampool/torch_allocator.h"

#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/torch/allocator_state.h"
#include "src/torch/reports.h"

namespace streampool::internal::torch {
namespace {

thread_local std::string t_error_message;

// The one thing the code below can throw is std::bad_alloc (a string, a
// vector, the stream map); anything else would be a bug, answered as such.
spError_t CurrentExceptionToError() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return spErrorMemoryAllocation;
  } catch (...) {
    return spErrorUnknown;
  }
}

// The shell of the int-returning functions: the message of a failure is kept
// for streampool_torch_error_message.
template <typename Body>
int Entry(Body&& body) noexcept {
  try {
    std::string error;
    const spError_t e = body(&error);
    if (e != spSuccess) t_error_message = std::move(error);
    return e;
  } catch (...) {
    const spError_t e = CurrentExceptionToError();
    try {
      t_error_message = spGetErrorString(e);
    } catch (...) {
    }
    return e;
  }
}

// The JSON reports: the runtime must exist, and the text goes out as the
// header says (copied only when it fits with its NUL).
template <typename Report>
int JsonEntry(char* buffer, size_t capacity, size_t* length, Report&& report) noexcept {
  return Entry([&](std::string* error) -> spError_t {
    if (length == nullptr || (buffer == nullptr && capacity != 0)) {
      *error = "length is NULL, or buffer is NULL with a non-zero capacity";
      return spErrorInvalidValue;
    }
    AllocatorState& state = AllocatorState::Instance();
    spRuntime_t rt = state.runtime();
    if (rt == nullptr) return state.NoRuntimeError(error);
    std::string text;
    if (spError_t e = report(state, rt, &text, error); e != spSuccess) return e;
    *length = text.size();
    if (capacity > text.size()) std::memcpy(buffer, text.c_str(), text.size() + 1);
    return spSuccess;
  });
}

}  // namespace
}  // namespace streampool::internal::torch

using streampool::internal::torch::AllocatorState;
using streampool::internal::torch::Entry;
using streampool::internal::torch::JsonEntry;

extern "C" {

void* streampool_torch_alloc(ssize_t size, int device, void* stream) noexcept {
  try {
    std::string error;
    void* ptr = AllocatorState::Instance().Allocate(size, device, stream, &error);
    if (ptr == nullptr && !error.empty()) {
      streampool::internal::torch::t_error_message = std::move(error);
    }
    return ptr;
  } catch (...) {
    return nullptr;
  }
}

void streampool_torch_free(void* ptr, ssize_t size, int device, void* stream) noexcept {
  try {
    AllocatorState::Instance().Free(ptr, device, stream);
  } catch (...) {
    // Nothing to tell PyTorch, which expects a free to succeed; the block
    // stays allocated.
  }
}

void streampool_torch_record_stream(void* ptr, void* stream) noexcept {
  try {
    AllocatorState::Instance().RecordStream(ptr, stream);
  } catch (...) {
    // The free is then ordered after the allocating stream only, as without
    // the call.
  }
}

int streampool_torch_configure(const char* settings) noexcept {
  return Entry(
      [&](std::string* error) { return AllocatorState::Instance().Configure(settings, error); });
}

int streampool_torch_init(void) noexcept {
  return Entry([&](std::string* error) {
    spError_t code = spSuccess;
    AllocatorState::Instance().GetOrCreateRuntime(&code, error);
    return code;
  });
}

spRuntime_t streampool_torch_runtime(void) noexcept { return AllocatorState::Instance().runtime(); }

const char* streampool_torch_error_message(void) noexcept {
  return streampool::internal::torch::t_error_message.c_str();
}

int streampool_torch_get_stats(int device, spMemPoolStats* stats) noexcept {
  return Entry([&](std::string* error) -> spError_t {
    if (stats == nullptr) {
      *error = "stats is NULL";
      return spErrorInvalidValue;
    }
    AllocatorState& state = AllocatorState::Instance();
    spRuntime_t rt = state.runtime();
    if (rt == nullptr) return state.NoRuntimeError(error);
    spMemPool_t pool = nullptr;
    if (spError_t e = spDeviceGetMemPool(&pool, rt, device); e != spSuccess) {
      *error = absl::StrCat("spDeviceGetMemPool (device ", device, ") failed: ", spGetErrorName(e));
      return e;
    }
    if (spError_t e = spMemPoolGetStats(pool, stats); e != spSuccess) {
      *error = absl::StrCat("spMemPoolGetStats (device ", device, ") failed: ", spGetErrorName(e));
      return e;
    }
    return spSuccess;
  });
}

int streampool_torch_stats_json(int device, char* buffer, size_t capacity,
                                size_t* length) noexcept {
  return JsonEntry(
      buffer, capacity, length,
      [&](const AllocatorState& state, spRuntime_t rt, std::string* out, std::string* error) {
        return streampool::internal::torch::StatsJson(state, rt, device, out, error);
      });
}

int streampool_torch_snapshot_json(int device, char* buffer, size_t capacity,
                                   size_t* length) noexcept {
  return JsonEntry(
      buffer, capacity, length,
      [&](const AllocatorState&, spRuntime_t rt, std::string* out, std::string* error) {
        return streampool::internal::torch::SnapshotJson(rt, device, out, error);
      });
}

int streampool_torch_leak_report_json(int device, char* buffer, size_t capacity,
                                      size_t* length) noexcept {
  return JsonEntry(
      buffer, capacity, length,
      [&](const AllocatorState&, spRuntime_t rt, std::string* out, std::string* error) {
        return streampool::internal::torch::LeakReportJson(rt, device, out, error);
      });
}

}  // extern "C"
