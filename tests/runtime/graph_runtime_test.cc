// Graphs through streampool::Runtime: the same handles and rules as the C
// API's (tests/capi/graph_capi_test.cc pins the CUDA guide's scenarios), seen
// through the typed ids, with each method's error paths: a handle of the
// wrong kind, a destroyed graph, a second executable graph of a graph with
// memory nodes.
#include <cstdint>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kMiB = uint64_t{1} << 20;

class GraphRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = *Runtime::Create();
    s_ = *rt_->CreateStream(0, /*non_blocking=*/true);
    s2_ = *rt_->CreateStream(0, /*non_blocking=*/true);
  }
  uint64_t Used() { return rt_->GraphMemoryStats(0)->used_current; }

  std::unique_ptr<Runtime> rt_;
  StreamId s_, s2_;
};

TEST_F(GraphRuntimeTest, CaptureTurnsOpsIntoNodes) {
  std::vector<unsigned char> a(256, 5), b(256, 0);
  ASSERT_TRUE(rt_->BeginCapture(s_, CaptureMode::kThreadLocal).ok());
  EXPECT_EQ(*rt_->CaptureStatusOf(s_), CaptureStatus::kActive);
  ASSERT_TRUE(rt_->MemcpyAsync(b.data(), a.data(), 256, s_).ok());
  ASSERT_TRUE(rt_->LaunchKernel(s_, 1000, {}).ok());
  absl::StatusOr<CaptureInfo> info = rt_->GetCaptureInfo(s_);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->status, CaptureStatus::kActive);
  EXPECT_GE(info->id, 1u);
  ASSERT_EQ(info->deps.size(), 1u);
  EXPECT_EQ(*rt_->NodeType(info->deps[0]), GraphNodeType::kKernel);
  absl::StatusOr<GraphId> g = rt_->EndCapture(s_);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, info->graph);
  EXPECT_EQ(*rt_->CaptureStatusOf(s_), CaptureStatus::kNone);
  EXPECT_EQ(rt_->GetCaptureInfo(s_)->id, 0u);
  EXPECT_EQ(b[0], 0);  // captured, not run

  absl::StatusOr<std::vector<GraphNodeId>> nodes = rt_->GraphNodes(*g);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ(*rt_->NodeType((*nodes)[0]), GraphNodeType::kMemcpy);
  EXPECT_THAT(*rt_->GraphEdges(*g), ElementsAre(GraphEdge{(*nodes)[0], (*nodes)[1]}));
  absl::StatusOr<GraphExecId> x = rt_->Instantiate(*g);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(rt_->LaunchGraph(*x, s_).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(s_).ok());
  EXPECT_EQ(b[255], 5);
  EXPECT_TRUE(rt_->DestroyGraphExec(*x).ok());
  EXPECT_TRUE(rt_->DestroyGraph(*g).ok());
}

TEST_F(GraphRuntimeTest, CaptureToAGraphAfterItsNodes) {
  GraphId g = *rt_->CreateGraph();
  GraphNodeId first = *rt_->AddEmptyNode(g, {});
  ASSERT_TRUE(rt_->BeginCaptureToGraph(s_, g, {first}).ok());
  ASSERT_TRUE(rt_->LaunchKernel(s_, 10, {}).ok());
  absl::StatusOr<GraphId> ended = rt_->EndCapture(s_);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->value, 0u);  // the nodes are in g
  std::vector<GraphNodeId> nodes = *rt_->GraphNodes(g);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_THAT(*rt_->NodeDependencies(nodes[1]), ElementsAre(first));
  EXPECT_TRUE(rt_->DestroyGraph(g).ok());
}

// MallocAsync and FreeAsync in a capture are memory nodes; the pool is
// untouched.
TEST_F(GraphRuntimeTest, CapturedAllocationsAreMemoryNodes) {
  ASSERT_TRUE(rt_->BeginCapture(s_).ok());
  absl::StatusOr<AllocInfo> a = rt_->MallocAsync(kMiB, s_);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(rt_->FreeAsync(a->ptr, s_).ok());
  GraphId g = *rt_->EndCapture(s_);
  std::vector<GraphNodeId> nodes = *rt_->GraphNodes(g);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(*rt_->NodeType(nodes[0]), GraphNodeType::kMemAlloc);
  EXPECT_EQ(*rt_->NodeType(nodes[1]), GraphNodeType::kMemFree);
  EXPECT_EQ(rt_->GetPoolStats(*rt_->DefaultPool(0))->alloc_count, 0u);
  ASSERT_TRUE(rt_->DestroyGraph(g).ok());
}

