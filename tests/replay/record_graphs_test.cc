// A program that uses graphs, recorded and replayed: captured allocations
// and frees, launches on two streams ordered by events, a graph allocation
// freed outside its graph (stream-ordered and synchronous), a graph built by
// hand with memory nodes, a child graph, a clone, an update, trims, event
// record and wait nodes from a capture. At the
// recorded settings the replay takes every pool decision again and ends
// with the live run's graph memory figures.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/replay.h"
#include "src/replay/report.h"
#include "src/replay/trace.h"
#include "streampool/runtime.h"

namespace streampool::replay {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

struct Live {
  uint64_t allocations = 0;  // pool and captured, each a decision
  PoolStats pool;
  GraphMemStats graph;
};

void RunProgram(Runtime& rt, Live& live) {
  const StreamId s1 = *rt.CreateStream(0, /*non_blocking=*/true);
  const StreamId s2 = *rt.CreateStream(0, /*non_blocking=*/true);
  const EventId fork = *rt.CreateEvent();
  const EventId join = *rt.CreateEvent();
  const EventId between = *rt.CreateEvent();
  const EventId ext = *rt.CreateEvent();
  std::vector<void*> pool_ptrs;
  auto pool_alloc = [&](uint64_t size, StreamId s) {
    absl::StatusOr<AllocInfo> a = rt.MallocAsync(size, s);
    ASSERT_TRUE(a.ok()) << a.status();
    ++live.allocations;
    pool_ptrs.push_back(a->ptr);
  };
  pool_alloc(3 * kMiB, s1);
  pool_alloc(1 * kMiB, s2);

  // Captured on s1, joined by s2: p is freed inside the graph, q outside.
  ASSERT_TRUE(rt.RecordEvent(ext, s2).ok());
  ASSERT_TRUE(rt.BeginCapture(s1).ok());
  // Event wait and record nodes: the graph waits for ext's latest record
  // and records it.
  ASSERT_TRUE(rt.StreamWaitEvent(s1, ext, EventWaitFlag::kExternal).ok());
  void* p = rt.MallocAsync(4 * kMiB, s1)->ptr;
  ASSERT_TRUE(rt.LaunchKernel(s1, 5000, {}).ok());
  ASSERT_TRUE(rt.RecordEvent(fork, s1).ok());
  ASSERT_TRUE(rt.StreamWaitEvent(s2, fork).ok());
  void* q = rt.MallocAsync(6 * kMiB, s2)->ptr;
  ASSERT_TRUE(rt.MemsetAsync(q, 0, 4096, s2).ok());
  ASSERT_TRUE(rt.LaunchHostFunc(s2, [] {}).ok());
  ASSERT_TRUE(rt.RecordEvent(join, s2).ok());
  ASSERT_TRUE(rt.StreamWaitEvent(s1, join).ok());
  ASSERT_TRUE(rt.FreeAsync(p, s1).ok());
  ASSERT_TRUE(rt.RecordEvent(ext, s1, EventRecordFlag::kExternal).ok());
  live.allocations += 2;
  absl::StatusOr<GraphId> captured = rt.EndCapture(s1);
  ASSERT_TRUE(captured.ok()) << captured.status();
  const GraphExecId exec = *rt.Instantiate(*captured);

  // Launched on alternate streams; q freed after each launch, on the other
  // stream once an event orders it.
  for (int i = 0; i < 4; ++i) {
    const StreamId on = i % 2 == 0 ? s1 : s2;
    const StreamId other = i % 2 == 0 ? s2 : s1;
    {
      absl::Status st = rt.LaunchGraph(exec, on);
      ASSERT_TRUE(st.ok()) << st;
    }
    pool_alloc((i + 1) * kMiB, on);
    ASSERT_TRUE(rt.RecordEvent(between, on).ok());
    ASSERT_TRUE(rt.StreamWaitEvent(other, between).ok());
    ASSERT_TRUE(rt.FreeAsync(q, other).ok());
    ASSERT_TRUE(rt.FreeAsync(pool_ptrs.back(), other).ok());
    pool_ptrs.pop_back();
    ASSERT_TRUE(rt.HostAdvance(2000).ok());
  }

  // By hand: an allocation node, a fill of it, a child graph, an event
  // record, the free node; an edge added afterwards.
  const GraphId child = *rt.CreateGraph();
  const GraphNodeId k = *rt.AddKernelNode(child, {}, 3000);
  ASSERT_TRUE(rt.AddEmptyNode(child, {k}).ok());
  const GraphId clone = *rt.CloneGraph(child);
  const GraphId hand = *rt.CreateGraph();
  const GraphAllocNode a = *rt.AddMemAllocNode(hand, {}, 0, 8 * kMiB);
  const GraphNodeId fill = *rt.AddMemsetNode(hand, {a.node}, a.dptr, 1, 8 * kMiB);
  const GraphNodeId sub = *rt.AddChildGraphNode(hand, {a.node}, child);
  const GraphNodeId host = *rt.AddHostNode(hand, {}, [] {});
  const GraphNodeId rec = *rt.AddEventRecordNode(hand, {fill, sub}, between);
  ASSERT_TRUE(rt.AddDependencies(hand, {{GraphEdge{host, sub}}}).ok());
  ASSERT_TRUE(rt.AddMemFreeNode(hand, {rec}, a.dptr).ok());
  const GraphExecId hand_exec = *rt.Instantiate(hand, kGraphInstantiateUpload);
  ASSERT_TRUE(rt.UploadGraph(hand_exec, s2).ok());
  ASSERT_TRUE(rt.LaunchGraph(hand_exec, s2).ok());
  ASSERT_TRUE(rt.LaunchGraph(hand_exec, s2).ok());
  ASSERT_TRUE(rt.StreamWaitEvent(s1, between).ok());
  const GraphExecId child_exec = *rt.Instantiate(child);
  ASSERT_TRUE(rt.UpdateGraphExec(child_exec, clone).ok());
  ASSERT_TRUE(rt.LaunchGraph(child_exec, s1).ok());

  // A last launch whose q is freed synchronously, then everything goes.
  ASSERT_TRUE(rt.LaunchGraph(exec, s1).ok());
  ASSERT_TRUE(rt.StreamSynchronize(s1).ok());
  ASSERT_TRUE(rt.Free(q).ok());
  ASSERT_TRUE(rt.ResetGraphMemoryHigh(0, GraphMemHigh::kUsed).ok());
  ASSERT_TRUE(rt.DestroyGraphExec(child_exec).ok());
  ASSERT_TRUE(rt.DestroyGraphExec(hand_exec).ok());
  ASSERT_TRUE(rt.DestroyGraph(hand).ok());
  ASSERT_TRUE(rt.DestroyGraph(clone).ok());
  ASSERT_TRUE(rt.TrimGraphMemory(0).ok());
  pool_alloc(5 * kMiB, s2);
  for (void* ptr : pool_ptrs) ASSERT_TRUE(rt.FreeAsync(ptr, s2).ok());
  // What is left: the captured graph and its executable graph.
  live.pool = *rt.GetPoolStats(*rt.DefaultPool(0));
  live.graph = *rt.GraphMemoryStats(0);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RecordGraphs, ReplayTakesTheRecordedDecisionsAndGraphMemory) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/record_graphs.", ::getpid(), ".trace");
  RuntimeConfig config;
  config.backing = Backing::kAddressOnly;
  config.device_capacity = uint64_t{1} << 30;
  std::unique_ptr<Runtime> rt = *Runtime::Create(config);
  rt->EnableChecker(true);
  ASSERT_TRUE(rt->StartRecording(path).ok());
  Live live;
  RunProgram(*rt, live);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(rt->StopRecording().ok());
  EXPECT_TRUE(rt->CheckReports().empty());
  ASSERT_GT(live.graph.reserved_high, 0u);

