// Snapshot replay: rebuild the window's starting state backwards, derive the trace, replay
// it with the recorded segment addresses, and compare the allocator's decisions.
#include "sim/snapshot_replay.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>

#include "base/input_error.h"
#include "sim/caching_allocator.h"
#include "sim/size_class.h"

namespace oomcast::sim {
namespace {

using Action = SnapshotTraceEntry::Action;

std::string hex(uint64_t value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(value));
  return buffer;
}

struct SegmentState {
  uint64_t size = 0;
  uint64_t stream = 0;
  bool is_small = false;
};

struct BlockState {
  uint64_t extent = 0;          // block size: the rounded request, or more when unsplit
  uint64_t requested = 0;
};

// The allocator's memory layout as the recording shows it: segments and allocated blocks.
// Free blocks are the gaps, because free neighbours always merge (spec §14 C3).
class RecordedLayout {
 public:
  RecordedLayout(const std::string& name, const AllocatorConfig& config) : name_(name), config_(config) {}

  std::map<uint64_t, SegmentState> segments;
  std::map<uint64_t, BlockState> allocated;

  [[noreturn]] void fail(int64_t entry, const std::string& message) const {
    throw InputError({name_, 0, 0, entry}, "", "inconsistent snapshot: " + message);
  }

  std::map<uint64_t, SegmentState>::const_iterator segment_containing(uint64_t address, int64_t entry) const {
    auto it = segments.upper_bound(address);
    if (it == segments.begin()) fail(entry, "address " + hex(address) + " lies in no segment");
    --it;
    if (address >= it->first + it->second.size) fail(entry, "address " + hex(address) + " lies in no segment");
    return it;
  }

  // The size of the block handed out at `address` for a request of `requested` bytes: the
  // rounded size, or the whole free run when the remainder is too small to split off.
  uint64_t infer_extent(uint64_t address, uint64_t requested, int64_t entry) const {
    auto segment = segment_containing(address, entry);
    uint64_t boundary = segment->first + segment->second.size;
    auto next = allocated.upper_bound(address);
    if (next != allocated.end() && next->first < boundary) boundary = next->first;
    uint64_t rounded = round_size(requested, config_);
    uint64_t available = boundary - address;
    if (available < rounded)
      fail(entry, "block at " + hex(address) + " needs " + std::to_string(rounded) + " bytes but only " +
                      std::to_string(available) + " are free there");
    uint64_t remaining = available - rounded;
    bool splits = segment->second.is_small || config_.expandable_segments
                      ? remaining >= kMinBlockSize
                      : rounded < config_.max_split_size && remaining > kSmallSize;
    return splits ? rounded : available;
  }

  uint64_t reserved() const {
    uint64_t total = 0;
    for (const auto& [address, segment] : segments) total += segment.size;
    return total;
  }

 private:
  std::string name_;
  const AllocatorConfig& config_;
};

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
        layout.allocated[entry.addr] = BlockState{extent, entry.size};
        break;
      }
      case Action::SegmentAlloc:
        if (!layout.segments.erase(entry.addr))
          layout.fail(index, "segment_alloc at " + hex(entry.addr) + " of a segment that does not exist later");
        break;
      case Action::SegmentFree:
        layout.segments[entry.addr] = SegmentState{entry.size, entry.stream, entry.size == kSmallBuffer};
        break;
      case Action::SegmentMap:
      case Action::SegmentUnmap:
        layout.fail(index, "expandable-segment events (segment_map/unmap) are not supported by snapshot replay yet");
      default:
        break;
    }
  }
}

void load_dump_layout(RecordedLayout& layout, const Snapshot& snapshot, int device_index, const std::string& name) {
  for (const SnapshotSegment& segment : snapshot.segments) {
    if (segment.device != device_index) continue;
    if (segment.is_expandable)
      throw InputError({name, 0, 0, -1}, "is_expandable",
                       "snapshots with expandable segments are not supported by snapshot replay yet");
    layout.segments[segment.address] = SegmentState{segment.total_size, segment.stream, segment.is_small_pool};
    for (const SnapshotBlock& block : segment.blocks) {
      if (block.state != SnapshotBlock::State::Inactive)
        layout.allocated[block.address] = BlockState{block.size, block.requested_size};
    }
  }
}

std::string describe(const SegmentDecision& decision) {
  return std::string(segment_decision_name(decision.kind)) + " " + std::to_string(decision.size) + " at " +
         hex(decision.address);
}

}  // namespace

AllocatorConfig snapshot_allocator_config(const Snapshot& snapshot) {
  if (snapshot.alloc_conf && !snapshot.alloc_conf->empty()) return parse_alloc_conf(*snapshot.alloc_conf);
  return AllocatorConfig{};
}