// Capture errors carry CUDA's codes, which the C API would return.
TEST_F(GraphRuntimeTest, CaptureErrorsCarryTheirCCodes) {
  EXPECT_EQ(ToCError(rt_->BeginCapture(*rt_->LegacyStream(0))), spErrorStreamCaptureUnsupported);
  ASSERT_TRUE(rt_->BeginCapture(s_).ok());
  EXPECT_EQ(ToCError(rt_->BeginCapture(s_)), spErrorIllegalState);
  EXPECT_EQ(ToCError(rt_->StreamSynchronize(s_)), spErrorStreamCaptureUnsupported);
  EXPECT_EQ(*rt_->CaptureStatusOf(s_), CaptureStatus::kInvalidated);
  EXPECT_EQ(ToCError(rt_->LaunchKernel(s_, 1, {})), spErrorStreamCaptureInvalidated);
  EXPECT_EQ(ToCError(rt_->EndCapture(s_).status()), spErrorStreamCaptureInvalidated);
  EXPECT_EQ(rt_->EndCapture(s_).status().code(), absl::StatusCode::kInvalidArgument);

  EventId fork = *rt_->CreateEvent();
  ASSERT_TRUE(rt_->BeginCapture(s_).ok());
  ASSERT_TRUE(rt_->RecordEvent(fork, s_).ok());
  ASSERT_TRUE(rt_->StreamWaitEvent(s2_, fork).ok());
  ASSERT_TRUE(rt_->LaunchKernel(s2_, 1, {}).ok());
  EXPECT_EQ(ToCError(rt_->EndCapture(s2_).status()), spErrorStreamCaptureUnmatched);
  EXPECT_EQ(ToCError(rt_->EndCapture(s_).status()), spErrorStreamCaptureUnjoined);
  EXPECT_EQ(rt_->CaptureStatusOf(StreamId{12345}).status().code(), absl::StatusCode::kNotFound);
}

// The graph a capture builds cannot be destroyed while it does: the capture
// would go on adding to a graph whose handle is gone.
TEST_F(GraphRuntimeTest, AGraphUnderCaptureCannotBeDestroyed) {
  ASSERT_TRUE(rt_->BeginCapture(s_).ok());
  const GraphId captured = rt_->GetCaptureInfo(s_)->graph;
  EXPECT_EQ(ToCError(rt_->DestroyGraph(captured)), spErrorIllegalState);
  ASSERT_TRUE(rt_->MallocAsync(kMiB, s_).ok());
  ASSERT_TRUE(rt_->GetCaptureInfo(s_).ok());
  absl::StatusOr<GraphId> g = rt_->EndCapture(s_);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(rt_->GraphNodes(*g)->size(), 1u);
  EXPECT_TRUE(rt_->DestroyGraph(*g).ok());

  GraphId mine = *rt_->CreateGraph();
  ASSERT_TRUE(rt_->BeginCaptureToGraph(s_, mine, {}).ok());
  EXPECT_EQ(ToCError(rt_->DestroyGraph(mine)), spErrorIllegalState);
  ASSERT_TRUE(rt_->LaunchKernel(s_, 1, {}).ok());
  ASSERT_TRUE(rt_->EndCapture(s_).ok());
  EXPECT_EQ(rt_->GraphNodes(mine)->size(), 1u);
  EXPECT_TRUE(rt_->DestroyGraph(mine).ok());
}

