// Snapshot replay of frees that the recording shows deferred (free_requested long before
// free_completed, as record_stream makes them). No real snapshot with such gaps could be
// found (tests/data/README.md), so the recording here is CONSTRUCTED in the documented
// format from the documented behaviour (spec §7, §8.5): it checks the replay machinery,
// not agreement with real PyTorch.
#include <catch2/catch.hpp>

#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/snapshot_test_support.h"

using namespace oomcast::sim;
using oomcast::sim::testing::require_reproduced;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kA = 0x7f0000000000ull;
constexpr uint64_t kB = 0x7f0001000000ull;
using Action = SnapshotTraceEntry::Action;

// a (a whole 16 MiB segment) is freed while a side stream still uses it: while it waits, b
// and d need a second segment; when its event completes (at the next malloc), c reuses it.
std::vector<SnapshotTraceEntry> deferred_free_entries() {
  auto entry = [](Action action, uint64_t addr, uint64_t size) { return SnapshotTraceEntry{action, addr, size, 0, 0}; };
  return {
      entry(Action::SegmentAlloc, kA, 16 * MiB),   entry(Action::Alloc, kA, 16 * MiB),
      entry(Action::FreeRequested, kA, 16 * MiB),   entry(Action::SegmentAlloc, kB, 20 * MiB),
      entry(Action::Alloc, kB, 4 * MiB),           entry(Action::Alloc, kB + 4 * MiB, 4 * MiB),
      entry(Action::FreeRequested, kB, 4 * MiB),   entry(Action::FreeCompleted, kB, 4 * MiB),
      entry(Action::FreeRequested, kB + 4 * MiB, 4 * MiB), entry(Action::FreeCompleted, kB + 4 * MiB, 4 * MiB),
      entry(Action::FreeCompleted, kA, 16 * MiB),  entry(Action::Alloc, kA, 16 * MiB),
  };
}

Snapshot deferred_free_snapshot(size_t from_entry) {
  Snapshot snapshot;
  std::vector<SnapshotTraceEntry> entries = deferred_free_entries();
  snapshot.device_traces.emplace_back(entries.begin() + static_cast<std::ptrdiff_t>(from_entry), entries.end());
  SnapshotSegment a;
  a.address = kA;
  a.total_size = 16 * MiB;
  a.blocks = {SnapshotBlock{kA, 16 * MiB, 16 * MiB, SnapshotBlock::State::ActiveAllocated}};
  SnapshotSegment b;
  b.address = kB;
  b.total_size = 20 * MiB;
  b.blocks = {SnapshotBlock{kB, 20 * MiB, 4 * MiB, SnapshotBlock::State::Inactive}};
  snapshot.segments = {a, b};
  return snapshot;
}

}  // namespace

TEST_CASE("a free the recording shows deferred keeps its block out of reach until free_completed",
          "[sim][snapshot][streams]") {
  SnapshotReplayReport report = replay_snapshot(deferred_free_snapshot(0), AllocatorConfig{}, "constructed", 0, true);
  CHECK(report.recorded_segment_decisions == 2);
  require_reproduced(report);
  // allocated_bytes drops at the request: a or c alone, never a with b and d (24 MiB).
  CHECK(report.replay.peak_allocated_bytes == 16 * MiB);
}

TEST_CASE("a window that starts while a free is pending rebuilds the block as pending", "[sim][snapshot][streams]") {
  // The window starts after a's free_requested: at its start a is active but not allocated.
  SnapshotReplayReport report = replay_snapshot(deferred_free_snapshot(3), AllocatorConfig{}, "constructed", 0, true);
  CHECK_FALSE(report.starts_empty);
  CHECK(report.initial_allocated_blocks == 1);
  CHECK(report.recorded_segment_decisions == 1);
  require_reproduced(report);
}
