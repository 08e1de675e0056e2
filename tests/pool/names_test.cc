// The one table of enum names (src/pool/names.h) that the tools, their
// reports and the Python package share: every value has a name, every name
// parses back to its value, and an unknown name is an error that lists the
// known ones.
#include "src/pool/names.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace streampool::internal {
namespace {

using ::testing::HasSubstr;

// Every enumerator from first to last, by value: a value the table misses
// is named "unknown".
template <typename E>
void ExpectRoundTrip(int first, int last) {
  std::set<std::string> seen;
  for (int v = first; v <= last; ++v) {
    const E value = static_cast<E>(v);
    const std::string name = EnumName(value);
    EXPECT_NE(name, "unknown") << EnumWhat<E>() << " " << v;
    EXPECT_EQ(ParseEnumName<E>(name), value) << name;
    EXPECT_TRUE(seen.insert(name).second) << "two values named " << name;
  }
  EXPECT_EQ(EnumNames<E>().size(), seen.size()) << EnumWhat<E>();
  EXPECT_STREQ(EnumName(static_cast<E>(last + 1)), "unknown");
  EXPECT_EQ(ParseEnumName<E>(""), std::nullopt);
  EXPECT_EQ(ParseEnumName<E>("unknown"), std::nullopt);
}

TEST(NamesTest, EveryValueRoundTrips) {
  ExpectRoundTrip<AllocationType>(1, 4);
  ExpectRoundTrip<PagePolicy>(0, 2);
  ExpectRoundTrip<PoolGrowth>(0, 2);
  ExpectRoundTrip<ReuseRule>(0, 5);
  ExpectRoundTrip<Backing>(0, 1);
  ExpectRoundTrip<ExecutorKind>(0, 2);
  ExpectRoundTrip<CheckKind>(1, 6);
  ExpectRoundTrip<OpKind>(0, 8);
  ExpectRoundTrip<CaptureMode>(0, 2);
  ExpectRoundTrip<CaptureStatus>(0, 2);
}

// CUDA's values have a gap (8 and 9 are external semaphore nodes, which
// graphs here do not have).
TEST(NamesTest, GraphNodeTypesRoundTripAcrossCudasGap) {
  for (const NamedValue<GraphNodeType>& row : EnumNames<GraphNodeType>()) {
    EXPECT_EQ(ParseEnumName<GraphNodeType>(row.name), row.value) << row.name;
  }
  EXPECT_EQ(EnumNames<GraphNodeType>().size(), 10u);
  EXPECT_STREQ(EnumName(static_cast<GraphNodeType>(8)), "unknown");
  EXPECT_STREQ(EnumName(GraphNodeType::kMemAlloc), "mem_alloc");
}

TEST(NamesTest, NamesAreTheEnumeratorsInSnakeCase) {
  EXPECT_STREQ(EnumName(AllocationType::kPinnedHost), "pinned_host");
  EXPECT_STREQ(EnumName(ReuseRule::kSameStream), "same_stream");
  EXPECT_STREQ(EnumName(OpKind::kInternalWait), "internal_wait");
  EXPECT_STREQ(EnumName(Backing::kAddressOnly), "address_only");
  EXPECT_STREQ(EnumName(PoolGrowth::kDefault), "default");
}

TEST(NamesTest, AliasesParseButAreNeverPrinted) {
  EXPECT_EQ(ParseEnumName<AllocationType>("pinned"), AllocationType::kPinnedHost);
  EXPECT_EQ(ParseEnumName<AllocationType>("hugepage"), AllocationType::kHugePage);
  EXPECT_EQ(ParseEnumName<Backing>("address"), Backing::kAddressOnly);
  EXPECT_EQ(EnumNameList<AllocationType>(), "'device', 'pinned_host', 'huge_page', 'dvpp'");
}

TEST(NamesTest, ParsingIsExact) {
  EXPECT_EQ(ParseEnumName<PoolGrowth>("Chunked"), std::nullopt);
  EXPECT_EQ(ParseEnumName<PoolGrowth>("chunked "), std::nullopt);
  EXPECT_EQ(ParseEnumName<ReuseRule>("same-stream"), std::nullopt);
}

TEST(NamesTest, UnknownNameSaysWhatWasExpected) {
  const absl::StatusOr<PoolGrowth> g = ParseEnumNameOrError<PoolGrowth>("sideways");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "unknown growth 'sideways' (one of 'default', 'chunked', 'expandable')");
  EXPECT_THAT(std::string(ParseEnumNameOrError<AllocationType>("gpu").status().message()),
              HasSubstr("unknown pool type 'gpu'"));
}

}  // namespace
}  // namespace streampool::internal
