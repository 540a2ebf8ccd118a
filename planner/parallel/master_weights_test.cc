// training.master_weights under the sharding engines. A bf16 full fine-tune whose AdamW steps
// the bf16 parameters themselves (torchtune's default, Lightning's bf16-true) keeps, per
// parameter and rank, 2 bytes of shard + 2 of gradient + 2 + 2 of moments (torch.optim's
// exp_avg and exp_avg_sq are zeros_like(param)): 8 bytes / N. With fp32 masters it is
// 2 + 2 + 4 (master) + 4 + 4 (fp32 moments): 16 bytes / N. llama-tiny's Ψ = 106,816 divides
// into FSDP1 flat shards exactly for N = 4.
#include <catch2/catch.hpp>

#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;

namespace {

constexpr uint64_t kPsi = 106'816;
constexpr int64_t kWorld = 4;

Scenario bf16_job(ParallelEngine engine, bool master_weights) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::PureBf16);
  scenario.parallel.engine = engine;
  scenario.parallel.world_size = kWorld;
  scenario.parallel.gpus_per_node = kWorld;
  scenario.job.training.master_weights = master_weights;
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

TEST_CASE("FSDP with master_weights false keeps bf16 shards, grads and AdamW moments: 8 bytes per parameter over N",
          "[parallel][master_weights]") {
  // N = 4: 2 x 26,704 shard + 2 x 26,704 grad + 4 x 26,704 moments.
  PlannedTrace planned = checked(bf16_job(ParallelEngine::Fsdp, false));
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi / kWorld);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kPsi / kWorld);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 4 * kPsi / kWorld);
  CHECK(planned.parallel.model_states.optimizer == 4 * kPsi / kWorld);
}

TEST_CASE("FSDP with fp32 master weights keeps 16 bytes per parameter over N", "[parallel][master_weights]") {
  PlannedTrace planned = checked(bf16_job(ParallelEngine::Fsdp, true));
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi / kWorld);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kPsi / kWorld);
  CHECK(planned.parallel.model_states.optimizer == 12 * kPsi / kWorld);
}

TEST_CASE("FSDP2 with master_weights false keeps bf16 moments the size of the bf16 shard, twice over",
          "[parallel][master_weights]") {
  // FSDP2 pads each parameter's dim 0, so the shard is measured, not Ψ/N: per element 2 bytes of
  // shard, 2 of grad, 4 of moments, and no fp32 copy.
  PlannedTrace planned = checked(bf16_job(ParallelEngine::Fsdp2, false));
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  const uint64_t shard = bytes.at_mark[TensorCategory::Parameter];
  REQUIRE(shard >= 2 * kPsi / kWorld);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == shard);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 2 * shard);
  CHECK(planned.parallel.model_states.optimizer == 2 * shard);
}

TEST_CASE("FSDP2 with fp32 master weights keeps six times the bf16 shard in optimizer state",
          "[parallel][master_weights]") {
  PlannedTrace planned = checked(bf16_job(ParallelEngine::Fsdp2, true));
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  const uint64_t shard = bytes.at_mark[TensorCategory::Parameter];
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 6 * shard);  // (4 + 4 + 4) / 2
}
