// Gradient accumulation with the reduce-scatter skipped on every micro-batch but the last
// (FSDP1's model.no_sync(), FSDP2's set_requires_gradient_sync(False)): between micro-batches
// each rank holds the whole model's unsharded gradient, not its shard. llama-tiny has
// Ψ = 106,816 parameters; N = 4 ranks, fp32 unless said.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;

namespace {

constexpr uint64_t kPsi = 106'816;
constexpr int64_t kWorld = 4;

Scenario accumulating_job(ParallelEngine engine, bool no_sync) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::Fp32);
  scenario.parallel.engine = engine;
  scenario.parallel.world_size = kWorld;
  scenario.parallel.gpus_per_node = kWorld;
  scenario.grad_accum_steps = 2;
  scenario.parallel.fsdp.no_sync = no_sync;
  scenario.parallel.fsdp2.no_sync = no_sync;
  return scenario;
}

PlannedTrace checked(const Scenario& scenario) {
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = testing::check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
  return planned;
}

}  // namespace

TEST_CASE("FSDP under no_sync holds every unsharded fp32 gradient between micro-batches",
          "[parallel][no_sync]") {
  CategoryBytes synced = live_by_category(checked(accumulating_job(ParallelEngine::Fsdp, false)), "iter1/mb1/forward");
  CategoryBytes skipped = live_by_category(checked(accumulating_job(ParallelEngine::Fsdp, true)), "iter1/mb1/forward");
  CHECK(synced.at_mark[TensorCategory::Gradient] == 4 * kPsi / kWorld);  // the sharded .grad
  CHECK(skipped.at_mark[TensorCategory::Gradient] == 4 * kPsi);         // flat_param.grad, unsharded
}

TEST_CASE("FSDP under no_sync ends the step with the same sharded gradient as a synced accumulation",
          "[parallel][no_sync]") {
  CategoryBytes synced = live_by_category(checked(accumulating_job(ParallelEngine::Fsdp, false)), "iter1/optimizer");
  CategoryBytes skipped = live_by_category(checked(accumulating_job(ParallelEngine::Fsdp, true)), "iter1/optimizer");
  CHECK(skipped.at_mark[TensorCategory::Gradient] == synced.at_mark[TensorCategory::Gradient]);
  CHECK(skipped.at_mark[TensorCategory::Gradient] == 4 * kPsi / kWorld);
}

TEST_CASE("FSDP2 without gradient sync keeps the unsharded grads when reduce_dtype is the grads' dtype",
          "[parallel][no_sync]") {
  CategoryBytes skipped = live_by_category(checked(accumulating_job(ParallelEngine::Fsdp2, true)), "iter1/mb1/forward");
  CHECK(skipped.at_mark[TensorCategory::Gradient] == 4 * kPsi);
}

TEST_CASE("FSDP2 without gradient sync upcasts bf16 grads into fp32 unsharded_accumulated_grad",
          "[parallel][no_sync]") {
  // MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), torchtitan's default: the bf16
  // grads are dropped once upcast, so 4 bytes per parameter stay, not 2 + 4.
  Scenario scenario = accumulating_job(ParallelEngine::Fsdp2, true);
  scenario.parallel.fsdp2.mixed_precision = true;
  scenario.parallel.fsdp2.param_dtype = FloatDtype::BFloat16;
  scenario.parallel.fsdp2.reduce_dtype = FloatDtype::Float32;
  CategoryBytes skipped = live_by_category(checked(scenario), "iter1/mb1/forward");
  CHECK(skipped.at_mark[TensorCategory::Gradient] == 4 * kPsi);
}

TEST_CASE("no_sync with a single micro-batch is refused, naming the key", "[parallel][no_sync]") {
  Scenario scenario = accumulating_job(ParallelEngine::Fsdp, true);
  scenario.grad_accum_steps = 1;
  CHECK_THROWS_WITH(plan_steps(scenario), Catch::Contains("grad_accum_steps"));
  scenario.parallel.engine = ParallelEngine::Fsdp2;
  CHECK_THROWS_WITH(plan_steps(scenario), Catch::Contains("set_requires_gradient_sync"));
}
