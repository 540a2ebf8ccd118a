// The allocated memory after every event of one planned step, and the phase each event lies
// in: the closed-form fit's view of *when* a step peaks (closed_form_fit.h). Schedules of one
// model at different batch sizes and sequence lengths have the same events in the same order
// (the shapes change, not the ops), so one event index names the same moment in each, and
// what is live at that moment is a sum of tensor sizes, each a polynomial in B and S.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "advisor/peak_regimes.h"
#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::advisor {

struct AllocatedSeries {
  std::vector<uint64_t> allocated;  // allocated bytes after event i
  std::vector<uint64_t> identity;   // event i's kind and tensor name, hashed: the same moment in
                                    // another sample's schedule has the same identity
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  size_t peak_event = 0;            // the first event at the allocated peak
  PeakRegimes regimes;              // forward/backward and optimizer-step peaks (peak_regimes.h)
  std::vector<std::pair<size_t, std::string>> marks;  // (event index, label) of each phase mark

  // The label of the last mark at or before `event` ("iter1/backward"); "setup" before any.
  std::string phase_at(size_t event) const;
};

// Replays `planned` with the scenario's allocator on its device (the fit passes an unbounded
// one) and records allocated memory after every event. Requires a GPU device (the cpu device
// has no caching allocator).
AllocatedSeries replay_allocated_series(const scenario::Scenario& scenario, const planner::PlannedTrace& planned);

}  // namespace oomcast::advisor
