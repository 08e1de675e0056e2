// streampool on a CUDA runtime against the CUDA runtime's own allocators on
// the same GPU, in one binary and one run, so that every figure is a ratio
// to cudaMallocAsync measured minutes apart at most:
//
//   cuda_malloc_async  cudaMallocAsync / cudaFreeAsync on the device's
//                      default pool, release threshold UINT64_MAX (the pool
//                      never shrinks at a synchronize: the baseline times
//                      reuse, as streampool's pool is set up to)
//   streampool         spMallocAsync / spFreeAsync on a spExecutorCuda
//                      runtime's default pool, release threshold UINT64_MAX
//   cuda_malloc        cudaMalloc / cudaFree: no pool at all
//
// Workloads (each registered for all three, the baseline first):
//   Pair/<size>   one same-stream alloc + free of 64 B, 4 KiB or 1 MiB
//                 (bench/pool_benchmark.cc's Pair).
//   CrossStream   bench/cross_stream_benchmark.cc's program on four
//                 streams, made correct for a real GPU: step i allocates
//                 on stream i % 4 and records an event after it; the block
//                 step i - 8 allocated is freed on stream (i + 1) % 4 after
//                 that stream waits for the event of its allocation; that
//                 stream allocates in the next step, so its own frees serve
//                 it. cudaMalloc's variant makes the same event calls, and
//                 its cudaFree ignores the stream.
//   Random        bench/pool_benchmark.cc's random walk (bench_common.h,
//                 seed 42, 200 000 steps, 1 B .. 1 MiB, at most 8 GiB live)
//                 on one stream, each iteration from an empty pool.
//
// Counters: reserved (bytes the allocator holds after the workload: the
// pool's reserved memory; for cudaMalloc what the driver holds for it),
// peak_reserved (pools), device_used (the driver's count of used device
// memory, cudaMemGetInfo, against before the workload: every allocator's
// bytes as the device sees them), streampool's reuse by rule; and, on every
// run, time_ratio, reserved_ratio, peak_reserved_ratio and
// device_used_ratio: the figure over the same workload's cuda_malloc_async
// figure. A table of the ratios is printed at exit.
//
// Time is wall clock (UseRealTime): the CUDA allocators may block the host
// (cudaFree synchronizes the device). Without a GPU every benchmark reports
// "no CUDA device: ..." and the binary exits 0.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

// ------------------------------------------------------------ the device

// The CUDA runtime's view of device 0, made once: whether there is a GPU,
// and the default pool the baseline uses.
struct Device {
  bool ok = false;
  std::string why_not;  // "no CUDA device: ..." when !ok
  std::string name;
  cudaMemPool_t pool = nullptr;
};

std::string CudaError(cudaError_t e) {
  return absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

const Device& TheDevice() {
  static const Device* device = [] {
    auto* d = new Device;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess) {
      d->why_not = absl::StrCat("no CUDA device: ", CudaError(e));
      return d;
    }
    cudaDeviceProp prop{};
    // cudaFree(nullptr) makes the primary context, which then stays for the
    // process: the streampool runtimes each benchmark makes share it instead
    // of making it anew.
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaFree(nullptr)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess ||
        (e = cudaDeviceGetDefaultMemPool(&d->pool, 0)) != cudaSuccess) {
      d->why_not = absl::StrCat("CUDA device 0 unusable: ", CudaError(e));
      return d;
    }
    uint64_t keep_all = UINT64_MAX;
    if ((e = cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep_all)) !=
        cudaSuccess) {
      d->why_not = absl::StrCat("cudaMemPoolSetAttribute: ", CudaError(e));
      return d;
    }
    d->name = prop.name;
    d->ok = true;
    return d;
  }();
  return *device;
}

// Bytes of device 0 in use now, by every context (0 if unreadable).
uint64_t DeviceUsedBytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total - free;
}

// ------------------------------------------------------------ allocators

