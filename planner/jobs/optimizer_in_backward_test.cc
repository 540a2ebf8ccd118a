// optimizer.in_backward (planner/optimizer_in_backward.h): each parameter's optimizer steps in
// its post-accumulate-grad hook and frees the .grad, so the gradients of a step never coexist.
// llama-tiny in pure bf16 without master weights: every parameter, gradient and AdamW moment
// is bf16, 2 bytes per element.
#include <catch2/catch.hpp>

#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;

namespace {

constexpr uint64_t kPsi = 106'816;  // llama-tiny's parameters (planner/parallel/rank_schedule_test.cc)

CategoryBytes plan_bf16(bool in_backward) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::PureBf16);
  scenario.job.training.master_weights = false;
  scenario.optimizer.in_backward = in_backward;
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = testing::check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
  return live_by_category(planned, "iter1/optimizer");
}

}  // namespace

TEST_CASE("with the optimizer stepped in backward no gradient is left when backward ends", "[planner][optimizer]") {
  CategoryBytes after_step = plan_bf16(false);
  CategoryBytes in_backward = plan_bf16(true);
  CHECK(after_step.at_mark[TensorCategory::Gradient] == 2 * kPsi);
  CHECK(in_backward.at_mark[TensorCategory::Gradient] == 0);
  // The same AdamW moments, bf16 like the parameters: 2 x 2 bytes per parameter.
  CHECK(after_step.at_mark[TensorCategory::OptimizerState] == 4 * kPsi);
  CHECK(in_backward.at_mark[TensorCategory::OptimizerState] == 4 * kPsi);
}

TEST_CASE("with the optimizer stepped in backward at most a few gradients live at once", "[planner][optimizer]") {
  // The largest tensors are the 16,384-element embedding and lm_head: 32 KiB of bf16 grad each.
  CategoryBytes in_backward = plan_bf16(true);
  CHECK(in_backward.max_gradient_in_iteration1 <= 2 * 2 * 16'384);
  CHECK(plan_bf16(false).max_gradient_in_iteration1 == 2 * kPsi);
}
