// Snapshot replay of recordings made with expandable_segments:True. No real snapshot with
// expandable segments could be found in public repositories (see tests/data/README.md), so
// these recordings are CONSTRUCTED by hand, in the documented snapshot format, from the
// behaviour the spec and PyTorch's devlog describe (spec §4: 20 MiB / 2 MiB pages, the
// 8 x 16 MiB example mapping 20, 40, 60, 80, 80, 100, 120, 140 MiB). They check that the
// replay machinery (window rebuild, map/unmap comparison, reservations, streams, devices)
// reproduces such a recording; they are not evidence that the rules match real PyTorch.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/snapshot_test_support.h"

using namespace oomcast::sim;
using oomcast::sim::testing::require_reproduced;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kBase = 0x7f0000000000ull;
constexpr uint64_t kSecondBase = 0x7f2000000000ull;

using Action = SnapshotTraceEntry::Action;

// Appends trace entries the way the allocator records them.
struct Recording {
  std::vector<SnapshotTraceEntry> entries;
  uint64_t stream = 0;

  void add(Action action, uint64_t addr, uint64_t size) { entries.push_back(SnapshotTraceEntry{action, addr, size, stream, 0}); }
  void map(uint64_t addr, uint64_t size) { add(Action::SegmentMap, addr, size); }
  void unmap(uint64_t addr, uint64_t size) { add(Action::SegmentUnmap, addr, size); }
  void alloc(uint64_t addr, uint64_t size) { add(Action::Alloc, addr, size); }
  void free(uint64_t addr, uint64_t size) {
    add(Action::FreeRequested, addr, size);
    add(Action::FreeCompleted, addr, size);
  }
};

SnapshotSegment expandable_segment(int device, uint64_t address, uint64_t stream, bool is_small,
                                   std::vector<SnapshotBlock> blocks) {
  SnapshotSegment segment;
  segment.device = device;
  segment.address = address;
  segment.stream = stream;
  segment.is_small_pool = is_small;
  segment.is_expandable = true;
  for (const SnapshotBlock& block : blocks) segment.total_size += block.size;
  segment.blocks = std::move(blocks);
  return segment;
}

SnapshotBlock allocated(uint64_t address, uint64_t size) {
  return SnapshotBlock{address, size, size, SnapshotBlock::State::ActiveAllocated};
}
SnapshotBlock inactive(uint64_t address, uint64_t size) {
  return SnapshotBlock{address, size, 0, SnapshotBlock::State::Inactive};
}

Snapshot with_settings(Snapshot snapshot) {
  snapshot.has_allocator_settings = true;
  snapshot.expandable_segments = true;
  snapshot.alloc_conf = "expandable_segments:True";
  return snapshot;
}

// The devlog's 8 x 16 MiB, freed, 4 x 32 MiB in the merged block, freed, empty_cache
// (one unmap of all 140 MiB releases the reservation), then 16 MiB in a new reservation.
// `from_entry` drops the start, as a full ring buffer does.
Snapshot devlog_recording(size_t from_entry = 0) {
  Recording r;
  for (uint64_t k = 0; k < 8; ++k) {
    const uint64_t mapped_end[] = {20, 40, 60, 80, 80, 100, 120, 140};
    if (k == 0 || mapped_end[k] != mapped_end[k - 1]) r.map(kBase + (mapped_end[k] - 20) * MiB, 20 * MiB);
    r.alloc(kBase + 16 * k * MiB, 16 * MiB);
  }
  for (uint64_t k = 0; k < 8; ++k) r.free(kBase + 16 * k * MiB, 16 * MiB);
  for (uint64_t k = 0; k < 4; ++k) r.alloc(kBase + 32 * k * MiB, 32 * MiB);
  for (uint64_t k = 0; k < 4; ++k) r.free(kBase + 32 * k * MiB, 32 * MiB);
  r.unmap(kBase, 140 * MiB);
  r.map(kSecondBase, 20 * MiB);
  r.alloc(kSecondBase, 16 * MiB);

  Snapshot snapshot;
  snapshot.device_traces.emplace_back(r.entries.begin() + static_cast<std::ptrdiff_t>(from_entry), r.entries.end());
  snapshot.segments.push_back(expandable_segment(
      0, kSecondBase, 0, false, {allocated(kSecondBase, 16 * MiB), inactive(kSecondBase + 16 * MiB, 4 * MiB)}));
  return with_settings(snapshot);
}

SnapshotReplayReport replay(const Snapshot& snapshot, int device = 0) {
  return replay_snapshot(snapshot, snapshot_allocator_config(snapshot), "constructed", device, true);
}

}  // namespace

TEST_CASE("an expandable-segment recording from an empty allocator replays its maps and unmaps exactly",
          "[sim][snapshot][expandable]") {
  SnapshotReplayReport report = replay(devlog_recording());
  CHECK(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 7 + 1 + 1);
  require_reproduced(report);
  CHECK(report.replay.peak_reserved_bytes == 140 * MiB);
  CHECK(report.replay.peak_allocated_bytes == 128 * MiB);
  CHECK(report.replay.final_stats.reserved_bytes.all().current == int64_t(20 * MiB));
  CHECK(report.replay.final_stats.segment.all().current == 0);
}