// The three allocators behind one shape, so that each workload is written
// once (a template, not virtual calls: the streampool fast path is a few
// tens of ns, and an indirect call would be a visible share of it). Each has
// `streams` streams and `events` events, and Open() says why it cannot run.

class CudaAsync {
 public:
  static constexpr const char* kName = "cuda_malloc_async";
  std::string Open(int streams, int events) {
    pool_ = TheDevice().pool;
    streams_.resize(streams);
    events_.resize(events);
    for (cudaStream_t& s : streams_) {
      if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
        return CudaError(e);
      }
    }
    for (cudaEvent_t& ev : events_) {
      if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess) {
        return CudaError(e);
      }
    }
    return "";
  }
  ~CudaAsync() {
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  bool Alloc(void** p, size_t n, int s) {
    return cudaMallocAsync(p, n, streams_[s]) == cudaSuccess;
  }
  bool Free(void* p, int s) { return cudaFreeAsync(p, streams_[s]) == cudaSuccess; }
  bool Record(int e, int s) { return cudaEventRecord(events_[e], streams_[s]) == cudaSuccess; }
  bool Wait(int s, int e) { return cudaStreamWaitEvent(streams_[s], events_[e], 0) == cudaSuccess; }
  bool Sync() { return cudaDeviceSynchronize() == cudaSuccess; }
  // Synchronizes and gives back everything the pool keeps, and forgets its
  // watermark: the next workload starts from an empty pool.
  bool Empty() {
    uint64_t zero = 0;
    return Sync() && cudaMemPoolTrimTo(pool_, 0) == cudaSuccess &&
           cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero) == cudaSuccess;
  }
  uint64_t Reserved() const { return Attr(cudaMemPoolAttrReservedMemCurrent); }
  uint64_t PeakReserved() const { return Attr(cudaMemPoolAttrReservedMemHigh); }
  void Report(benchmark::State&) const {}

 private:
  uint64_t Attr(cudaMemPoolAttr attr) const {
    uint64_t v = 0;
    return cudaMemPoolGetAttribute(pool_, attr, &v) == cudaSuccess ? v : 0;
  }
  cudaMemPool_t pool_ = nullptr;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
};

class Streampool {
 public:
  static constexpr const char* kName = "streampool";
  std::string Open(int streams, int events) {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.executor = spExecutorCuda;
    cfg.deviceCount = 1;
    cfg.deviceCapacity = 0;  // the device's memory
    const spError_t e = spRuntimeCreate(&rt_, &cfg);
    if (e != spSuccess) {
      rt_ = nullptr;
      const bool no_gpu = e == spErrorInsufficientDriver || e == spErrorNoDevice;
      return absl::StrCat(no_gpu ? "no CUDA device: " : "streampool CUDA runtime: ",
                          spGetErrorName(e));
    }
    uint64_t keep_all = UINT64_MAX;
    if (spDeviceGetDefaultMemPool(&pool_, rt_, 0) != spSuccess ||
        spMemPoolSetAttribute(pool_, spMemPoolAttrReleaseThreshold, &keep_all) != spSuccess) {
      return "streampool: default pool setup failed";
    }
    streams_.resize(streams);
    events_.resize(events);
    for (spStream_t& s : streams_) {
      if (spStreamCreate(&s, rt_, 0, spStreamNonBlocking) != spSuccess) return "spStreamCreate";
    }
    for (spEvent_t& ev : events_) {
      if (spEventCreateWithFlags(&ev, rt_, spEventDisableTiming) != spSuccess) {
        return "spEventCreateWithFlags";
      }
    }
    return "";
  }
  ~Streampool() {
    if (rt_ != nullptr) spRuntimeDestroy(rt_);
  }
  bool Alloc(void** p, size_t n, int s) { return spMallocAsync(p, n, streams_[s]) == spSuccess; }
  bool Free(void* p, int s) { return spFreeAsync(p, streams_[s]) == spSuccess; }
  bool Record(int e, int s) { return spEventRecord(events_[e], streams_[s]) == spSuccess; }
  bool Wait(int s, int e) { return spStreamWaitEvent(streams_[s], events_[e]) == spSuccess; }
  bool Sync() { return spDeviceSynchronize(rt_, 0) == spSuccess; }
  bool Empty() {
    uint64_t zero = 0;
    if (!Sync() || spMemPoolTrimTo(pool_, 0) != spSuccess ||
        spMemPoolSetAttribute(pool_, spMemPoolAttrReservedMemHigh, &zero) != spSuccess) {
      return false;
    }
    before_ = Stats();
    return true;
  }
  uint64_t Reserved() const { return Stats().reservedBytes; }
  uint64_t PeakReserved() const { return Stats().reservedHigh; }
  // Reuse by rule since the last Empty().
  void Report(benchmark::State& state) const { ReportReuse(state, before_, Stats()); }

