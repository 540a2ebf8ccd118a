// Data-parallel ranks with frozen parameters (a trainable subset or LoRA): DDP's Reducer,
// DeepSpeed's optimizer groups and FSDP's optimizer see only the requires_grad parameters;
// ZeRO-3 and FSDP still shard and gather the frozen ones. Hand-worked on llama-tiny
// (Ψ = 106,816; hidden 64, 4 heads of 16, 2 kv heads, 2 layers) with LoRA r = 4 on q_proj
// ([64, 64]: lora_A [4, 64] + lora_B [64, 4] = 512) and v_proj ([32, 64]: 256 + 128 = 384):
// 896 adapter elements per layer, Ψ_t = 1,792, every one fp32.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "planner/parallel/fsdp_rank_shards.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;

namespace {

constexpr uint64_t kPsi = 106'816;
constexpr uint64_t kAdapters = 1'792;

Scenario tiny_lora(ParallelEngine engine, int64_t world, Precision precision) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, precision);
  scenario.parallel.engine = engine;
  scenario.parallel.world_size = world;
  scenario.parallel.gpus_per_node = world;
  scenario.parallel.deepspeed.zero_optimization.stage3_param_persistence_threshold = 0;
  scenario.job.training.kind = TrainableKind::None;
  scenario.job.training.lora.enabled = true;
  scenario.job.training.lora.r = 4;
  scenario.job.training.lora.target_modules = {"q_proj", "v_proj"};
  return scenario;
}

PlannedTrace plan_checked(const Scenario& scenario) {
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = testing::check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
  return planned;
}

// Sizes of the allocations whose slot name contains `part`, in schedule order.
std::vector<uint64_t> allocations_named(const PlannedTrace& planned, const std::string& part) {
  std::vector<uint64_t> sizes;
  for (const auto& event : planned.trace.events) {
    if (event.kind != oomcast::sim::EventKind::Alloc) continue;
    if (planned.trace.slot_names[event.slot].find(part) != std::string::npos) sizes.push_back(event.bytes);
  }
  return sizes;
}

}  // namespace

TEST_CASE("DDP with LoRA gives buckets, gradients and optimizer state to the adapters alone", "[parallel][frozen]") {
  // fp32: every parameter 4 x (106,816 + 1,792) = 434,432 B on the rank; .grad and the one
  // bucket (7,168 B, under the 1 MiB first-bucket cap) 4 x 1,792; AdamW m and v 8 x 1,792.
  PlannedTrace planned = plan_checked(tiny_lora(ParallelEngine::Ddp, 2, Precision::Fp32));
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 4 * (kPsi + kAdapters));
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 4 * kAdapters);
  CHECK(bytes.at_mark[TensorCategory::Communication] == 4 * kAdapters);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 8 * kAdapters);
  CHECK(allocations_named(planned, "ddp.bucket") == std::vector<uint64_t>{4 * kAdapters});
  // The summary the report prints agrees with the schedule.
  CHECK(planned.parallel.model_states.parameters == 4 * (kPsi + kAdapters));
  CHECK(planned.parallel.model_states.gradients == 4 * kAdapters);
  CHECK(planned.parallel.model_states.optimizer == 8 * kAdapters);
}

TEST_CASE("DDP fills one run of buckets per gradient dtype", "[parallel][frozen]") {
  // pure_bf16 with the final norm trainable besides the fp32 adapters: the bf16 norm weight
  // (64 elements, 128 B) cannot share the adapters' fp32 bucket (7,168 B). In gradient-ready
  // order the adapters (created last) come first.
  Scenario scenario = tiny_lora(ParallelEngine::Ddp, 2, Precision::PureBf16);
  scenario.job.training.kind = TrainableKind::Patterns;
  scenario.job.training.patterns = {"model.norm"};
  PlannedTrace planned = plan_checked(scenario);
  CHECK(allocations_named(planned, "ddp.bucket") == std::vector<uint64_t>{4 * kAdapters, 2 * 64});
}

TEST_CASE("ZeRO-2 with LoRA keeps optimizer state and the grad partition for the adapters only", "[parallel][frozen]") {
  // DeepSpeed casts the module to bf16: frozen parameters stay 2-byte tensors of their own,
  // the adapters form the flat group, 2 x (106,816 + 1,792) = 217,216 B. N = 4: master + m + v
  // 12 x 1,792 / 4 = 5,376 B; the bf16 grad partition 2 x 1,792 / 4 = 896 B.
  Scenario scenario = tiny_lora(ParallelEngine::DeepSpeed, 4, Precision::PureBf16);
  scenario.parallel.deepspeed.zero_optimization.stage = 2;
  PlannedTrace planned = plan_checked(scenario);
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * (kPsi + kAdapters));
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kAdapters / 4);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kAdapters / 4);
  CHECK(allocations_named(planned, "deepspeed.bit16_groups_flat") == std::vector<uint64_t>{2 * kAdapters});
  // The summary the report prints agrees with the schedule.
  CHECK(planned.parallel.model_states.optimizer == 12 * kAdapters / 4);
  CHECK(planned.parallel.model_states.gradients == 2 * kAdapters / 4);
}

