// replay_result_json(), mark_json(), snapshot_replay_json(); see replay_json.h.
#include "advisor/replay_json.h"

namespace oomcast::advisor {

nlohmann::json replay_result_json(const sim::ReplayResult& result) {
  nlohmann::json out;
  out["events"] = result.events_replayed;
  out["peak_allocated_bytes"] = result.peak_allocated_bytes;
  out["peak_reserved_bytes"] = result.peak_reserved_bytes;
  out["peak_allocated_event"] = result.peak_allocated_event;
  out["reserved_at_peak_allocated_bytes"] = result.reserved_at_peak_allocated;
  out["fragmentation_at_peak_bytes"] = result.reserved_at_peak_allocated - result.peak_allocated_bytes;
  out["inactive_split_at_peak_bytes"] = result.inactive_split_at_peak_allocated;
  out["segment_allocs"] = result.segment_allocs;
  out["segment_frees"] = result.segment_frees;
  out["num_ooms"] = result.num_ooms;
  out["oom_message"] = result.oom ? nlohmann::json(result.oom->message) : nlohmann::json(nullptr);
  out["oom_event"] = result.oom ? nlohmann::json(result.oom->event_index) : nlohmann::json(nullptr);
  nlohmann::json stats;
  for (const auto& [key, value] : result.final_stats.as_flat_map()) stats[key] = value;
  out["memory_stats"] = stats;
  return out;
}

nlohmann::json mark_json(const sim::MarkReport& mark) {
  return {{"label", mark.label},
          {"event", mark.event_index},
          {"allocated_bytes", mark.allocated_bytes},
          {"reserved_bytes", mark.reserved_bytes},
          {"peak_allocated_bytes", mark.peak_allocated_bytes},
          {"peak_reserved_bytes", mark.peak_reserved_bytes}};
}

nlohmann::json snapshot_replay_json(const sim::SnapshotReplayReport& report, const SnapshotAnalysis& analysis,
                                    const sim::DeviceModel& device, bool bounded, bool starts_over) {
  nlohmann::json out = replay_result_json(report.replay);
  out["events"] = report.trace.events.size();
  nlohmann::json recorded;
  recorded["segment_decisions"] = report.recorded_segment_decisions;
  recorded["segment_decisions_matched"] = report.segment_decisions_matched;
  recorded["peak_reserved_bytes"] = report.recorded_peak_reserved_bytes;
  recorded["peak_allocated_bytes"] = report.recorded_peak_allocated_bytes;
  recorded["block_addresses_checked"] = report.block_addresses_checked;
  recorded["block_addresses_matched"] = report.block_addresses_matched;
  recorded["starts_empty"] = report.starts_empty;
  recorded["initial_segments"] = report.initial_segments;
  recorded["initial_allocated_blocks"] = report.initial_allocated_blocks;
  recorded["initial_reserved_bytes"] = report.initial_reserved_bytes;
  recorded["recorded_oom"] = report.recorded_oom;
  recorded["devices_in_file"] = report.devices_in_file;
  if (report.first_mismatch) {
    recorded["first_mismatch"] = {{"decision_index", report.first_mismatch->decision_index},
                                  {"snapshot_event", report.first_mismatch->snapshot_event},
                                  {"recorded", report.first_mismatch->recorded},
                                  {"simulated", report.first_mismatch->simulated}};
  } else {
    recorded["first_mismatch"] = nullptr;
  }
  out["recorded"] = recorded;
  out["analysis"] = analysis_json(analysis, 20);
  out["analysis"]["run"] = "recorded";  // without the device limit, whatever --device-memory says
  out["analysis"]["peak_allocated_bytes"] = analysis.peak_allocated_bytes;
  out["device"] = bounded ? nlohmann::json{{"total_bytes", device.total_bytes},
                                           {"context_bytes", device.context_bytes},
                                           {"memory_fraction", device.memory_fraction},
                                           {"usable_bytes", device.usable_bytes()},
                                           {"window_starts_over_capacity", starts_over}}
                          : nlohmann::json(nullptr);
  return out;
}

}  // namespace oomcast::advisor