  const std::string text = Slurp(path);
  for (const char* line : {"capture 1 0\n",
                           "  # graph\n",
                           "endcapture 1 0\n",
                           "ginst 0 0 0\n",
                           "glaunch 0 1\n",
                           "xwait 1 3\n",
                           "xrecord 3 1\n",
                           "glaunch 0 2\n",
                           "gcreate 1\n",
                           "gnode 1 0 kernel 3000\n",
                           "gnode 1 1 empty 0\n",
                           "gclone 2 1\n",
                           "gnode 3 0 mem_alloc ",
                           "gnode 3 1 memset 8388608 0\n",
                           "gnode 3 2 graph 1 0\n",
                           "gnode 3 3 host\n",
                           "gnode 3 4 event_record 2 1 2\n",
                           "gedge 3 3 2\n",
                           "ginst 1 3 2\n",
                           "gupload 1 2\n",
                           "gupdate 2 2\n",
                           "greset 0 used\n",
                           "gtrim 0\n",
                           "release "}) {
    EXPECT_THAT(text, HasSubstr(line));
  }

  absl::StatusOr<Trace> trace = LoadTrace(path);
  std::remove(path.c_str());
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplaySettings settings;
  settings.use_recorded = true;
  absl::StatusOr<ReplayResult> r = Replay(*trace, settings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->decisions_checked, live.allocations);
  EXPECT_EQ(r->decisions_diverged, 0u) << r->first_divergence;
  EXPECT_EQ(r->checker_reports, 0u);
  EXPECT_EQ(r->stats.reserved_high, live.pool.reserved_high);
  EXPECT_EQ(r->stats.used_high, live.pool.used_high);
  EXPECT_EQ(r->stats.reserved_bytes, live.pool.reserved_bytes);
  EXPECT_EQ(r->stats.reuse_same_stream, live.pool.reuse_same_stream);
  EXPECT_EQ(r->stats.reuse_event_dependency, live.pool.reuse_event_dependency);
  ASSERT_EQ(r->graph_memory.size(), 1u);
  EXPECT_EQ(r->graph_memory[0].used_high, live.graph.used_high);
  EXPECT_EQ(r->graph_memory[0].reserved_high, live.graph.reserved_high);
  EXPECT_EQ(r->graph_memory[0].used_end, live.graph.used_current);
  EXPECT_EQ(r->graph_memory[0].reserved_end, live.graph.reserved_current);
  EXPECT_EQ(r->failed_launches, 0u);

  // The reports show graph memory beside the pools.
  const std::vector<TraceReport> reports{TraceReport{&*trace, {*r}}};
  EXPECT_THAT(FormatJson(reports), HasSubstr("\"graph_memory\""));
  EXPECT_THAT(FormatText(reports),
              HasSubstr(absl::StrCat("graph memory device 0: used high ", live.graph.used_high)));
}

}  // namespace
}  // namespace streampool::replay
