// Snapshot replay: rebuild the window's starting state backwards, derive the trace, replay
// it with the recorded segment addresses, and compare the allocator's decisions.
#include "sim/snapshot_replay.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "base/input_error.h"
#include "sim/caching_allocator.h"
#include "sim/recorded_layout.h"
#include "sim/size_class.h"

namespace oomcast::sim {
namespace {

using Action = SnapshotTraceEntry::Action;

bool releases_segment(Action action) { return action == Action::SegmentFree || action == Action::SegmentUnmap; }

// Walks the recorded events backwards from the dump-time layout to the window's start.
void undo_events(RecordedLayout& layout, const std::vector<SnapshotTraceEntry>& entries) {
  for (size_t i = entries.size(); i-- > 0;) {
    const SnapshotTraceEntry& entry = entries[i];
    auto index = static_cast<int64_t>(i);
    switch (entry.action) {
      case Action::Alloc:
        if (!layout.allocated.erase(entry.addr))
          layout.fail(index, "alloc at " + hex(entry.addr) + " whose block is not allocated later");
        break;
      case Action::FreeCompleted: {
        if (layout.allocated.count(entry.addr))
          layout.fail(index, "free of " + hex(entry.addr) + " while a block there is allocated");
        uint64_t extent = layout.infer_extent(entry.addr, entry.size, index);
        layout.allocated[entry.addr] = RecordedBlock{extent, entry.size, true};
        break;
      }
      case Action::FreeRequested: {
        auto it = layout.allocated.find(entry.addr);
        if (it == layout.allocated.end() || !it->second.pending)
          layout.fail(index, "free_requested of " + hex(entry.addr) + " whose block is neither freed later nor pending at the dump");
        it->second.pending = false;
        break;
      }
      case Action::SegmentAlloc: {
        auto it = layout.segments.find(entry.addr);
        if (it == layout.segments.end() || it->second.expandable)
          layout.fail(index, "segment_alloc at " + hex(entry.addr) + " of a segment that does not exist later");
        layout.segments.erase(it);
        break;
      }
      case Action::SegmentFree:
        layout.segments[entry.addr] = RecordedSegment{entry.size, entry.stream, entry.size == kSmallBuffer, false};
        break;
      case Action::SegmentMap:
        layout.unmap_range(entry.addr, entry.size, index);
        break;
      case Action::SegmentUnmap:
        layout.map_range(entry.addr, entry.size, entry.stream, layout.is_small_range(entry, true), index);
        break;
      default:
        break;
    }
  }
}

// Returns how many CUDA graph private pools (segment_pool_id other than (0, 0)) the
// device's segments belong to; their segments are numbered 1.. in RecordedSegment::pool.
uint64_t load_dump_layout(RecordedLayout& layout, const Snapshot& snapshot, int device_index) {
  std::map<std::pair<int64_t, int64_t>, uint64_t> pools;
  for (const SnapshotSegment& segment : snapshot.segments) {
    if (segment.device != device_index) continue;
    uint64_t pool = 0;
    if (segment.pool_id_first != 0 || segment.pool_id_second != 0) {
      auto key = std::make_pair(segment.pool_id_first, segment.pool_id_second);
      pool = pools.emplace(key, pools.size() + 1).first->second;
    }
    if (segment.is_expandable) {
      layout.map_range(segment.address, segment.total_size, segment.stream, segment.is_small_pool, -1);
    } else {
      layout.segments[segment.address] =
          RecordedSegment{segment.total_size, segment.stream, segment.is_small_pool, false, pool};
    }
    for (const SnapshotBlock& block : segment.blocks) {
      if (block.state != SnapshotBlock::State::Inactive)
        layout.allocated[block.address] = RecordedBlock{block.size, block.requested_size,
                                                        block.state == SnapshotBlock::State::ActivePendingFree};
    }
  }
  return pools.size();
}

// One expandable segment per (stream, pool): PyTorch makes another only when no existing one
// has room, which takes more than the device's memory.
using ReservationKey = std::pair<uint64_t, bool>;  // stream, is_small

struct ReservationState {
  bool live = false;         // has mapped pages (a wholly unmapped reservation is released)
  bool from_start = false;   // still the reservation that existed at the window's start
  uint64_t mapped = 0;
  uint64_t start_base = 0;   // lowest address the starting reservation is seen to map
};

// What the recording says happened, moving forward from the rebuilt start: peaks, and where
// each expandable segment begins (the address of its first map).
struct ForwardFacts {
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;
  std::map<ReservationKey, ReservationState> reservations;
  std::deque<uint64_t> new_reservation_bases;
};

ForwardFacts walk_forward(const RecordedLayout& start, const std::vector<SnapshotTraceEntry>& entries) {
  ForwardFacts facts;
  RecordedLayout layout = start;
  for (const auto& [address, segment] : layout.segments) {
    if (!segment.expandable) continue;
    ReservationState& state = facts.reservations[{segment.stream, segment.is_small}];
    state.start_base = state.live ? std::min(state.start_base, address) : address;
    state.live = state.from_start = true;
    state.mapped += segment.size;
  }
  uint64_t reserved = layout.reserved();
  uint64_t allocated = 0;
  for (const auto& [address, block] : layout.allocated)
    if (!block.pending) allocated += block.extent;
  facts.peak_reserved = reserved;
  facts.peak_allocated = allocated;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SnapshotTraceEntry& entry = entries[i];
    auto index = static_cast<int64_t>(i);
    switch (entry.action) {
      case Action::SegmentAlloc:
        layout.segments[entry.addr] = RecordedSegment{entry.size, entry.stream, entry.size == kSmallBuffer, false};
        reserved += entry.size;
        break;
      case Action::SegmentFree:
        layout.segments.erase(entry.addr);
        reserved -= entry.size;
        break;
      case Action::SegmentMap: {
        bool is_small = layout.is_small_range(entry, false);
        ReservationState& state = facts.reservations[{entry.stream, is_small}];
        if (!state.live) {
          facts.new_reservation_bases.push_back(entry.addr);
          state.live = true;
        } else if (state.from_start) {
          state.start_base = std::min(state.start_base, entry.addr);
        }
        state.mapped += entry.size;
        layout.map_range(entry.addr, entry.size, entry.stream, is_small, index);
        reserved += entry.size;
        break;
      }
      case Action::SegmentUnmap: {
        const RecordedSegment& run = layout.segment_containing(entry.addr, index)->second;
        ReservationState& state = facts.reservations[{run.stream, run.is_small}];
        state.mapped -= std::min(state.mapped, entry.size);
        if (state.mapped == 0) state.live = state.from_start = false;
        layout.unmap_range(entry.addr, entry.size, index);
        reserved -= entry.size;
        break;
      }
      case Action::Alloc: {
        uint64_t extent = layout.infer_extent(entry.addr, entry.size, index);
        layout.allocated[entry.addr] = RecordedBlock{extent, entry.size};
        allocated += extent;
        break;
      }
      case Action::FreeRequested: {
        // allocated_bytes drops at the request; the block stays until free_completed.
        auto it = layout.allocated.find(entry.addr);
        if (it == layout.allocated.end()) start.fail(index, "free of " + hex(entry.addr) + ", which is not allocated");
        if (!it->second.pending) allocated -= it->second.extent;
        it->second.pending = true;
        break;
      }
      case Action::FreeCompleted: {
        auto it = layout.allocated.find(entry.addr);
        if (it == layout.allocated.end()) start.fail(index, "free of " + hex(entry.addr) + ", which is not allocated");
        if (!it->second.pending) allocated -= it->second.extent;
        layout.allocated.erase(it);
        break;
      }
      default:
        break;
    }
    facts.peak_reserved = std::max(facts.peak_reserved, reserved);
    facts.peak_allocated = std::max(facts.peak_allocated, allocated);
  }
  return facts;
}

// The blocks of [address, address + size): allocated ones from the layout, gaps free.
std::vector<RestoredBlock> blocks_of(const RecordedLayout& layout, uint64_t address, uint64_t size,
                                     std::vector<uint64_t>& allocated_addresses) {
  std::vector<RestoredBlock> blocks;
  uint64_t cursor = address;
  uint64_t end = address + size;
  for (auto it = layout.allocated.lower_bound(address); it != layout.allocated.end() && it->first < end; ++it) {
    if (it->first < cursor || it->first + it->second.extent > end)
      layout.fail(-1, "allocated blocks overlap at " + hex(it->first));
    if (it->first > cursor) blocks.push_back(RestoredBlock{it->first - cursor, 0, false});
    blocks.push_back(RestoredBlock{it->second.extent, it->second.requested, true});
    allocated_addresses.push_back(it->first);
    cursor = it->first + it->second.extent;
  }
  if (cursor < end) blocks.push_back(RestoredBlock{end - cursor, 0, false});
  return blocks;
}

// The trace of a recording, as TraceBuilder would build it from the ids
// "<hex address>.<generation>" (the generation counts the allocs at that address), but keyed
// by address: no id string is built or hashed per event, only one name per slot.
class AddressTraceBuilder {
 public:
  AddressTraceBuilder() { trace_.strings.emplace_back(); }
  uint32_t adopt(uint64_t address, bool pending) {
    const uint32_t slot = new_slot(address, 0);
    requested_.back() = pending;
    return slot;
  }
  void alloc(uint64_t address, uint64_t bytes, uint64_t stream) {
    trace_.events.push_back(Event{EventKind::Alloc, new_slot(address, 1), 0, bytes, stream});
  }
  // The rules of TraceBuilder::free, free_requested and free_completed.
  bool free(uint64_t address) {
    Address* at = live(address);
    if (!at || requested_[at->slot]) return false;
    trace_.events.push_back(Event{EventKind::Free, at->slot, 0, 0, 0});
    at->live = false;
    return true;
  }
  bool free_requested(uint64_t address) {
    Address* at = live(address);
    if (!at || requested_[at->slot]) return false;
    trace_.events.push_back(Event{EventKind::FreeRequested, at->slot, 0, 0, 0});
    requested_[at->slot] = 1;
    return true;
  }
  bool free_completed(uint64_t address) {
    Address* at = live(address);
    if (!at || !requested_[at->slot]) return false;
    requested_[at->slot] = 0;
    trace_.events.push_back(Event{EventKind::FreeCompleted, at->slot, 0, 0, 0});
    at->live = false;
    return true;
  }
  void empty_cache() { trace_.events.push_back(Event{EventKind::EmptyCache, 0, 0, 0, 0}); }
  Trace take() { return std::move(trace_); }