// Every kind of node, its type and neighbours, and the graph run: the copy
// and the fill move bytes in dependency order, the host node and the kernel
// body run, events are recorded and waited on.
TEST_F(GraphRuntimeTest, HandBuiltGraphOfEveryKind) {
  std::vector<unsigned char> src(64, 3), dst(64, 0);
  int host_runs = 0, body_runs = 0;
  EventId e = *rt_->CreateEvent();
  GraphId g = *rt_->CreateGraph();
  GraphNodeId fill = *rt_->AddMemsetNode(g, {}, src.data(), 9, 32);
  GraphNodeId copy = *rt_->AddMemcpyNode(g, {fill}, dst.data(), src.data(), 64);
  GraphNodeId host = *rt_->AddHostNode(g, {copy}, [&] { ++host_runs; });
  GraphNodeId kernel = *rt_->AddKernelNode(g, {copy}, 500, {}, [&] { ++body_runs; });
  GraphNodeId record = *rt_->AddEventRecordNode(g, {host, kernel}, e);
  GraphNodeId wait = *rt_->AddEventWaitNode(g, {}, e);
  GraphId child = *rt_->CreateGraph();
  ASSERT_TRUE(rt_->AddEmptyNode(child, {}).ok());
  GraphNodeId sub = *rt_->AddChildGraphNode(g, {}, child);
  GraphNodeId empty = *rt_->AddEmptyNode(g, {});
  ASSERT_TRUE(rt_->AddDependencies(g, {{GraphEdge{record, empty}, GraphEdge{sub, empty}}}).ok());

  EXPECT_EQ(*rt_->NodeType(fill), GraphNodeType::kMemset);
  EXPECT_EQ(*rt_->NodeType(host), GraphNodeType::kHost);
  EXPECT_EQ(*rt_->NodeType(record), GraphNodeType::kEventRecord);
  EXPECT_EQ(*rt_->NodeType(wait), GraphNodeType::kWaitEvent);
  EXPECT_EQ(*rt_->NodeType(sub), GraphNodeType::kGraph);
  EXPECT_EQ(*rt_->NodeType(empty), GraphNodeType::kEmpty);
  EXPECT_THAT(*rt_->GraphRootNodes(g), ElementsAre(fill, wait, sub));
  EXPECT_THAT(*rt_->NodeDependents(copy), UnorderedElementsAre(host, kernel));
  EXPECT_THAT(*rt_->NodeDependencies(empty), ElementsAre(record, sub));
  EXPECT_EQ(rt_->GraphNodes(g)->size(), 8u);
  EXPECT_EQ(rt_->GraphEdges(g)->size(), 7u);

  GraphExecId x = *rt_->Instantiate(g, kGraphInstantiateUpload);
  ASSERT_TRUE(rt_->UploadGraph(x, s_).ok());
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(s_).ok());
  EXPECT_EQ(dst[0], 9);
  EXPECT_EQ(dst[63], 3);
  EXPECT_EQ(host_runs, 1);
  EXPECT_EQ(body_runs, 1);
  EXPECT_TRUE(rt_->EventQuery(e).ok());

  // A clone is a graph of its own.
  GraphId copy_of = *rt_->CloneGraph(g);
  EXPECT_EQ(rt_->GraphNodes(copy_of)->size(), 8u);
  EXPECT_TRUE(rt_->DestroyGraph(copy_of).ok());
  EXPECT_TRUE(rt_->DestroyGraphExec(x).ok());
  EXPECT_TRUE(rt_->DestroyGraph(child).ok());
  EXPECT_TRUE(rt_->DestroyGraph(g).ok());
}

