// The two torch.utils.checkpoint implementations (checkpointing.reentrant) and torchtitan's
// op-level selective policy (checkpointing.save, every_other_linear): what each recomputes,
// which blocks train, and how long the forward RNG state lives. The byte-level agreement
// with real PyTorch is the CPU validation's (validate/scenarios/llama-tiny-amp-ckpt*.yaml).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "planner/checkpointing.h"
#include "planner/jobs/training_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::OpKind;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::testing::cpu_scenario;

namespace {

Scenario checkpointed_llama(bool reentrant) {
  Scenario scenario = cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
  scenario.checkpointing.mode = CheckpointMode::Full;
  scenario.checkpointing.reentrant = reentrant;
  return scenario;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Allocations whose slot name ends with `suffix`, live when `mark` is first reached.
size_t live_named_at(const PlannedTrace& planned, const std::string& suffix, const std::string& mark) {
  std::vector<uint8_t> live(planned.trace.slot_names.size(), 0);
  for (const auto& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] == mark) break;
    if (event.kind == oomcast::sim::EventKind::Alloc) live[event.slot] = 1;
    if (event.kind == oomcast::sim::EventKind::Free) live[event.slot] = 0;
  }
  size_t count = 0;
  for (size_t slot = 0; slot < live.size(); ++slot) {
    if (live[slot] && ends_with(planned.trace.slot_names[slot], suffix)) ++count;
  }
  return count;
}

struct PlannedCheckpoints {
  LayerGraph graph;
  ExecutionOrder order;
  CheckpointPlan plan;
};

PlannedCheckpoints plan_for(const Scenario& scenario) {
  PlannedCheckpoints out;
  out.graph = build_training_graph(scenario);
  out.order = compute_execution_order(out.graph);
  out.plan = plan_checkpointing(out.graph, out.order, scenario.checkpointing);
  return out;
}

}  // namespace

TEST_CASE("the reentrant checkpoint keeps each block's forward RNG state with the loss, the non-reentrant one frees it "
          "with the block's backward",
          "[planner][checkpointing]") {
  // llama-tiny has two blocks; the loop holds the loss until the next forward rebinds it.
  CHECK(live_named_at(plan_steps(checkpointed_llama(true)), "checkpoint.fwd_cpu_state", "iter1/optimizer") == 2);
  CHECK(live_named_at(plan_steps(checkpointed_llama(false)), "checkpoint.fwd_cpu_state", "iter1/optimizer") == 0);
}

TEST_CASE("the reentrant checkpoint recomputes its whole block, the non-reentrant one stops at the last saved tensor",
          "[planner][checkpointing]") {
  PlannedCheckpoints reentrant = plan_for(checkpointed_llama(true));
  PlannedCheckpoints early = plan_for(checkpointed_llama(false));
  for (size_t unit = 0; unit < reentrant.plan.unit_checkpointed.size(); ++unit) {
    INFO("unit " << unit);
    CHECK(reentrant.plan.unit_recompute_stop[unit] == reentrant.plan.unit_last_position[unit]);
    CHECK(early.plan.unit_recompute_stop[unit] < early.plan.unit_last_position[unit]);
  }
  auto recomputed = [](const CheckpointPlan& plan) {
    return std::count(plan.recomputed.begin(), plan.recomputed.end(), uint8_t{1});
  };
  CHECK(recomputed(reentrant.plan) > recomputed(early.plan));
}

TEST_CASE("a block none of whose inputs requires grad trains under the non-reentrant checkpoint",
          "[planner][checkpointing]") {
  // Frozen embeddings and no enable_input_require_grads: the reentrant checkpoint runs the
  // first block without a graph (its parameters get no .grad); the non-reentrant one does not.
  auto gradient_bytes = [](bool reentrant) {
    Scenario scenario = checkpointed_llama(reentrant);
    scenario.job.training.freeze = {"embed_tokens"};
    scenario.job.training.input_require_grads = 0;
    PlannedTrace planned = plan_steps(scenario);
    uint64_t bytes = 0;
    for (size_t i = 0; i < planned.trace.events.size(); ++i) {
      const auto& event = planned.trace.events[i];
      if (event.kind == oomcast::sim::EventKind::Alloc && planned.info[i].category == TensorCategory::Gradient &&
          planned.info[i].iteration == 0 && planned.trace.slot_names[event.slot].find("layers.0.") != std::string::npos) {
        bytes += event.bytes;
      }
    }
    return bytes;
  };
  CHECK(gradient_bytes(true) == 0);
  CHECK(gradient_bytes(false) > 0);
}

TEST_CASE("torchtitan's op policy saves the odd-numbered linears of each block and recomputes the even ones",
          "[planner][checkpointing]") {
  Scenario scenario = cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16);
  scenario.checkpointing.mode = CheckpointMode::Selective;
  scenario.checkpointing.reentrant = false;
  scenario.checkpointing.save_ops = {"linear", "attention"};
  for (bool every_other : {false, true}) {
    INFO("every_other_linear " << every_other);
    scenario.checkpointing.every_other_linear = every_other;
    PlannedCheckpoints planned = plan_for(scenario);
    std::vector<uint8_t> linear_recomputed;  // block 0's linears in execution order
    for (uint32_t op : planned.order.order) {
      if (planned.graph.ops[op].unit == 0 && planned.graph.ops[op].kind == OpKind::Linear) {
        linear_recomputed.push_back(planned.plan.recomputed[op]);
      }
    }
    REQUIRE(linear_recomputed.size() == 7);  // q, k, v, o, gate, up, down
    for (size_t i = 0; i < linear_recomputed.size(); ++i) {
      INFO("linear " << i + 1);
      // Early stop: nothing after the last saved tensor is recomputed, so the last (odd) linear never is.
      CHECK(linear_recomputed[i] == (every_other && i % 2 == 1 ? 1 : 0));
    }
  }
}