 private:
  struct Address {
    uint32_t slot = 0;        // its newest slot; an earlier one never freed is out of reach, as its id is
    bool live = false;
    uint64_t generation = 0;  // allocs seen at this address
  };
  Address* live(uint64_t address) {
    auto it = addresses_.find(address);
    return it != addresses_.end() && it->second.live ? &it->second : nullptr;
  }
  // A slot named "<hex address>.<generation>" after `allocs` more allocs at `address`.
  uint32_t new_slot(uint64_t address, uint64_t allocs) {
    Address& at = addresses_[address];
    at.generation += allocs;
    at.slot = static_cast<uint32_t>(trace_.slot_names.size());
    at.live = true;
    char name[48];
    char* end = name + sizeof name;
    char* p = end;
    uint64_t generation = at.generation;
    do *--p = static_cast<char>('0' + generation % 10); while ((generation /= 10) != 0);
    *--p = '.';
    uint64_t hex_digits = address;
    do *--p = "0123456789abcdef"[hex_digits & 15]; while ((hex_digits >>= 4) != 0);
    *--p = 'x';
    *--p = '0';
    trace_.slot_names.emplace_back(p, end);
    requested_.push_back(0);
    return at.slot;
  }

  Trace trace_;
  std::unordered_map<uint64_t, Address> addresses_;
  std::vector<uint8_t> requested_;                     // per slot: free requested, not completed
};

std::string describe(const SegmentDecision& decision) {
  return std::string(segment_decision_name(decision.kind)) + " " + std::to_string(decision.size) + " at " +
         hex(decision.address);
}

}  // namespace

