#include "src/compat/context.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace streampool::internal::compat {

namespace {

std::atomic<uint64_t> next_generation{1};

// Every context, for the exit handler. Contexts are never destroyed.
absl::Mutex& ContextsMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}
std::vector<Context*>& Contexts() {
  static std::vector<Context*>* contexts = new std::vector<Context*>;
  return *contexts;
}

void ShutdownAtExit() { Context::ShutdownAll(); }

}  // namespace

ProcessRuntime::ProcessRuntime(std::unique_ptr<Runtime> runtime, const CompatConfig& config,
                               uint64_t generation)
    : runtime_(std::move(runtime)),
      config_(config),
      generation_(generation),
      fault_(std::make_shared<std::atomic<Fault>>(Fault::kNone)),
      peer_enabled_(config.device_count, 0) {}

// Destroying the owning Runtime destroys everything in it: streams, events,
// pools and live allocations, as cudaDeviceReset does.
ProcessRuntime::~ProcessRuntime() = default;

bool ProcessRuntime::SetPeerEnabled(int device, int peer, bool enabled) {
  absl::MutexLock lock(&mu_);
  uint64_t& bits = peer_enabled_[device];
  const uint64_t bit = uint64_t{1} << peer;
  const bool was = (bits & bit) != 0;
  bits = enabled ? (bits | bit) : (bits & ~bit);
  return was;
}

uint64_t ProcessRuntime::host_default_pool() const {
  absl::MutexLock lock(&mu_);
  return host_default_pool_;
}

uint64_t ProcessRuntime::KeepHostDefaultPool(uint64_t pool) {
  absl::MutexLock lock(&mu_);
  if (host_default_pool_ == 0) host_default_pool_ = pool;
  return host_default_pool_;
}

uint64_t ProcessRuntime::host_current_pool() const {
  absl::MutexLock lock(&mu_);
  return host_current_pool_;
}

void ProcessRuntime::set_host_current_pool(uint64_t pool) {
  absl::MutexLock lock(&mu_);
  host_current_pool_ = pool;
}

void ProcessRuntime::AddManaged(void* ptr) {
  absl::MutexLock lock(&mu_);
  managed_.insert(ptr);
}

bool ProcessRuntime::TakeManaged(void* ptr) {
  absl::MutexLock lock(&mu_);
  return managed_.erase(ptr) != 0;
}

// A thread's states, one per context it used; destroyed when the thread
// exits, which destroys its per-thread streams (a long-running process whose
// threads come and go must not accumulate streams).
class ThreadStates {
 public:
  ~ThreadStates() {
    for (Slot& slot : slots_) slot.context->ReleaseThreadStreams(*slot.state);
  }
  ThreadState& For(Context* context) {
    for (Slot& slot : slots_) {
      if (slot.context == context) return *slot.state;
    }
    slots_.push_back(Slot{context, std::make_unique<ThreadState>()});
    return *slots_.back().state;
  }

 private:
  struct Slot {
    Context* context;
    std::unique_ptr<ThreadState> state;
  };
  std::vector<Slot> slots_;
};

namespace {
thread_local ThreadStates thread_states;
}  // namespace

Context::Context(std::string env_prefix) : env_prefix_(std::move(env_prefix)) {
  absl::MutexLock lock(&ContextsMutex());
  Contexts().push_back(this);
}

absl::StatusOr<std::shared_ptr<ProcessRuntime>> Context::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (runtime_ != nullptr) return runtime_;
    if (shut_down_) return absl::FailedPreconditionError("the process is exiting");
  }
  // Created outside mu_ (it may take a while and runs the library's own
  // initialisation); if two threads race, the first to publish wins.
  std::vector<std::string> problems;
  const CompatConfig config = ParseConfig(env_prefix_, ProcessEnv(), &problems);
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(config.ToRuntimeConfig());
  if (!runtime.ok()) return runtime.status();
  // A face promises its runtime's serving order: growth before any wait
  // (docs/design.md "Waiting versus growing"); a program may opt in.
  for (int d = 0; d < config.device_count; ++d) {
    absl::StatusOr<PoolId> pool = (*runtime)->DefaultPool(d);
    if (!pool.ok()) return pool.status();
    if (absl::Status st = (*runtime)->SetPoolAttribute(*pool, PoolAttr::kWaitBeforeGrowth, 0);
        !st.ok()) {
      return st;
    }
  }
  auto created =
      std::make_shared<ProcessRuntime>(*std::move(runtime), config, next_generation.fetch_add(1));
  // Registered after the library made its first runtime, so the handler runs
  // before the destructors of the library's own statics.
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(&ShutdownAtExit); });
  std::shared_ptr<ProcessRuntime> loser;
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::FailedPreconditionError("the process is exiting");
  if (runtime_ != nullptr) {
    loser = std::move(created);  // destroyed after the lock is released
    return runtime_;
  }
  for (const std::string& problem : problems) std::fprintf(stderr, "%s\n", problem.c_str());
  runtime_ = std::move(created);
  return runtime_;
}

std::shared_ptr<ProcessRuntime> Context::Current() const {
  absl::MutexLock lock(&mu_);
  return runtime_;
}

void Context::Reset() {
  std::shared_ptr<ProcessRuntime> old;
  {
    absl::MutexLock lock(&mu_);
    old = std::move(runtime_);
  }
  // `old` goes out of scope here, outside mu_: destroying a runtime joins its
  // threads and runs nothing of ours, but must not block other calls.
}

void Context::ShutdownAll() {
  std::vector<Context*> contexts;
  {
    absl::MutexLock lock(&ContextsMutex());
    contexts = Contexts();
  }
  for (Context* context : contexts) {
    std::shared_ptr<ProcessRuntime> old;  // destroyed outside the lock
    absl::MutexLock lock(&context->mu_);
    context->shut_down_ = true;
    old = std::move(context->runtime_);
  }
}

ThreadState& Context::Thread() { return thread_states.For(this); }

absl::StatusOr<StreamId> Context::PerThreadStream(ProcessRuntime& runtime, int device) {
  ThreadState& state = Thread();
  if (state.streams_generation != runtime.generation()) {
    // Streams of a runtime that was reset died with it.
    state.per_thread_streams.clear();
    state.streams_generation = runtime.generation();
  }
  if (device < 0 || device >= runtime.device_count()) {
    return absl::OutOfRangeError("no such device");
  }
  if (state.per_thread_streams.size() <= static_cast<size_t>(device)) {
    state.per_thread_streams.resize(device + 1);
  }
  StreamId& stream = state.per_thread_streams[device];
  if (stream.value == 0) {
    // Blocking, as CUDA's per-thread default stream: it synchronizes with the
    // legacy stream.
    absl::StatusOr<StreamId> made = runtime.cpp().CreateStream(device, /*non_blocking=*/false);
    if (!made.ok()) return made.status();
    stream = *made;
  }
  return stream;
}

void Context::ReleaseThreadStreams(ThreadState& state) {
  std::shared_ptr<ProcessRuntime> runtime = Current();
  if (runtime != nullptr && runtime->generation() == state.streams_generation) {
    for (StreamId stream : state.per_thread_streams) {
      if (stream.value != 0) runtime->cpp().DestroyStream(stream).IgnoreError();
    }
  }
  state.per_thread_streams.clear();
}

}  // namespace streampool::internal::compat
