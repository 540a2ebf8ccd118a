// CachingAllocator: a simulator of PyTorch's native CUDA caching allocator for one device:
// malloc (round, best fit, split, grow, retry, OOM), free (merge), empty_cache, garbage
// collection, max_split_size rules and expandable segments. Function names mirror
// CUDACachingAllocator.cpp so docs/allocator-model.md needs no translation column.
// Single-threaded; one stream partition per stream id; CUDA events of record_stream are
// modelled by the synchronisation points the caller reports (sim/stream_events.cc). CUDA
// graph captures and torch.cuda.MemPool contexts allocate from private pools; a MemPool
// made with use_on_oom lends its cached blocks to default-pool requests about to fail
// (sim/graph_pools.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/allocator_config.h"
#include "sim/allocator_release_facts.h"
#include "sim/block.h"
#include "sim/block_pool.h"
#include "sim/device.h"
#include "sim/expandable_segment.h"
#include "sim/memory_stats.h"
#include "sim/oom_message.h"
#include "sim/private_pool.h"
#include "sim/segment_decision.h"

namespace oomcast::sim {

// Why and how a malloc failed: PyTorch's message and the figures behind it.
struct OomDetails {
  uint64_t requested_bytes = 0;
  uint64_t rounded_bytes = 0;
  uint64_t alloc_size = 0;
  std::string message;         // PyTorch 2.2+ text
  std::string legacy_message;  // PyTorch 1.10-2.0 text
};

// A block as found in a snapshot, for restoring the state at a recording window's start.
struct RestoredBlock {
  uint64_t size = 0;
  uint64_t requested_size = 0;
  bool allocated = false;
};

// A mapped run of an expandable segment as found in a snapshot: its blocks cover it exactly.
struct RestoredRun {
  uint64_t address = 0;
  std::vector<RestoredBlock> blocks;
};

class CachingAllocator {
 public:
  CachingAllocator(const AllocatorConfig& config, Device& device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Allocates `size` bytes on `stream`. Returns the block, or nullptr on OOM with the
  // details in last_oom(). A zero-byte request returns nullptr without touching anything
  // (check `size == 0` before treating nullptr as OOM).
  Block* malloc(uint64_t size, uint64_t stream = 0);
  // Frees a block malloc returned. Requires: block is allocated.
  void free(Block* block);
  // torch.cuda.empty_cache(): waits for every outstanding event, then returns every wholly
  // free segment (and unmaps free pages).
  void empty_cache();

  // --- stream_events.cc: frees that wait for other streams (spec §7) ---
  // tensor.record_stream(stream): the block is also used on `stream`, so its free waits for
  // an event recorded there. Its own stream is ignored, as in PyTorch.
  void record_stream(Block* block, uint64_t stream);
  // A free request whose completion the caller reports with complete_free (snapshot replay:
  // a recorded free_requested long before its free_completed).
  void request_free(Block* block);
  void complete_free(Block* block);
  // All work queued so far on `stream` (on every stream) has finished: the events recorded
  // there complete. Their blocks return to the pool at the next malloc (process_events) or
  // empty_cache.
  void synchronize_stream(uint64_t stream);
  void synchronize_device();
  // Blocks whose free was requested but not completed.
  size_t pending_frees() const { return pending_frees_; }

  // --- graph_pools.cc: CUDA graph private pools (spec: docs/allocator-model.md) ---
  // CUDAGraph::capture_begin: allocations on `stream` go to the private pool `pool_id`
  // (created on first use, else one more user) until end_allocate_to_pool. Returns false,
  // changing nothing, where PyTorch fails an internal assert: the pool is already being
  // captured into, or every graph using it was released while it still holds segments.
  // With `every_stream` (torch.cuda.use_mem_pool: the thread's allocations, on any stream)
  // `stream` is ignored.
  bool begin_allocate_to_pool(uint64_t pool_id, uint64_t stream, bool every_stream = false);
  // A side stream joins the capture into `pool_id` (it waited on the capturing stream inside
  // the capture): until the capture ends its allocations go to the same pool. Returns false
  // if no graph capture into `pool_id` is underway.
  bool join_capture(uint64_t pool_id, uint64_t stream);
  // CUDAGraph::capture_end, or the end of a use_mem_pool context. Returns false if no
  // capture into `pool_id` is underway.
  bool end_allocate_to_pool(uint64_t pool_id);
  // torch.cuda.MemPool(use_on_oom, no_split): a user pool with one user, the pool object.
  // With `use_on_oom` a default-pool allocation that would OOM may take one of its cached
  // blocks; with `no_split` its blocks are never split. Returns false if the id is taken.
  bool create_pool(uint64_t pool_id, bool use_on_oom = false, bool no_split = false);
  // The MemPool object is destroyed: its pool no longer serves other allocations on OOM.
  void stop_use_on_oom(uint64_t pool_id);
  // A graph using the pool is destroyed or reset: one user fewer. At zero its free segments
  // become releasable. Returns false if the pool has no user left to release.
  bool release_pool(uint64_t pool_id);
  // A CUDA graph capture (not a use_mem_pool context) is underway: synchronising is illegal.
  bool graph_capture_underway() const;
  // The live private pool `pool_id` (also one whose graphs are all released but which still
  // holds segments), or nullptr.
  const PrivatePool* private_pool(uint64_t pool_id) const;

  // Adds a segment found in a snapshot. `blocks` cover it exactly, in address order.
  // Returns the Block objects in the same order. Stats move as if it had been allocated.
  // A segment of a private pool (`pool_id` != 0) goes to that pool, which is created with
  // one user (the graph that owned it when the snapshot was taken) if it does not exist.
  std::vector<Block*> restore_segment(uint64_t address, uint64_t stream, bool is_small,
                                      const std::vector<RestoredBlock>& blocks, uint64_t pool_id = 0);

  // Adds an expandable segment found in a snapshot: a reservation starting at `base` whose
  // mapped ranges are `runs` (in address order); the rest of it is unmapped. Returns the
  // Block objects of each run's blocks. Reserved bytes move by the mapped bytes only.
  std::vector<std::vector<Block*>> restore_expandable_segment(uint64_t base, uint64_t stream, bool is_small,
                                                              const std::vector<RestoredRun>& runs);

  const MemoryStats& stats() const { return stats_; }
  const AllocatorConfig& config() const { return config_; }
  const std::optional<OomDetails>& last_oom() const { return last_oom_; }
  // Sets the peaks of every stat to their current values (reset_peak_memory_stats).
  void reset_peak_stats();

  // Segment decisions are appended here (with `current_event`) when recording is on.
  void record_segment_decisions(std::vector<SegmentDecision>* sink) { decisions_ = sink; }
  size_t current_event = 0;

  // Walks every pool and segment and checks the allocator's invariants; returns an empty
  // string when they hold, else a description of the first violation.
  std::string check_invariants() const;

  // Every segment (by its first block), in address order; for invariants and reports.
  std::vector<const Block*> segment_heads() const;

 private:
  // --- caching_allocator.cc: the malloc and free paths ---
  Block* new_block();
  void delete_block(Block* block);
  BlockPool& pool_for(uint64_t rounded_size, uint64_t stream) {
    if (!captures_underway_.empty()) [[unlikely]]
      if (BlockPool* captured = capture_pool_for(rounded_size, stream)) return *captured;
    return is_small_pool_size(rounded_size) ? small_pool_ : large_pool_;
  }
  Block* get_free_block(BlockPool& pool, uint64_t stream, uint64_t size);
  bool should_split(const Block* block, uint64_t size) const;
  Block* alloc_found_block(Block* block, uint64_t size, uint64_t requested);
  // Marks a block allocated and counts it in the allocation, active and requested stats.
  void mark_allocated(Block* block);
  Block* alloc_block(BlockPool& pool, uint64_t stream, uint64_t size, uint64_t alloc_size, bool is_retry);
  void free_block(Block* block);
  uint64_t try_merge_blocks(Block* destination, Block* source, BlockPool& pool);
  void release_cached_blocks();
  void release_blocks(BlockPool& pool);
  void release_block(Block* block);
  void record(SegmentDecision::Kind kind, uint64_t address, uint64_t size);
  void fail_with_oom(uint64_t requested, uint64_t rounded, uint64_t alloc_size);
  uint64_t allowed_memory_maximum() const;
  bool memory_fraction_set() const { return device_.model().memory_fraction > 0.0; }
  bool garbage_collection_active() const {
    return memory_fraction_set() && config_.garbage_collection_threshold > 0.0;
  }

  // --- graph_pools.cc ---
  BlockPool* capture_pool_for(uint64_t rounded_size, uint64_t stream);
  // PyTorch's try_mempool_fallback: for a request of the default pools about to fail, a
  // cached block that fits in one of the use_on_oom pools (created first, tried first), taken
  // out of that pool's free set; nullptr when none fits. Never a new segment.
  Block* take_from_use_on_oom_pool(const BlockPool& requested, uint64_t stream, uint64_t size);
  PrivatePool* find_private_pool(uint64_t pool_id);
  void release_freeable_private_pools();
  // The pools a walk over every free block must visit: the allocator's and each private one.
  std::vector<const BlockPool*> all_pools() const;

  // --- stream_events.cc ---
  void note_free_request(Block* block);
  void insert_events(Block* block);
  void mark_pending_free(Block* block);
  void record_events_on_used_streams(Block* block);
  void insert_events_deferred_until_no_capture();
  void process_events();
  void synchronize_and_free_events();

  // --- garbage_collection.cc: reclaiming cached blocks under pressure ---
  void garbage_collect_cached_blocks();
  bool release_available_cached_blocks(BlockPool& pool, uint64_t stream, uint64_t size);

  // --- expandable_segment.cc: reserve-then-map segments ---
  Block* try_allocate_expandable_block(BlockPool& pool, uint64_t stream, uint64_t size);
  Block* find_expandable_block(BlockPool& pool, uint64_t stream, uint64_t size);
  Block* map_block(Block* unmapped, uint64_t size);
  void unmap_block(Block* block);
  void release_expandable_segment(ExpandableSegment* segment, Block* whole_range);

  AllocatorConfig config_;
  const AllocatorReleaseFacts* release_facts_;  // config_.torch_version's, read on the hot paths
  Device& device_;
  BlockPool small_pool_{true};
  BlockPool large_pool_{false};
  MemoryStats stats_;
  std::optional<OomDetails> last_oom_;
  std::vector<SegmentDecision>* decisions_ = nullptr;
  std::deque<Block> block_storage_;
  std::vector<Block*> spare_blocks_;
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments_;
  std::map<const Block*, std::vector<uint64_t>> stream_uses_;     // only blocks with has_stream_uses
  std::map<uint64_t, std::vector<Block*>> outstanding_events_;     // stream -> blocks with an event there
  std::vector<Block*> completed_events_;                          // all events done; freed at process_events
  size_t pending_frees_ = 0;
  std::map<uint64_t, std::unique_ptr<PrivatePool>> private_pools_;  // by MempoolId
  std::vector<PrivatePool*> freeable_private_pools_;                 // use_count 0, segments left
  std::vector<uint64_t> use_on_oom_pools_;                           // live MemPools with use_on_oom
  // PyTorch's captures_underway: the pools that take allocations now, each with the streams
  // it takes them from. A use_mem_pool context is one too, so while it is open, as during a
  // capture, events are not polled and the OOM retry does not flush the cache.
  struct CaptureUnderway {
    uint64_t pool_id;
    uint64_t stream;
    bool every_stream = false;            // a use_mem_pool context
    std::vector<uint64_t> joined_streams;  // side streams that joined a graph capture
    bool takes(uint64_t s) const;
  };
  std::vector<CaptureUnderway> captures_underway_;
  // Frees of record_stream'd blocks during a capture: events may not be recorded while a
  // capture is underway, so they are recorded at the first poll after it ends.
  std::vector<Block*> events_deferred_until_no_capture_;
};

}  // namespace oomcast::sim
