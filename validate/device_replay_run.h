// Runs a DeviceReplayPlan against a device (the real one in cuda_replay.cu, a fake in tests):
// makes the cudaMalloc/cudaFree calls in order, reads the device's used memory at every probe
// and after every malloc, frees whatever it holds on every path out, and writes the CSV that
// compares measured with predicted.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "validate/device_replay_plan.h"

namespace oomcast::validate {

// The GPU as cuda_replay uses it. `malloc` returns nullopt and fills `error` on failure.
class ReplayDevice {
 public:
  virtual ~ReplayDevice() = default;
  virtual std::optional<uint64_t> malloc(uint64_t bytes, std::string& error) = 0;  // the pointer
  virtual bool free(uint64_t pointer, std::string& error) = 0;
  // Bytes in use on the device (cudaMemGetInfo total - free); nullopt and `error` on failure.
  virtual std::optional<uint64_t> used_bytes(std::string& error) = 0;
};

struct ProbeResult {
  std::string label;
  size_t event_index = 0;
  uint64_t predicted_allocated_bytes = 0;
  uint64_t predicted_reserved_bytes = 0;
  uint64_t predicted_phase_peak_reserved_bytes = 0;
  uint64_t device_used_bytes = 0;            // total - free at the probe
  uint64_t measured_reserved_bytes = 0;      // device_used - baseline (what our mallocs hold)
  uint64_t measured_phase_peak_bytes = 0;    // highest measured_reserved up to the next probe
};

struct ReplayRun {
  ReplayMode mode = ReplayMode::Segments;
  uint64_t baseline_used_bytes = 0;  // before the first malloc: the context plus other processes
  std::vector<ProbeResult> probes;
  uint64_t measured_peak_bytes = 0;
  uint64_t predicted_peak_bytes = 0;
  size_t mallocs_done = 0;
  bool failed = false;
  std::string error;             // the failed call and CUDA's message
  size_t failed_action = 0;
  bool everything_freed = true;  // false when a cudaFree on the way out failed too
};

struct RunOptions {
  size_t probe_every_mallocs = 1;  // read used memory after every Nth malloc (peaks); 0 = probes only
};

// Executes `plan` on `device`. Never throws for a device failure: the run records it, frees
// every pointer it still holds, and returns.
ReplayRun run_plan(const DeviceReplayPlan& plan, ReplayDevice& device, const RunOptions& options = {});

// The CSV of a run: one row per probe, columns
// mode,phase,event_index,predicted_allocated_bytes,predicted_reserved_bytes,measured_reserved_bytes,
// predicted_phase_peak_bytes,measured_phase_peak_bytes,device_used_bytes,baseline_used_bytes
void write_run_csv(std::ostream& out, const ReplayRun& run, bool header);

// The one-paragraph summary printed at the end: peaks, the largest probe difference and
// whether segments matched exactly (measured == predicted at every probe).
std::string run_summary(const ReplayRun& run);

}  // namespace oomcast::validate