AllocatorConfig snapshot_allocator_config(const Snapshot& snapshot) {
  AllocatorConfig config;
  if (snapshot.alloc_conf && !snapshot.alloc_conf->empty()) config = parse_alloc_conf(*snapshot.alloc_conf);
  // The settings dict holds what the allocator ran with, also when they were set at run
  // time (_set_allocator_settings) rather than by the environment string.
  if (snapshot.has_allocator_settings) {
    config.expandable_segments = snapshot.expandable_segments;
    if (snapshot.max_split_size > 0) config.max_split_size = static_cast<uint64_t>(snapshot.max_split_size);
  }
  return config;
}

std::vector<LiveBlock> live_blocks_after(const SnapshotReplayReport& report, size_t event) {
  const Trace& trace = report.trace;
  std::vector<LiveBlock> blocks;
  if (event >= trace.events.size()) return blocks;
  std::vector<size_t> alloc_event(report.block_bytes_of_slot.size(), SIZE_MAX);
  std::vector<uint8_t> live(report.block_bytes_of_slot.size(), 0);
  std::fill_n(live.begin(), std::min(live.size(), report.initial_allocated_blocks), 1);
  for (size_t i = 0; i <= event; ++i) {
    const Event& e = trace.events[i];
    if (e.slot >= live.size()) continue;
    if (e.kind == EventKind::Alloc) {
      live[e.slot] = 1;
      alloc_event[e.slot] = i;
    } else if (e.kind == EventKind::Free || e.kind == EventKind::FreeCompleted) {
      live[e.slot] = 0;  // a requested free keeps its block until it completes
    }
  }
  for (size_t slot = 0; slot < live.size(); ++slot)
    if (live[slot] && report.block_bytes_of_slot[slot] > 0)
      blocks.push_back(LiveBlock{alloc_event[slot], report.block_bytes_of_slot[slot]});
  return blocks;
}

