// Snapshot replay of CUDA graph pool segments (segment_pool_id other than (0, 0)). No public
// snapshot with graph pools could be found (tests/data/README.md), so the recordings here
// are CONSTRUCTED in the documented format: they check that pool segments are restored into
// a private pool, not agreement with real PyTorch.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/snapshot_test_support.h"

using namespace oomcast::sim;
using oomcast::sim::testing::require_reproduced;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kPoolSegment = 0x7f0000000000ull;
constexpr uint64_t kOrdinary = 0x7f0002000000ull;
using Action = SnapshotTraceEntry::Action;

// At the dump a 20 MiB segment of graph pool (1, 2) is wholly free; the window makes an
// ordinary 4 MiB request, which PyTorch serves from a new segment of its own pool.
Snapshot pool_snapshot(std::vector<SnapshotTraceEntry> entries) {
  Snapshot snapshot;
  snapshot.device_traces.push_back(std::move(entries));
  SnapshotSegment pool;
  pool.address = kPoolSegment;
  pool.total_size = 20 * MiB;
  pool.pool_id_first = 1;
  pool.pool_id_second = 2;
  pool.blocks = {SnapshotBlock{kPoolSegment, 20 * MiB, 0, SnapshotBlock::State::Inactive}};
  SnapshotSegment ordinary;
  ordinary.address = kOrdinary;
  ordinary.total_size = 20 * MiB;
  ordinary.blocks = {SnapshotBlock{kOrdinary, 4 * MiB, 4 * MiB, SnapshotBlock::State::ActiveAllocated},
                     SnapshotBlock{kOrdinary + 4 * MiB, 16 * MiB, 0, SnapshotBlock::State::Inactive}};
  snapshot.segments = {pool, ordinary};
  return snapshot;
}

SnapshotTraceEntry entry(Action action, uint64_t addr, uint64_t size) { return SnapshotTraceEntry{action, addr, size, 0, 0}; }

}  // namespace

TEST_CASE("a graph pool's free segment in a snapshot is not reused by the window's ordinary requests",
          "[sim][snapshot][graphs]") {
  Snapshot snapshot = pool_snapshot({entry(Action::SegmentAlloc, kOrdinary, 20 * MiB), entry(Action::Alloc, kOrdinary, 4 * MiB)});
  SnapshotReplayReport report = replay_snapshot(snapshot, AllocatorConfig{}, "constructed", 0, true);
  CHECK(report.initial_segments == 1);  // the pool's segment; the ordinary one is made in the window
  require_reproduced(report);
}

TEST_CASE("a graph pool's free segment survives the window's empty_cache while its graph lives",
          "[sim][snapshot][graphs]") {
  // The window is one empty_cache that returns a wholly free ordinary segment; the pool's
  // equally free segment stays (its graph still lives at the dump).
  Snapshot snapshot = pool_snapshot({entry(Action::SegmentFree, kOrdinary + 64 * MiB, 20 * MiB)});
  snapshot.segments.pop_back();  // only the pool's segment is left at the dump
  SnapshotReplayReport report = replay_snapshot(snapshot, AllocatorConfig{}, "constructed", 0, true);
  CHECK(report.initial_segments == 2);
  require_reproduced(report);
}

TEST_CASE("an allocation into a graph pool inside the recording window is refused, not replayed elsewhere",
          "[sim][snapshot][graphs][errors]") {
  Snapshot snapshot = pool_snapshot({entry(Action::Alloc, kPoolSegment, 4 * MiB), entry(Action::FreeRequested, kPoolSegment, 4 * MiB),
                                     entry(Action::FreeCompleted, kPoolSegment, 4 * MiB)});
  CHECK_THROWS_WITH(replay_snapshot(snapshot, AllocatorConfig{}, "constructed", 0, true),
                    Catch::Contains("CUDA graph pool"));
}
