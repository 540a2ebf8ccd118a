// The JSON answer of a replay (`oomcast replay --json`, oomcast.replay() in Python): the
// simulated peaks, fragmentation, segments, OOM and memory_stats of a trace or snapshot replay,
// and for a snapshot what the recorded run decided and whether the replay reproduced it.
#pragma once

#include <nlohmann/json.hpp>

#include "advisor/snapshot_analysis.h"
#include "sim/device_model.h"
#include "sim/replay.h"
#include "sim/snapshot_replay.h"

namespace oomcast::advisor {

// Peaks, fragmentation, segments, OOM and memory_stats of one replay; no "marks" (a trace may
// hold millions: the caller adds them, streamed or as mark_json rows).
nlohmann::json replay_result_json(const sim::ReplayResult& result);

// One phase mark of a replay.
nlohmann::json mark_json(const sim::MarkReport& mark);

// The whole answer for a snapshot: replay_result_json plus "recorded" (the recorded run's
// decisions and peaks), "analysis" (the call sites of the recorded run, top 20) and "device"
// (null when the replay had no device limit).
nlohmann::json snapshot_replay_json(const sim::SnapshotReplayReport& report, const SnapshotAnalysis& analysis,
                                    const sim::DeviceModel& device, bool bounded, bool starts_over);

}  // namespace oomcast::advisor
