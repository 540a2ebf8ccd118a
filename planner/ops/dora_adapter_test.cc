// DoRA (training.trainable.lora.use_dora): PEFT's lora_A, lora_B and magnitude vector per
// adapted linear, and what its forward keeps. The byte-level agreement with real PEFT is
// validate/scenarios/llama-tiny-dora.yaml's.
#include <catch2/catch.hpp>

#include <string>

#include "planner/jobs/training_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;

namespace {

oomcast::scenario::Scenario dora_scenario(bool use_dora) {
  oomcast::scenario::Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  oomcast::scenario::LoraConfig& lora = scenario.job.training.lora;
  lora.enabled = true;
  lora.r = 8;
  lora.target_modules = {"q_proj"};
  lora.use_dora = use_dora;
  scenario.job.training.kind = oomcast::scenario::TrainableKind::None;
  return scenario;
}

}  // namespace

TEST_CASE("DoRA gives each adapted linear a trainable magnitude vector of its output size after lora_A and lora_B",
          "[planner][dora]") {
  LayerGraph graph = build_training_graph(dora_scenario(true));
  size_t magnitudes = 0;
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    const std::string& name = graph.names[desc.name];
    if (name.find(".lora_magnitude_vector.default.weight") == std::string::npos) continue;
    ++magnitudes;
    CHECK(desc.requires_grad);
    REQUIRE(p >= 2);
    CHECK(graph.names[graph.tensors[graph.parameters[p - 1]].name].find(".lora_B.") != std::string::npos);
    CHECK(graph.parameter_shapes[p] == std::vector<int64_t>{graph.parameter_shapes[p - 1].front()});  // [out]
  }
  CHECK(magnitudes == graph.adapter_init_work.size());
  CHECK(magnitudes > 0);
}

TEST_CASE("DoRA's forward holds more than LoRA's: the identity, B @ A and the weight-norm temporaries", "[planner][dora]") {
  testing::ScheduleCheck lora = testing::check_schedule(plan_steps(dora_scenario(false)));
  testing::ScheduleCheck dora = testing::check_schedule(plan_steps(dora_scenario(true)));
  INFO(dora.error);
  REQUIRE(dora.ok);
  CHECK(dora.peak_bytes > lora.peak_bytes);
}
