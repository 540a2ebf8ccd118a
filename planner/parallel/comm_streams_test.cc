// Communication buffers on their own streams: FSDP's all-gathers on the unshard stream and
// its reduce-scatters on the post-backward stream, with record_stream-deferred frees, and
// DeepSpeed's overlap_comm all-gather and reduction streams, so the plan's reserved memory
// includes what overlapping collectives hold apart from the compute stream. The comparisons replay the plans through the simulator (default settings).
#include <set>

#include <catch2/catch.hpp>

#include "planner/parallel/comm_streams.h"
#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"
#include "sim/replay.h"

using namespace oomcast::planner;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::sim::EventKind;

namespace {

Scenario fsdp_job(bool limit_all_gathers = true) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
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
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
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
  for (int stage : {1, 2, 3}) {
    PlannedTrace plan = plan_steps(deepspeed_job(stage, true));
    oomcast::sim::ReplayResult overlapped = replayed(plan.trace);
    oomcast::sim::ReplayResult serial = replayed(on_one_stream(plan.trace));
    CHECK(overlapped.peak_allocated_bytes == serial.peak_allocated_bytes);
    CHECK(overlapped.peak_reserved_bytes >= serial.peak_reserved_bytes);
  }
}

namespace {

// The trace positions of the named tensor's allocs (by suffix of its name).
std::vector<size_t> allocs_of(const PlannedTrace& plan, const std::string& name) {
  std::vector<size_t> at;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    if (plan.trace.events[i].kind == EventKind::Alloc && plan.names[plan.info[i].tensor] == name) at.push_back(i);
  }
  return at;
}

}  // namespace

TEST_CASE("ZeRO-1 with overlap_comm reduces the boundary's grads on the reduction stream into grads_in_partition",
          "[planner][parallel][deepspeed][streams]") {
  PlannedTrace overlapped = plan_steps(deepspeed_job(1, true));
  CHECK(allocated_on(overlapped, "deepspeed.allreduce_bucket_flat", kDeepSpeedReductionStream));
  CHECK(allocated_on(overlapped, "deepspeed.grads_in_partition", kDeepSpeedReductionStream));
  CHECK(allocs_of(overlapped, "deepspeed.averaged_gradients").empty());
  // Without overlap_comm stage 1 reduces after backward (reduce_gradients), as before.
  PlannedTrace serial = plan_steps(deepspeed_job(1, false));
  CHECK(allocs_of(serial, "deepspeed.grads_in_partition").empty());
  CHECK(allocated_on(serial, "deepspeed.averaged_gradients", kComputeStream));
}

TEST_CASE("ZeRO-1 with overlap_comm reduces only in the backward of the accumulation boundary",
          "[planner][parallel][deepspeed][streams]") {
  Scenario scenario = deepspeed_job(1, true);
  scenario.grad_accum_steps = 2;
  scenario.iterations = 1;
  PlannedTrace plan = plan_steps(scenario);
  std::vector<size_t> flats = allocs_of(plan, "deepspeed.allreduce_bucket_flat");
  std::vector<size_t> ipg = allocs_of(plan, "deepspeed.ipg_buffer0");
  REQUIRE(ipg.size() == 2);  // one per backward
  REQUIRE_FALSE(flats.empty());
  for (size_t at : flats) CHECK(at > ipg[1]);
}

TEST_CASE("ZeRO-2 bucket reductions flatten every grad once, a bucket at a time",
          "[planner][parallel][deepspeed][streams]") {
  Scenario scenario = deepspeed_job(2, true);
  scenario.parallel.deepspeed.zero_optimization.reduce_bucket_size = 100'000;
  scenario.iterations = 1;
  PlannedTrace plan = plan_steps(scenario);
  uint64_t flattened = 0;
  for (size_t at : allocs_of(plan, "deepspeed.allreduce_bucket_flat")) {
    flattened += plan.trace.events[at].bytes;
    CHECK(plan.trace.events[at].bytes <= (100'000 + plan.parameter_count / 4 + 1) * 4);
  }
  CHECK(flattened == plan.parameter_count * 4);  // autocast keeps fp32 parameters and grads; each reduced once
  CHECK(allocs_of(plan, "deepspeed.allreduce_bucket_flat").size() > 1);
}

TEST_CASE("ZeRO-2 with overlap_comm frees the ipg buffers after recording the reduction stream on them, and the stream's events complete at the epilogue",
          "[planner][parallel][deepspeed][streams]") {
  Scenario scenario = deepspeed_job(2, true);
  scenario.parallel.deepspeed.zero_optimization.reduce_bucket_size = 100'000;  // several buckets: both buffers reduce
  PlannedTrace plan = plan_steps(scenario);
  std::vector<uint8_t> recorded(plan.trace.slot_names.size(), 0);
  size_t ipg_frees = 0;
  size_t recorded_frees = 0;
  bool awaiting_sync = false;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind == EventKind::RecordStream && event.stream == kDeepSpeedReductionStream) recorded[event.slot] = 1;
    if (event.kind == EventKind::StreamSync && event.stream == kDeepSpeedReductionStream) awaiting_sync = false;
    if (event.kind == EventKind::Alloc) CHECK_FALSE(awaiting_sync);  // no request sees the buffers pending
    if (event.kind != EventKind::Free || plan.names[plan.info[i].tensor].rfind("deepspeed.ipg_buffer", 0) != 0) continue;
    ++ipg_frees;
    if (recorded[event.slot]) ++recorded_frees;
    awaiting_sync = true;
  }
  REQUIRE(ipg_frees > 0);
  CHECK(recorded_frees == ipg_frees);
  CHECK_FALSE(awaiting_sync);
}

