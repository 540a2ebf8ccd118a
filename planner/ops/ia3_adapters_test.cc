// IA3 (training.trainable.ia3): PEFT's learned vectors on the target linears, [out, 1] scaling
// the output, or [1, in] scaling the input of a feedforward module; the base model frozen.
// The byte-level agreement with real PEFT is validate/scenarios/llama-tiny-ia3.yaml's.
#include <catch2/catch.hpp>

#include "planner/jobs/training_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::Ia3Config;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;

namespace {

LayerGraph ia3_graph() {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  Ia3Config& ia3 = scenario.job.training.ia3;
  ia3.enabled = true;
  ia3.target_modules = {"k_proj", "down_proj"};
  ia3.feedforward_modules = {"down_proj"};
  scenario.job.training.kind = TrainableKind::None;
  return build_training_graph(scenario);
}

}  // namespace

TEST_CASE("IA3 gives each target linear one trainable vector shaped by whether it scales the input or the output",
          "[planner][ia3]") {
  LayerGraph graph = ia3_graph();
  size_t vectors = 0;
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    const std::string& name = graph.names[desc.name];
    if (name.find(".ia3_l.default") == std::string::npos) {
      CHECK_FALSE(desc.requires_grad);  // the base model is frozen
      continue;
    }
    ++vectors;
    CHECK(desc.requires_grad);
    CHECK(desc.dtype == DType::Float32);
    const std::vector<int64_t>& shape = graph.parameter_shapes[p];
    REQUIRE(shape.size() == 2);
    if (name.find("down_proj") != std::string::npos) {
      CHECK(shape[0] == 1);  // feedforward: [1, in_features]
    } else {
      CHECK(shape[1] == 1);  // [out_features, 1]
    }
  }
  CHECK(vectors == 2 * 2);  // two blocks, k_proj and down_proj
}
