// FastPathGate on its own: the switch, and an epoch that every change moves
// to a value no gate had before.
#include "src/runtime/fast_path_gate.h"

#include <cstdint>
#include <memory>
#include <set>

#include "gtest/gtest.h"

namespace streampool::internal {
namespace {

TEST(FastPathGateTest, StartsOffAndEveryTurnOfTheSwitchInvalidates) {
  FastPathGate gate;
  EXPECT_FALSE(gate.on());
  const uint64_t e0 = gate.epoch();
  gate.Set(true);
  EXPECT_TRUE(gate.on());
  const uint64_t e1 = gate.epoch();
  EXPECT_NE(e1, e0);
  gate.Set(false);
  EXPECT_FALSE(gate.on());
  EXPECT_NE(gate.epoch(), e1);
  EXPECT_EQ(gate.epoch_relaxed(), gate.epoch());
}

TEST(FastPathGateTest, InvalidateLeavesTheSwitchAndMovesTheEpoch) {
  FastPathGate gate;
  gate.Set(true);
  const uint64_t before = gate.epoch();
  gate.Invalidate();
  EXPECT_TRUE(gate.on());
  EXPECT_NE(gate.epoch(), before);
}

TEST(FastPathGateTest, NoTwoGatesOrChangesShareAnEpoch) {
  // A memo left by a destroyed runtime must not match one made at its address.
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    auto gate = std::make_unique<FastPathGate>();
    EXPECT_TRUE(seen.insert(gate->epoch()).second);
    gate->Invalidate();
    EXPECT_TRUE(seen.insert(gate->epoch()).second);
  }
}

}  // namespace
}  // namespace streampool::internal
