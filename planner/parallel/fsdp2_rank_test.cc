// FSDP2 (fully_shard) rank schedules: per-rank model states are 1/N of the whole with each
// parameter padded on dim 0, the all-gather and reduce-scatter buffers have FSDP2's sizes
// and streams, reshard_after_forward false keeps the unsharded blocks from forward to
// backward, and more ranks lower the peak. llama-tiny: Ψ = 106,816, hidden 64, every dim 0 a
// multiple of 32 (k_proj/v_proj have 32 rows), so N = 3 pads and N = 2, 8 do not.
#include <catch2/catch.hpp>

#include "planner/parallel/fsdp2_shards.h"
#include "planner/parallel/fsdp2_streams.h"
#include "planner/parallel/rank_test_support.h"
#include "sim/replay.h"

using namespace oomcast::planner;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;
using oomcast::planner::testing::CategoryBytes;
using oomcast::planner::testing::live_by_category;
using oomcast::sim::EventKind;

namespace {

constexpr uint64_t kPsi = 106'816;

Scenario fsdp2_job(int64_t world, bool reshard_after_forward = true) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::PureBf16);
  scenario.device.is_cpu = false;
  scenario.parallel.engine = ParallelEngine::Fsdp2;
  scenario.parallel.world_size = world;
  scenario.parallel.gpus_per_node = std::min<int64_t>(world, 8);
  scenario.parallel.fsdp2.reshard_after_forward = reshard_after_forward;
  scenario.parallel.fsdp2.mixed_precision = true;  // fp32 shards, bf16 all-gathers, fp32 reduce-scatters
  scenario.parallel.fsdp2.param_dtype = FloatDtype::BFloat16;
  scenario.parallel.fsdp2.reduce_dtype = FloatDtype::Float32;
  return scenario;
}

// Frozen base weights with trainable LoRA adapters (r = 4) on q_proj and v_proj.
void with_lora(Scenario& scenario) {
  scenario.job.training.kind = TrainableKind::None;
  scenario.job.training.lora.enabled = true;
  scenario.job.training.lora.r = 4;
  scenario.job.training.lora.target_modules = {"q_proj", "v_proj"};
}

PlannedTrace checked_plan(const Scenario& scenario) {
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = testing::check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
  return planned;
}

uint64_t peak_allocated(const Scenario& scenario) {
  return oomcast::sim::replay(plan_steps(scenario).trace, oomcast::sim::AllocatorConfig{}, oomcast::sim::DeviceModel{}, {})
      .peak_allocated_bytes;
}

struct Allocation {
  uint64_t bytes = 0;
  oomcast::sim::StreamId stream = 0;
  size_t count = 0;
};

// The first allocation of the tensor named `name`, and how many there were.
Allocation allocation_of(const PlannedTrace& plan, const std::string& name) {
  Allocation found;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind != EventKind::Alloc || plan.names[plan.info[i].tensor] != name) continue;
    if (found.count++ == 0) {
      found.bytes = event.bytes;
      found.stream = event.stream;
    }
  }
  return found;
}

Fsdp2Shards shards_of(const Scenario& scenario) {
  LayerGraph graph = build_training_graph(scenario);
  return fsdp2_shards(graph, unit_groups(graph, parameter_uses(graph), true),
                      static_cast<uint64_t>(scenario.parallel.world_size));
}

}  // namespace

TEST_CASE("an FSDP2 shard is ceil(dim 0 / N) rows of the parameter on every rank", "[parallel][fsdp2]") {
  LayerGraph graph = build_training_graph(fsdp2_job(3));
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    const std::vector<int64_t>& shape = graph.parameter_shapes[p];
    REQUIRE_FALSE(shape.empty());
    const uint64_t rows = static_cast<uint64_t>(shape[0]);
    const uint64_t per_row = graph.tensors[graph.parameters[p]].numel / rows;
    // 64 rows over 3 ranks: chunks of 22, 22, 20, each padded to 22; 32 rows: 11 each.
    CHECK(fsdp2_padded_shard_numel(graph, static_cast<int32_t>(p), 3) == (rows + 2) / 3 * per_row);
    CHECK(fsdp2_padded_shard_numel(graph, static_cast<int32_t>(p), 3) * 3 >= rows * per_row);
  }
}

