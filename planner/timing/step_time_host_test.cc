// Tests for the host side of the step-time model (step_time_host.h): the per-op host cost,
// the host/GPU pipeline, and the optimizer loops' launches.
#include <catch2/catch.hpp>

#include "planner/timing/op_cost.h"
#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"
#include "planner/timing/step_time.h"
#include "planner/timing/step_time_host.h"
#include "scenario/device_profiles.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::OpKind;
using oomcast::scenario::OptimizerImpl;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::device_config_from_profile;
using oomcast::scenario::find_device_profile;

namespace {

Scenario gpu_scenario(const std::string& model, int64_t batch, int64_t seq) {
  Scenario s = oomcast::scenario::testing::cpu_scenario(model, batch, seq, Precision::AmpBf16, AttentionImpl::Flash);
  s.device = device_config_from_profile(*find_device_profile("a100-80gb"));
  s.iterations = 1;
  return s;
}

}  // namespace

TEST_CASE("an op costs the larger of its host and device time, not their sum, once the pipeline runs",
          "[planner][step_time_host]") {
  HostDevicePipeline host_bound;
  double total = 0.0;
  for (int op = 0; op < 100; ++op) total += host_bound.issue(10e-6, 2e-6);
  CHECK(total == Approx(100 * 10e-6 + 2e-6));  // the GPU waits for each launch
  HostDevicePipeline device_bound;
  total = 0.0;
  for (int op = 0; op < 100; ++op) total += device_bound.issue(2e-6, 10e-6);
  CHECK(total == Approx(2e-6 + 100 * 10e-6));  // the host runs ahead
}

TEST_CASE("a synchronisation makes the host wait for the GPU", "[planner][step_time_host]") {
  HostDevicePipeline pipeline;
  pipeline.issue(1e-6, 1e-3);
  pipeline.synchronize();
  CHECK(pipeline.host_seconds() == Approx(pipeline.device_seconds()));
}

TEST_CASE("a tiny model's step is bounded below by its ops' host dispatch and launch floors",
          "[planner][step_time_host]") {
  Scenario s = gpu_scenario("gpt2-tiny", 1, 16);
  PlannedTrace plan = plan_steps(s);
  REQUIRE(plan.step_time.modelled);
  const LayerGraph graph = build_training_graph(s);
  double host = 0.0, floors = 0.0;
  for (const OpNode& op : graph.ops) {
    OpCost cost = forward_cost(graph, op);
    host += forward_host_seconds(op, cost);
    floors += cost.kernels * kKernelFloorSeconds;
  }
  CHECK(host > 0.0);
  CHECK(plan.step_time.forward_seconds >= host);
  CHECK(plan.step_time.forward_seconds >= floors);
}

TEST_CASE("an autocast cast issued by the dispatcher costs the host less than a Python-level op",
          "[planner][step_time_host]") {
  OpNode cast;
  cast.kind = OpKind::Cast;
  OpNode gelu;
  gelu.kind = OpKind::Gelu;
  OpCost one_kernel;
  one_kernel.kernels = 1.0;
  CHECK(forward_host_seconds(cast, one_kernel) < forward_host_seconds(gelu, one_kernel));
  CHECK(forward_host_seconds(gelu, one_kernel) == Approx(kHostPythonOpSeconds + kHostLaunchSeconds));
}

TEST_CASE("a single-tensor Adam loop pays host time per parameter tensor, foreach per chunk of tensors",
          "[planner][step_time_host]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  const std::vector<uint64_t> many_small(400, 1024);
  s.optimizer.impl = OptimizerImpl::SingleTensor;
  OptimizerStepTime loop = optimizer_step_time(s, many_small);
  s.optimizer.impl = OptimizerImpl::Foreach;
  OptimizerStepTime foreach = optimizer_step_time(s, many_small);
  // 400 tensors × 10 Python ops × (7 µs + 3 µs launch) (the 10th op, the step counter, is
  // counted with a launch: a bound).
  CHECK(loop.host_seconds > 400 * 9 * (kHostPythonOpSeconds + kHostLaunchSeconds));
  CHECK(foreach.host_seconds < loop.host_seconds / 20);
  // Small tensors: each of the loop's kernels is bound by the launch floor.
  CHECK(loop.device_seconds == Approx(400 * 9 * kKernelFloorSeconds));
}
