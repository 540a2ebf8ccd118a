// The per-rank schedule: live parameter, gradient and optimizer-state bytes when the
// optimizer step begins equal the ZeRO paper's 2 + 2 + 12 bytes per parameter divided as each
// stage divides them (Rajbhandari et al. 2019, Figure 1), and FSDP/DDP hold what their
// engines hold. llama-tiny has Ψ = 106,816 parameters, every tensor a multiple of 64 elements,
// so shards divide exactly for N up to 64.
#include <catch2/catch.hpp>

#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::parallel_engine_name;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;

namespace {

constexpr uint64_t kPsi = 106'816;  // embed 16,384 + 2 x 36,992 per layer + norm 64 + lm_head 16,384

Scenario tiny(ParallelEngine engine, int64_t world) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::PureBf16);
  scenario.parallel.engine = engine;
  scenario.parallel.world_size = world;
  scenario.parallel.gpus_per_node = world;
  // The paper divides every parameter; DeepSpeed keeps small ones whole unless told not to.
  scenario.parallel.deepspeed.zero_optimization.stage3_param_persistence_threshold = 0;
  return scenario;
}

CategoryBytes plan_zero(int stage, int64_t world) {
  Scenario scenario = tiny(ParallelEngine::DeepSpeed, world);
  scenario.parallel.deepspeed.zero_optimization.stage = stage;
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = testing::check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
  return live_by_category(planned, "iter1/optimizer");
}

}  // namespace

TEST_CASE("ZeRO stage 0 holds 16 bytes per parameter on every rank", "[parallel][schedule]") {
  // 2Ψ bf16 params + 2Ψ bf16 grads + 12Ψ (fp32 master, m, v) = 16 x 106,816 = 1,709,056.
  CategoryBytes bytes = plan_zero(0, 4);
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kPsi);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kPsi);
}

TEST_CASE("ZeRO-1 divides the optimizer states by the world size", "[parallel][schedule]") {
  for (int64_t world : {2, 4, 8, 64}) {
    INFO("N = " << world);
    // 2Ψ + 2Ψ + 12Ψ/N; N = 8: 213,632 + 213,632 + 160,224. Whole grads live through backward.
    CategoryBytes bytes = plan_zero(1, world);
    CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi);
    CHECK(bytes.max_gradient_in_iteration1 >= 2 * kPsi);
    CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kPsi / static_cast<uint64_t>(world));
  }
}

TEST_CASE("ZeRO-2 divides gradients and optimizer states by the world size", "[parallel][schedule]") {
  for (int64_t world : {2, 4, 8, 64}) {
    INFO("N = " << world);
    // 2Ψ + (2 + 12)Ψ/N; N = 4: 213,632 + 53,408 + 320,448.
    CategoryBytes bytes = plan_zero(2, world);
    CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi);
    CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kPsi / static_cast<uint64_t>(world));
    CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kPsi / static_cast<uint64_t>(world));
  }
}

TEST_CASE("ZeRO-3 divides parameters, gradients and optimizer states by the world size", "[parallel][schedule]") {
  for (int64_t world : {2, 4, 8, 64}) {
    INFO("N = " << world);
    // (2 + 2 + 12)Ψ/N; N = 64: 3,338 + 3,338 + 20,028 = 26,704 = 16 x 106,816 / 64.
    CategoryBytes bytes = plan_zero(3, world);
    const uint64_t n = static_cast<uint64_t>(world);
    CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * kPsi / n);
    CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kPsi / n);
    CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kPsi / n);
    // Gathered parameters are all released once the backward trace ends.
    CHECK(bytes.at_mark[TensorCategory::Communication] ==
          oomcast::scenario::ZeroConfig{}.reduce_bucket_size * 2);  // only the persistent ipg bucket
  }
}

TEST_CASE("FSDP FULL_SHARD with bf16 mixed precision keeps 16 bytes per parameter divided by N",
          "[parallel][schedule]") {
  // fp32 flat-parameter shard 4Ψ/N, fp32 sharded grad 4Ψ/N (reduce_dtype fp32), AdamW m and v 8Ψ/N;
  // N = 8: 53,408 + 53,408 + 106,816. Units are padded to a multiple of N; llama-tiny's divide.
  Scenario scenario = tiny(ParallelEngine::Fsdp, 8);
  scenario.parallel.fsdp.mixed_precision = true;
  scenario.parallel.fsdp.param_dtype = FloatDtype::BFloat16;
  scenario.parallel.fsdp.reduce_dtype = FloatDtype::Float32;
  PlannedTrace planned = plan_steps(scenario);
  REQUIRE(testing::check_schedule(planned).ok);
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 4 * kPsi / 8);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 4 * kPsi / 8);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 8 * kPsi / 8);
  // The post-backward callback reshards every unit, the root included.
  CHECK(bytes.at_mark[TensorCategory::Communication] == 0);
}

TEST_CASE("DDP buckets duplicate the gradients unless gradient_as_bucket_view is set", "[parallel][schedule]") {
  Scenario scenario = tiny(ParallelEngine::Ddp, 4);
  scenario.precision = Precision::Fp32;
  // fp32: params 4Ψ, .grad 4Ψ, buckets 4Ψ (bucket_cap_mb 25 holds the whole tiny model after the 1 MiB
  // first bucket cap, so two buckets), AdamW m and v 8Ψ.
  CategoryBytes copied = live_by_category(plan_steps(scenario), "iter1/optimizer");
  CHECK(copied.at_mark[TensorCategory::Parameter] == 4 * kPsi);
  CHECK(copied.at_mark[TensorCategory::Gradient] == 4 * kPsi);
  CHECK(copied.at_mark[TensorCategory::Communication] == 4 * kPsi);
  CHECK(copied.at_mark[TensorCategory::OptimizerState] == 8 * kPsi);
  scenario.parallel.ddp.gradient_as_bucket_view = true;
  CategoryBytes viewed = live_by_category(plan_steps(scenario), "iter1/optimizer");
  CHECK(viewed.at_mark[TensorCategory::Gradient] == 0);
  CHECK(viewed.at_mark[TensorCategory::Communication] == 4 * kPsi);
}

TEST_CASE("every parallel engine's schedule frees only live allocations", "[parallel][schedule]") {
  for (ParallelEngine engine : {ParallelEngine::Ddp, ParallelEngine::Fsdp, ParallelEngine::DeepSpeed}) {
    for (int stage = 0; stage <= 3; ++stage) {
      Scenario scenario = tiny(engine, 4);
      scenario.grad_accum_steps = 2;
      scenario.checkpointing.mode = CheckpointMode::Full;
      scenario.eval.enabled = true;
      scenario.parallel.deepspeed.zero_optimization.stage = stage;
      scenario.parallel.deepspeed.zero_optimization.contiguous_gradients = stage % 2 == 0;
      scenario.parallel.fsdp.forward_prefetch = stage % 2 == 1;
      INFO(parallel_engine_name(engine) << " stage " << stage);
      testing::ScheduleCheck check = testing::check_schedule(plan_steps(scenario));
      INFO(check.error);
      CHECK(check.ok);
    }
  }
}
