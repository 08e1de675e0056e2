// HandleTable: handles name one record until removed, never again after,
// and a full table is an error, not an abort.
#include "src/runtime/handle_table.h"

#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace streampool::internal {
namespace {

struct Rec {
  int value = 0;
};

TEST(HandleTableTest, FindsLiveHandlesOnly) {
  HandleTable<Rec> table(HandleKind::kStream, 7);
  auto h = table.Add([](Rec& r, uint64_t) { r.value = 42; });
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(KindOf(*h), HandleKind::kStream);
  EXPECT_EQ(RuntimeIdOf(*h), 7u);
  ASSERT_NE(table.Find(*h), nullptr);
  EXPECT_EQ(table.Find(*h)->value, 42);
  // Another kind, another runtime, a forged id: nothing.
  EXPECT_EQ(table.Find(MakeHandle(HandleKind::kPool, 7, ObjectIdOf(*h))), nullptr);
  EXPECT_EQ(table.Find(MakeHandle(HandleKind::kStream, 8, ObjectIdOf(*h))), nullptr);
  EXPECT_EQ(table.Find(*h + 1), nullptr);
  EXPECT_EQ(table.Find(0), nullptr);
  table.Remove(*h);
  EXPECT_EQ(table.Find(*h), nullptr);
}

TEST(HandleTableTest, AReusedSlotGetsANewHandle) {
  HandleTable<Rec> table(HandleKind::kPool, 1);
  std::set<uint64_t> seen;
  uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    auto h = table.Add([i](Rec& r, uint64_t) { r.value = i; });
    ASSERT_TRUE(h.ok());
    EXPECT_TRUE(seen.insert(*h).second) << "handle " << *h << " came back";
    if (last != 0) {
      EXPECT_EQ(table.Find(last), nullptr);
    }
    EXPECT_EQ(table.Find(*h)->value, i);
    table.Remove(*h);
    last = *h;
  }
}

TEST(HandleTableTest, AFullTableIsResourceExhausted) {
  HandleTable<Rec> table(HandleKind::kEvent, 1);
  std::vector<uint64_t> handles;
  for (uint32_t i = 0; i < HandleTable<Rec>::kCapacity; ++i) {
    auto h = table.Add([](Rec&, uint64_t) {});
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  EXPECT_FALSE(table.HasRoom());
  auto full = table.Add([](Rec&, uint64_t) {});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  table.Remove(handles[5]);
  EXPECT_TRUE(table.HasRoom());
  auto again = table.Add([](Rec&, uint64_t) {});
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, handles[5]);
  int live = 0;
  table.ForEach([&live](uint64_t, Rec&) { ++live; });
  EXPECT_EQ(live, static_cast<int>(HandleTable<Rec>::kCapacity));
}

}  // namespace
}  // namespace streampool::internal
