// replay(): runs a Trace through the caching allocator and reports peaks, phase marks,
// segment decisions and the first OOM. What every front end (CLI, planner, tests) calls.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/allocator_config.h"
#include "sim/device_model.h"
#include "sim/memory_stats.h"
#include "sim/segment_decision.h"
#include "sim/trace.h"

namespace oomcast::sim {

enum class OomMessageStyle {
  Current,  // 2.2+: "... has a total capacity of ... If reserved but unallocated memory is large ..."
  Legacy,   // 1.10-2.0: "... (GPU 0; X total capacity; Y already allocated; ...)"
};

struct ReplayOptions {
  bool check_invariants = false;       // walk every pool and segment after each event (slow)
  bool stop_at_first_oom = true;       // else the failed alloc is skipped and replay goes on
  bool record_segment_decisions = false;
  OomMessageStyle oom_style = OomMessageStyle::Current;
};

// The allocator's state at a `mark` event, and the peaks of the phase it opens: from the
// mark to the next mark (or the end of the trace).
struct MarkReport {
  std::string label;
  size_t event_index = 0;
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  Bytes peak_allocated_bytes = 0;  // highest allocated from this mark to the next one
  Bytes peak_reserved_bytes = 0;
};

struct OomReport {
  size_t event_index = 0;
  Bytes requested_bytes = 0;  // the request as made (unrounded)
  Bytes alloc_size = 0;       // the segment size it tried to get
  std::string message;        // PyTorch's text, byte for byte
};

struct ReplayResult {
  size_t events_replayed = 0;
  Bytes peak_allocated_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  size_t peak_allocated_event = 0;     // index of the event that set the allocated peak
  size_t peak_reserved_event = 0;
  Bytes reserved_at_peak_allocated = 0;
  Bytes inactive_split_at_peak_allocated = 0;
  size_t segment_allocs = 0;           // cudaMalloc calls (or maps)
  size_t segment_frees = 0;            // cudaFree calls (or unmaps)
  uint64_t num_ooms = 0;
  std::optional<OomReport> oom;        // the first OOM
  std::vector<MarkReport> marks;
  std::vector<SegmentDecision> segment_decisions;  // only with record_segment_decisions
  MemoryStats final_stats;
};

// Replays `trace` on a fresh allocator. Throws InputError for a free of a slot that is not
// allocated (naming the event index and source line when known).
ReplayResult replay(const Trace& trace, const AllocatorConfig& config, const DeviceModel& device,
                    const ReplayOptions& options = {});

}  // namespace oomcast::sim

namespace oomcast::sim {

class CachingAllocator;
class SimulatedDevice;
struct Block;

// Replayer: the machinery behind replay(), exposed so a caller can restore allocator state
// first (a snapshot window that starts mid-run) and bind trace slots to restored blocks.
class Replayer {
 public:
  Replayer(const AllocatorConfig& config, const DeviceModel& device, const ReplayOptions& options);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  CachingAllocator& allocator();
  SimulatedDevice& device();
  // Makes `slot` refer to an already allocated block, so the trace can free it.
  void bind(uint32_t slot, Block* block);
  // Address of the block currently bound to `slot`, or 0.
  uint64_t address_of(uint32_t slot) const;
  // Pool ids from this one on are given to the trace's fresh pools (a snapshot replay sets
  // it above the ids of the pools it restored).
  void set_first_pool_id(uint64_t id) { next_pool_id_ = id; }
  // Called after each event with its index; used by snapshot replays to check addresses.
  void on_event(std::function<void(size_t)> callback) { callback_ = std::move(callback); }

  ReplayResult run(const Trace& trace);

 private:
  ReplayOptions options_;
  std::unique_ptr<SimulatedDevice> device_;
  std::unique_ptr<CachingAllocator> allocator_;
  std::vector<Block*> slots_;
  std::vector<uint32_t> skipped_completions_;  // free_requested of a zero-byte or failed alloc
  // The CUDA graphs of the trace (by the string index of their name) and the pools of
  // graph_pool_handle() names; pool ids count from 1 (0 is the allocator's own pool).
  struct GraphState {
    uint64_t pool_id = 0;
    bool capturing = false;
  };
  std::vector<std::pair<uint32_t, GraphState>> graphs_;
  std::vector<std::pair<uint32_t, uint64_t>> pool_handles_;
  // The live torch.cuda.MemPool objects of the trace, by the string index of their name.
  struct UserPool {
    uint32_t name = 0;
    uint64_t pool_id = 0;
    bool entered = false;  // inside its use_mem_pool context
  };
  std::vector<UserPool> user_pools_;
  UserPool* find_user_pool(uint32_t name);
  void join_capture(const Trace& trace, size_t index);
  void enter_mem_pool(const Trace& trace, size_t index);
  void exit_mem_pool(const Trace& trace, size_t index);
  void release_mem_pool(const Trace& trace, size_t index);
  uint64_t next_pool_id_ = 1;
  void begin_capture(const Trace& trace, size_t index);
  void end_capture(const Trace& trace, size_t index);
  void release_graph(const Trace& trace, size_t index);
  GraphState* find_graph(uint32_t name);
  // Prefetches, for the frees a few events after `now`, their slot entry, block and
  // neighbours (replay.cc). Requires: now + kPrefetchSlot is inside the trace.
  static constexpr size_t kPrefetchSlot = 12;
  static constexpr size_t kPrefetchBlock = 8;
  static constexpr size_t kPrefetchNeighbours = 4;
  void prefetch_free_ahead(const Event* now) const;
  std::function<void(size_t)> callback_;
};

}  // namespace oomcast::sim
