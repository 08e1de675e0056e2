// What a graph costs against the ops it stands for, in one run.
//
// BM_Stream_Enqueue/ops:N enqueues N ops on a stream (kernels of 0 ns, each
// declaring a 4 KiB write, and every eighth op a 4 KiB copy), then
// synchronizes. BM_Graph_CaptureLaunch/ops:N captures the same N ops from
// the same stream, ends the capture, instantiates, launches the graph once,
// synchronizes and destroys the graph and the executable graph: the cost of
// a graph used once (destroying them is not timed). BM_Graph_Launch/ops:N launches an executable
// graph of those N ops made before the loop, and synchronizes: the cost of a replay. The goal is
// capture + launch no dearer than enqueueing (the first ratio below at most 1).
//
// Ratios: bench/README.md's convention, from the same run:
//   capture_launch / enqueue, launch / enqueue.
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace {

struct Env {
  Env() {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = spBackingAddressOnly;
    spRuntimeCreate(&rt, &cfg);
    spStreamCreate(&s, rt, 0, spStreamNonBlocking);
    spMalloc(&buf, 1 << 20, rt, 0);
  }
  ~Env() {
    spFree(rt, buf);
    spRuntimeDestroy(rt);
  }
  // The ops: kernels writing 4 KiB, every eighth op a copy.
  bool Enqueue(int64_t n) {
    char* b = static_cast<char*>(buf);
    for (int64_t i = 0; i < n; ++i) {
      char* at = b + (i % 128) * 4096;
      if (i % 8 == 7) {
        if (spMemcpyAsync(at, b + 512 * 1024, 4096, s) != spSuccess) return false;
      } else {
        const spAccess a{at, 4096, 1};
        if (spLaunchKernel(s, 0, &a, 1) != spSuccess) return false;
      }
    }
    return true;
  }
  spGraphExec_t Capture(int64_t n, spGraph_t* graph) {
    spGraphExec_t exec = nullptr;
    if (spStreamBeginCapture(s, spStreamCaptureModeGlobal) != spSuccess || !Enqueue(n) ||
        spStreamEndCapture(s, graph) != spSuccess ||
        spGraphInstantiate(&exec, *graph, 0) != spSuccess) {
      return nullptr;
    }
    return exec;
  }
  spRuntime_t rt = nullptr;
  spStream_t s = nullptr;
  void* buf = nullptr;
};

void BM_Stream_Enqueue(benchmark::State& state) {
  Env env;
  for (auto _ : state) {
    if (!env.Enqueue(state.range(0)) || spStreamSynchronize(env.s) != spSuccess) {
      state.SkipWithError("enqueue failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Graph_CaptureLaunch(benchmark::State& state) {
  Env env;
  for (auto _ : state) {
    spGraph_t g = nullptr;
    spGraphExec_t x = env.Capture(state.range(0), &g);
    if (x == nullptr || spGraphLaunch(x, env.s) != spSuccess ||
        spStreamSynchronize(env.s) != spSuccess) {
      state.SkipWithError("capture or launch failed");
      break;
    }
    state.PauseTiming();
    spGraphExecDestroy(x);
    spGraphDestroy(g);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Graph_Launch(benchmark::State& state) {
  Env env;
  spGraph_t g = nullptr;
  spGraphExec_t x = env.Capture(state.range(0), &g);
  if (x == nullptr) {
    state.SkipWithError("capture failed");
    return;
  }
  for (auto _ : state) {
    if (spGraphLaunch(x, env.s) != spSuccess || spStreamSynchronize(env.s) != spSuccess) {
      state.SkipWithError("launch failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  spGraphExecDestroy(x);
  spGraphDestroy(g);
}

BENCHMARK(BM_Stream_Enqueue)->ArgName("ops")->Arg(1000);
BENCHMARK(BM_Graph_CaptureLaunch)->ArgName("ops")->Arg(1000);
BENCHMARK(BM_Graph_Launch)->ArgName("ops")->Arg(1000);

}  // namespace

BENCHMARK_MAIN();