SnapshotReplayReport replay_snapshot(const Snapshot& snapshot, const AllocatorConfig& config, const std::string& name,
                                     int device_index, bool check_invariants,
                                     const SnapshotReplayObserver& observer) {
  if (snapshot.expandable_segments || config.expandable_segments)
    throw InputError({name, 0, 0, -1}, "expandable_segments",
                     "snapshots recorded or replayed with expandable_segments are not supported by snapshot replay yet");
  static const std::vector<SnapshotTraceEntry> no_entries;
  const auto& entries = device_index >= 0 && static_cast<size_t>(device_index) < snapshot.device_traces.size()
                            ? snapshot.device_traces[static_cast<size_t>(device_index)]
                            : no_entries;
  SnapshotReplayReport report;

  RecordedLayout start(name, config);
  load_dump_layout(start, snapshot, device_index, name);
  undo_events(start, entries);
  report.initial_segments = start.segments.size();
  report.initial_allocated_blocks = start.allocated.size();
  report.initial_reserved_bytes = start.reserved();
  report.starts_empty = start.segments.empty();

  // The trace the recording implies, and the decisions it recorded.
  TraceBuilder builder;
  std::unordered_map<uint64_t, uint64_t> generation;
  auto id_for = [&](uint64_t address) { return hex(address) + "." + std::to_string(generation[address]); };
  std::vector<std::pair<uint64_t, uint32_t>> initial_slots;  // address, slot
  for (const auto& [address, block] : start.allocated) initial_slots.emplace_back(address, builder.adopt(id_for(address)));
  std::vector<SegmentDecision> recorded;
  std::vector<int64_t> entry_of_event;
  std::vector<uint64_t> address_of_event;
  std::deque<std::pair<uint64_t, uint64_t>> scripted;
  uint64_t highest_address = 0;
  for (const auto& [address, segment] : start.segments) highest_address = std::max(highest_address, address + segment.size);
  Action previous = Action::Other;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SnapshotTraceEntry& entry = entries[i];
    auto index = static_cast<int64_t>(i);
    switch (entry.action) {
      case Action::Alloc:
        generation[entry.addr] += 1;
        builder.alloc(id_for(entry.addr), entry.size, entry.stream);
        entry_of_event.push_back(index);
        address_of_event.push_back(entry.addr);
        break;
      case Action::FreeCompleted:
        if (!builder.free(id_for(entry.addr)))
          start.fail(index, "free of " + hex(entry.addr) + ", which is not allocated");
        entry_of_event.push_back(index);
        address_of_event.push_back(0);
        break;
      case Action::SegmentAlloc:
        recorded.push_back(SegmentDecision{SegmentDecision::Kind::Alloc, entry.addr, entry.size,
                                           static_cast<size_t>(i)});
        scripted.emplace_back(entry.size, entry.addr);
        highest_address = std::max(highest_address, entry.addr + entry.size);
        break;
      case Action::SegmentFree:
        recorded.push_back(SegmentDecision{SegmentDecision::Kind::Free, entry.addr, entry.size,
                                           static_cast<size_t>(i)});
        // A run of segment_free is one empty_cache: explicit, or the OOM retry's flush, which
        // frees the same set (spec §14 C4).
        if (previous != Action::SegmentFree) {
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

  // Recorded peaks, from the recorded layout moving forward.
  {
    RecordedLayout layout = start;
    uint64_t reserved = layout.reserved();
    uint64_t allocated = 0;
    for (const auto& [address, block] : layout.allocated) allocated += block.extent;
    report.recorded_peak_reserved_bytes = reserved;
    report.recorded_peak_allocated_bytes = allocated;
    for (size_t i = 0; i < entries.size(); ++i) {
      const SnapshotTraceEntry& entry = entries[i];
      auto index = static_cast<int64_t>(i);
      if (entry.action == Action::SegmentAlloc) {
        layout.segments[entry.addr] = SegmentState{entry.size, entry.stream, entry.size == kSmallBuffer};
        reserved += entry.size;
      } else if (entry.action == Action::SegmentFree) {
        layout.segments.erase(entry.addr);
        reserved -= entry.size;
      } else if (entry.action == Action::Alloc) {
        uint64_t extent = layout.infer_extent(entry.addr, entry.size, index);
        layout.allocated[entry.addr] = BlockState{extent, entry.size};
        allocated += extent;
      } else if (entry.action == Action::FreeCompleted) {
        auto it = layout.allocated.find(entry.addr);
        if (it == layout.allocated.end()) start.fail(index, "free of " + hex(entry.addr) + ", which is not allocated");
        allocated -= it->second.extent;
        layout.allocated.erase(it);
      }
      report.recorded_peak_reserved_bytes = std::max(report.recorded_peak_reserved_bytes, reserved);
      report.recorded_peak_allocated_bytes = std::max(report.recorded_peak_allocated_bytes, allocated);
    }
  }

  // Replay from the rebuilt state, handing out the recorded segment addresses.
  ReplayOptions options;
  options.record_segment_decisions = true;
  options.check_invariants = check_invariants;
  options.stop_at_first_oom = false;
  Replayer replayer(config, DeviceModel::unlimited(), options);
  size_t slot_index = 0;
  for (const auto& [address, segment] : start.segments) {
    std::vector<RestoredBlock> blocks;
    uint64_t cursor = address;
    uint64_t end = address + segment.size;
    for (auto it = start.allocated.lower_bound(address); it != start.allocated.end() && it->first < end; ++it) {
      if (it->first > cursor) blocks.push_back(RestoredBlock{it->first - cursor, 0, false});
      if (it->first < cursor || it->first + it->second.extent > end)
        start.fail(-1, "allocated blocks overlap at " + hex(it->first));
      blocks.push_back(RestoredBlock{it->second.extent, it->second.requested, true});
      cursor = it->first + it->second.extent;
    }
    if (cursor < end) blocks.push_back(RestoredBlock{end - cursor, 0, false});
    std::vector<Block*> restored = replayer.allocator().restore_segment(address, segment.stream, segment.is_small, blocks);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!blocks[i].allocated) continue;
      replayer.bind(initial_slots[slot_index++].second, restored[i]);
    }
  }
  replayer.allocator().reset_peak_stats();
  replayer.device().place_new_regions_above(highest_address);
  replayer.device().script_addresses(std::move(scripted));
  const Trace& trace = report.trace;
  replayer.on_event([&](size_t event) {
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
