// Graph (src/graph/graph.h): nodes and edges as CUDA's graph API builds them,
// and the plan a launch follows — every edge kept, a chain on one lane, a
// fork on lanes of its own, child graphs inlined.
#include "src/graph/graph.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace streampool::internal {
namespace {

NodeIndex AddEmpty(Graph& g, std::vector<NodeIndex> deps) {
  absl::StatusOr<NodeIndex> n = g.Add(EmptyNode{}, deps);
  EXPECT_TRUE(n.ok()) << n.status();
  return *n;
}

// Every edge a -> b of the graph holds in the plan: a's step comes first and,
// on another lane, b waits for a step at or after a on a's lane.
void ExpectPlanKeepsEdges(const Graph& g, const Plan& plan) {
  ASSERT_EQ(plan.steps.size(), g.size());
  // Without child graphs, step i is the i-th node in a topological order;
  // map params back to nodes.
  std::vector<int> step_of(g.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    for (NodeIndex n = 0; n < g.size(); ++n) {
      if (&g.node(n).params == plan.steps[s].params) step_of[n] = static_cast<int>(s);
    }
  }
  auto reaches = [&](int from, int to) {
    // from's lane reaches to: same lane and earlier, or a wait chain.
    std::vector<int> todo{to};
    std::set<int> seen;
    while (!todo.empty()) {
      const int s = todo.back();
      todo.pop_back();
      if (s == from) return true;
      if (!seen.insert(s).second) continue;
      for (int p = s - 1; p >= 0; --p) {
        if (plan.steps[p].lane == plan.steps[s].lane) {
          todo.push_back(p);
          break;
        }
      }
      for (uint32_t w : plan.steps[s].waits_for) todo.push_back(static_cast<int>(w));
    }
    return false;
  };
  for (const auto& [a, b] : g.Edges()) {
    ASSERT_GE(step_of[a], 0);
    ASSERT_GE(step_of[b], 0);
    EXPECT_LT(step_of[a], step_of[b]);
    EXPECT_TRUE(reaches(step_of[a], step_of[b])) << a << " -> " << b;
  }
}

TEST(GraphTest, AddRefusesBadAndDuplicateDependencies) {
  Graph g;
  const NodeIndex a = AddEmpty(g, {});
  EXPECT_FALSE(g.Add(EmptyNode{}, {a, a}).ok());
  EXPECT_FALSE(g.Add(EmptyNode{}, {7}).ok());
  EXPECT_EQ(g.size(), 1u);
}

TEST(GraphTest, AddEdgeRefusesCyclesAndRepeats) {
  Graph g;
  const NodeIndex a = AddEmpty(g, {});
  const NodeIndex b = AddEmpty(g, {a});
  EXPECT_FALSE(g.AddEdge(b, a).ok());
  EXPECT_FALSE(g.AddEdge(a, b).ok());
  EXPECT_FALSE(g.AddEdge(a, a).ok());
  const NodeIndex c = AddEmpty(g, {});
  EXPECT_TRUE(g.AddEdge(c, a).ok());  // a later index before an earlier one
  EXPECT_TRUE(g.Precedes(c, b));
  ExpectPlanKeepsEdges(g, MakePlan(g));
}

TEST(GraphTest, AChainTakesOneLaneAndAForkOneLaneABranch) {
  Graph chain;
  NodeIndex n = AddEmpty(chain, {});
  for (int i = 0; i < 5; ++i) n = AddEmpty(chain, {n});
  Plan p = MakePlan(chain);
  EXPECT_EQ(p.lanes, 1u);
  for (const PlanStep& s : p.steps) EXPECT_TRUE(s.waits_for.empty());
  // A chain is planned without the general walk; the same chain made with
  // edges added afterwards takes the walk, and both plans agree.
  Graph edged;
  for (NodeIndex i = 0; i < chain.size(); ++i) {
    AddEmpty(edged, {});
    if (i > 0) {
      ASSERT_TRUE(edged.AddEdge(i - 1, i).ok());
    }
  }
  ASSERT_TRUE(chain.chain());
  ASSERT_FALSE(edged.chain());
  const Plan walked = MakePlan(edged);
  ASSERT_EQ(walked.steps.size(), p.steps.size());
  EXPECT_EQ(walked.lanes, p.lanes);
  EXPECT_EQ(walked.tails, p.tails);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(walked.steps[i].lane, p.steps[i].lane);
    EXPECT_EQ(walked.steps[i].signals, p.steps[i].signals);
    EXPECT_EQ(walked.steps[i].waits_for, p.steps[i].waits_for);
  }

