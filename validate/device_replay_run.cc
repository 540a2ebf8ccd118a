// run_plan: acts out a plan on a ReplayDevice and measures it; CSV and summary writers.
#include "validate/device_replay_run.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace oomcast::validate {

namespace {

std::string mib(uint64_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

int64_t signed_difference(uint64_t a, uint64_t b) { return static_cast<int64_t>(a) - static_cast<int64_t>(b); }

}  // namespace

ReplayRun run_plan(const DeviceReplayPlan& plan, ReplayDevice& device, const RunOptions& options) {
  ReplayRun run;
  run.mode = plan.mode;
  run.predicted_peak_bytes = plan.predicted_peak_reserved_bytes;
  std::unordered_map<uint64_t, uint64_t> held;  // plan handle -> device pointer
  std::string error;
  auto fail = [&](size_t index, const std::string& what) {
    run.failed = true;
    run.failed_action = index;
    run.error = what;
  };
  auto used_now = [&](size_t index) -> std::optional<uint64_t> {
    auto used = device.used_bytes(error);
    if (!used) fail(index, "cudaMemGetInfo: " + error);
    return used;
  };
  auto baseline = used_now(0);
  if (baseline) {
    run.baseline_used_bytes = *baseline;
    size_t open = 0;  // index of the latest probe; 0 with no probe yet
    bool has_open = false;
    auto note_peak = [&](uint64_t used) {
      uint64_t ours = used > run.baseline_used_bytes ? used - run.baseline_used_bytes : 0;
      run.measured_peak_bytes = std::max(run.measured_peak_bytes, ours);
      if (has_open) run.probes[open].measured_phase_peak_bytes = std::max(run.probes[open].measured_phase_peak_bytes, ours);
    };
    for (size_t i = 0; i < plan.actions.size() && !run.failed; ++i) {
      const DeviceAction& action = plan.actions[i];
      if (action.kind == DeviceAction::Kind::Malloc) {
        if (held.count(action.handle)) {
          fail(i, "the plan allocates handle " + std::to_string(action.handle) + " twice");
          break;
        }
        auto pointer = device.malloc(action.bytes, error);
        if (!pointer) {
          fail(i, "cudaMalloc(" + std::to_string(action.bytes) + " B) at trace event " +
                      std::to_string(action.event_index) + ": " + error);
          break;
        }
        held.emplace(action.handle, *pointer);
        ++run.mallocs_done;
        if (options.probe_every_mallocs > 0 && run.mallocs_done % options.probe_every_mallocs == 0) {
          if (auto used = used_now(i)) note_peak(*used);
        }
      } else if (action.kind == DeviceAction::Kind::Free) {
        auto found = held.find(action.handle);
        if (found == held.end()) {
          fail(i, "the plan frees handle " + std::to_string(action.handle) + ", which it does not hold");
          break;
        }
        if (!device.free(found->second, error)) {
          held.erase(found);  // a failed cudaFree leaves nothing we could free again
          fail(i, "cudaFree at trace event " + std::to_string(action.event_index) + ": " + error);
          break;
        }
        held.erase(found);
      } else {
        auto used = used_now(i);
        if (!used) break;
        note_peak(*used);
        ProbeResult result;
        result.label = action.label;
        result.event_index = action.event_index;
        result.predicted_allocated_bytes = action.predicted_allocated_bytes;
        result.predicted_reserved_bytes = action.predicted_reserved_bytes;
        result.predicted_phase_peak_reserved_bytes = action.predicted_phase_peak_reserved_bytes;
        result.device_used_bytes = *used;
        result.measured_reserved_bytes = *used > run.baseline_used_bytes ? *used - run.baseline_used_bytes : 0;
        result.measured_phase_peak_bytes = result.measured_reserved_bytes;
        run.probes.push_back(result);
        open = run.probes.size() - 1;
        has_open = true;
      }
    }
  }
  // Every path out frees what it holds.
  for (const auto& [handle, pointer] : held) {
    if (!device.free(pointer, error)) run.everything_freed = false;
  }
  return run;
}

void write_run_csv(std::ostream& out, const ReplayRun& run, bool header) {
  if (header) {
    out << "mode,phase,event_index,predicted_allocated_bytes,predicted_reserved_bytes,measured_reserved_bytes,"
           "predicted_phase_peak_bytes,measured_phase_peak_bytes,device_used_bytes,baseline_used_bytes\n";
  }
  for (const ProbeResult& probe : run.probes) {
    out << replay_mode_name(run.mode) << ',' << probe.label << ',' << probe.event_index << ','
        << probe.predicted_allocated_bytes << ',' << probe.predicted_reserved_bytes << ','
        << probe.measured_reserved_bytes << ',' << probe.predicted_phase_peak_reserved_bytes << ','
        << probe.measured_phase_peak_bytes << ',' << probe.device_used_bytes << ',' << run.baseline_used_bytes << '\n';
  }
}

std::string run_summary(const ReplayRun& run) {
  std::string text = std::string(replay_mode_name(run.mode)) + ": ";
  if (run.failed) text += "FAILED at action " + std::to_string(run.failed_action) + ": " + run.error + "; ";
  int64_t worst = 0;
  std::string worst_label;
  for (const ProbeResult& probe : run.probes) {
    int64_t difference = signed_difference(probe.measured_reserved_bytes, probe.predicted_reserved_bytes);
    if (worst_label.empty() || std::llabs(difference) > std::llabs(worst)) {
      worst = difference;
      worst_label = probe.label;
    }
  }
  text += std::to_string(run.mallocs_done) + " cudaMalloc, " + std::to_string(run.probes.size()) +
          " probes; baseline (context and others) " + mib(run.baseline_used_bytes) + "; peak measured " +
          mib(run.measured_peak_bytes) + " vs predicted " + mib(run.predicted_peak_bytes);
  if (!worst_label.empty()) {
    text += "; largest probe difference " + std::to_string(worst) + " B at " + worst_label;
    if (run.mode == ReplayMode::Segments && !run.failed) {
      text += worst == 0 ? " (every probe exact)" : " (segments differ from the device)";
    }
  }
  if (!run.everything_freed) text += "; WARNING: some memory could not be freed";
  return text + "\n";
}

}  // namespace oomcast::validate
