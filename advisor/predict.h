// predict(): scenario -> allocation schedule -> allocator replay -> the answer a user wants:
// does it fit, how close to the edge, where is the peak and what is live there. What every
// front end (CLI, search, tests) calls; report.h renders the result.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "advisor/moe_routing.h"
#include "scenario/scenario.h"
#include "planner/jobs/training_job.h"
#include "sim/trace.h"

namespace oomcast::advisor {

inline constexpr size_t kNumTensorCategories = static_cast<size_t>(planner::TensorCategory::Communication) + 1;

// Where in the schedule an event happened, by name.
struct ScheduleLocation {
  size_t event_index = 0;
  int32_t iteration = 0;
  std::string phase;
  std::string op;
  std::string tensor;
  planner::TensorCategory category = planner::TensorCategory::Activation;
};

// The allocator's state at one phase mark of the schedule.
struct PhaseRow {
  std::string name;              // the mark's label
  int32_t iteration = 0;
  sim::Bytes allocated_bytes = 0;
  sim::Bytes reserved_bytes = 0;
  sim::Bytes peak_allocated_bytes = 0;  // highest allocated since the previous mark
  sim::Bytes peak_reserved_bytes = 0;
};

// Set when a long job was planned for a window of iterations and the rest extrapolated
// from a steady state (advisor/steady_state.h).
struct SteadyStateNote {
  bool extrapolated = false;
  bool exact = true;              // false: the layout had not settled (steady_state.h)
  int32_t from_iteration = 0;     // ended in the state of the iteration `period` before it; the
                                  // ones after it repeat their counterparts one period earlier
  int32_t period = 1;
  int64_t planned_iterations = 0; // planned and replayed
  int64_t iterations = 0;         // the scenario's
};

struct Prediction {
  scenario::Scenario scenario;
  uint64_t parameters = 0;
  size_t events = 0;
  // True for the cpu device: every block is exactly its request and reserved == allocated
  // (live tensor bytes counted from the trace, no caching allocator).
  bool exact_accounting = false;

  sim::Bytes device_total_bytes = 0;   // cudaMemGetInfo total
  sim::Bytes usable_bytes = 0;         // what the allocator can reserve: total - context -
                                       // other processes, capped by memory_fraction

  // The whole step's demand. When the device is too small these come from a second replay on
  // an unbounded device, so they say how much the step needs, not where it died.
  sim::Bytes peak_allocated_bytes = 0;
  sim::Bytes peak_reserved_bytes = 0;
  ScheduleLocation peak_at;            // the event that set the allocated peak
  // Live bytes per category at that event (requested sizes), plus what the allocator's
  // rounding adds on top; together they sum to peak_allocated_bytes.
  std::array<sim::Bytes, kNumTensorCategories> breakdown{};
  sim::Bytes rounding_bytes = 0;
  sim::Bytes reserved_at_peak_bytes = 0;       // reserved when allocated peaked
  sim::Bytes inactive_split_at_peak_bytes = 0; // free pieces of split blocks at that moment
  std::vector<PhaseRow> phases;

  bool fits = true;
  std::string oom_message;             // PyTorch's exact text; empty when it fits
  ScheduleLocation oom_at;             // the allocation that failed
  sim::Bytes oom_requested_bytes = 0;
  // Data-parallel jobs: per-rank model states, host RAM of offloaded states (host_bytes),
  // NCCL buffers, offload cost and warnings about unmodelled keys (planner/parallel/).
  planner::ParallelSummary parallel;
  uint64_t activation_offload_host_bytes = 0;   // activation_offloading's host copies of one forward
  SteadyStateNote steady_state;
  planner::StepTime step_time;                  // one optimizer step's duration on the device (planner/timing/step_time.h)
  // torch.cuda.memory_stats() at the end of the step's replay on the device (at the OOM when it
  // does not fit), flattened as PyTorch does; empty on the cpu device (no caching allocator).
  std::map<std::string, int64_t> memory_stats;
  // Mixture of experts: the peaks of the balanced and the worst routing (plan fills it).
  MoeRoutingCases moe_routing;

  // usable - peak reserved; negative when it does not fit.
  int64_t spare_bytes() const {
    return static_cast<int64_t>(usable_bytes) - static_cast<int64_t>(peak_reserved_bytes);
  }
  // reserved - allocated at the allocated peak.
  sim::Bytes fragmentation_bytes() const {
    return reserved_at_peak_bytes > peak_allocated_bytes ? reserved_at_peak_bytes - peak_allocated_bytes : 0;
  }
};

// Plans the scenario's steps and replays them on its device. Throws InputError for a scenario
// the model family cannot honour. A job of more than kPlanWholeUpToIterations iterations is
// planned for a window and extrapolated once it reaches a steady state (steady_state.h),
// so its cost does not grow with the iterations.
Prediction predict(const scenario::Scenario& scenario);

// The same for a schedule already planned (search and what-if loops reuse one plan).
Prediction predict_planned(const scenario::Scenario& scenario, const planner::PlannedTrace& planned);

}  // namespace oomcast::advisor