TEST_CASE("an expandable-segment window that starts mid-run is rebuilt from the dump-time state",
          "[sim][snapshot][expandable]") {
  // The ring buffer kept everything from the fifth alloc on: at the window's start 80 MiB
  // were mapped, holding four live 16 MiB blocks and a free 16 MiB tail.
  SnapshotReplayReport report = replay(devlog_recording(/*from_entry=*/8));
  CHECK_FALSE(report.starts_empty);
  CHECK(report.initial_reserved_bytes == 80 * MiB);
  CHECK(report.initial_allocated_blocks == 4);
  CHECK(report.recorded_segment_decisions == 3 + 1 + 1);
  require_reproduced(report);
}

TEST_CASE("an expandable-segment recording replayed without expandable segments is told apart",
          "[sim][snapshot][expandable]") {
  Snapshot snapshot = devlog_recording();
  SnapshotReplayReport report = replay_snapshot(snapshot, AllocatorConfig{}, "constructed");
  REQUIRE(report.first_mismatch);
  CHECK(report.first_mismatch->recorded == "segment_map 20971520 at 0x7f0000000000");
  // Without expandable segments a 16 MiB request gets a 16 MiB cudaMalloc of its own.
  CHECK(report.first_mismatch->simulated.rfind("segment_alloc 16777216 at ", 0) == 0);
}

namespace {

// Device 0: one 8 MiB block. Device 1: streams 7 and 9 each get their own large
// reservation, stream 7 also a small one; a block freed on stream 7 does not serve stream 9;
// empty_cache unmaps stream 7's whole pages (large pool first) and keeps stream 9's
// partial page.
Snapshot two_device_recording() {
  Snapshot snapshot;
  Recording d0;
  d0.map(kBase, 20 * MiB);
  d0.alloc(kBase, 8 * MiB);
  snapshot.device_traces.push_back(d0.entries);

  const uint64_t small7 = 0x7e0000000000ull, large7 = 0x7e2000000000ull, large9 = 0x7e4000000000ull;
  Recording d1;
  d1.stream = 7;
  d1.map(small7, 2 * MiB);
  d1.alloc(small7, 1000);
  d1.map(large7, 20 * MiB);
  d1.alloc(large7, 5 * MiB);
  d1.stream = 9;
  d1.map(large9, 20 * MiB);
  d1.alloc(large9, 5 * MiB);
  d1.stream = 7;
  d1.free(small7, 1000);
  d1.free(large7, 5 * MiB);
  d1.stream = 9;
  d1.alloc(large9 + 5 * MiB, 5 * MiB);
  d1.stream = 7;
  d1.unmap(large7, 20 * MiB);
  d1.unmap(small7, 2 * MiB);
  snapshot.device_traces.push_back(d1.entries);

  snapshot.segments.push_back(expandable_segment(0, kBase, 0, false, {allocated(kBase, 8 * MiB), inactive(kBase + 8 * MiB, 12 * MiB)}));
  snapshot.segments.push_back(expandable_segment(
      1, large9, 9, false,
      {allocated(large9, 5 * MiB), allocated(large9 + 5 * MiB, 5 * MiB), inactive(large9 + 10 * MiB, 10 * MiB)}));
  return with_settings(snapshot);
}

}  // namespace

TEST_CASE("a snapshot names the devices it holds", "[sim][snapshot][devices]") {
  CHECK(snapshot_devices(two_device_recording()) == std::vector<int>{0, 1});
  CHECK(snapshot_devices(devlog_recording()) == std::vector<int>{0});
}

TEST_CASE("each device of a snapshot replays on its own allocator", "[sim][snapshot][devices][expandable]") {
  Snapshot snapshot = two_device_recording();
  SnapshotReplayReport first = replay(snapshot, 0);
  CHECK(first.recorded_segment_decisions == 1);
  require_reproduced(first);
  CHECK(first.replay.peak_reserved_bytes == 20 * MiB);

  SnapshotReplayReport second = replay(snapshot, 1);
  CHECK(second.recorded_segment_decisions == 5);
  require_reproduced(second);
  CHECK(second.replay.peak_reserved_bytes == 42 * MiB);
  CHECK(second.replay.final_stats.reserved_bytes.all().current == int64_t(20 * MiB));
}

TEST_CASE("an unmap over an allocated block is reported as an inconsistent snapshot", "[sim][snapshot][expandable]") {
  Snapshot snapshot = devlog_recording();
  // Pretend the final unmap happened while the last 32 MiB block was still allocated.
  auto& entries = snapshot.device_traces[0];
  auto last_free = std::find_if(entries.rbegin(), entries.rend(), [](const SnapshotTraceEntry& e) {
    return e.action == Action::FreeCompleted;
  });
  entries.erase(std::next(last_free).base());
  CHECK_THROWS_AS(replay(snapshot), oomcast::InputError);
}

TEST_CASE("replaying a device the snapshot does not hold names the devices it does", "[sim][snapshot][devices]") {
  try {
    replay(two_device_recording(), 3);
    FAIL("no error");
  } catch (const oomcast::InputError& error) {
    CHECK(error.message() == "device 3 is not in the snapshot; it holds devices 0, 1");
  }
}
