// Steady state of a many-iteration job. A training loop repeats one iteration; once an
// iteration leaves the allocator exactly as the iteration `period` before it did (same
// segments, same blocks at the same addresses, the tensors that outlive it in the same
// blocks) and the schedules in between repeat, every later iteration replays as its
// counterpart one period earlier: the same peaks, the same phase rows, the same OOM or none. predict() then plans and replays only a window
// of iterations and extrapolates the rest, so memory and time do not grow with `iterations`.
//
// What this relies on from the planner: the schedule of an iteration depends on the
// iteration's number only through names (training_job: the loop body is the same code every
// iteration). A planner feature that changes the schedule every N iterations must disable
// extrapolation (steady_state_allowed) or make the window cover its period.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "advisor/predict.h"
#include "planner/planned_trace.h"
#include "scenario/scenario.h"
#include "sim/allocator_config.h"
#include "sim/device_model.h"

namespace oomcast::advisor {

// Jobs of up to this many iterations are planned and replayed whole, as before.
inline constexpr int64_t kPlanWholeUpToIterations = 8;
// The windows planned for a longer job, in turn, until a steady state is found.
inline constexpr int64_t kSteadyStateWindows[] = {8, 32};

// Iterations may settle into a cycle rather than a fixed point: the outputs the loop holds
// until the next forward alternate between two blocks, so the allocator's state repeats
// every second iteration. Cycles of up to this many iterations are recognised.
inline constexpr int32_t kMaxSteadyPeriod = 8;

struct SteadyIteration {
  // False when no exact cycle was found but the schedule repeats and no tensor accumulates:
  // the allocator's layout still shifts (a block that walks through a segment), so the
  // extrapolation is an approximation, and reports say so.
  bool exact = true;
  int32_t iteration = 0;  // the iteration that left the allocator as the one `period` before it did
  int32_t period = 1;
  int64_t planned_iterations = 0;
  // For the last `period` planned iterations (the template the rest repeat): their events and
  // memory_stats() at their end.
  std::vector<size_t> template_events;
  std::vector<std::map<std::string, int64_t>> template_stats;
  // What one period adds to each memory_stats() counter (0 for current values and peaks).
  std::map<std::string, int64_t> period_stats_delta;
};

// False for settings whose allocator state carries a clock (the garbage-collection age of
// cached blocks), which never repeats exactly.
bool steady_state_allowed(const scenario::Scenario& scenario);

// Replays `planned` on `device` and returns the first iteration whose end state and schedule
// repeat those of the iteration `period` before it; failing that, when the last iterations'
// schedules and surviving tensors repeat, an approximate steady state (exact = false);
// otherwise nothing (or when the replay hit OOM first).
// `hit_oom`, when given, is set when the replay stopped at an OOM.
std::optional<SteadyIteration> find_steady_iteration(const planner::PlannedTrace& planned, const sim::AllocatorConfig& config,
                                                     const sim::DeviceModel& device, bool* hit_oom = nullptr);

// Makes a prediction over the planned iterations stand for all `iterations`: events counted, the steady iteration's phase rows repeated and renumbered,
// and prediction.steady_state filled in so reports say what was extrapolated.
void extend_to_all_iterations(Prediction& prediction, const SteadyIteration& steady, int64_t iterations);

}  // namespace oomcast::advisor
