// Tests for Qwen-MoE's choice of sparse and dense decoder layers (decoder_sparse_step,
// mlp_only_layers): the parameters each kind of layer registers and the router a dense layer
// does not plan.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "planner/families/families.h"
#include "planner/planner_test_support.h"

using namespace oomcast;
using namespace oomcast::planner;
using oomcast::scenario::ModelConfig;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Scenario;
using oomcast::scenario::resolve_model;
using oomcast::planner::families::parameter_count;

namespace {

std::string write_config(const std::string& folder, const std::string& text) {
  // Per process: ctest runs the cases side by side, and two cases may write the same config.
  auto dir = std::filesystem::temp_directory_path() / "oomcast_moe_sparse_layers_test" /
             std::to_string(::getpid()) / folder;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  return dir.string();
}

// hidden 64, 4 heads of 16 (2 kv heads), dense MLP 256, 4 experts of 32, untied, vocab 128.
std::string qwen2_moe(const std::string& extra) {
  return write_config("qwen2-moe" + std::to_string(std::hash<std::string>{}(extra)),
                      R"({"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 256,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 128, "num_experts": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 128, "max_position_embeddings": 128, "tie_word_embeddings": false)" +
                          extra + "}");
}

std::string qwen3_moe(const std::string& extra) {
  return write_config("qwen3-moe" + std::to_string(std::hash<std::string>{}(extra)),
                      R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 256,
    "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
    "max_position_embeddings": 128, "tie_word_embeddings": false)" +
                          extra + "}");
}

// Trace slots whose name contains `part`.
size_t slots_named(const PlannedTrace& planned, const std::string& part) {
  size_t count = 0;
  for (const auto& name : planned.trace.slot_names) count += name.find(part) != std::string::npos ? 1 : 0;
  return count;
}

}  // namespace

TEST_CASE("a Qwen2-MoE decoder_sparse_step of 2 gives every second layer experts and the others a dense MLP",
          "[planner][models][hf][moe]") {
  ModelConfig model = resolve_model(qwen2_moe(R"(, "decoder_sparse_step": 2)"), "");
  CHECK(model.warnings.empty());
  // Per layer: q 64*64+64, k and v 32*64+32 each, o 64*64 (12,416) and two norms of 64: 12,544.
  // Dense (layers 0, 2): gate/up/down 3*64*256 = 49,152.
  // Sparse (layers 1, 3): router 4*64 = 256, experts 4 * 3*64*32 = 24,576, shared expert
  // 3*64*128 = 24,576 and its gate 64: 49,472.
  // Embedding and lm_head 128*64 each, final norm 64:
  // 4*12,544 + 2*49,152 + 2*49,472 + 2*8,192 + 64 = 263,872.
  CHECK(parameter_count(model) == 263872ull);
  // A step of 1 (HF's default): all four layers sparse, 263,872 + 2*(49,472 - 49,152).
  CHECK(parameter_count(resolve_model(qwen2_moe(""), "")) == 264512ull);
}

TEST_CASE("a Qwen3-MoE layer in mlp_only_layers has a dense MLP of intermediate_size", "[planner][models][hf][moe]") {
  ModelConfig model = resolve_model(qwen3_moe(R"(, "mlp_only_layers": [0])"), "");
  CHECK(model.warnings.empty());
  // Per layer: q and o 64*64 each, k and v 32*64 each, q_norm/k_norm 16 each, two norms of
  // 64: 12,448. Layer 0 dense: 3*64*256 = 49,152. Layer 1 sparse: router 4*64 = 256 and
  // experts 4 * 3*64*32 = 24,576: 24,832. Embedding and lm_head 8,192 each, final norm 64:
  // 2*12,448 + 49,152 + 24,832 + 16,384 + 64 = 115,328.
  CHECK(parameter_count(model) == 115328ull);
  // Without it both layers are sparse: 115,328 - 49,152 + 24,832.
  CHECK(parameter_count(resolve_model(qwen3_moe(""), "")) == 91008ull);
}

TEST_CASE("a layer listed in mlp_only_layers plans no router", "[planner][moe]") {
  Scenario scenario;
  scenario.model = resolve_model(qwen3_moe(R"(, "mlp_only_layers": [0])"), "");
  scenario.batch_size = 2;
  scenario.seq_len = 16;
  scenario.iterations = 1;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = true;
  PlannedTrace planned = plan_steps(scenario);
  REQUIRE(testing::check_schedule(planned).ok);
  CHECK(slots_named(planned, "layers.0.mlp.gate.") == 0);
  CHECK(slots_named(planned, "layers.0.mlp.gate_proj.") > 0);
  CHECK(slots_named(planned, "layers.1.mlp.gate.") > 0);
  CHECK(slots_named(planned, "layers.1.mlp.experts.") > 0);
}

TEST_CASE("mlp_only_layers that is not a list of layer indices is refused naming the key",
          "[planner][models][hf][hostile]") {
  for (const char* value : {R"("0")", "[0.5]", "[-1]"}) {
    INFO(value);
    CHECK_THROWS_WITH(resolve_model(qwen3_moe(std::string(R"(, "mlp_only_layers": )") + value), ""),
                      Catch::Contains("mlp_only_layers"));
  }
}