 private:
  spMemPoolStats Stats() const {
    spMemPoolStats s{};
    spMemPoolGetStats(pool_, &s);
    return s;
  }
  spRuntime_t rt_ = nullptr;
  spMemPool_t pool_ = nullptr;
  std::vector<spStream_t> streams_;
  std::vector<spEvent_t> events_;
  spMemPoolStats before_{};
};

// cudaMalloc holds no pool: what it holds is what the driver counts as used
// beyond where the workload started.
class CudaMalloc {
 public:
  static constexpr const char* kName = "cuda_malloc";
  std::string Open(int streams, int events) {
    const std::string why = events_.Open(streams, events);
    start_used_ = DeviceUsedBytes();
    return why;
  }
  bool Alloc(void** p, size_t n, int) { return cudaMalloc(p, n) == cudaSuccess; }
  bool Free(void* p, int) { return cudaFree(p) == cudaSuccess; }
  bool Record(int e, int s) { return events_.Record(e, s); }
  bool Wait(int s, int e) { return events_.Wait(s, e); }
  bool Sync() { return cudaDeviceSynchronize() == cudaSuccess; }
  bool Empty() { return Sync(); }
  uint64_t Reserved() const {
    const uint64_t used = DeviceUsedBytes();
    return used > start_used_ ? used - start_used_ : 0;
  }
  uint64_t PeakReserved() const { return 0; }  // not tracked: no counter
  void Report(benchmark::State&) const {}

 private:
  CudaAsync events_;  // its streams and events; its pool stays unused
  uint64_t start_used_ = 0;
};

// Opens `a` for a benchmark, or skips the benchmark saying why not.
template <typename A>
bool OpenOrSkip(benchmark::State& state, A& a, int streams, int events) {
  if (!TheDevice().ok) {
    state.SkipWithError(TheDevice().why_not.c_str());
    return false;
  }
  const std::string why = a.Open(streams, events);
  if (!why.empty()) {
    state.SkipWithError(why.c_str());
    return false;
  }
  if (!a.Empty()) {
    state.SkipWithError("cannot start from an empty pool");
    return false;
  }
  return true;
}

// The memory counters every benchmark reports, read after its workload.
template <typename A>
void ReportMemory(benchmark::State& state, const A& a, uint64_t used_before) {
  state.counters["reserved"] = Bytes(a.Reserved());
  if constexpr (!std::is_same_v<A, CudaMalloc>) {
    state.counters["peak_reserved"] = Bytes(a.PeakReserved());
  }
  const uint64_t used = DeviceUsedBytes();
  state.counters["device_used"] = Bytes(used > used_before ? used - used_before : 0);
  a.Report(state);
}

// ------------------------------------------------------------------ Pair

