// Phases from frames: the rules of frame_category (snapshot_analysis.cc) for optimizer,
// backward, setup and forward, plus validation and data loading, which only the user's own
// function names tell (a validation forward runs the same modules as a training one).
#include "advisor/snapshot_phases.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "advisor/snapshot_analysis.h"

namespace oomcast::advisor {
namespace {

bool names_validation(const std::string& name) {
  static constexpr std::array<const char*, 7> starts{"validat", "evaluat", "eval", "val_", "valid_", "test_step", "run_eval"};
  for (const char* start : starts)
    if (name.starts_with(start)) return true;
  return name.find("_validat") != std::string::npos || name.find("_eval") != std::string::npos;
}

bool names_data_loading(const CallFrame& frame) {
  if (frame.filename.find("/utils/data/") != std::string::npos) return true;
  const std::string& name = frame.name;
  return name.find("load") != std::string::npos || name.find("collate") != std::string::npos ||
         name.find("get_batch") != std::string::npos || name.find("prefetch") != std::string::npos ||
         name.find("to_device") != std::string::npos;
}

}  // namespace

const char* phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::Unknown: return "unknown";
    case StepPhase::Setup: return "model setup";
    case StepPhase::DataLoading: return "data loading";
    case StepPhase::Forward: return "forward";
    case StepPhase::Backward: return "backward";
    case StepPhase::Optimizer: return "optimizer step";
    case StepPhase::Validation: return "validation";
    case StepPhase::Other: return "other";
  }
  return "unknown";
}

std::string PhaseRun::label() const { return fmt::format("iter{}/{}", iteration, phase_name(phase)); }

StepPhase phase_of_entry(const SnapshotFrameTable& frames, int64_t entry) {
  const char* category = frame_category(frames, entry);
  if (std::strcmp(category, "optimizer step") == 0) return StepPhase::Optimizer;
  if (std::strcmp(category, "backward") == 0) return StepPhase::Backward;
  if (entry < 0 || static_cast<size_t>(entry) >= frames.entry_frames.size()) return StepPhase::Unknown;
  const std::span<const uint32_t> ids = frames.entry_frames[static_cast<size_t>(entry)];
  for (uint32_t id : ids) {
    const CallFrame& frame = frames.frames[id];
    if (frame.is_python() && names_validation(frame.name)) return StepPhase::Validation;
  }
  for (uint32_t id : ids) {
    const CallFrame& frame = frames.frames[id];
    if (frame.is_python() && names_data_loading(frame)) return StepPhase::DataLoading;
  }
  if (std::strcmp(category, "model setup") == 0) return StepPhase::Setup;
  if (std::strcmp(category, "forward") == 0) return StepPhase::Forward;
  if (std::strcmp(category, "other") == 0) return StepPhase::Other;
  return StepPhase::Unknown;
}

RecordingTimeline split_recording(const sim::Trace& trace, const std::vector<int64_t>& entry_of_event,
                                  const SnapshotFrameTable& frames, const std::vector<uint64_t>& allocated_after,
                                  uint64_t initial_allocated) {
  RecordingTimeline out;
  const size_t events = trace.events.size();
  out.event_phase.assign(events, StepPhase::Unknown);
  out.event_iteration.assign(events, 0);
  StepPhase current = StepPhase::Unknown;
  int iteration = 0;
  bool stepped = false;  // the current iteration has had a backward or optimizer step
  for (size_t event = 0; event < events; ++event) {
    if (trace.events[event].kind == sim::EventKind::Alloc) {
      int64_t entry = event < entry_of_event.size() ? entry_of_event[event] : -1;
      StepPhase phase = phase_of_entry(frames, entry);
      if (phase != StepPhase::Unknown && phase != StepPhase::Other) out.has_phases = true;
      // An allocation of the loop's own code between phases (a loss kept, a metric) belongs
      // to the phase it falls in.
      if (phase == StepPhase::Other && current != StepPhase::Unknown) phase = current;
      if (phase != StepPhase::Unknown) {
        bool starts_step = phase == StepPhase::Forward || phase == StepPhase::DataLoading;
        bool current_starts_step = current == StepPhase::Forward || current == StepPhase::DataLoading;
        if (starts_step && stepped && !current_starts_step) {
          iteration += 1;
          stepped = false;
        }
        if (phase == StepPhase::Backward || phase == StepPhase::Optimizer) stepped = true;
        current = phase;
      }
    }
    out.event_phase[event] = current;
    out.event_iteration[event] = iteration;
  }

  auto allocated = [&](size_t event) { return event < allocated_after.size() ? allocated_after[event] : 0; };
  // A phase run and an iteration are both spans of events with a start and a peak.
  auto open = [](auto& span, size_t event, uint64_t before) {
    span.first_event = span.last_event = span.peak_event = event;
    span.allocated_at_start = span.peak_allocated = before;
  };
  auto extend = [](auto& span, size_t event, uint64_t now) {
    span.last_event = event;
    if (now > span.peak_allocated) {
      span.peak_allocated = now;
      span.peak_event = event;
    }
  };
  for (size_t event = 0; event < events; ++event) {
    uint64_t before = event == 0 ? initial_allocated : allocated(event - 1);
    if (out.runs.empty() || out.runs.back().phase != out.event_phase[event] ||
        out.runs.back().iteration != out.event_iteration[event]) {
      PhaseRun run;
      run.phase = out.event_phase[event];
      run.iteration = out.event_iteration[event];
      open(run, event, before);
      out.runs.push_back(run);
    }
    if (out.iterations.empty() || out.iterations.back().index != out.event_iteration[event]) {
      if (!out.iterations.empty()) out.iterations.back().complete = true;
      IterationSpan span;
      span.index = out.event_iteration[event];
      open(span, event, before);
      out.iterations.push_back(span);
    }
    extend(out.runs.back(), event, allocated(event));
    extend(out.iterations.back(), event, allocated(event));
    out.iterations.back().allocated_at_end = allocated(event);
  }
  return out;
}

}  // namespace oomcast::advisor