TEST_CASE("FSDP2 keeps 1/N of the fp32 parameters, gradients and AdamW states on a rank, padded on dim 0",
          "[parallel][fsdp2][schedule]") {
  for (int64_t world : {2, 3, 8}) {
    INFO("N = " << world);
    const Scenario scenario = fsdp2_job(world);
    const uint64_t shard = shards_of(scenario).shard_elements;
    const auto n = static_cast<uint64_t>(world);
    CHECK(shard >= (kPsi + n - 1) / n);
    if (world != 3) CHECK(shard == kPsi / n);  // every dim 0 of llama-tiny divides by 2 and 8
    CategoryBytes bytes = live_by_category(checked_plan(scenario), "iter1/optimizer");
    // fp32 shard 4, fp32 sharded .grad 4 (reduce_dtype fp32), AdamW m and v 8 bytes per shard element.
    CHECK(bytes.at_mark[TensorCategory::Parameter] == 4 * shard);
    CHECK(bytes.at_mark[TensorCategory::Gradient] == 4 * shard);
    CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 8 * shard);
    // Nothing unsharded is left once backward ends.
    CHECK(bytes.at_mark[TensorCategory::Communication] == 0);
  }
}

TEST_CASE("an FSDP2 group's all-gather output is world_size x its shard in param_dtype on the copy-in stream",
          "[parallel][fsdp2][streams]") {
  const Scenario scenario = fsdp2_job(4);
  const Fsdp2Shards shards = shards_of(scenario);
  PlannedTrace plan = checked_plan(scenario);
  Allocation output = allocation_of(plan, "fsdp2.block0.all_gather_output");
  REQUIRE(output.count > 0);
  CHECK(output.bytes == 4 * shards.group_shard[0] * 2);  // bf16
  CHECK(output.stream == kFsdp2AllGatherCopyInStream);
  Allocation cast = allocation_of(plan, "fsdp2.block0.all_gather_input_cast");
  CHECK(cast.bytes == shards.group_shard[0] * 2);
  CHECK(cast.stream == kFsdp2AllGatherCopyInStream);
  // Gathered once for forward and once for backward in each iteration (reshard_after_forward true).
  CHECK(output.count == 2 * static_cast<size_t>(scenario.iterations));
}

TEST_CASE("FSDP2 reduce-scatters from the compute stream into an output on the reduce-scatter stream",
          "[parallel][fsdp2][streams]") {
  const Scenario scenario = fsdp2_job(4);
  const Fsdp2Shards shards = shards_of(scenario);
  PlannedTrace plan = checked_plan(scenario);
  Allocation input = allocation_of(plan, "fsdp2.block1.reduce_scatter_input");
  CHECK(input.bytes == 4 * shards.group_trainable_shard[1] * 4);  // N x shard, fp32
  CHECK(input.stream == kComputeStream);
  Allocation grad = allocation_of(plan, "fsdp2.block1.sharded_grad");
  CHECK(grad.bytes == shards.group_trainable_shard[1] * 4);
  CHECK(grad.stream == kFsdp2ReduceScatterStream);
}

TEST_CASE("FSDP2 with reshard_after_forward false keeps every block unsharded from forward to backward",
          "[parallel][fsdp2][schedule]") {
  const Scenario resharded = fsdp2_job(4, true);
  const Scenario kept = fsdp2_job(4, false);
  const uint64_t gathered_model = 4 * shards_of(kept).shard_elements * 2;  // bf16, padded
  CategoryBytes at_turn_resharded = live_by_category(checked_plan(resharded), "iter1/backward");
  CategoryBytes at_turn_kept = live_by_category(checked_plan(kept), "iter1/backward");
  // Kept: every group's unsharded parameters; resharded: the root's only.
  CHECK(at_turn_kept.at_mark[TensorCategory::Communication] == gathered_model);
  CHECK(at_turn_resharded.at_mark[TensorCategory::Communication] < gathered_model / 2);
  CHECK(peak_allocated(kept) > peak_allocated(resharded));
}

TEST_CASE("more FSDP2 ranks lower a rank's peak", "[parallel][fsdp2][schedule]") {
  uint64_t previous = UINT64_MAX;
  for (int64_t world : {1, 2, 4, 8}) {
    INFO("N = " << world);
    const uint64_t peak = peak_allocated(fsdp2_job(world));
    CHECK(peak < previous);
    previous = peak;
  }
}

TEST_CASE("FSDP2 schedules free only live allocations with accumulation, checkpointing, eval and frozen weights",
          "[parallel][fsdp2][schedule]") {
  for (int variant = 0; variant < 4; ++variant) {
    Scenario scenario = fsdp2_job(4, variant % 2 == 0);
    scenario.grad_accum_steps = 2;
    scenario.iterations = 2;
    scenario.checkpointing.mode = variant < 2 ? CheckpointMode::Full : CheckpointMode::None;
    scenario.eval.enabled = true;
    if (variant == 3) scenario.parallel.fsdp2.mixed_precision = false;
    if (variant == 2) with_lora(scenario);
    INFO("variant " << variant);
    testing::ScheduleCheck check = testing::check_schedule(plan_steps(scenario));
    INFO(check.error);
    CHECK(check.ok);
  }
}