namespace {

// How many frees of tensors whose names start with `prefix` the plan has, and how many of them
// follow a record_stream of the same slot on `stream`.
std::pair<size_t, size_t> recorded_frees(const PlannedTrace& plan, const std::string& prefix, oomcast::sim::StreamId stream) {
  std::vector<uint8_t> recorded(plan.trace.slot_names.size(), 0);
  size_t frees = 0;
  size_t after_record = 0;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const auto& event = plan.trace.events[i];
    if (event.kind == EventKind::RecordStream && event.stream == stream) recorded[event.slot] = 1;
    if (event.kind == EventKind::Alloc) recorded[event.slot] = 0;
    if (event.kind != EventKind::Free || plan.names[plan.info[i].tensor].rfind(prefix, 0) != 0) continue;
    ++frees;
    if (recorded[event.slot]) ++after_record;
  }
  return {frees, after_record};
}

size_t stream_events(const PlannedTrace& plan) {
  size_t count = 0;
  for (const auto& event : plan.trace.events) count += event.kind == EventKind::RecordStream ? 1 : 0;
  return count;
}

}  // namespace

TEST_CASE("ZeRO-3 with overlap_comm frees each gathered parameter only after recording the compute stream on it",
          "[planner][parallel][deepspeed][streams]") {
  auto [frees, after_record] = recorded_frees(plan_steps(deepspeed_job(3, true)), "allgather:", kComputeStream);
  REQUIRE(frees > 0);
  CHECK(after_record == frees);
}

TEST_CASE("ZeRO-3 with overlap_comm records each autograd grad on the reduce-and-partition stream as it enters the ipg bucket",
          "[planner][parallel][deepspeed][streams]") {
  PlannedTrace plan = plan_steps(deepspeed_job(3, true));
  size_t recorded = 0;
  for (const auto& event : plan.trace.events) {
    recorded += event.kind == EventKind::RecordStream && event.stream == kDeepSpeedReduceAndPartitionStream ? 1 : 0;
  }
  std::set<std::string> parameters;  // every parameter is gathered (no persistence threshold)
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    const std::string& name = plan.names[plan.info[i].tensor];
    if (plan.trace.events[i].kind == EventKind::Alloc && name.rfind("allgather:", 0) == 0) parameters.insert(name);
  }
  REQUIRE_FALSE(parameters.empty());
  CHECK(recorded == 3 * parameters.size());  // each grad, in each of the three backwards
}

TEST_CASE("ZeRO stages without overlap_comm record no stream, their collectives being on the compute stream",
          "[planner][parallel][deepspeed][streams]") {
  for (int stage : {1, 2, 3}) CHECK(stream_events(plan_steps(deepspeed_job(stage, false))) == 0);
}

TEST_CASE("ZeRO-3's recorded frees complete where DeepSpeed's CPU waits, so the released blocks are reused",
          "[planner][parallel][deepspeed][streams]") {
  PlannedTrace plan = plan_steps(deepspeed_job(3, true));
  oomcast::sim::Trace without_waits = plan.trace;
  without_waits.events.clear();
  without_waits.source_lines.clear();
  for (const auto& event : plan.trace.events) {
    if (event.kind != EventKind::StreamSync) without_waits.events.push_back(event);
  }
  CHECK(replayed(plan.trace).peak_reserved_bytes < replayed(without_waits).peak_reserved_bytes);
}
