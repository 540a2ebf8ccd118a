// Golden tests: every real snapshot in tests/data/ replayed through the simulator must
// reproduce every recorded cudaMalloc / cudaFree in order, size and address, and the
// recorded peak reserved bytes. Allocator invariants are checked after every event.
#include <catch2/catch.hpp>

#include "sim/allocator_config.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/snapshot_test_support.h"

using namespace oomcast::sim;
using oomcast::sim::testing::require_reproduced;

namespace {

std::string fixture(const std::string& name) { return std::string(OOMCAST_SOURCE_DIR) + "/tests/data/" + name; }

SnapshotReplayReport replay_fixture(const std::string& name) {
  Snapshot snapshot = read_snapshot(fixture(name));
  return replay_snapshot(snapshot, snapshot_allocator_config(snapshot), name, 0, /*check_invariants=*/true);
}

}  // namespace

TEST_CASE("the linear-layer snapshot with grad is reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("hfblog_linear_10k_50k_grad.pickle.gz");
  CHECK(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 7);
  require_reproduced(report);
}

TEST_CASE("the linear-layer snapshot without grad is reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("hfblog_linear_10k_50k_nograd.pickle.gz");
  CHECK(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 7);
  require_reproduced(report);
}

TEST_CASE("the naive-attention forward and backward snapshot is reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd.pickle.gz");
  CHECK(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 9);
  require_reproduced(report);
}

TEST_CASE("the small LM no-grad window is rebuilt and reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("cs336_silmont_small_fp32_nograd_fwd_ctx128.pickle.gz");
  CHECK_FALSE(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 0);
  require_reproduced(report);
}

TEST_CASE("the 2.7B forward window is rebuilt and reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz");
  CHECK_FALSE(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 289);
  require_reproduced(report);
}

TEST_CASE("the 2.7B full-step window with empty_cache runs is reproduced exactly", "[golden][snapshot]") {
  SnapshotReplayReport report = replay_fixture("cs336_kk_2p7b_fp32_step_ctx128.pickle.gz");
  CHECK_FALSE(report.starts_empty);
  CHECK(report.recorded_segment_decisions == 782 + 430);
  require_reproduced(report);
}

TEST_CASE("the comparison detects a replay under another configuration", "[golden][snapshot]") {
  // With max_split_size_mb:21, large cached blocks of 22 MiB and more stop serving small
  // requests, so the simulator must ask CUDA for segments the recording never made.
  Snapshot snapshot = read_snapshot(fixture("cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd.pickle.gz"));
  SnapshotReplayReport report = replay_snapshot(snapshot, parse_alloc_conf("max_split_size_mb:21"), "naive_attn");
  REQUIRE(report.first_mismatch);
  CHECK(report.segment_decisions_matched < report.recorded_segment_decisions);
}

TEST_CASE("every bundled snapshot replays under another roundup_power2_divisions as a what-if, not as an "
          "inconsistent recording",
          "[golden][snapshot][whatif]") {
  for (const char* name : {"hfblog_linear_10k_50k_grad.pickle.gz", "cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd.pickle.gz",
                           "cs336_silmont_small_fp32_nograd_fwd_ctx128.pickle.gz", "cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz",
                           "cs336_kk_2p7b_fp32_step_ctx128.pickle.gz"}) {
    INFO(name);
    Snapshot snapshot = read_snapshot(fixture(name));
    const AllocatorConfig recorded = snapshot_allocator_config(snapshot);
    const AllocatorConfig what_if = parse_alloc_conf("roundup_power2_divisions:4", recorded);
    const SnapshotReplayReport report = replay_snapshot(snapshot, what_if, name, 0, /*check_invariants=*/true);
    // The recording's own figures do not depend on the what-if; the replay's may.
    const SnapshotReplayReport as_recorded = replay_snapshot(snapshot, recorded, name, 0);
    CHECK(report.recorded_peak_reserved_bytes == as_recorded.recorded_peak_reserved_bytes);
    CHECK(report.recorded_peak_allocated_bytes == as_recorded.recorded_peak_allocated_bytes);
    CHECK(report.replay.peak_allocated_bytes >= as_recorded.replay.peak_allocated_bytes);
  }
}
