// PrivatePool: the memory pool of one or more captured CUDA graphs (PyTorch's PrivatePool,
// named by a MempoolId). While a capture is underway, allocations on the capturing stream
// come from here instead of the allocator's own pools; frees return blocks to the pool they
// came from, so the pool's memory is reused only by captures into the same pool. The pool
// lives while a graph uses it (use_count); after the last graph is released its wholly free
// segments become releasable by empty_cache and the OOM retry, and the pool disappears once
// it holds no segment.
#pragma once

#include <cstdint>

#include "sim/block_pool.h"
#include "sim/size_class.h"

namespace oomcast::sim {

struct PrivatePool {
  explicit PrivatePool(uint64_t pool_id) : id(pool_id) {}
  PrivatePool(const PrivatePool&) = delete;
  PrivatePool& operator=(const PrivatePool&) = delete;

  uint64_t id;
  int64_t use_count = 1;           // graphs (and captures underway) using the pool
  int64_t segment_count = 0;       // cudaMalloc'd segments not yet returned (cudaMalloc_count)
  BlockPool small_blocks{true, this};
  BlockPool large_blocks{false, this};

  // The pool a request of `rounded_size` comes from, as for the allocator's own pools.
  BlockPool& blocks_for(uint64_t rounded_size) { return is_small_pool_size(rounded_size) ? small_blocks : large_blocks; }
};

}  // namespace oomcast::sim