  Graph fork;
  const NodeIndex root = AddEmpty(fork, {});
  const NodeIndex l = AddEmpty(fork, {root});
  const NodeIndex r = AddEmpty(fork, {root});
  AddEmpty(fork, {l, r});
  p = MakePlan(fork);
  EXPECT_EQ(p.lanes, 2u);
  ExpectPlanKeepsEdges(fork, p);
}

TEST(GraphTest, AForkWhoseEdgesRunAgainstTheIndicesIsPlannedTheSame) {
  Graph g;
  const NodeIndex join = AddEmpty(g, {});
  const NodeIndex l = AddEmpty(g, {});
  const NodeIndex r = AddEmpty(g, {});
  const NodeIndex root = AddEmpty(g, {});
  ASSERT_TRUE(g.AddEdge(root, l).ok());
  ASSERT_TRUE(g.AddEdge(root, r).ok());
  ASSERT_TRUE(g.AddEdge(l, join).ok());
  ASSERT_TRUE(g.AddEdge(r, join).ok());
  EXPECT_FALSE(g.flat());
  const Plan p = MakePlan(g);
  EXPECT_EQ(p.lanes, 2u);
  EXPECT_EQ(p.steps.front().params, &g.node(root).params);
  ExpectPlanKeepsEdges(g, p);
}

TEST(GraphTest, WideFanOutIsBoundedInLanes) {
  Graph g;
  const NodeIndex root = AddEmpty(g, {});
  std::vector<NodeIndex> leaves;
  for (int i = 0; i < 100; ++i) leaves.push_back(AddEmpty(g, {root}));
  AddEmpty(g, leaves);
  const Plan p = MakePlan(g);
  EXPECT_LE(p.lanes, 16u);
  ExpectPlanKeepsEdges(g, p);
}

TEST(GraphTest, ChildGraphsAreInlinedBetweenTheirNeighbours) {
  auto child = std::make_shared<Graph>();
  const NodeIndex c0 = AddEmpty(*child, {});
  AddEmpty(*child, {c0});
  AddEmpty(*child, {c0});
  Graph g;
  const NodeIndex a = AddEmpty(g, {});
  const NodeIndex c = *g.Add(ChildGraphNode{child}, {a});
  AddEmpty(g, {c});
  const Plan p = MakePlan(g);
  EXPECT_EQ(p.steps.size(), 5u);  // the child node itself is no step
  EXPECT_EQ(p.steps.front().params, &g.node(a).params);
  EXPECT_EQ(p.steps.back().params, &g.node(2).params);
  // The last step follows both of the child's sinks.
  const PlanStep& last = p.steps.back();
  EXPECT_EQ(last.waits_for.size() + 1, 2u);
}

TEST(GraphTest, MemoryNodesAndUnfreedAllocations) {
  Graph g;
  int x = 0;
  MemAllocNode alloc;
  alloc.bytes = 8;
  alloc.dptr = &x;
  const NodeIndex a = *g.Add(alloc, {});
  EXPECT_TRUE(g.has_memory_nodes());
  NodeIndex at = 99;
  EXPECT_NE(g.UnfreedAllocation(&x, &at), nullptr);
  EXPECT_EQ(at, a);
  *g.Add(MemFreeNode{&x}, {a});
  EXPECT_EQ(g.UnfreedAllocation(&x), nullptr);
  EXPECT_EQ(NodeTypeOf(g.node(a).params), GraphNodeType::kMemAlloc);
}

}  // namespace
}  // namespace streampool::internal
