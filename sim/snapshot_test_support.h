// Shared by the snapshot-replay tests (sim/ and tests/): the check that a replay reproduced
// every recorded segment decision, peak and block address of a snapshot.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "sim/snapshot_replay.h"

namespace oomcast::sim::testing {

inline void require_reproduced(const SnapshotReplayReport& report) {
  INFO("first mismatch: " << (report.first_mismatch ? report.first_mismatch->recorded + " vs " +
                                                          report.first_mismatch->simulated
                                                    : std::string("none")));
  CHECK_FALSE(report.first_mismatch);
  CHECK(report.segment_decisions_matched == report.recorded_segment_decisions);
  CHECK(report.replay.peak_reserved_bytes == report.recorded_peak_reserved_bytes);
  CHECK(report.replay.peak_allocated_bytes == report.recorded_peak_allocated_bytes);
  CHECK(report.block_addresses_matched == report.block_addresses_checked);
}

}  // namespace oomcast::sim::testing
