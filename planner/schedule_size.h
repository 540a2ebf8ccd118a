// The planner's work limit: before a schedule is written, the number of events it will hold
// is estimated from the graph and the loop, and a schedule beyond reason is refused with an
// InputError naming the keys that multiply it, instead of exhausting the host's memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "scenario/scenario.h"

namespace oomcast::planner {

// About 40 bytes of trace and event info each, plus names: 20 M events stay under ~2 GB.
inline constexpr int64_t kMaxPlannedEvents = 20'000'000;

// Events the schedule of `iterations` iterations will roughly hold (saturating).
int64_t estimated_schedule_events(size_t ops, size_t parameters, const scenario::Scenario& scenario, int64_t iterations);

// Throws InputError when the estimate for the scenario's iterations exceeds kMaxPlannedEvents.
void check_schedule_size(size_t ops, size_t parameters, const scenario::Scenario& scenario);

}  // namespace oomcast::planner