template <typename A>
void PairBody(benchmark::State& state) {
  A a;
  if (!OpenOrSkip(state, a, 1, 0)) return;
  const uint64_t used_before = DeviceUsedBytes();
  const auto size = static_cast<size_t>(state.range(0));
  // One untimed pair: the pool's first memory is mapped before the clock runs.
  void* warm = nullptr;
  if (!a.Alloc(&warm, size, 0) || !a.Free(warm, 0)) {
    state.SkipWithError("warm-up pair failed");
    return;
  }
  for (auto _ : state) {
    void* p = nullptr;
    if (!a.Alloc(&p, size, 0) || !a.Free(p, 0)) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  if (!a.Sync()) state.SkipWithError("synchronize failed");
  ReportMemory(state, a, used_before);
  state.SetItemsProcessed(state.iterations());
}

// ----------------------------------------------------------- CrossStream

constexpr int kCrossStreams = 4;
constexpr size_t kCrossSteps = 100000;
constexpr size_t kCrossLag = 8;  // a block is freed this many steps after its allocation

// cross_stream_benchmark.cc's sizes: uniform in [4 KiB, 64 KiB], seed 42.
const std::vector<uint32_t>& CrossStreamSizes() {
  static const std::vector<uint32_t>* sizes = [] {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<uint32_t> size(4 * kKiB, 64 * kKiB);
    auto* v = new std::vector<uint32_t>(kCrossSteps);
    for (uint32_t& s : *v) s = size(rng);
    return v;
  }();
  return *sizes;
}

template <typename A>
void CrossStreamBody(benchmark::State& state) {
  A a;
  // Event i % kCrossLag stands for the allocation of step i until step
  // i + kCrossLag frees its block.
  if (!OpenOrSkip(state, a, kCrossStreams, kCrossLag)) return;
  const uint64_t used_before = DeviceUsedBytes();
  const std::vector<uint32_t>& sizes = CrossStreamSizes();
  std::vector<void*> ptrs(kCrossSteps, nullptr);
  for (auto _ : state) {
    bool ok = true;
    for (size_t i = 0; i < kCrossSteps && ok; ++i) {
      const int producer = static_cast<int>(i % kCrossStreams);
      const int consumer = static_cast<int>((i + 1) % kCrossStreams);
      const int event = static_cast<int>(i % kCrossLag);
      ok = a.Alloc(&ptrs[i], sizes[i], producer);
      if (ok && i >= kCrossLag) {
        ok = a.Wait(consumer, event) && a.Free(ptrs[i - kCrossLag], consumer);
      }
      ok = ok && a.Record(event, producer);
    }
    state.PauseTiming();
    // The last blocks, untimed, on the streams that made them.
    for (size_t i = kCrossSteps - kCrossLag; i < kCrossSteps && ok; ++i) {
      ok = a.Free(ptrs[i], static_cast<int>(i % kCrossStreams));
    }
    ok = ok && a.Sync();
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError("a step failed");
      break;
    }
  }
  ReportMemory(state, a, used_before);
  state.counters["time_per_step"] = TimePer(kCrossSteps);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kCrossSteps));
}

// ---------------------------------------------------------------- Random

const Trace& RandomTrace() {
  static const Trace* trace = new Trace(MakeRandomTrace(/*seed=*/42, /*steps=*/200000,
                                                        /*cap=*/8 * kGiB, /*max_size=*/1 << 20,
                                                        /*drain=*/false));
  return *trace;
}

