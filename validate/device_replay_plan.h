// What validate/cuda_replay does on a real GPU, decided without one: the list of cudaMalloc,
// cudaFree and cudaMemGetInfo probes for a trace. `--segments` acts out the simulator's own
// segment decisions (replay the trace through sim/ and keep its cudaMalloc/cudaFree calls);
// `--raw` makes one cudaMalloc per allocation. Plain C++ so CI tests it without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/allocator_config.h"
#include "sim/trace.h"

namespace oomcast::validate {

enum class ReplayMode { Segments, Raw };
const char* replay_mode_name(ReplayMode mode);

struct DeviceAction {
  enum class Kind { Malloc, Free, Probe };
  Kind kind = Kind::Malloc;
  uint64_t handle = 0;       // Malloc/Free: the segment address (segments) or slot (raw)
  uint64_t bytes = 0;        // Malloc: the size to cudaMalloc
  size_t event_index = 0;    // the trace event it belongs to
  // Probe: the phase it opens ("iter0/forward", or "end" after the last event) and what the
  // simulator (segments) or the sum of live requests (raw) says at that point.
  std::string label;
  uint64_t predicted_allocated_bytes = 0;
  uint64_t predicted_reserved_bytes = 0;
  uint64_t predicted_phase_peak_reserved_bytes = 0;  // highest from this probe to the next
};

struct DeviceReplayPlan {
  ReplayMode mode = ReplayMode::Segments;
  std::vector<DeviceAction> actions;
  uint64_t predicted_peak_reserved_bytes = 0;
  size_t mallocs = 0;
  size_t frees = 0;
};

// Replays `trace` through the simulator (unlimited device, `config`) and turns its segment
// decisions into actions, with a probe at every mark and at the end. Throws InputError for a
// trace the simulator rejects and for expandable segments (their map/unmap decisions need the
// CUDA virtual memory API, which cuda_replay does not use).
DeviceReplayPlan plan_segment_replay(const sim::Trace& trace, const sim::AllocatorConfig& config);

// One Malloc per alloc event of ≥ 1 byte and one Free per free, with a probe at every mark
// and at the end; the prediction at a probe is the sum of the live requests.
DeviceReplayPlan plan_raw_replay(const sim::Trace& trace);

}  // namespace oomcast::validate