TEST_F(GraphRuntimeTest, BadNodesAreRefusedAndAddNothing) {
  GraphId g = *rt_->CreateGraph();
  GraphNodeId a = *rt_->AddEmptyNode(g, {});
  GraphNodeId b = *rt_->AddEmptyNode(g, {a});
  EXPECT_EQ(rt_->AddMemcpyNode(g, {}, nullptr, nullptr, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddMemsetNode(g, {}, nullptr, 0, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddHostNode(g, {}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddEmptyNode(g, {a, a}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddEventWaitNode(g, {}, EventId{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddEventRecordNode(g, {}, EventId{g.value}).status().code(),
            absl::StatusCode::kNotFound);
  // A cycle, or an edge that exists: none of the edges is added.
  EXPECT_EQ(rt_->AddDependencies(g, {{GraphEdge{a, b}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddDependencies(g, {{GraphEdge{b, a}}}).code(),
            absl::StatusCode::kInvalidArgument);
  GraphId other = *rt_->CreateGraph();
  EXPECT_EQ(rt_->AddEmptyNode(other, {a}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddChildGraphNode(g, {}, g).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->GraphNodes(g)->size(), 2u);
  EXPECT_EQ(rt_->GraphEdges(g)->size(), 1u);
  EXPECT_TRUE(rt_->DestroyGraph(other).ok());
  EXPECT_TRUE(rt_->DestroyGraph(g).ok());
}

// Ids of one kind handed where another goes, and ids of what was destroyed,
// are invalid handles.
TEST_F(GraphRuntimeTest, WrongKindAndDestroyedHandles) {
  GraphId g = *rt_->CreateGraph();
  GraphNodeId n = *rt_->AddEmptyNode(g, {});
  GraphExecId x = *rt_->Instantiate(g);
  const auto not_found = absl::StatusCode::kNotFound;
  EXPECT_EQ(rt_->GraphNodes(GraphId{n.value}).status().code(), not_found);
  EXPECT_EQ(rt_->GraphNodes(GraphId{x.value}).status().code(), not_found);
  EXPECT_EQ(rt_->GraphNodes(GraphId{s_.value}).status().code(), not_found);
  EXPECT_EQ(rt_->NodeType(GraphNodeId{g.value}).status().code(), not_found);
  EXPECT_EQ(rt_->LaunchGraph(GraphExecId{g.value}, s_).code(), not_found);
  EXPECT_EQ(rt_->LaunchGraph(x, StreamId{g.value}).code(), not_found);
  EXPECT_EQ(rt_->Instantiate(g, 4).status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(rt_->DestroyGraph(g).ok());
  EXPECT_EQ(rt_->DestroyGraph(g).code(), not_found);
  EXPECT_EQ(rt_->AddEmptyNode(g, {}).status().code(), not_found);
  EXPECT_EQ(rt_->NodeType(n).status().code(), not_found);
  EXPECT_EQ(rt_->Instantiate(g).status().code(), not_found);
  EXPECT_EQ(rt_->CloneGraph(g).status().code(), not_found);
  // The executable graph outlives its graph.
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  EXPECT_EQ(rt_->LaunchGraph(x, s_).code(), not_found);
  EXPECT_EQ(rt_->UploadGraph(x, s_).code(), not_found);
  EXPECT_EQ(rt_->DestroyGraphExec(x).code(), not_found);
}

// Graph memory: the address is fixed at the node, a launch maps it once and
// relaunches reuse it; a graph with memory nodes has one executable graph at
// a time and is neither cloned nor a child.
TEST_F(GraphRuntimeTest, MemoryNodesAndTheirFootprint) {
  GraphId g = *rt_->CreateGraph();
  absl::StatusOr<GraphAllocNode> alloc = rt_->AddMemAllocNode(g, {}, 0, 3 * kMiB);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  ASSERT_NE(alloc->dptr, nullptr);
  EXPECT_EQ(*rt_->NodeType(alloc->node), GraphNodeType::kMemAlloc);
  Access access{alloc->dptr, 3 * kMiB, true};
  GraphNodeId k = *rt_->AddKernelNode(g, {alloc->node}, 1000, {&access, 1});
  GraphNodeId f = *rt_->AddMemFreeNode(g, {k}, alloc->dptr);
  EXPECT_EQ(*rt_->NodeType(f), GraphNodeType::kMemFree);
  EXPECT_EQ(rt_->AddMemFreeNode(g, {f}, alloc->dptr).status().code(),
            absl::StatusCode::kInvalidArgument);

  GraphExecId x = *rt_->Instantiate(g);
  EXPECT_EQ(rt_->Instantiate(g).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->CloneGraph(g).status().code(), absl::StatusCode::kUnimplemented);
  GraphId parent = *rt_->CreateGraph();
  EXPECT_EQ(rt_->AddChildGraphNode(parent, {}, g).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Used(), 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(s_).ok());
  const GraphMemStats stats = *rt_->GraphMemoryStats(0);
  EXPECT_EQ(stats.used_current, 4 * kMiB);  // 2 MiB pages
  EXPECT_EQ(stats.reserved_high, 4 * kMiB);
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  // Once the first is gone, another may be made.
  x = *rt_->Instantiate(g);
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  ASSERT_TRUE(rt_->DestroyGraph(g).ok());
  ASSERT_TRUE(rt_->DestroyGraph(parent).ok());
  ASSERT_TRUE(rt_->TrimGraphMemory(0).ok());
  EXPECT_EQ(rt_->GraphMemoryStats(0)->reserved_current, 0u);
  EXPECT_EQ(rt_->GraphMemoryStats(0)->used_high, 4 * kMiB);
  ASSERT_TRUE(rt_->ResetGraphMemoryHigh(0, GraphMemHigh::kUsed).ok());
  EXPECT_EQ(rt_->GraphMemoryStats(0)->used_high, 0u);
  EXPECT_EQ(rt_->GraphMemoryStats(0)->reserved_high, 4 * kMiB);
  ASSERT_TRUE(rt_->ResetGraphMemoryHigh(0, GraphMemHigh::kReserved).ok());
  EXPECT_EQ(rt_->GraphMemoryStats(0)->reserved_high, 0u);
  EXPECT_EQ(rt_->GraphMemoryStats(7).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(rt_->TrimGraphMemory(-1).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(GraphRuntimeTest, AllocationNodesCheckTheirProperties) {
  GraphId g = *rt_->CreateGraph();
  EXPECT_EQ(rt_->AddMemAllocNode(g, {}, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->AddMemAllocNode(g, {}, 9, kMiB).status().code(), absl::StatusCode::kOutOfRange);
  PoolProps pinned;
  pinned.alloc_type = AllocationType::kPinnedHost;
  EXPECT_EQ(rt_->AddMemAllocNode(g, {}, pinned, kMiB).status().code(),
            absl::StatusCode::kInvalidArgument);
  const MemAccessDesc host{MemLocation{MemLocationType::kHost, 0}, MemAccessFlags::kProtReadWrite};
  EXPECT_EQ(rt_->AddMemAllocNode(g, {}, PoolProps{}, kMiB, {&host, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(rt_->GraphNodes(g)->empty());
  EXPECT_TRUE(rt_->DestroyGraph(g).ok());
}

// An allocation the graph does not free outlives the launch: a relaunch needs
// it freed first, or the auto-free flag.
TEST_F(GraphRuntimeTest, UnfreedAllocationsAndAutoFree) {
  GraphId g = *rt_->CreateGraph();
  GraphAllocNode a = *rt_->AddMemAllocNode(g, {}, 0, 2 * kMiB);
  GraphExecId x = *rt_->Instantiate(g);
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  EXPECT_EQ(rt_->LaunchGraph(x, s_).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(rt_->FreeAsync(a.dptr, s_).ok());
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  x = *rt_->Instantiate(g, kGraphInstantiateAutoFreeOnLaunch);
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());  // frees the last launch's first
  ASSERT_TRUE(rt_->StreamSynchronize(s_).ok());
  ASSERT_TRUE(rt_->Free(a.dptr).ok());
  EXPECT_EQ(Used(), 2 * kMiB);  // freed memory stays mapped until a trim
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  ASSERT_TRUE(rt_->DestroyGraph(g).ok());
  ASSERT_TRUE(rt_->TrimGraphMemory(0).ok());
  EXPECT_EQ(Used(), 0u);
}

// An update keeps the executable graph's topology and takes the new
// parameters; another topology is refused with CUDA's update error.
TEST_F(GraphRuntimeTest, UpdateGraphExec) {
  std::vector<unsigned char> buf(16, 0);
  GraphId g = *rt_->CreateGraph();
  ASSERT_TRUE(rt_->AddMemsetNode(g, {}, buf.data(), 1, 16).ok());
  GraphExecId x = *rt_->Instantiate(g);
  GraphId next = *rt_->CreateGraph();
  ASSERT_TRUE(rt_->AddMemsetNode(next, {}, buf.data(), 2, 16).ok());
  ASSERT_TRUE(rt_->UpdateGraphExec(x, next).ok());
  ASSERT_TRUE(rt_->LaunchGraph(x, s_).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(s_).ok());
  EXPECT_EQ(buf[15], 2);
  ASSERT_TRUE(rt_->AddEmptyNode(next, {}).ok());
  const absl::Status st = rt_->UpdateGraphExec(x, next);
  EXPECT_EQ(ToCError(st), spErrorGraphExecUpdateFailure);
  EXPECT_EQ(rt_->UpdateGraphExec(x, GraphId{x.value}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(rt_->DestroyGraphExec(x).ok());
  ASSERT_TRUE(rt_->DestroyGraph(next).ok());
  ASSERT_TRUE(rt_->DestroyGraph(g).ok());
}

// The ids are the C API's handles.
TEST_F(GraphRuntimeTest, IdsAreTheCHandles) {
  GraphId g = *rt_->CreateGraph();
  GraphNodeId n = *rt_->AddEmptyNode(g, {});
  spGraphNodeType type;
  ASSERT_EQ(spGraphNodeGetType(n.c(), &type), spSuccess);
  EXPECT_EQ(type, spGraphNodeTypeEmpty);
  spGraphExec_t x = nullptr;
  ASSERT_EQ(spGraphInstantiate(&x, g.c(), 0), spSuccess);
  EXPECT_TRUE(rt_->DestroyGraphExec(GraphExecId{reinterpret_cast<uintptr_t>(x)}).ok());
  EXPECT_EQ(spGraphDestroy(g.c()), spSuccess);
}

}  // namespace
}  // namespace streampool
