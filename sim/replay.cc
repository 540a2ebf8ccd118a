// replay(): drives the allocator through a trace, tracking peaks, marks and the first OOM.
// This loop is the simulator's hot path: no hashing, no strings, no allocation per event.
#include "sim/replay.h"

#include <algorithm>

#include "base/input_error.h"
#include "base/progress.h"
#include "sim/allocator_release_facts.h"
#include "sim/caching_allocator.h"
#include "sim/work_counters.h"

namespace oomcast::sim {
namespace {

// Stand-ins in the slot table for allocations that hold no block.
Block zero_size_block;   // a zero-byte request: PyTorch returns a null pointer
Block failed_block;      // an allocation that hit OOM when replay goes on past it

[[noreturn]] void throw_bad_free(const Trace& trace, size_t index, const std::string& why) {
  const Event& event = trace.events[index];
  std::string id = event.slot < trace.slot_names.size() ? trace.slot_names[event.slot] : std::to_string(event.slot);
  int64_t line = index < trace.source_lines.size() ? trace.source_lines[index] : 0;
  throw InputError({trace.source_name, line, 0, static_cast<int64_t>(index)}, id, "free of id '" + id + "' " + why);
}

[[noreturn]] void throw_bad_pool_event(const Trace& trace, size_t index, const std::string& why) {
  const Event& event = trace.events[index];
  std::string pool = event.tag < trace.strings.size() ? trace.strings[event.tag] : std::to_string(event.tag);
  int64_t line = index < trace.source_lines.size() ? trace.source_lines[index] : 0;
  throw InputError({trace.source_name, line, 0, static_cast<int64_t>(index)}, pool, "memory pool '" + pool + "' " + why);
}

[[noreturn]] void throw_bad_graph_event(const Trace& trace, size_t index, const std::string& why) {
  const Event& event = trace.events[index];
  std::string graph = event.tag < trace.strings.size() ? trace.strings[event.tag] : std::to_string(event.tag);
  int64_t line = index < trace.source_lines.size() ? trace.source_lines[index] : 0;
  throw InputError({trace.source_name, line, 0, static_cast<int64_t>(index)}, graph, "graph '" + graph + "' " + why);
}

}  // namespace

// A free touches three things nothing else brought into cache: its slot's entry (slots are
// handed out in trace order, so an old tensor's entry is far from the recent ones), its
// block, and the block's neighbours, which the merge reads. Each is fetched a few events
// before it is needed, one stage per level of indirection, so the replay does not wait on
// memory; every stage reads only what the stage before it fetched. A stale entry (the slot
// changes before its event) costs one useless prefetch: blocks are never returned to the
// heap while the replayer lives, so any pointer in the table is still readable.
void Replayer::prefetch_free_ahead(const Event* now) const {
  auto is_free = [](const Event& event) {
    return event.kind == EventKind::Free || event.kind == EventKind::FreeRequested || event.kind == EventKind::FreeCompleted;
  };
  auto entry_of = [this](const Event& event) -> Block* const* {
    return event.slot < slots_.size() ? &slots_[event.slot] : nullptr;
  };
  const Event& far = now[kPrefetchSlot];
  if (is_free(far))
    if (Block* const* entry = entry_of(far)) __builtin_prefetch(entry);
  const Event& middle = now[kPrefetchBlock];
  if (is_free(middle))
    if (Block* const* entry = entry_of(middle); entry && *entry) __builtin_prefetch(*entry);
  const Event& near = now[kPrefetchNeighbours];
  if (is_free(near))
    if (Block* const* entry = entry_of(near); entry && *entry) {
      const Block* block = *entry;
      if (block->prev) __builtin_prefetch(block->prev);
      if (block->next) __builtin_prefetch(block->next);
    }
}

Replayer::GraphState* Replayer::find_graph(uint32_t name) {
  for (auto& [graph, state] : graphs_)
    if (graph == name) return &state;
  return nullptr;
}

void Replayer::begin_capture(const Trace& trace, size_t index) {
  const Event& event = trace.events[index];
  if (find_graph(event.tag)) throw_bad_graph_event(trace, index, "is captured again before graph_release");
  uint64_t pool_id = 0;
  if (event.slot == 0) {
    pool_id = next_pool_id_++;
  } else if (const GraphState* shared = find_graph(event.slot)) {
    pool_id = shared->pool_id;  // pool=other_graph.pool()
  } else if (const UserPool* user = find_user_pool(event.slot)) {
    pool_id = user->pool_id;  // pool=mem_pool.id
  } else {
    for (const auto& [handle, id] : pool_handles_)
      if (handle == event.slot) pool_id = id;
    if (pool_id == 0) {  // the first use of a graph_pool_handle()
      pool_id = next_pool_id_++;
      pool_handles_.emplace_back(event.slot, pool_id);
    }
  }
  if (!allocator_->begin_allocate_to_pool(pool_id, event.stream)) {
    const PrivatePool* pool = allocator_->private_pool(pool_id);
    if (pool && pool->use_count == 0)
      throw_bad_graph_event(trace, index,
                            "captures into a pool whose graphs were all released while it still holds memory: "
                            "PyTorch fails an internal assert (use_count > 0); capture into a fresh pool");
    throw_bad_graph_event(trace, index, "captures into a pool another capture is already recording into");
  }
  graphs_.emplace_back(event.tag, GraphState{pool_id, true});
}

void Replayer::end_capture(const Trace& trace, size_t index) {
  GraphState* graph = find_graph(trace.events[index].tag);
  if (!graph || !graph->capturing) throw_bad_graph_event(trace, index, "ends a capture it did not begin");
  allocator_->end_allocate_to_pool(graph->pool_id);
  graph->capturing = false;
}

void Replayer::release_graph(const Trace& trace, size_t index) {
  uint32_t name = trace.events[index].tag;
  GraphState* graph = find_graph(name);
  if (!graph) throw_bad_graph_event(trace, index, "is released but was never captured");
  if (graph->capturing) throw_bad_graph_event(trace, index, "is released while it is capturing");
  allocator_->release_pool(graph->pool_id);
  graphs_.erase(std::find_if(graphs_.begin(), graphs_.end(), [name](const auto& entry) { return entry.first == name; }));
}

void Replayer::join_capture(const Trace& trace, size_t index) {
  const Event& event = trace.events[index];
  GraphState* graph = find_graph(event.tag);
  if (!graph || !graph->capturing) throw_bad_graph_event(trace, index, "is joined by a stream but is not capturing");
  allocator_->join_capture(graph->pool_id, event.stream);
}

Replayer::UserPool* Replayer::find_user_pool(uint32_t name) {
  for (UserPool& pool : user_pools_)
    if (pool.name == name) return &pool;
  return nullptr;
}

// torch.cuda.MemPool() makes the pool with one user, the object; use_mem_pool adds one while
// its context is open (beginAllocateToPool) and gives it back on exit (releasePool); `del
// pool` gives back the last, after which empty_cache returns the pool's free segments.
void Replayer::enter_mem_pool(const Trace& trace, size_t index) {
  const Event& event = trace.events[index];
  uint32_t name = event.tag;
  UserPool* pool = find_user_pool(name);
  const uint32_t options = event.slot;
  if (options != 0 && pool) throw_bad_pool_event(trace, index, "gets MemPool options after its creation");
  if (!pool) {
    const TorchVersion version = allocator_->config().torch_version;
    auto refuse_older = [&](const char* option, const char* since) {
      throw_bad_pool_event(trace, index,
                           std::string("is created with ") + option + ", which torch.cuda.MemPool takes from PyTorch " +
                               since + " on; the replay mimics " + std::to_string(version / 100) + "." +
                               std::to_string(version % 100) + ", where MemPool() raises TypeError (set the torch "
                               "version to " + since + " or later)");
    };
    const AllocatorReleaseFacts& release = allocator_release_facts(version);
    if ((options & kMemPoolUseOnOom) && !release.mem_pool_use_on_oom) refuse_older("use_on_oom", "2.8");
    if ((options & kMemPoolNoSplit) && !release.mem_pool_no_split) refuse_older("no_split", "2.10");
    user_pools_.push_back(UserPool{name, next_pool_id_++, false});
    pool = &user_pools_.back();
    allocator_->create_pool(pool->pool_id, options & kMemPoolUseOnOom, options & kMemPoolNoSplit);
  }
  if (pool->entered) throw_bad_pool_event(trace, index, "is entered again inside its own use_mem_pool context");
  if (!allocator_->begin_allocate_to_pool(pool->pool_id, 0, /*every_stream=*/true))
    throw_bad_pool_event(trace, index, "is entered while a graph captures into it");
  pool->entered = true;
}

void Replayer::exit_mem_pool(const Trace& trace, size_t index) {
  UserPool* pool = find_user_pool(trace.events[index].tag);
  if (!pool || !pool->entered) throw_bad_pool_event(trace, index, "is exited but was not entered");
  allocator_->end_allocate_to_pool(pool->pool_id);
  allocator_->release_pool(pool->pool_id);
  pool->entered = false;
}

void Replayer::release_mem_pool(const Trace& trace, size_t index) {
  uint32_t name = trace.events[index].tag;
  UserPool* pool = find_user_pool(name);
  if (!pool) throw_bad_pool_event(trace, index, "is released but was never entered");
  if (pool->entered) throw_bad_pool_event(trace, index, "is released inside its use_mem_pool context");
  allocator_->stop_use_on_oom(pool->pool_id);
  allocator_->release_pool(pool->pool_id);
  user_pools_.erase(user_pools_.begin() + (pool - user_pools_.data()));
}

Replayer::Replayer(const AllocatorConfig& config, const DeviceModel& device, const ReplayOptions& options)
    : options_(options),
      device_(std::make_unique<SimulatedDevice>(device)),
      allocator_(std::make_unique<CachingAllocator>(config, *device_)) {}

Replayer::~Replayer() = default;

CachingAllocator& Replayer::allocator() { return *allocator_; }
SimulatedDevice& Replayer::device() { return *device_; }

void Replayer::bind(uint32_t slot, Block* block) {
  if (slot >= slots_.size()) slots_.resize(slot + 1, nullptr);
  slots_[slot] = block;
}

uint64_t Replayer::address_of(uint32_t slot) const {
  if (slot >= slots_.size() || !slots_[slot] || slots_[slot] == &zero_size_block || slots_[slot] == &failed_block)
    return 0;
  return slots_[slot]->address;
}

ReplayResult Replayer::run(const Trace& trace) {
  ReplayResult result;
  CachingAllocator& allocator = *allocator_;
  if (slots_.size() < trace.slot_names.size()) slots_.resize(trace.slot_names.size(), nullptr);
  if (options_.record_segment_decisions) allocator.record_segment_decisions(&result.segment_decisions);
  const MemoryStats& stats = allocator.stats();

  auto allocated_now = [&] { return static_cast<Bytes>(stats.allocated_bytes.all().current); };
  auto reserved_now = [&] { return static_cast<Bytes>(stats.reserved_bytes.all().current); };
  result.peak_allocated_bytes = allocated_now();
  result.peak_reserved_bytes = reserved_now();
  result.reserved_at_peak_allocated = reserved_now();
  result.inactive_split_at_peak_allocated = static_cast<Bytes>(stats.inactive_split_bytes.all().current);
  Bytes phase_peak_allocated = allocated_now();
  Bytes phase_peak_reserved = reserved_now();
  const int64_t device_allocs_before = stats.num_device_alloc;
  const int64_t device_frees_before = stats.num_device_free;

  // A mark's peaks cover the events from it to the next mark (or the end of the trace).
  auto close_phase = [&] {
    if (result.marks.empty()) return;
    result.marks.back().peak_allocated_bytes = phase_peak_allocated;
    result.marks.back().peak_reserved_bytes = phase_peak_reserved;
  };

  size_t index = 0;
  constexpr size_t kProgressEvery = size_t{1} << 16;  // events between progress reports
  const size_t event_count = trace.events.size();
  for (; index < event_count; ++index) {
    if (index % kProgressEvery == 0) report_progress("replaying events", index, event_count);
    if (index + kPrefetchSlot < event_count) prefetch_free_ahead(trace.events.data() + index);
    const Event& event = trace.events[index];
    allocator.current_event = index;
    switch (event.kind) {
      case EventKind::Alloc: {
        if (event.slot >= slots_.size()) slots_.resize(event.slot + 1, nullptr);
        Block* block = allocator.malloc(event.bytes, event.stream);
        if (!block) {
          if (event.bytes == 0) {
            slots_[event.slot] = &zero_size_block;
            break;
          }
          result.num_ooms += 1;
          if (!result.oom) {
            const OomDetails& details = *allocator.last_oom();
            result.oom = OomReport{index, event.bytes, details.alloc_size,
                                   options_.oom_style == OomMessageStyle::Legacy ? details.legacy_message
                                                                                : details.message};
          }
          slots_[event.slot] = &failed_block;
          if (options_.stop_at_first_oom) goto finished;
          break;
        }
        slots_[event.slot] = block;
        Bytes allocated = allocated_now();
        if (allocated > result.peak_allocated_bytes) {
          result.peak_allocated_bytes = allocated;
          result.peak_allocated_event = index;
          result.reserved_at_peak_allocated = reserved_now();
          result.inactive_split_at_peak_allocated = static_cast<Bytes>(stats.inactive_split_bytes.all().current);
        }
        if (allocated > phase_peak_allocated) phase_peak_allocated = allocated;
        Bytes reserved = reserved_now();
        if (reserved > result.peak_reserved_bytes) {
          result.peak_reserved_bytes = reserved;
          result.peak_reserved_event = index;
        }
        if (reserved > phase_peak_reserved) phase_peak_reserved = reserved;
        break;
      }
      case EventKind::Free:
      case EventKind::FreeRequested: {
        Block* block = event.slot < slots_.size() ? slots_[event.slot] : nullptr;
        if (!block) throw_bad_free(trace, index, "that is not allocated (never allocated, or freed twice)");
        if (block->pending_free) throw_bad_free(trace, index, "whose free was already requested");
        bool real = block != &zero_size_block && block != &failed_block;
        if (event.kind == EventKind::Free) {
          slots_[event.slot] = nullptr;
          if (real) allocator.free(block);
        } else if (real) {
          allocator.request_free(block);
        } else {
          slots_[event.slot] = nullptr;  // nothing to complete later
          skipped_completions_.push_back(event.slot);
        }
        break;
      }
      case EventKind::FreeCompleted: {
        Block* block = event.slot < slots_.size() ? slots_[event.slot] : nullptr;
        if (!block) {
          auto skipped = std::find(skipped_completions_.begin(), skipped_completions_.end(), event.slot);
          if (skipped == skipped_completions_.end())
            throw_bad_free(trace, index, "whose free was not requested (free_completed without free_requested)");
          skipped_completions_.erase(skipped);
          break;
        }
        if (!block->pending_free) throw_bad_free(trace, index, "whose free was not requested (free_completed without free_requested)");
        slots_[event.slot] = nullptr;
        allocator.complete_free(block);
        break;
      }
      case EventKind::RecordStream: {
        Block* block = event.slot < slots_.size() ? slots_[event.slot] : nullptr;
        if (block && block != &zero_size_block && block != &failed_block && block->allocated)
          allocator.record_stream(block, event.stream);
        break;
      }
      case EventKind::StreamSync:
        allocator.synchronize_stream(event.stream);
        break;
      case EventKind::DeviceSync:
        allocator.synchronize_device();
        break;
      case EventKind::Mark: {
        close_phase();
        MarkReport mark;
        mark.label = event.tag < trace.strings.size() ? trace.strings[event.tag] : std::string();
        mark.event_index = index;
        mark.allocated_bytes = allocated_now();
        mark.reserved_bytes = reserved_now();
        result.marks.push_back(std::move(mark));
        phase_peak_allocated = allocated_now();
        phase_peak_reserved = reserved_now();
        break;
      }
      case EventKind::EmptyCache:
        if (allocator.graph_capture_underway())
          throw InputError({trace.source_name, index < trace.source_lines.size() ? trace.source_lines[index] : 0, 0,
                            static_cast<int64_t>(index)},
                           "empty_cache", "empty_cache during a CUDA graph capture: PyTorch forbids synchronising then");
        allocator.empty_cache();
        break;
      case EventKind::CaptureBegin:
        begin_capture(trace, index);
        break;
      case EventKind::CaptureEnd:
        end_capture(trace, index);
        break;
      case EventKind::GraphRelease:
        release_graph(trace, index);
        break;
      case EventKind::CaptureJoin:
        join_capture(trace, index);
        break;
      case EventKind::MemPoolEnter:
        enter_mem_pool(trace, index);
        break;
      case EventKind::MemPoolExit:
        exit_mem_pool(trace, index);
        break;
      case EventKind::MemPoolRelease:
        release_mem_pool(trace, index);
        break;
    }
    if (options_.check_invariants) {
      std::string problem = allocator.check_invariants();
      if (!problem.empty())
        throw std::logic_error("allocator invariant broken after event " + std::to_string(index) + ": " + problem);
    }
    if (callback_) callback_(index);
  }
finished:
  end_progress("replaying events");
  close_phase();
  result.events_replayed = index < trace.events.size() ? index + 1 : index;
  result.segment_allocs = static_cast<size_t>(stats.num_device_alloc - device_allocs_before);
  result.segment_frees = static_cast<size_t>(stats.num_device_free - device_frees_before);
  result.final_stats = stats;
  count_replay(result.events_replayed);
  return result;
}

ReplayResult replay(const Trace& trace, const AllocatorConfig& config, const DeviceModel& device,
                    const ReplayOptions& options) {
  Replayer replayer(config, device, options);
  return replayer.run(trace);
}

}  // namespace oomcast::sim
