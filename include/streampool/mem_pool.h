/// \file
/// Kept for programs that include it: a pool's statistics are in
/// pool_stats.h, the rules that serve allocations in reuse_rule.h.
#ifndef STREAMPOOL_MEM_POOL_H_
#define STREAMPOOL_MEM_POOL_H_

#include "streampool/pool_stats.h"
#include "streampool/reuse_rule.h"

#endif  // STREAMPOOL_MEM_POOL_H_