template <typename A>
void RandomBody(benchmark::State& state) {
  A a;
  if (!OpenOrSkip(state, a, 1, 0)) return;
  const uint64_t used_before = DeviceUsedBytes();
  const Trace& t = RandomTrace();
  const std::vector<uint32_t> leftover = LiveSlotsAtEnd(t);
  std::vector<void*> ptrs(t.slots, nullptr);
  uint64_t reserved = 0, peak = 0, device_used = 0;
  for (auto _ : state) {
    bool ok = true;
    size_t step = 0;
    for (; step < t.ops.size(); ++step) {
      const TraceOp& op = t.ops[step];
      ok = op.size != 0 ? a.Alloc(&ptrs[op.slot], op.size, 0) : a.Free(ptrs[op.slot], 0);
      if (!ok) break;
    }
    const bool program_ok = ok;
    state.PauseTiming();
    // What the program's end holds, its leftovers live; then an empty pool
    // for the next iteration, as a fresh runtime would be.
    reserved = a.Reserved();
    peak = a.PeakReserved();
    const uint64_t used = DeviceUsedBytes();
    device_used = used > used_before ? used - used_before : 0;
    for (uint32_t slot : leftover) ok = ok && a.Free(ptrs[slot], 0);
    if (ok) a.Report(state);
    ok = ok && a.Empty();
    state.ResumeTiming();
    if (!program_ok) {
      const TraceOp& op = t.ops[step];
      state.SkipWithError(absl::StrCat("step ", step, ": ",
                                       op.size != 0 ? absl::StrCat("allocating ", op.size, " B")
                                                    : std::string("a free"),
                                       " failed")
                              .c_str());
      break;
    }
    if (!ok) {
      state.SkipWithError("freeing the program's leftovers failed");
      break;
    }
  }
  state.counters["reserved"] = Bytes(reserved);
  if constexpr (!std::is_same_v<A, CudaMalloc>) state.counters["peak_reserved"] = Bytes(peak);
  state.counters["device_used"] = Bytes(device_used);
  state.counters["steps"] = static_cast<double>(t.ops.size());
  state.counters["time_per_step"] = TimePer(static_cast<double>(t.ops.size()));
  state.counters["peak_live"] = Bytes(t.peak_live_bytes);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * t.ops.size()));
}

// ----------------------------------------------------------- registration

enum class Kind { kCudaAsync, kStreampool, kCudaMalloc };

template <template <typename> class Body>
void Dispatch(benchmark::State& state, Kind kind) {
  switch (kind) {
    case Kind::kCudaAsync:
      return Body<CudaAsync>::Run(state);
    case Kind::kStreampool:
      return Body<Streampool>::Run(state);
    case Kind::kCudaMalloc:
      return Body<CudaMalloc>::Run(state);
  }
}
template <typename A>
struct Pair {
  static void Run(benchmark::State& s) { PairBody<A>(s); }
};
template <typename A>
struct CrossStream {
  static void Run(benchmark::State& s) { CrossStreamBody<A>(s); }
};
template <typename A>
struct Random {
  static void Run(benchmark::State& s) { RandomBody<A>(s); }
};

void BM_Gpu_Pair(benchmark::State& state, Kind kind) { Dispatch<Pair>(state, kind); }
void BM_Gpu_CrossStream(benchmark::State& state, Kind kind) { Dispatch<CrossStream>(state, kind); }
void BM_Gpu_Random(benchmark::State& state, Kind kind) { Dispatch<Random>(state, kind); }

void PairSizes(benchmark::internal::Benchmark* b) {
  b->ArgName("size")->Arg(64)->Arg(4 * kKiB)->Arg(1 * kMiB)->UseRealTime();
}

// The baseline of each workload first: the ratios are taken as runs are
// reported, against the workload's cuda_malloc_async run.
BENCHMARK_CAPTURE(BM_Gpu_Pair, cuda_malloc_async, Kind::kCudaAsync)->Apply(PairSizes);
BENCHMARK_CAPTURE(BM_Gpu_Pair, streampool, Kind::kStreampool)->Apply(PairSizes);
BENCHMARK_CAPTURE(BM_Gpu_Pair, cuda_malloc, Kind::kCudaMalloc)->Apply(PairSizes);
BENCHMARK_CAPTURE(BM_Gpu_CrossStream, cuda_malloc_async, Kind::kCudaAsync)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Gpu_CrossStream, streampool, Kind::kStreampool)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Gpu_CrossStream, cuda_malloc, Kind::kCudaMalloc)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Gpu_Random, cuda_malloc_async, Kind::kCudaAsync)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Gpu_Random, streampool, Kind::kStreampool)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Gpu_Random, cuda_malloc, Kind::kCudaMalloc)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---------------------------------------------------------------- ratios

// The figures the ratios are taken of: wall time per iteration and the
// memory counters.
constexpr const char* kRatioCounters[] = {"reserved", "peak_reserved", "device_used"};