std::vector<int> snapshot_devices(const Snapshot& snapshot) {
  std::vector<int> devices;
  for (size_t d = 0; d < snapshot.device_traces.size(); ++d)
    if (!snapshot.device_traces[d].empty()) devices.push_back(static_cast<int>(d));
  for (const SnapshotSegment& segment : snapshot.segments)
    if (segment.device >= 0 && segment.device <= INT32_MAX) devices.push_back(static_cast<int>(segment.device));
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return devices;
}

SnapshotReplayReport replay_snapshot(const Snapshot& snapshot, const AllocatorConfig& config, const std::string& name,
                                     int device_index, bool check_invariants,
                                     const SnapshotReplayObserver& observer, const DeviceModel& device) {
  static const std::vector<SnapshotTraceEntry> no_entries;
  const auto& entries = device_index >= 0 && static_cast<size_t>(device_index) < snapshot.device_traces.size()
                            ? snapshot.device_traces[static_cast<size_t>(device_index)]
                            : no_entries;
  SnapshotReplayReport report;
  report.devices_in_file = snapshot_devices(snapshot);
  if (!report.devices_in_file.empty() &&
      !std::binary_search(report.devices_in_file.begin(), report.devices_in_file.end(), device_index)) {
    std::string held;
    for (int device : report.devices_in_file) held += (held.empty() ? "" : ", ") + std::to_string(device);
    throw InputError({name, 0, 0, -1}, "device",
                     "device " + std::to_string(device_index) + " is not in the snapshot; it holds device" +
                         (report.devices_in_file.size() > 1 ? "s " : " ") + held);
  }

  // The recording's blocks were rounded and split under the settings it was recorded with;
  // `config` (a what-if such as another roundup_power2_divisions) governs only the replay.
  // Inferring the recorded extents under `config` would call a legitimate what-if an
  // inconsistent snapshot.
  AllocatorConfig recorded_config = snapshot_allocator_config(snapshot);
  recorded_config.torch_version = config.torch_version;
  RecordedLayout start(name, recorded_config);
  const uint64_t graph_pools = load_dump_layout(start, snapshot, device_index);
  // A private-pool segment at the dump: an allocation into it inside the window was made by
  // a capture, which the recording does not mark; refused rather than replayed into the
  // allocator's own pools.
  std::map<uint64_t, RecordedSegment> pool_segments;
  for (const auto& [address, segment] : start.segments)
    if (segment.pool != 0) pool_segments.emplace(address, segment);
  for (size_t i = 0; i < entries.size() && !pool_segments.empty(); ++i) {
    if (entries[i].action != Action::Alloc && entries[i].action != Action::SegmentAlloc) continue;
    auto after = pool_segments.upper_bound(entries[i].addr);
    if (after == pool_segments.begin()) continue;
    auto segment = std::prev(after);
    if (entries[i].addr < segment->first + segment->second.size)
      throw InputError({name, 0, 0, static_cast<int64_t>(i)}, "segment_pool_id",
                       "allocation at " + hex(entries[i].addr) +
                           " inside a CUDA graph pool's segment: captures inside the recording window are not "
                           "replayed from snapshots yet");
  }
  undo_events(start, entries);
  report.initial_segments = start.segments.size();
  report.initial_allocated_blocks = start.allocated.size();
  report.initial_reserved_bytes = start.reserved();
  report.starts_empty = start.segments.empty();

  // The trace the recording implies, and the decisions it recorded.
  AddressTraceBuilder builder;
  std::map<uint64_t, uint32_t> initial_slots;  // address -> slot
  std::unordered_set<uint64_t> deferred;  // addresses whose free was requested, not yet completed
  for (const auto& [address, block] : start.allocated) {
    initial_slots[address] = builder.adopt(address, block.pending);
    if (block.pending) deferred.insert(address);
  }
  std::vector<SegmentDecision> recorded;
  std::vector<int64_t> entry_of_event;
  std::vector<uint64_t> address_of_event;
  std::deque<std::pair<uint64_t, uint64_t>> scripted;
  uint64_t highest_address = 0;
  for (const auto& [address, segment] : start.segments) highest_address = std::max(highest_address, address + segment.size);
  auto record = [&](SegmentDecision::Kind kind, const SnapshotTraceEntry& entry, size_t i) {
    recorded.push_back(SegmentDecision{kind, entry.addr, entry.size, i});
  };
  Action previous = Action::Other;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SnapshotTraceEntry& entry = entries[i];
    auto index = static_cast<int64_t>(i);
    switch (entry.action) {
      case Action::Alloc:
        builder.alloc(entry.addr, entry.size, entry.stream);
        entry_of_event.push_back(index);
        address_of_event.push_back(entry.addr);
        break;
      case Action::FreeRequested:
        // Completed at once (no record_stream): one plain free, at the completion.
        if (i + 1 < entries.size() && entries[i + 1].action == Action::FreeCompleted && entries[i + 1].addr == entry.addr)
          break;
        if (!builder.free_requested(entry.addr))
          start.fail(index, "free_requested of " + hex(entry.addr) + ", which is not allocated");
        deferred.insert(entry.addr);
        entry_of_event.push_back(index);
        address_of_event.push_back(0);
        break;
      case Action::FreeCompleted: {
        bool was_deferred = deferred.erase(entry.addr) > 0;
        if (!(was_deferred ? builder.free_completed(entry.addr) : builder.free(entry.addr)))
          start.fail(index, "free of " + hex(entry.addr) + ", which is not allocated");
        entry_of_event.push_back(index);
        address_of_event.push_back(0);
        break;
      }
      case Action::SegmentAlloc:
        record(SegmentDecision::Kind::Alloc, entry, i);
        scripted.emplace_back(entry.size, entry.addr);
        highest_address = std::max(highest_address, entry.addr + entry.size);
        break;
      case Action::SegmentMap:
        record(SegmentDecision::Kind::Map, entry, i);
        highest_address = std::max(highest_address, entry.addr + entry.size);
        break;
      case Action::SegmentFree:
      case Action::SegmentUnmap:
        record(entry.action == Action::SegmentFree ? SegmentDecision::Kind::Free : SegmentDecision::Kind::Unmap,
               entry, i);
        // A run of segment_free / segment_unmap is one empty_cache: explicit, or the OOM
        // retry's flush, which releases the same set (spec §14 C4).
        if (!releases_segment(previous)) {
          builder.empty_cache();
          entry_of_event.push_back(index);
          address_of_event.push_back(0);
        }
        break;
      case Action::Oom:
        report.recorded_oom = true;
        break;
      default:
        break;
    }
    if (entry.action != Action::FreeRequested) previous = entry.action;
  }
  report.trace = builder.take();
  report.recorded_segment_decisions = recorded.size();

  ForwardFacts facts = walk_forward(start, entries);
  report.recorded_peak_reserved_bytes = facts.peak_reserved;
  report.recorded_peak_allocated_bytes = facts.peak_allocated;

  // Replay from the rebuilt state, handing out the recorded segment addresses.
  ReplayOptions options;
  options.record_segment_decisions = true;
  options.check_invariants = check_invariants;
  options.stop_at_first_oom = false;
  Replayer replayer(config, device, options);
  CachingAllocator& allocator = replayer.allocator();
  auto bind_blocks = [&](const std::vector<uint64_t>& addresses, const std::vector<RestoredBlock>& blocks,
                         const std::vector<Block*>& restored, size_t& next) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!blocks[i].allocated) continue;
      uint64_t address = addresses[next++];
      replayer.bind(initial_slots.at(address), restored[i]);
      if (start.allocated.at(address).pending) allocator.request_free(restored[i]);
    }
  };
  std::map<ReservationKey, std::vector<RestoredRun>> expandable_runs;
  std::map<ReservationKey, std::vector<uint64_t>> expandable_addresses;
  for (const auto& [address, segment] : start.segments) {
    if (segment.expandable) {
      ReservationKey key{segment.stream, segment.is_small};
      expandable_runs[key].push_back(RestoredRun{address, blocks_of(start, address, segment.size, expandable_addresses[key])});
      continue;
    }
    std::vector<uint64_t> addresses;
    std::vector<RestoredBlock> blocks = blocks_of(start, address, segment.size, addresses);
    size_t next = 0;
    bind_blocks(addresses, blocks,
                allocator.restore_segment(address, segment.stream, segment.is_small, blocks, segment.pool), next);
  }
  replayer.set_first_pool_id(graph_pools + 1);
  for (const auto& [key, runs] : expandable_runs) {
    uint64_t base = std::min(facts.reservations[key].start_base, runs.front().address);
    std::vector<std::vector<Block*>> restored = allocator.restore_expandable_segment(base, key.first, key.second, runs);
    size_t next = 0;
    for (size_t r = 0; r < runs.size(); ++r) bind_blocks(expandable_addresses[key], runs[r].blocks, restored[r], next);
  }
  allocator.reset_peak_stats();
  replayer.device().place_new_regions_above(highest_address);
  replayer.device().script_addresses(std::move(scripted));
  replayer.device().script_reservations(std::move(facts.new_reservation_bases));
  const Trace& trace = report.trace;
  // Block sizes: a restored block's from the rebuilt layout, an alloc's from the allocated
  // bytes it added (the allocator counts block sizes).
  report.block_bytes_of_slot.assign(trace.slot_names.size(), 0);
  for (const auto& [address, slot] : initial_slots) report.block_bytes_of_slot[slot] = start.allocated.at(address).extent;
  int64_t allocated_before = allocator.stats().allocated_bytes.all().current;
  replayer.on_event([&](size_t event) {
    const int64_t allocated_now = allocator.stats().allocated_bytes.all().current;
    const Event& replayed = trace.events[event];
    if (replayed.kind == EventKind::Alloc && allocated_now > allocated_before)
      report.block_bytes_of_slot[replayed.slot] = static_cast<uint64_t>(allocated_now - allocated_before);
    allocated_before = allocated_now;
    if (observer) observer(event, replayer);
    uint64_t expected = address_of_event[event];
    if (expected == 0) return;
    report.block_addresses_checked += 1;
    if (replayer.address_of(trace.events[event].slot) == expected) report.block_addresses_matched += 1;
  });
  report.replay = replayer.run(trace);

  const auto& simulated = report.replay.segment_decisions;
  size_t common = std::min(simulated.size(), recorded.size());
  size_t matched = 0;
  while (matched < common && simulated[matched] == recorded[matched]) ++matched;
  report.segment_decisions_matched = matched;
  if (matched < recorded.size() || matched < simulated.size()) {
    SnapshotMismatch mismatch;
    mismatch.decision_index = matched;
    if (matched < recorded.size()) {
      mismatch.recorded = describe(recorded[matched]);
      mismatch.snapshot_event = static_cast<int64_t>(recorded[matched].event_index);
    } else {
      mismatch.recorded = "nothing";
    }
    if (matched < simulated.size()) {
      mismatch.simulated = describe(simulated[matched]);
      if (mismatch.snapshot_event < 0) mismatch.snapshot_event = entry_of_event[simulated[matched].event_index];
    } else {
      mismatch.simulated = "nothing";
    }
    report.first_mismatch = mismatch;
  }
  report.entry_of_event = std::move(entry_of_event);
  return report;
}

}  // namespace oomcast::sim
