// CallGate: after Close and Drain no call is inside and none gets in, however
// the threads interleave; nested passes on one thread count as one call.
#include "src/util/call_gate.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace streampool::internal {
namespace {

TEST(CallGateTest, PassesNestAndAClosedGateRefuses) {
  CallGate gate;
  {
    CallGate::Pass outer(gate);
    ASSERT_TRUE(outer.entered());
    CallGate::Pass inner(gate);
    EXPECT_TRUE(inner.entered());
  }
  gate.Close();
  gate.Drain();
  CallGate::Pass late(gate);
  EXPECT_FALSE(late.entered());
  EXPECT_TRUE(gate.closed());
}

TEST(CallGateTest, DrainWaitsForEveryCallInsideAndNoneEntersAfter) {
  for (int round = 0; round < 20; ++round) {
    CallGate gate;
    std::atomic<int> inside{0};
    std::atomic<bool> drained{false};
    std::atomic<int> entered_after_drain{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        while (!stop.load()) {
          CallGate::Pass pass(gate);
          if (!pass.entered()) continue;
          inside.fetch_add(1);
          if (drained.load()) entered_after_drain.fetch_add(1);
          for (int spin = 0; spin < 100; ++spin)
            std::atomic_signal_fence(std::memory_order_seq_cst);
          inside.fetch_sub(1);
        }
      });
    }
    std::this_thread::yield();
    gate.Close();
    gate.Drain();
    drained.store(true);
    EXPECT_EQ(inside.load(), 0);
    stop.store(true);
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(entered_after_drain.load(), 0);
  }
}

TEST(CallGateTest, ThreadsThatExitGiveTheirSlotsBack) {
  CallGate gate;
  { CallGate::Pass warm(gate); }  // this thread's slot
  const size_t before = CallGate::SlotCount();
  // Many short-lived threads, one at a time: each takes over the slot the
  // last one gave back, so the count stays flat.
  for (int i = 0; i < 200; ++i) {
    std::thread([&] { CallGate::Pass pass(gate); }).join();
  }
  EXPECT_LE(CallGate::SlotCount(), before + 1);
  gate.Close();
  gate.Drain();
}

}  // namespace
}  // namespace streampool::internal
