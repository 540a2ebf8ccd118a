// The comparison of a planned cpu schedule with a real PyTorch CPU capture: per-mark live
// bytes and phase peaks on both sides, their errors, and the first op where they part.
#include "advisor/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <unordered_map>

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;

const char* const kDivergenceMethod =
    "inside the first phase out of tolerance, both traces are walked from the phase's mark with "
    "the bytes allocated since the mark as a common clock (both sides allocate mostly the same "
    "tensors in the same order); at each planned event the live bytes are compared with the "
    "capture's at the first event that has allocated as much; the first planned event where they "
    "differ by more than the tolerance (else the one with the largest difference) is reported";

namespace {

bool is_skipped(const std::string& label, const std::vector<std::string>& skipped) {
  return std::find(skipped.begin(), skipped.end(), label) != skipped.end();
}

// Live bytes after every event, and the bytes allocated since the trace start.
struct Curve {
  std::vector<uint64_t> live;       // after event i
  std::vector<uint64_t> allocated;  // cumulative, after event i
};

Curve live_curve(const sim::Trace& trace) {
  Curve curve;
  curve.live.reserve(trace.events.size());
  curve.allocated.reserve(trace.events.size());
  std::vector<uint64_t> slot_bytes(trace.slot_names.size(), 0);
  uint64_t live = 0;
  uint64_t allocated = 0;
  for (const sim::Event& event : trace.events) {
    if (event.kind == sim::EventKind::Alloc) {
      if (event.slot >= slot_bytes.size()) slot_bytes.resize(event.slot + 1, 0);
      slot_bytes[event.slot] = event.bytes;
      live += event.bytes;
      allocated += event.bytes;
    } else if (event.kind == sim::EventKind::Free && event.slot < slot_bytes.size()) {
      live -= slot_bytes[event.slot];
      slot_bytes[event.slot] = 0;
    }
    curve.live.push_back(live);
    curve.allocated.push_back(allocated);
  }
  return curve;
}

// The index of the mark event labelled `label`, or events.size() when there is none.
size_t find_mark(const sim::Trace& trace, const std::string& label) {
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const sim::Event& event = trace.events[i];
    if (event.kind == sim::EventKind::Mark && trace.strings[event.tag] == label) return i;
  }
  return trace.events.size();
}

// The event that ends the phase opened by the mark at `start`: the next mark, or the end.
size_t phase_end(const sim::Trace& trace, size_t start) {
  for (size_t i = start + 1; i < trace.events.size(); ++i) {
    if (trace.events[i].kind == sim::EventKind::Mark) return i;
  }
  return trace.events.size();
}

double fraction(uint64_t predicted, uint64_t real, uint64_t scale) {
  if (scale == 0) return 0.0;
  return (static_cast<double>(predicted) - static_cast<double>(real)) / static_cast<double>(scale);
}

std::optional<Divergence> find_divergence(const PlannedTrace& planned, const sim::Trace& capture,
                                          const std::string& phase, uint64_t tolerance_bytes) {
  const sim::Trace& predicted = planned.trace;
  size_t p_start = find_mark(predicted, phase);
  size_t r_start = find_mark(capture, phase);
  if (p_start >= predicted.events.size() || r_start >= capture.events.size()) return std::nullopt;
  size_t p_end = phase_end(predicted, p_start);
  size_t r_end = phase_end(capture, r_start);
  Curve p_curve = live_curve(predicted);
  Curve r_curve = live_curve(capture);
  const uint64_t p_base = p_curve.allocated[p_start];
  const uint64_t r_base = r_curve.allocated[r_start];

  std::optional<Divergence> worst;
  uint64_t worst_gap = 0;
  for (size_t p = p_start; p < p_end; ++p) {
    uint64_t clock = p_curve.allocated[p] - p_base;
    size_t r = r_start;
    // First captured event of the phase that has allocated at least as much (binary search:
    // the cumulative allocation never decreases).
    auto first = r_curve.allocated.begin() + static_cast<std::ptrdiff_t>(r_start);
    auto last = r_curve.allocated.begin() + static_cast<std::ptrdiff_t>(r_end);
    auto found = std::lower_bound(first, last, r_base + clock);
    r = found == last ? r_end - 1 : static_cast<size_t>(found - r_curve.allocated.begin());
    uint64_t p_live = p_curve.live[p];
    uint64_t r_live = r_curve.live[r];
    uint64_t gap = p_live > r_live ? p_live - r_live : r_live - p_live;
    if (!worst || gap > worst_gap) {
      const EventInfo& info = planned.info[p];
      Divergence d;
      d.phase = phase;
      d.op = planned.names[info.op];
      d.tensor = planned.names[info.tensor];
      d.predicted_event = p;
      d.real_event = r;
      d.predicted_live_bytes = p_live;
      d.real_live_bytes = r_live;
      worst = d;
      worst_gap = gap;
      if (gap > tolerance_bytes) return worst;
    }
  }
  return worst;
}

}  // namespace

