// Parameter counts of published Hugging Face configs (tests/data/hf/, copied as published)
// against the counts their model cards and sum(p.numel() for p in model.parameters()) give,
// and the mixture-of-experts token routing.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>

#include "planner/families/families.h"
#include "planner/families/moe_block.h"
#include "scenario/model_catalog.h"

using namespace oomcast;
using namespace oomcast::planner;
using oomcast::scenario::ModelConfig;
using oomcast::scenario::resolve_model;
using oomcast::planner::families::parameter_count;

namespace {

ModelConfig published(const std::string& folder) {
  return resolve_model(std::string(OOMCAST_SOURCE_DIR) + "/tests/data/hf/" + folder, "");
}

std::string warnings_of(const ModelConfig& model) {
  std::string text;
  for (const auto& warning : model.warnings) text += warning + "\n";
  return text;
}

}  // namespace

TEST_CASE("Qwen2 and Qwen3 configs count their published parameters", "[planner][models][hf]") {
  // Qwen2-7B: q/k/v biases, GQA 28/4, untied: 7,615,616,512.
  CHECK(parameter_count(published("Qwen2-7B")) == 7615616512ull);
  // Qwen3-0.6B: head_dim 128 (not 1024/16), q_norm/k_norm per head, tied: 596,049,920.
  CHECK(parameter_count(published("Qwen3-0.6B")) == 596049920ull);
}

TEST_CASE("Gemma and Gemma 2 configs count their published parameters", "[planner][models][hf]") {
  // gemma-2b: head_dim 256, one kv head, tied: 2,506,172,416.
  CHECK(parameter_count(published("gemma-2b")) == 2506172416ull);
  // gemma-2-2b: four norms per layer: 2,614,341,888.
  CHECK(parameter_count(published("gemma-2-2b")) == 2614341888ull);
}

TEST_CASE("Phi-3, Phi-2, Pythia and Falcon configs count their published parameters", "[planner][models][hf]") {
  CHECK(parameter_count(published("Phi-3-mini-4k-instruct")) == 3821079552ull);
  // phi-2: biases everywhere, lm_head with a bias, one LayerNorm per layer: 2,779,683,840.
  CHECK(parameter_count(published("phi-2")) == 2779683840ull);
  CHECK(parameter_count(published("pythia-160m")) == 162322944ull);
  // falcon-7b: multi-query fused qkv (4544 + 2*64 rows), no biases, tied: 6,921,720,704.
  CHECK(parameter_count(published("falcon-7b")) == 6921720704ull);
}

TEST_CASE("mixture-of-experts configs count every expert's parameters", "[planner][models][hf]") {
  CHECK(parameter_count(published("Mixtral-8x7B-v0.1")) == 46702792704ull);
  // Qwen1.5-MoE-A2.7B: 60 experts of 1408 plus a shared expert of 5632 and its gate.
  CHECK(parameter_count(published("Qwen1.5-MoE-A2.7B")) == 14315784192ull);
  CHECK(parameter_count(published("Qwen3-30B-A3B")) == 30532122624ull);
}

TEST_CASE("the published configs are read without unmodelled keys except the ones named", "[planner][models][hf]") {
  for (const char* folder : {"Qwen2-7B", "Qwen3-0.6B", "Mixtral-8x7B-v0.1", "Qwen1.5-MoE-A2.7B", "Qwen3-30B-A3B",
                             "gemma-2b", "gemma-2-2b", "Phi-3-mini-4k-instruct", "phi-2", "pythia-160m",
                             "falcon-7b"}) {
    INFO(folder);
    CHECK(warnings_of(published(folder)).empty());
  }
}

TEST_CASE("Gemma 2's config switches on both of its logit softcaps", "[planner][models][hf]") {
  ModelConfig model = published("gemma-2-2b");
  CHECK(model.options.at("attn_logit_softcap") == "true");
  CHECK(model.options.at("final_logit_softcap") == "true");
}

TEST_CASE("mixtral is read as a mixture of experts, not as mistral", "[planner][models][hf]") {
  ModelConfig model = published("Mixtral-8x7B-v0.1");
  CHECK(model.dims.at("experts") == 8);
  CHECK(model.dims.at("experts_per_token") == 2);
}

TEST_CASE("balanced routing gives every expert tokens times k over experts", "[planner][moe]") {
  auto counts = families::expert_token_counts(1024, 8, 2, /*balanced=*/true);
  CHECK(counts == std::vector<uint64_t>(8, 256));
}

TEST_CASE("worst-case routing gives the busiest expert k times its share and keeps the total", "[planner][moe]") {
  auto counts = families::expert_token_counts(1024, 8, 2, /*balanced=*/false);
  CHECK(counts[0] == 512);  // 2 x 256
  CHECK(std::accumulate(counts.begin(), counts.end(), uint64_t{0}) == 2048);
  for (uint64_t count : counts) CHECK(count <= 1024);
}

TEST_CASE("worst-case routing never gives an expert more than every token", "[planner][moe]") {
  // Two experts, top-2: every token goes to both; k x share would be 2 x 1024.
  auto counts = families::expert_token_counts(1024, 2, 2, false);
  CHECK(counts == std::vector<uint64_t>{1024, 1024});
  auto few = families::expert_token_counts(10, 4, 3, false);
  CHECK(std::accumulate(few.begin(), few.end(), uint64_t{0}) == 30);
  for (uint64_t count : few) CHECK(count <= 10);
}
