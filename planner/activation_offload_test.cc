// Activation offloading (planner/activation_offload.h): which saved tensors torchtune's
// OffloadActivations and torch's save_on_cpu copy to the host, and what the device keeps.
// The byte-level agreement with real PyTorch is validate/scenarios/llama-tiny-offload-*.yaml's.
#include <catch2/catch.hpp>

#include <string>

#include "planner/activation_offload.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::OffloadMethod;
using oomcast::scenario::Scenario;

namespace {

Scenario offloading_scenario(OffloadMethod method) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  scenario.activation_offloading.enabled = true;
  scenario.activation_offloading.method = method;
  scenario.activation_offloading.min_offload_bytes = method == OffloadMethod::Torchtune ? 1024 : 0;
  return scenario;
}

struct OffloadedGraph {
  LayerGraph graph;
  ExecutionOrder order;
  CheckpointPlan plan;
};

OffloadedGraph offloaded_graph(OffloadMethod method) {
  const Scenario scenario = offloading_scenario(method);
  OffloadedGraph result;
  result.graph = build_training_graph(scenario);
  result.order = compute_execution_order(result.graph);
  result.plan = plan_checkpointing(result.graph, result.order, scenario.checkpointing);
  plan_activation_offload(result.graph, result.order, scenario.activation_offloading, &result.plan);
  return result;
}

bool is_output_head_or_after(const OffloadedGraph& g, uint32_t op) {
  for (uint32_t other = 0; other < g.graph.ops.size(); ++other) {
    if (g.graph.names[g.graph.ops[other].name].rfind("lm_head", 0) == 0 &&
        g.order.position[other] <= g.order.position[op]) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("torchtune offloads a linear's saved weight (a weight.t() view) but keeps a norm's weight and the output head's saves",
          "[planner][offload]") {
  const OffloadedGraph g = offloaded_graph(OffloadMethod::Torchtune);
  int linear_weights = 0;
  int kept_module_tensors = 0;
  for (uint32_t op = 0; op < g.graph.ops.size(); ++op) {
    const OpNode& node = g.graph.ops[op];
    for (size_t i = 0; i < node.saved.size(); ++i) {
      const bool offloaded = g.plan.saved_offloaded[op][i] != 0;
      if (is_output_head_or_after(g, op)) {
        CHECK_FALSE(offloaded);
        continue;
      }
      const TensorDesc& desc = g.graph.tensors[node.saved[i]];
      if (desc.role != TensorRole::Parameter) continue;
      // A norm's weight is the nn.Parameter itself, kept whatever its size; a linear's saved
      // weight is a weight.t() view, offloaded from 1024 bytes.
      if (node.kind == oomcast::scenario::OpKind::Linear) {
        if (desc.bytes() < 1024) continue;
        CHECK(offloaded);
        ++linear_weights;
      } else {
        CHECK_FALSE(offloaded);
        ++kept_module_tensors;
      }
    }
  }
  CHECK(linear_weights > 0);
  CHECK(kept_module_tensors + linear_weights > linear_weights);  // RMSNorm weights were seen
}

TEST_CASE("save_on_cpu offloads every tensor the forward saves, parameters and loss included", "[planner][offload]") {
  const OffloadedGraph g = offloaded_graph(OffloadMethod::SaveOnCpu);
  for (uint32_t op = 0; op < g.graph.ops.size(); ++op) {
    const OpNode& node = g.graph.ops[op];
    if (!node.records_grad_node) continue;
    for (size_t i = 0; i < node.saved.size(); ++i) {
      INFO(g.graph.names[node.name]);
      CHECK(g.plan.saved_offloaded[op][i] == (g.graph.tensors[node.saved[i]].bytes() > 0 ? 1 : 0));
    }
  }
}

TEST_CASE("with save_on_cpu almost no activation is left on the device for backward", "[planner][offload]") {
  Scenario plain = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  const auto without = testing::live_by_category(plan_steps(plain), "iter1/backward");
  PlannedTrace offloaded = plan_steps(offloading_scenario(OffloadMethod::SaveOnCpu));
  testing::ScheduleCheck check = testing::check_schedule(offloaded);
  INFO(check.error);
  REQUIRE(check.ok);
  const auto with = testing::live_by_category(offloaded, "iter1/backward");
  auto activations = [](const testing::CategoryBytes& bytes) {
    auto found = bytes.at_mark.find(TensorCategory::Activation);
    return found == bytes.at_mark.end() ? uint64_t{0} : found->second;
  };
  CHECK(activations(without) > 100'000);
  // What is left is the loss and the loop's batch tensors, nothing the graph saved.
  CHECK(activations(with) * 20 < activations(without));
  CHECK(offloaded.activation_offload_host_bytes > activations(without));
}
