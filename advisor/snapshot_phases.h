// The iterations and phases of a real snapshot's recording, read from the frames of its
// allocations: model setup, data loading, forward, backward, optimizer step, validation. A new
// iteration starts when a forward (or data loading) follows a backward or optimizer step.
// What the doctor splits a recording into before it judges patterns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "advisor/snapshot_frames.h"
#include "sim/trace.h"

namespace oomcast::advisor {

enum class StepPhase : uint8_t { Unknown, Setup, DataLoading, Forward, Backward, Optimizer, Validation, Other };

const char* phase_name(StepPhase phase);

// The phase of device-trace entry `entry` from its frames (first match: optimizer step,
// backward, validation, data loading, model setup, forward, other; Unknown without frames).
StepPhase phase_of_entry(const SnapshotFrameTable& frames, int64_t entry);

// A run of consecutive events of one phase inside one iteration.
struct PhaseRun {
  StepPhase phase = StepPhase::Unknown;
  int iteration = 0;
  size_t first_event = 0, last_event = 0;  // inclusive
  uint64_t allocated_at_start = 0;         // before its first event
  uint64_t peak_allocated = 0;
  size_t peak_event = 0;
  std::string label() const;               // "iter2/backward"
};

struct IterationSpan {
  int index = 0;
  size_t first_event = 0, last_event = 0;  // inclusive
  uint64_t allocated_at_start = 0;
  uint64_t allocated_at_end = 0;
  uint64_t peak_allocated = 0;
  size_t peak_event = 0;
  bool complete = false;                   // the recording goes on past it
};

struct RecordingTimeline {
  std::vector<StepPhase> event_phase;      // per trace event (frees take the phase they fall in)
  std::vector<int> event_iteration;
  std::vector<PhaseRun> runs;
  std::vector<IterationSpan> iterations;
  bool has_phases = false;                 // some allocation had frames that named a phase
};

// Splits `trace` (events mapped to device-trace entries by `entry_of_event`) with the
// allocated bytes after each event (`allocated_after`, one per event) and before the first
// (`initial_allocated`: a window that starts mid-run already holds blocks).
RecordingTimeline split_recording(const sim::Trace& trace, const std::vector<int64_t>& entry_of_event,
                                  const SnapshotFrameTable& frames, const std::vector<uint64_t>& allocated_after,
                                  uint64_t initial_allocated = 0);

}  // namespace oomcast::advisor
