// A LIVE block made by hand, for tests of what indexes blocks (the page map,
// the runtime's allocation index) without a pool behind them.
#ifndef STREAMPOOL_TESTS_POOL_BLOCK_TESTING_H_
#define STREAMPOOL_TESTS_POOL_BLOCK_TESTING_H_

#include <cstdint>

#include "src/pool/block.h"

namespace streampool::internal {

inline Block MakeBlock(uintptr_t addr, uint64_t size) {
  Block b;
  b.node.addr = addr;
  b.node.size = size;
  b.state = BlockState::kLive;
  return b;
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_TESTS_POOL_BLOCK_TESTING_H_
