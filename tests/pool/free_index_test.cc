// FreeIndex on blocks made by hand: which candidate each rule's search
// finds, promotion by bound, and the equations CheckInvariants holds.
#include "src/pool/free_index.h"

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "tests/pool/block_testing.h"

namespace streampool::internal {
namespace {

// An oracle whose answers the test sets: s's frees up to ordered[s] are
// ordered before the allocating stream, those up to complete[s] complete.
class ScriptedOracle : public OrderOracle {
 public:
  explicit ScriptedOracle(StreamIndex t) : t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override { return Get(ordered, s); }
  Position ObservedComplete(StreamIndex s) const override { return Get(complete, s); }
  void InsertWait(StreamIndex, Position) override {}
  std::map<StreamIndex, Position> ordered, complete;

 private:
  static Position Get(const std::map<StreamIndex, Position>& m, StreamIndex s) {
    auto it = m.find(s);
    return it == m.end() ? 0 : it->second;
  }
  StreamIndex t_;
};

class FreeIndexTest : public ::testing::Test {
 protected:
  // A READY block, wholly mapped, in the index.
  Block* Ready(uintptr_t addr, uint64_t size) {
    Block* b = New(addr, size);
    b->state = BlockState::kReady;
    index_.Insert(b);
    return b;
  }
  // A block freed on s at f, in s's frees.
  Block* Pending(uintptr_t addr, uint64_t size, StreamIndex s, Position f) {
    Block* b = New(addr, size);
    b->state = BlockState::kPending;
    b->stream = s;
    b->free_pos = f;
    b->free_seq = next_seq_++;
    b->stamp = b->free_seq;
    StreamFrees& frees = index_.FreesOf(s);
    index_.Insert(b);
    frees.Queue(b, f);
    index_.Activate(s);
    return b;
  }
  Block* New(uintptr_t addr, uint64_t size) {
    blocks_.push_back(MakeBlock(addr, size));
    blocks_.back().node.order = addr;
    return &blocks_.back();
  }

  std::deque<Block> blocks_;  // stable addresses
  FreeIndex index_;
  uint64_t next_seq_ = 1;
};

TEST_F(FreeIndexTest, OwnSearchTakesTheBestFitOfReadyAndTheStreamsOwnFrees) {
  Ready(0x10000, 4096);
  Block* own = Pending(0x20000, 1024, /*s=*/1, /*f=*/5);
  Pending(0x30000, 512, /*s=*/2, /*f=*/5);  // another stream's: not rule 1's
  EXPECT_EQ(index_.FindOwn(1, 512), own);
  EXPECT_EQ(index_.FindOwn(3, 512)->addr(), 0x10000u);
  EXPECT_EQ(index_.FindOwn(1, 8192), nullptr);
  EXPECT_TRUE(index_.CheckInvariants());
}

TEST_F(FreeIndexTest, OrderedSearchTakesOnlyFreesTheStreamIsOrderedAfter) {
  Pending(0x10000, 512, /*s=*/1, /*f=*/9);
  Block* ordered = Pending(0x20000, 1024, /*s=*/2, /*f=*/3);
  ScriptedOracle oracle(/*t=*/3);
  EXPECT_EQ(index_.FindOrdered(3, 256, oracle), nullptr);
  oracle.ordered = {{1, 8}, {2, 3}};
  EXPECT_EQ(index_.FindOrdered(3, 256, oracle), ordered);  // 1's free at 9 is not
  oracle.ordered[1] = 9;
  EXPECT_EQ(index_.FindOrdered(3, 256, oracle)->addr(), 0x10000u);  // the better fit
}

TEST_F(FreeIndexTest, FirstPendingFreeIsTheEarliestFreeWithinTheBounds) {
  Block* early = Pending(0x10000, 1024, /*s=*/1, /*f=*/4);
  Block* later = Pending(0x20000, 1024, /*s=*/2, /*f=*/2);
  ScriptedOracle oracle(/*t=*/3);
  index_.SetWaitBounds(3, /*free_waits=*/nullptr);
  EXPECT_EQ(index_.FirstPendingFree(3, 1024), early);
  EXPECT_EQ(index_.FirstPendingFree(1, 1024), later);  // a stream's own is not waited on
  oracle.complete = {{1, 3}, {2, 2}};                  // 1's free at 4 would delay the allocation
  index_.SetWaitBounds(3, &oracle);
  EXPECT_EQ(index_.FirstPendingFree(3, 1024), later);
  EXPECT_EQ(index_.FirstPendingFree(3, 2048), nullptr);
}

TEST_F(FreeIndexTest, PopUpToHandsOverFreesUpToTheBoundAndDelistsEmptiedStreams) {
  Block* a = Pending(0x10000, 512, /*s=*/1, /*f=*/1);
  Pending(0x20000, 512, /*s=*/1, /*f=*/6);
  Block* c = Pending(0x30000, 512, /*s=*/2, /*f=*/2);
  std::vector<Block*> popped;
  index_.PopUpTo([](StreamIndex) { return Position{2}; },
                 [&](Block* b) {
                   b->state = BlockState::kReady;
                   popped.push_back(b);
                 });
  EXPECT_EQ(popped.size(), 2u);
  EXPECT_TRUE((popped[0] == a && popped[1] == c) || (popped[0] == c && popped[1] == a));
  EXPECT_TRUE(index_.IsListed(1));
  EXPECT_FALSE(index_.IsListed(2));
  EXPECT_EQ(index_.pending_size(), 1u);
  EXPECT_TRUE(index_.CheckInvariants());
}

TEST_F(FreeIndexTest, AStreamWithFreesThatIsNotListedBreaksTheInvariants) {
  Pending(0x10000, 512, /*s=*/1, /*f=*/1);
  Block* b = New(0x20000, 512);
  b->state = BlockState::kPending;
  b->stream = 2;
  index_.FreesOf(2);
  index_.Insert(b);  // never activated
  EXPECT_FALSE(index_.CheckInvariants());
}

}  // namespace
}  // namespace streampool::internal
