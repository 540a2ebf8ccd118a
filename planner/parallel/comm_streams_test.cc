// Communication buffers on their own streams: FSDP's all-gathers on the unshard stream and
// its reduce-scatters on the post-backward stream, with record_stream-deferred frees, and
// DeepSpeed's overlap_comm all-gather and reduction streams, so the plan's reserved memory
// includes what overlapping collectives hold apart from the compute stream. The comparisons replay the plans through the simulator (default settings).
#include <catch2/catch.hpp>

#include "planner/parallel/comm_streams.h"
#include "planner/planner_test_support.h"
#include "planner/step_planner.h"
#include "sim/replay.h"

using namespace oomcast::planner;
using oomcast::sim::EventKind;

namespace {

Scenario fsdp_job(bool limit_all_gathers = true) {
  Scenario scenario = testing::cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
  scenario.device.is_cpu = false;
  scenario.parallel.engine = ParallelEngine::Fsdp;
  scenario.parallel.world_size = 4;
  scenario.parallel.gpus_per_node = 4;
  scenario.parallel.fsdp.limit_all_gathers = limit_all_gathers;
  scenario.parallel.fsdp.mixed_precision = true;  // bf16 all-gathers of the fp32 shards, fp32 reduce-scatters
  scenario.parallel.fsdp.param_dtype = FloatDtype::BFloat16;
  scenario.iterations = 3;
  return scenario;
}

// The same plan with every event on the compute stream and no stream events: collectives
// that do not overlap anything.
oomcast::sim::Trace on_one_stream(const oomcast::sim::Trace& trace) {
  oomcast::sim::Trace flat = trace;
  flat.events.clear();
  flat.source_lines.clear();
  for (oomcast::sim::Event event : trace.events) {
    if (event.kind == EventKind::RecordStream || event.kind == EventKind::StreamSync ||
        event.kind == EventKind::DeviceSync)
      continue;
    if (event.kind == EventKind::Alloc) event.stream = kComputeStream;
    flat.events.push_back(event);
  }
  return flat;
}

oomcast::sim::ReplayResult replayed(const oomcast::sim::Trace& trace) {
  oomcast::sim::ReplayOptions options;
  options.check_invariants = true;
  return oomcast::sim::replay(trace, oomcast::sim::AllocatorConfig{}, oomcast::sim::DeviceModel{}, options);
}

bool allocated_on(const PlannedTrace& plan, const std::string& tensor_suffix, oomcast::sim::StreamId stream) {
  bool seen = false;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind != EventKind::Alloc) continue;
    const std::string& name = plan.names[plan.info[i].tensor];
    if (name.size() < tensor_suffix.size() || name.compare(name.size() - tensor_suffix.size(), tensor_suffix.size(), tensor_suffix) != 0)
      continue;
    if (event.stream != stream) return false;
    seen = true;
  }
  return seen;
}

}  // namespace

TEST_CASE("FSDP all-gathers on the unshard stream and reduce-scatters on the post-backward stream",
          "[planner][parallel][fsdp][streams]") {
  PlannedTrace plan = plan_steps(fsdp_job());
  CHECK(allocated_on(plan, ".unsharded_flat_param", kFsdpUnshardStream));
  CHECK(allocated_on(plan, ".mp_shard", kFsdpUnshardStream));
  CHECK(allocated_on(plan, ".grad_shard", kFsdpPostBackwardStream));
}

TEST_CASE("an FSDP reshard frees the unsharded parameter only after the compute stream is done with it",
          "[planner][parallel][fsdp][streams]") {
  PlannedTrace plan = plan_steps(fsdp_job());
  size_t unsharded_frees = 0;
  size_t recorded_first = 0;
  std::vector<uint8_t> recorded(plan.trace.slot_names.size(), 0);
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind == EventKind::RecordStream && event.stream == kComputeStream) recorded[event.slot] = 1;
    if (event.kind != EventKind::Free) continue;
    const std::string& name = plan.names[plan.info[i].tensor];
    if (name.find(".unsharded_flat_param") == std::string::npos) continue;
    ++unsharded_frees;
    if (recorded[event.slot]) ++recorded_first;
  }
  REQUIRE(unsharded_frees > 0);
  CHECK(recorded_first == unsharded_frees);
}