std::vector<MarkStats> mark_stats(const sim::Trace& trace, const std::vector<std::string>& skipped) {
  std::vector<MarkStats> rows;
  Curve curve = live_curve(trace);
  bool open = false;  // a row's phase is being measured
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const sim::Event& event = trace.events[i];
    if (event.kind == sim::EventKind::Mark) {
      const std::string& label = trace.strings[event.tag];
      open = !is_skipped(label, skipped);
      if (open) {
        MarkStats row;
        row.label = label;
        row.event_index = i;
        row.live_bytes = curve.live[i];
        row.phase_peak_bytes = curve.live[i];
        rows.push_back(row);
      }
    } else if (open) {
      rows.back().phase_peak_bytes = std::max(rows.back().phase_peak_bytes, curve.live[i]);
    }
  }
  return rows;
}

Comparison compare_capture(const PlannedTrace& planned, const sim::Trace& capture, double tolerance) {
  Comparison result;
  result.tolerance = tolerance;
  // The capture's teardown (the script dropping the model) and the planner's end have no
  // counterpart on the other side.
  std::vector<MarkStats> real = mark_stats(capture, {"teardown", "end"});
  std::vector<MarkStats> predicted = mark_stats(planned.trace, {"teardown", "end"});
  std::unordered_map<std::string, const MarkStats*> predicted_by_label;
  for (const MarkStats& row : predicted) predicted_by_label[row.label] = &row;
  for (const MarkStats& row : real) result.real_peak_bytes = std::max(result.real_peak_bytes, row.phase_peak_bytes);
  for (const MarkStats& row : predicted) {
    result.predicted_peak_bytes = std::max(result.predicted_peak_bytes, row.phase_peak_bytes);
  }

  std::unordered_map<std::string, bool> in_capture;
  std::vector<double> abs_peak_errors;
  const double failing = tolerance + 1e-12;
  for (const MarkStats& row : real) {
    in_capture[row.label] = true;
    auto found = predicted_by_label.find(row.label);
    if (found == predicted_by_label.end()) {
      result.only_in_capture.push_back(row.label);
      continue;
    }
    ComparedPhase phase;
    phase.label = row.label;
    phase.real_live_bytes = row.live_bytes;
    phase.real_peak_bytes = row.phase_peak_bytes;
    phase.predicted_live_bytes = found->second->live_bytes;
    phase.predicted_peak_bytes = found->second->phase_peak_bytes;
    phase.live_error = fraction(phase.predicted_live_bytes, phase.real_live_bytes, result.real_peak_bytes);
    phase.peak_error = fraction(phase.predicted_peak_bytes, phase.real_peak_bytes, result.real_peak_bytes);
    abs_peak_errors.push_back(std::fabs(phase.peak_error));
    result.max_abs_peak_error = std::max(result.max_abs_peak_error, std::fabs(phase.peak_error));
    result.max_abs_live_error = std::max(result.max_abs_live_error, std::fabs(phase.live_error));
    if (!result.first_failing_phase && (std::fabs(phase.peak_error) > failing || std::fabs(phase.live_error) > failing)) {
      result.first_failing_phase = phase.label;
    }
    result.phases.push_back(phase);
  }
  for (const MarkStats& row : predicted) {
    if (!in_capture.count(row.label)) result.only_in_prediction.push_back(row.label);
  }
  if (!abs_peak_errors.empty()) {
    std::sort(abs_peak_errors.begin(), abs_peak_errors.end());
    size_t n = abs_peak_errors.size();
    result.median_abs_peak_error =
        n % 2 == 1 ? abs_peak_errors[n / 2] : (abs_peak_errors[n / 2 - 1] + abs_peak_errors[n / 2]) / 2.0;
  }
  if (result.first_failing_phase) {
    auto tolerance_bytes = static_cast<uint64_t>(tolerance * static_cast<double>(result.real_peak_bytes));
    result.divergence = find_divergence(planned, capture, *result.first_failing_phase, tolerance_bytes);
    // Already apart at the phase's own mark: the curves parted during the phase before it.
    auto failing_at = std::find_if(result.phases.begin(), result.phases.end(),
                                   [&](const ComparedPhase& p) { return p.label == *result.first_failing_phase; });
    if (result.divergence && failing_at != result.phases.begin() && failing_at != result.phases.end() &&
        std::fabs(failing_at->live_error) > failing) {
      auto earlier = find_divergence(planned, capture, std::prev(failing_at)->label, tolerance_bytes);
      if (earlier) result.divergence = earlier;
    }
  }
  return result;
}

}  // namespace oomcast::advisor
