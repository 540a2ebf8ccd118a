// PlannedPoints: a mutex-guarded map from (batch, seq_len) to a planned schedule, shared by
// the doctor's stages running on worker threads.
#include "advisor/planned_points.h"

#include "advisor/steady_state.h"
#include "planner/jobs/training_job.h"

namespace oomcast::advisor {

using planner::PlannedTrace;
using planner::plan_steps;
using scenario::CheckpointMode;
using scenario::Scenario;

bool PlannedPoints::shareable(const Scenario& scenario) {
  const bool auto_unresolved = scenario.checkpointing.mode == CheckpointMode::Auto && scenario.checkpointing.units.empty();
  return !auto_unresolved && scenario.iterations <= kPlanWholeUpToIterations;
}

std::shared_ptr<const PlannedTrace> PlannedPoints::find(int64_t batch, int64_t seq_len) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = points_.find({batch, seq_len});
  return found == points_.end() ? nullptr : found->second;
}

void PlannedPoints::keep(int64_t batch, int64_t seq_len, std::shared_ptr<const PlannedTrace> planned) {
  std::lock_guard<std::mutex> lock(mutex_);
  points_.emplace(std::make_pair(batch, seq_len), std::move(planned));
}

std::shared_ptr<const PlannedTrace> PlannedPoints::plan(const Scenario& scenario) {
  if (auto kept = find(scenario.batch_size, scenario.seq_len)) return kept;
  auto planned = std::make_shared<const PlannedTrace>(plan_steps(scenario));
  keep(scenario.batch_size, scenario.seq_len, planned);
  return planned;
}

size_t PlannedPoints::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return points_.size();
}

Prediction predict_sharing(const Scenario& scenario, PlannedPoints* points) {
  // For these scenarios predict() is exactly predict_planned(plan_steps()) (predict.cc).
  if (points == nullptr || !PlannedPoints::shareable(scenario)) return predict(scenario);
  return predict_planned(scenario, *points->plan(scenario));
}

}  // namespace oomcast::advisor