TEST_CASE("ZeRO-3 with LoRA partitions and gathers the frozen parameters too", "[parallel][frozen]") {
  // Every parameter's partition: 2 x (106,816 + 1,792) / 4 = 54,304 B (all divide by 4);
  // state and grads as at stage 2.
  Scenario scenario = tiny_lora(ParallelEngine::DeepSpeed, 4, Precision::PureBf16);
  scenario.parallel.deepspeed.zero_optimization.stage = 3;
  PlannedTrace planned = plan_checked(scenario);
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 2 * (kPsi + kAdapters) / 4);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 12 * kAdapters / 4);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * kAdapters / 4);
  // The frozen embedding (256 x 64) is all-gathered whole, in bf16, for the forward.
  CHECK_FALSE(allocations_named(planned, "allgather:model.embed_tokens.weight").empty());
  CHECK(allocations_named(planned, "allgather:model.embed_tokens.weight").front() == 2 * 256 * 64);
}

TEST_CASE("FSDP without use_orig_params refuses a unit that mixes frozen and trainable parameters",
          "[parallel][frozen]") {
  Scenario scenario = tiny_lora(ParallelEngine::Fsdp, 2, Precision::Fp32);
  try {
    plan_steps(scenario);
    FAIL("planned");
  } catch (const oomcast::InputError& error) {
    CHECK(error.key() == "parallel.fsdp.use_orig_params");
    CHECK_THAT(error.message(), Catch::Contains("unit0") && Catch::Contains("lora_A"));
  }
}

TEST_CASE("FSDP use_orig_params keeps whole-unit sharded grads but optimizer state for trainable pieces only",
          "[parallel][frozen]") {
  // N = 2, bf16 MixedPrecision with fp32 shards and fp32 reduce. A block unit is 36,992 + 896
  // = 37,888 elements, 18,944 per rank. Its sharded .grad covers the whole slice (frozen parts
  // too): 2 blocks x 4 x 18,944 = 151,552 B; the root (embeddings, norm, lm_head) is all
  // frozen and gets none. The adapters sit before o_proj in each block (offsets below 9,152),
  // inside rank 0's slice: rank 0 steps all 1,792 trainable elements, AdamW m and v 8 B each.
  Scenario scenario = tiny_lora(ParallelEngine::Fsdp, 2, Precision::Fp32);
  scenario.parallel.fsdp.use_orig_params = true;
  scenario.parallel.fsdp.mixed_precision = true;
  scenario.parallel.fsdp.param_dtype = FloatDtype::BFloat16;
  scenario.parallel.fsdp.reduce_dtype = FloatDtype::Float32;
  scenario.precision = Precision::PureBf16;
  PlannedTrace planned = plan_checked(scenario);
  CategoryBytes bytes = live_by_category(planned, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 4 * (kPsi + kAdapters) / 2);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 2 * 4 * 18'944);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 8 * kAdapters);
  CHECK(allocations_named(planned, "fsdp.root.grad_shard").empty());
  CHECK(planned.parallel.model_states.gradients == 2 * 4 * 18'944);
  CHECK(planned.parallel.model_states.optimizer == 8 * kAdapters);
}

TEST_CASE("the FSDP rank planned is the one whose slices hold the most trainable elements", "[parallel][frozen]") {
  // Only each block's down_proj (128 -> 64: 8,192 elements) trains. It is the last parameter
  // of its 36,992-element unit: with N = 2 (slices of 18,496) it lies wholly in rank 1's.
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  scenario.job.training.kind = TrainableKind::Patterns;
  scenario.job.training.patterns = {"down_proj"};
  LayerGraph graph = build_training_graph(scenario);
  UnitGroups groups = unit_groups(graph, parameter_uses(graph), true);
  FsdpRankShards shards = fsdp_rank_shards(graph, groups, 2, true);
  CHECK(shards.rank == 1);
  CHECK(shards.trainable_elements == 2 * 8'192);
  CHECK(shards.gradient_unit_elements == 2 * 36'992);
  // NO_SHARD: one rank holds every trainable element.
  CHECK(fsdp_rank_shards(graph, groups, 2, false).trainable_elements == 2 * 8'192);
}
