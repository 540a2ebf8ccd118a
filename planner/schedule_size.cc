// estimated_schedule_events() and check_schedule_size(); see schedule_size.h. The estimate
// counts about three events per op in forward and three in backward for every micro-batch,
// three per op for every evaluation batch, and a few per parameter for the optimizer step.
#include "planner/schedule_size.h"

#include <string>

#include "base/input_error.h"
#include "scenario/size_limits.h"

namespace oomcast::planner {

using scenario::Scenario;
using scenario::saturating_product;

int64_t estimated_schedule_events(size_t ops, size_t parameters, const Scenario& scenario, int64_t iterations) {
  const auto op_count = static_cast<int64_t>(ops);
  const auto parameter_count = static_cast<int64_t>(parameters);
  int64_t per_iteration = saturating_product(op_count * 6, scenario.grad_accum_steps);
  if (scenario.eval.enabled) per_iteration += saturating_product(op_count * 3, scenario.eval.batches);
  per_iteration += parameter_count * 6;
  return saturating_product(per_iteration, iterations) + parameter_count * 8;
}

void check_schedule_size(size_t ops, size_t parameters, const Scenario& scenario) {
  const int64_t events = estimated_schedule_events(ops, parameters, scenario, scenario.iterations);
  if (events <= kMaxPlannedEvents) return;
  // One iteration of one micro-batch without evaluation is the least a training job plans: when
  // even that is over the limit, the model is what to make smaller, not the loop.
  Scenario least = scenario;
  least.grad_accum_steps = 1;
  least.eval.enabled = false;
  const int64_t one_step = estimated_schedule_events(ops, parameters, least, 1);
  if (one_step > kMaxPlannedEvents) {
    throw InputError(SourceLocation{scenario.source_path}, "model",
                     "one training step of the model's " + std::to_string(ops) + " ops and " +
                         std::to_string(parameters) + " parameter tensors would hold about " + std::to_string(one_step) +
                         " events, over the limit of " + std::to_string(kMaxPlannedEvents) +
                         ": the model is too large to plan (a graph file: fewer repeats)");
  }
  std::string factors = "iterations " + std::to_string(scenario.iterations) + " x grad_accum_steps " +
                        std::to_string(scenario.grad_accum_steps);
  if (scenario.eval.enabled) factors += " (+ eval.batches " + std::to_string(scenario.eval.batches) + ")";
  // The largest of the factors is the one to lower.
  std::string key = "iterations";
  int64_t largest = scenario.iterations;
  if (scenario.grad_accum_steps > largest) {
    key = "grad_accum_steps";
    largest = scenario.grad_accum_steps;
  }
  if (scenario.eval.enabled && scenario.eval.batches > largest) key = "eval.batches";
  throw InputError(SourceLocation{scenario.source_path}, key,
                   "the schedule would hold about " + std::to_string(events) + " events (" + factors + " over " +
                       std::to_string(ops) + " ops), over the limit of " + std::to_string(kMaxPlannedEvents) +
                       ": lower '" + key + "'");
}

}  // namespace oomcast::planner