double NsPerIteration(const benchmark::BenchmarkReporter::Run& run) {
  double unit = 1;
  switch (run.time_unit) {
    case benchmark::kNanosecond:
      unit = 1;
      break;
    case benchmark::kMicrosecond:
      unit = 1e3;
      break;
    case benchmark::kMillisecond:
      unit = 1e6;
      break;
    case benchmark::kSecond:
      unit = 1e9;
      break;
  }
  return run.GetAdjustedRealTime() * unit;
}

std::string Duration(double ns) {
  if (ns < 1e3) return absl::StrFormat("%.1f ns", ns);
  if (ns < 1e6) return absl::StrFormat("%.2f us", ns / 1e3);
  return absl::StrFormat("%.2f ms", ns / 1e6);
}

// Every run's figures over its workload's cuda_malloc_async figures, added
// to the run as counters (so the JSON has them) and kept for the table.
class Ratios {
 public:
  // Adds the ratio counters to `run`; with `keep`, remembers it for the
  // table. A run's name is "BM_Gpu_<workload>/<allocator>[/size:N]...".
  void Annotate(benchmark::BenchmarkReporter::Run& run, bool keep) {
    const std::string function = run.run_name.function_name;  // BM_Gpu_Pair/streampool
    const size_t slash = function.find('/');
    if (slash == std::string::npos) return;
    Row row;
    constexpr size_t kPrefix = sizeof("BM_Gpu_") - 1;
    if (slash < kPrefix) return;
    row.workload = absl::StrCat(function.substr(kPrefix, slash - kPrefix),
                                run.run_name.args.empty() ? "" : "/", run.run_name.args);
    row.allocator = function.substr(slash + 1);
    if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate) {
      if (run.aggregate_name != "median") return;  // the median stands for repetitions
      row.workload += " (median)";
    }
    if (run.error_occurred) {
      row.error = run.error_message;
      if (keep) rows_.push_back(row);
      return;
    }
    row.ns = NsPerIteration(run);
    for (const char* name : kRatioCounters) {
      auto it = run.counters.find(name);
      if (it != run.counters.end()) row.figures[name] = it->second.value;
    }
    if (row.allocator == CudaAsync::kName) baselines_[row.workload] = row;
    auto base = baselines_.find(row.workload);
    if (base != baselines_.end()) {
      const Row& b = base->second;
      if (b.ns > 0) {
        row.ratios["time"] = row.ns / b.ns;
        run.counters["time_ratio"] = row.ratios["time"];
      }
      for (const auto& [name, value] : row.figures) {
        auto bv = b.figures.find(name);
        if (bv == b.figures.end() || bv->second <= 0) continue;
        row.ratios[name] = value / bv->second;
        run.counters[absl::StrCat(name, "_ratio")] = row.ratios[name];
      }
    }
    if (keep) rows_.push_back(std::move(row));
  }

  // The table printed at exit: per workload and allocator, time per
  // iteration and memory held, each with its ratio to cuda_malloc_async.
  std::string Table() const {
    std::string out = absl::StrCat(
        "\nstreampool (spExecutorCuda) against cudaMallocAsync (default pool, release threshold "
        "max) and cudaMalloc",
        TheDevice().ok ? absl::StrCat(" on ", TheDevice().name) : "", "\n");
    // One reason for every run (no GPU here) is said once.
    bool one_error = !rows_.empty();
    for (const Row& r : rows_)
      one_error = one_error && r.error == rows_.front().error && !r.error.empty();
    if (rows_.empty()) return out + "  nothing measured\n";
    if (one_error) return absl::StrCat(out, "  nothing measured: ", rows_.front().error, "\n");
    absl::StrAppendFormat(&out, "%-22s %-18s %14s %8s %12s %8s %12s %8s %12s %8s\n", "workload",
                          "allocator", "time/iter", "x async", "reserved", "x async", "peak",
                          "x async", "device used", "x async");
    auto ratio = [](const Row& r, const char* name) -> std::string {
      auto it = r.ratios.find(name);
      return it == r.ratios.end() ? "-" : absl::StrFormat("%.3f", it->second);
    };
    auto bytes = [](const Row& r, const char* name) -> std::string {
      auto it = r.figures.find(name);
      if (it == r.figures.end()) return "-";
      return absl::StrFormat("%.1f MiB", it->second / static_cast<double>(kMiB));
    };
    for (const Row& r : rows_) {
      if (!r.error.empty()) {
        absl::StrAppendFormat(&out, "%-22s %-18s %s\n", r.workload, r.allocator, r.error);
        continue;
      }
      absl::StrAppendFormat(&out, "%-22s %-18s %14s %8s %12s %8s %12s %8s %12s %8s\n", r.workload,
                            r.allocator, Duration(r.ns), ratio(r, "time"), bytes(r, "reserved"),
                            ratio(r, "reserved"), bytes(r, "peak_reserved"),
                            ratio(r, "peak_reserved"), bytes(r, "device_used"),
                            ratio(r, "device_used"));
    }
    return out;
  }

 private:
  struct Row {
    std::string workload, allocator, error;
    double ns = 0;
    std::map<std::string, double> figures, ratios;
  };
  std::map<std::string, Row> baselines_;
  std::vector<Row> rows_;
};

