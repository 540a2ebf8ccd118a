// compare_capture(): the planner's cpu-device schedule against a trace captured from real
// PyTorch (validate/capture.py): live bytes at every phase mark and the peak of every phase,
// errors as a fraction of the real overall peak, and where the two first part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "planner/jobs/training_job.h"
#include "sim/trace.h"

namespace oomcast::advisor {

// Live bytes (sum of the requested sizes of live allocations) at one mark, and the highest
// live bytes from that mark up to the next one (the phase the mark opens).
struct MarkStats {
  std::string label;
  size_t event_index = 0;
  uint64_t live_bytes = 0;
  uint64_t phase_peak_bytes = 0;
};

// Per-mark live bytes and phase peaks of a trace. Marks named in `skipped` (the capture's
// `teardown`, the planner's `end`) close the previous phase but get no row.
std::vector<MarkStats> mark_stats(const sim::Trace& trace, const std::vector<std::string>& skipped);

struct ComparedPhase {
  std::string label;
  uint64_t real_live_bytes = 0;       // at the mark
  uint64_t predicted_live_bytes = 0;
  uint64_t real_peak_bytes = 0;       // of the phase the mark opens
  uint64_t predicted_peak_bytes = 0;
  double live_error = 0.0;            // (predicted - real) / overall real peak
  double peak_error = 0.0;
};

// Where, inside the first phase out of tolerance, the live-bytes curves part.
struct Divergence {
  std::string phase;
  std::string op;                     // the planner op at the predicted event
  std::string tensor;
  size_t predicted_event = 0;         // index in the planned trace
  size_t real_event = 0;              // index in the captured trace
  uint64_t predicted_live_bytes = 0;
  uint64_t real_live_bytes = 0;
};

struct Comparison {
  double tolerance = 0.02;            // of the overall real peak
  uint64_t real_peak_bytes = 0;       // overall, over the compared phases
  uint64_t predicted_peak_bytes = 0;
  std::vector<ComparedPhase> phases;  // in the capture's order
  std::vector<std::string> only_in_capture;     // marks the planner has not
  std::vector<std::string> only_in_prediction;  // marks the capture has not
  double max_abs_peak_error = 0.0;    // over the per-phase peaks
  double median_abs_peak_error = 0.0;
  double max_abs_live_error = 0.0;    // over the live bytes at the marks
  std::optional<std::string> first_failing_phase;
  std::optional<Divergence> divergence;
  bool within_tolerance() const { return !first_failing_phase && only_in_capture.empty() && only_in_prediction.empty(); }
};

// Compares a planned schedule with a captured trace. A phase fails when its peak or the live
// bytes at its mark differ by more than `tolerance` × the real overall peak.
Comparison compare_capture(const planner::PlannedTrace& planned, const sim::Trace& capture, double tolerance);

// How the divergence point is found, for reports.
extern const char* const kDivergenceMethod;

}  // namespace oomcast::advisor