TEST_CASE("overlapping FSDP collectives on side streams reserve at least what one stream would",
          "[planner][parallel][fsdp][streams]") {
  PlannedTrace plan = plan_steps(fsdp_job());
  oomcast::sim::ReplayResult overlapped = replayed(plan.trace);
  oomcast::sim::ReplayResult serial = replayed(on_one_stream(plan.trace));
  CHECK(overlapped.peak_allocated_bytes == serial.peak_allocated_bytes);
  CHECK(overlapped.peak_reserved_bytes >= serial.peak_reserved_bytes);
  CHECK(overlapped.final_stats.num_device_alloc >= serial.final_stats.num_device_alloc);
}

TEST_CASE("without limit_all_gathers the resharded parameters wait longer and FSDP reserves no less",
          "[planner][parallel][fsdp][streams]") {
  oomcast::sim::ReplayResult limited = replayed(plan_steps(fsdp_job(true)).trace);
  oomcast::sim::ReplayResult unlimited = replayed(plan_steps(fsdp_job(false)).trace);
  CHECK(unlimited.peak_reserved_bytes >= limited.peak_reserved_bytes);
}

namespace {

Scenario deepspeed_job(int stage, bool overlap_comm) {
  Scenario scenario = testing::cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
  scenario.device.is_cpu = false;
  scenario.parallel.engine = ParallelEngine::DeepSpeed;
  scenario.parallel.world_size = 4;
  scenario.parallel.gpus_per_node = 4;
  scenario.parallel.deepspeed.zero_optimization.stage = stage;
  scenario.parallel.deepspeed.zero_optimization.overlap_comm = overlap_comm;
  scenario.parallel.deepspeed.zero_optimization.stage3_param_persistence_threshold = 0;  // gather every parameter
  scenario.iterations = 3;
  return scenario;
}

// Every stage 3 all-gather of the plan is on `stream` (and there is one).
bool gathers_on(const PlannedTrace& plan, oomcast::sim::StreamId stream) {
  bool seen = false;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind != EventKind::Alloc || plan.names[plan.info[i].tensor].rfind("allgather:", 0) != 0) continue;
    if (event.stream != stream) return false;
    seen = true;
  }
  return seen;
}

}  // namespace

TEST_CASE("ZeRO-3 with overlap_comm all-gathers the parameters on the all-gather stream",
          "[planner][parallel][deepspeed][streams]") {
  CHECK(gathers_on(plan_steps(deepspeed_job(3, true)), kDeepSpeedAllgatherStream));
  CHECK(gathers_on(plan_steps(deepspeed_job(3, false)), kComputeStream));
}

TEST_CASE("ZeRO-2 with overlap_comm makes the grad partition on the reduction stream and the ipg buffers on the compute stream",
          "[planner][parallel][deepspeed][streams]") {
  PlannedTrace overlapped = plan_steps(deepspeed_job(2, true));
  CHECK(allocated_on(overlapped, "deepspeed.grads_in_partition", kDeepSpeedReductionStream));
  CHECK(allocated_on(overlapped, "deepspeed.ipg_buffer0", kComputeStream));
  CHECK(allocated_on(overlapped, "deepspeed.ipg_buffer1", kComputeStream));
  CHECK(allocated_on(plan_steps(deepspeed_job(2, false)), "deepspeed.grads_in_partition", kComputeStream));
}

TEST_CASE("DeepSpeed's side streams change reserved memory, not allocated memory",
          "[planner][parallel][deepspeed][streams]") {
  for (int stage : {2, 3}) {
    PlannedTrace plan = plan_steps(deepspeed_job(stage, true));
    oomcast::sim::ReplayResult overlapped = replayed(plan.trace);
    oomcast::sim::ReplayResult serial = replayed(on_one_stream(plan.trace));
    CHECK(overlapped.peak_allocated_bytes == serial.peak_allocated_bytes);
    CHECK(overlapped.peak_reserved_bytes >= serial.peak_reserved_bytes);
  }
}
