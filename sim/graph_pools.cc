// CUDA graph private pools (torch.cuda.graph, torch.compile "reduce-overhead", the decode
// graphs of serving engines) and torch.cuda.MemPool user pools: begin/end of a capture or a
// use_mem_pool context, side streams joining a capture, the release of a graph or a pool,
// the pool lookup malloc makes while one is underway, and the MemPool options (use_on_oom's
// last-resort borrowing, no_split). Behaviour as in PyTorch's beginAllocateToPool (with its
// stream filter) / endAllocateToPool / releasePool, release_cached_blocks and
// try_mempool_fallback.
#include <algorithm>

#include "sim/caching_allocator.h"

namespace oomcast::sim {

PrivatePool* CachingAllocator::find_private_pool(uint64_t pool_id) {
  auto found = private_pools_.find(pool_id);
  return found == private_pools_.end() ? nullptr : found->second.get();
}

const PrivatePool* CachingAllocator::private_pool(uint64_t pool_id) const {
  auto found = private_pools_.find(pool_id);
  return found == private_pools_.end() ? nullptr : found->second.get();
}

bool CachingAllocator::CaptureUnderway::takes(uint64_t s) const {
  if (every_stream || s == stream) return true;
  return std::find(joined_streams.begin(), joined_streams.end(), s) != joined_streams.end();
}

bool CachingAllocator::graph_capture_underway() const {
  return std::any_of(captures_underway_.begin(), captures_underway_.end(),
                     [](const CaptureUnderway& capture) { return !capture.every_stream; });
}

bool CachingAllocator::create_pool(uint64_t pool_id, bool use_on_oom, bool no_split) {
  if (find_private_pool(pool_id)) return false;
  PrivatePool& pool = *private_pools_.emplace(pool_id, std::make_unique<PrivatePool>(pool_id)).first->second;
  pool.small_blocks.set_no_split(no_split);
  pool.large_blocks.set_no_split(no_split);
  if (use_on_oom) use_on_oom_pools_.push_back(pool_id);
  return true;
}

void CachingAllocator::stop_use_on_oom(uint64_t pool_id) {
  use_on_oom_pools_.erase(std::remove(use_on_oom_pools_.begin(), use_on_oom_pools_.end(), pool_id),
                          use_on_oom_pools_.end());
}

// Only cached blocks: the fallback searches the pool as get_free_block would (best fit, the
// max_split_size rules) and never grows it. The block stays the pool's, so its free returns
// it there, and a no_split pool hands it out whole.
Block* CachingAllocator::take_from_use_on_oom_pool(const BlockPool& requested, uint64_t stream, uint64_t size) {
  if (requested.owner()) return nullptr;  // an allocation already bound for a private pool just fails
  for (uint64_t pool_id : use_on_oom_pools_) {
    PrivatePool* pool = find_private_pool(pool_id);
    if (!pool) continue;
    if (Block* block = get_free_block(pool->blocks_for(size), stream, size)) return block;
  }
  return nullptr;
}

bool CachingAllocator::join_capture(uint64_t pool_id, uint64_t stream) {
  for (CaptureUnderway& capture : captures_underway_) {
    if (capture.pool_id != pool_id || capture.every_stream) continue;
    if (!capture.takes(stream)) capture.joined_streams.push_back(stream);
    return true;
  }
  return false;
}

bool CachingAllocator::begin_allocate_to_pool(uint64_t pool_id, uint64_t stream, bool every_stream) {
  for (const CaptureUnderway& capture : captures_underway_)
    if (capture.pool_id == pool_id) return false;
  PrivatePool* pool = find_private_pool(pool_id);
  if (pool && pool->use_count == 0) return false;  // PyTorch asserts use_count > 0 here
  if (pool) {
    pool->use_count += 1;
  } else {
    private_pools_.emplace(pool_id, std::make_unique<PrivatePool>(pool_id));
  }
  captures_underway_.push_back(CaptureUnderway{pool_id, stream, every_stream, {}});
  return true;
}

bool CachingAllocator::end_allocate_to_pool(uint64_t pool_id) {
  auto found = std::find_if(captures_underway_.begin(), captures_underway_.end(),
                            [pool_id](const CaptureUnderway& capture) { return capture.pool_id == pool_id; });
  if (found == captures_underway_.end()) return false;
  captures_underway_.erase(found);
  return true;
}

bool CachingAllocator::release_pool(uint64_t pool_id) {
  PrivatePool* pool = find_private_pool(pool_id);
  if (!pool || pool->use_count == 0) return false;
  if (--pool->use_count == 0) freeable_private_pools_.push_back(pool);
  return true;
}

BlockPool* CachingAllocator::capture_pool_for(uint64_t rounded_size, uint64_t stream) {
  for (const CaptureUnderway& capture : captures_underway_) {
    if (!capture.takes(stream)) continue;
    PrivatePool* pool = find_private_pool(capture.pool_id);
    return &pool->blocks_for(rounded_size);
  }
  return nullptr;
}

void CachingAllocator::release_freeable_private_pools() {
  for (auto it = freeable_private_pools_.begin(); it != freeable_private_pools_.end();) {
    PrivatePool* pool = *it;
    release_blocks(pool->small_blocks);
    release_blocks(pool->large_blocks);
    if (pool->segment_count == 0) {
      stop_use_on_oom(pool->id);
      it = freeable_private_pools_.erase(it);
      private_pools_.erase(pool->id);
    } else {
      ++it;
    }
  }
}

std::vector<const BlockPool*> CachingAllocator::all_pools() const {
  std::vector<const BlockPool*> pools = {&small_pool_, &large_pool_};
  for (const auto& [id, pool] : private_pools_) {
    pools.push_back(&pool->small_blocks);
    pools.push_back(&pool->large_blocks);
  }
  return pools;
}

}  // namespace oomcast::sim