// A reporter that adds the ratios to each run before `inner` reports it.
class RatioReporter : public benchmark::BenchmarkReporter {
 public:
  RatioReporter(Ratios* ratios, std::unique_ptr<BenchmarkReporter> inner, bool keep)
      : ratios_(ratios), inner_(std::move(inner)), keep_(keep) {}
  bool ReportContext(const Context& context) override {
    // The library points this reporter at its stream (stdout, or the
    // --benchmark_out file); the inner one writes there.
    inner_->SetOutputStream(&GetOutputStream());
    inner_->SetErrorStream(&GetErrorStream());
    return inner_->ReportContext(context);
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> annotated = runs;
    for (Run& run : annotated) ratios_->Annotate(run, keep_);
    inner_->ReportRuns(annotated);
  }
  void Finalize() override { inner_->Finalize(); }

 private:
  Ratios* ratios_;
  std::unique_ptr<BenchmarkReporter> inner_;
  bool keep_;
};

}  // namespace
}  // namespace streampool::bench

int main(int argc, char** argv) {
  namespace sb = streampool::bench;
  // --benchmark_out decides whether there is a file report, and its format
  // which reporter this binary wraps (the library opens the file).
  bool file_out = false;
  std::string out_format = "json";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--benchmark_out=")) file_out = arg.size() > 16;
    if (absl::StartsWith(arg, "--benchmark_out_format=")) out_format = arg.substr(23);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (sb::TheDevice().ok) benchmark::AddCustomContext("gpu", sb::TheDevice().name);

  sb::Ratios ratios;
  const auto options = isatty(STDOUT_FILENO) == 1 ? benchmark::ConsoleReporter::OO_ColorTabular
                                                  : benchmark::ConsoleReporter::OO_Tabular;
  sb::RatioReporter display(&ratios, std::make_unique<benchmark::ConsoleReporter>(options),
                            /*keep=*/true);
  // JSON and console files get the ratios; another format is the library's
  // own reporter, without them.
  std::unique_ptr<benchmark::BenchmarkReporter> file;
  if (file_out && (out_format == "json" || out_format == "console")) {
    std::unique_ptr<benchmark::BenchmarkReporter> inner;
    if (out_format == "console") {
      inner = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
    } else {
      inner = std::make_unique<benchmark::JSONReporter>();
    }
    file = std::make_unique<sb::RatioReporter>(&ratios, std::move(inner), /*keep=*/false);
  }
  benchmark::RunSpecifiedBenchmarks(&display, file.get());
  benchmark::Shutdown();
  std::fputs(ratios.Table().c_str(), stdout);
  return 0;
}
