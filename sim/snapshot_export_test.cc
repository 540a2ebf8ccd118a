// Tests of the snapshot export: read back by the snapshot reader and replayed, it gives the
// simulator's own decisions and peaks; an OOM ends the trace as PyTorch records it; frames land
// on the entries and blocks they name.
#include "sim/snapshot_export.h"

#include <catch2/catch.hpp>

#include "sim/pickle_reader.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

namespace oomcast::sim {
namespace {

constexpr Bytes kMiB = 1ull << 20;

Trace mixed_trace() {
  TraceBuilder builder;
  builder.mark("forward");
  for (int i = 0; i < 30; ++i) builder.alloc("a" + std::to_string(i), (i % 5 + 1) * kMiB + 4096 * i);
  for (int i = 0; i < 30; i += 3) builder.free("a" + std::to_string(i));
  builder.alloc("small", 1000);
  builder.alloc("big", 300 * kMiB);
  builder.free("big");
  builder.empty_cache();
  builder.alloc("after", 50 * kMiB);
  return builder.take();
}

void frames_of(size_t event, std::vector<SnapshotFrame>& frames) {
  frames.push_back({"op" + std::to_string(event), "model.layer [activation]", 0});
  frames.push_back({"forward", "oomcast schedule, iteration 0", 0});
}

Snapshot read_back(const std::string& pickle) {
  return parse_snapshot("export.pickle", reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size());
}

TEST_CASE("an exported run replays to the same segment decisions and peaks", "[sim][snapshot_export]") {
  Trace trace = mixed_trace();
  std::string pickle;
  SnapshotExport exported = build_snapshot_pickle(trace, AllocatorConfig{}, DeviceModel{}, frames_of, pickle);
  REQUIRE(!exported.replay.oom);
  Snapshot snapshot = read_back(pickle);
  SnapshotReplayReport report = replay_snapshot(snapshot, snapshot_allocator_config(snapshot), "export.pickle");
  CHECK(report.starts_empty);
  CHECK(!report.first_mismatch);
  CHECK(report.recorded_segment_decisions == exported.replay.segment_allocs + exported.replay.segment_frees);
  CHECK(report.segment_decisions_matched == report.recorded_segment_decisions);
  CHECK(report.replay.peak_allocated_bytes == exported.replay.peak_allocated_bytes);
  CHECK(report.replay.peak_reserved_bytes == exported.replay.peak_reserved_bytes);
  CHECK(report.block_addresses_matched == report.block_addresses_checked);
  CHECK(exported.replay.segment_frees > 0);  // the empty_cache is in the recording
}

TEST_CASE("the dump-time segments hold the blocks live at the end of the run", "[sim][snapshot_export]") {
  std::string pickle;
  SnapshotExport exported = build_snapshot_pickle(mixed_trace(), AllocatorConfig{}, DeviceModel{}, frames_of, pickle);
  Snapshot snapshot = read_back(pickle);
  uint64_t reserved = 0, allocated = 0;
  for (const SnapshotSegment& segment : snapshot.segments) {
    reserved += segment.total_size;
    allocated += segment.allocated_size;
  }
  CHECK(snapshot.segments.size() == exported.segments);
  CHECK(reserved == static_cast<uint64_t>(exported.replay.final_stats.reserved_bytes.all().current));
  CHECK(allocated == static_cast<uint64_t>(exported.replay.final_stats.allocated_bytes.all().current));
}

TEST_CASE("a run that hits OOM ends with an oom entry carrying the device's free bytes", "[sim][snapshot_export]") {
  TraceBuilder builder;
  builder.alloc("a", 60 * kMiB);
  builder.alloc("b", 60 * kMiB);
  DeviceModel device;
  device.total_bytes = 100 * kMiB;
  std::string pickle;
  SnapshotExport exported = build_snapshot_pickle(builder.take(), AllocatorConfig{}, device, frames_of, pickle);
  REQUIRE(exported.replay.oom);
  Snapshot snapshot = read_back(pickle);
  const auto& entries = snapshot.device_traces.at(0);
  REQUIRE(!entries.empty());
  CHECK(entries.back().action == SnapshotTraceEntry::Action::Oom);
  CHECK(entries.back().addr == 100 * kMiB - 60 * kMiB);  // device_free after the first segment
  CHECK(entries.back().size == 60 * kMiB);
  CHECK(entries.front().action == SnapshotTraceEntry::Action::SegmentAlloc);
}

TEST_CASE("frames name each alloc entry and each allocated block", "[sim][snapshot_export]") {
  TraceBuilder builder;
  builder.alloc("x", 3 * kMiB);
  builder.alloc("y", 2 * kMiB);
  builder.free("x");
  std::string pickle;
  build_snapshot_pickle(builder.take(), AllocatorConfig{}, DeviceModel{}, frames_of, pickle);
  pickle::Document doc = pickle::parse_pickle("export.pickle", reinterpret_cast<const uint8_t*>(pickle.data()),
                                              pickle.size());
  const pickle::Value& root = doc.root();
  auto traces = doc.items(*doc.find(root, "device_traces"));
  auto entries = doc.items(traces[0]);
  // segment_alloc, alloc (event 0), alloc (event 1), free_requested and free_completed of x.
  REQUIRE(entries.size() == 5);
  CHECK(doc.text(*doc.find(entries[1], "action")) == "alloc");
  auto frames = doc.items(*doc.find(entries[1], "frames"));
  REQUIRE(frames.size() == 2);
  CHECK(doc.text(*doc.find(frames[0], "name")) == "op0");
  CHECK(doc.text(*doc.find(frames[1], "filename")) == "oomcast schedule, iteration 0");
  CHECK(doc.text(*doc.find(entries[4], "action")) == "free_completed");
  auto blocks = doc.items(*doc.find(doc.items(*doc.find(root, "segments"))[0], "blocks"));
  bool named = false;
  for (const pickle::Value& block : blocks) {
    if (doc.text(*doc.find(block, "state")) != "active_allocated") continue;
    auto block_frames = doc.items(*doc.find(block, "frames"));
    named = block_frames.size() == 2 && doc.text(*doc.find(block_frames[0], "name")) == "op1";
  }
  CHECK(named);
}

}  // namespace
}  // namespace oomcast::sim
