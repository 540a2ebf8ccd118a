// BlockPool: the free-block index plus garbage-collection age stamps (insert and erase are
// inline in the header).
#include "sim/block_pool.h"

namespace oomcast::sim {

BlockPool::BlockPool(bool is_small, PrivatePool* owner)
    : is_small_(is_small), owner_(owner) {}

}  // namespace oomcast::sim
