// LoRA adapters' dtype (training.trainable.lora.autocast_adapter_dtype): PEFT's default makes
// the adapters of a 16-bit base fp32 and copies their input to fp32; without it (torchtune's
// bf16 recipes) they are bf16 and take the input as it is.
#include <catch2/catch.hpp>

#include "planner/jobs/training_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::LoraConfig;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;

namespace {

LayerGraph lora_graph(bool autocast_adapter_dtype) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, Precision::PureBf16);
  LoraConfig& lora = scenario.job.training.lora;
  lora.enabled = true;
  lora.target_modules = {"q_proj", "v_proj"};
  lora.autocast_adapter_dtype = autocast_adapter_dtype;
  scenario.job.training.kind = TrainableKind::None;
  return build_training_graph(scenario);
}

size_t adapter_count(const LayerGraph& graph, DType dtype) {
  size_t count = 0;
  for (TensorId parameter : graph.parameters) {
    const TensorDesc& desc = graph.tensors[parameter];
    if (graph.names[desc.name].find(".lora_") != std::string::npos && desc.dtype == dtype) ++count;
  }
  return count;
}

size_t input_casts(const LayerGraph& graph) {
  size_t count = 0;
  for (const OpNode& op : graph.ops) {
    if (graph.names[op.name].find("lora_input_cast") != std::string::npos) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("PEFT's default makes a bf16 model's LoRA adapters fp32 and copies their input to fp32", "[planner][lora]") {
  LayerGraph graph = lora_graph(true);
  CHECK(adapter_count(graph, DType::Float32) == 2 * 2 * 2);  // two blocks, q and v, A and B
  CHECK(input_casts(graph) == 2 * 2);
}

TEST_CASE("without autocast_adapter_dtype a bf16 model's LoRA adapters are bf16 and their input is not copied",
          "[planner][lora]") {
  LayerGraph graph = lora_graph(false);
  CHECK(adapter_count(graph, DType::BFloat16) == 2 * 2 * 2);
  CHECK(adapter_count(graph, DType::Float32) == 0);
  CHECK(input_casts(graph) == 0);
}