TEST_CASE("FSDP2 keeps gradients and optimizer state only for the trainable parameters' shards",
          "[parallel][fsdp2][schedule]") {
  Scenario scenario = fsdp2_job(4);
  with_lora(scenario);
  const Fsdp2Shards shards = shards_of(scenario);
  REQUIRE(shards.trainable_shard_elements > 0);
  REQUIRE(shards.trainable_shard_elements < shards.shard_elements);
  CategoryBytes bytes = live_by_category(checked_plan(scenario), "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 4 * shards.shard_elements);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 4 * shards.trainable_shard_elements);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 8 * shards.trainable_shard_elements);
}

TEST_CASE("FSDP2 frees its buffers by stream waits alone: no record_stream and no CPU sync in its plan",
          "[parallel][fsdp2][streams]") {
  PlannedTrace plan = checked_plan(fsdp2_job(4));
  size_t record_streams = 0;
  size_t stream_syncs = 0;
  for (const auto& event : plan.trace.events) {
    if (event.kind == EventKind::RecordStream) ++record_streams;
    if (event.kind == EventKind::StreamSync) ++stream_syncs;
  }
  CHECK(record_streams == 0);
  CHECK(stream_syncs == 0);
}

TEST_CASE("FSDP2's side-stream buffers reserve at least what the same plan reserves on one stream",
          "[parallel][fsdp2][streams]") {
  PlannedTrace plan = checked_plan(fsdp2_job(4));
  oomcast::sim::Trace one_stream = plan.trace;
  size_t moved = 0;
  for (auto& event : one_stream.events) {
    if (event.kind != EventKind::Alloc || event.stream == kComputeStream) continue;
    event.stream = kComputeStream;
    ++moved;
  }
  REQUIRE(moved > 0);
  const auto replay = [](const oomcast::sim::Trace& trace) {
    return oomcast::sim::replay(trace, oomcast::sim::AllocatorConfig{}, oomcast::sim::DeviceModel{}, {});
  };
  const auto overlapped = replay(plan.trace);
  const auto serial = replay(one_stream);
  CHECK(overlapped.peak_allocated_bytes == serial.peak_allocated_bytes);
  CHECK(overlapped.peak_reserved_bytes >= serial.peak_reserved_bytes);
}

TEST_CASE("FSDP2 with CPUOffloadPolicy keeps no parameters, gradients or optimizer state on the GPU",
          "[parallel][fsdp2][offload]") {
  Scenario scenario = fsdp2_job(4);
  scenario.parallel.fsdp2.cpu_offload = true;
  const Fsdp2Shards shards = shards_of(scenario);
  PlannedTrace plan = checked_plan(scenario);
  CategoryBytes bytes = live_by_category(plan, "iter1/optimizer");
  CHECK(bytes.at_mark[TensorCategory::Parameter] == 0);
  CHECK(bytes.at_mark[TensorCategory::Gradient] == 0);
  CHECK(bytes.at_mark[TensorCategory::OptimizerState] == 0);
  // The host holds the fp32 shards, the fp32 sharded grads and AdamW's m and v: 16 B per shard element.
  CHECK(plan.parallel.host_bytes == 16 * shards.shard_elements);
  CHECK(plan.parallel.host_pinned);
  // Each parameter's shard is copied in before its group's all-gather, on the copy-in stream.
  Allocation copied = allocation_of(plan, "model.layers.0.mlp.up_proj.weight.fsdp2_shard_h2d");
  REQUIRE(copied.count > 0);
  CHECK(copied.stream == kFsdp2AllGatherCopyInStream);
}

TEST_CASE("the FSDP2 summary's per-rank model states are what its schedule holds at the optimizer step",
          "[parallel][fsdp2][model_states]") {
  for (int64_t world : {2, 3, 8}) {
    INFO("N = " << world);
    PlannedTrace plan = checked_plan(fsdp2_job(world));
    CategoryBytes bytes = live_by_category(plan, "iter1/optimizer");
    CHECK(plan.parallel.model_states.parameters == bytes.at_mark[TensorCategory::Parameter]);
    CHECK(plan.parallel.model_states.gradients == bytes.at_mark[TensorCategory::Gradient]);
    CHECK(plan.parallel.model_states.optimizer == bytes.at_mark[TensorCategory::OptimizerState]);
  }
}
