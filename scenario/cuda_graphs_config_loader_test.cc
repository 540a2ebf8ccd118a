// Tests of the scenario's `cuda_graphs` list: what it reads and the jobs it refuses.
#include "scenario/cuda_graphs_config_loader.h"

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kGenerate =
    "model: llama-tiny\nbatch_size: 2\nseq_len: 16\ndevice: a100-80gb\n"
    "job: {kind: generate, cache: static, new_tokens: 4}\n";

Scenario load(const std::string& text) { return load_scenario_text(text, "s.yaml", {}); }
std::string load_error(const std::string& text) {
  return error_of([&] { load(text); });
}

TEST_CASE("cuda_graphs lists the captured batch sizes largest first and shares one pool by default",
          "[scenario][cuda_graphs]") {
  Scenario s = load(kGenerate + "cuda_graphs: [{name: decode, phase: decode, batch_sizes: [1, 8, 2, 4]}]\n");
  REQUIRE(s.cuda_graphs.size() == 1);
  CHECK(s.cuda_graphs[0].name == "decode");
  CHECK(s.cuda_graphs[0].phase == CapturedPhase::Decode);
  CHECK(s.cuda_graphs[0].batch_sizes == std::vector<int64_t>{8, 4, 2, 1});
  CHECK(s.cuda_graphs[0].share_pool);
}

TEST_CASE("share_pool: false gives every captured graph a pool of its own", "[scenario][cuda_graphs]") {
  Scenario s = load(kGenerate + "cuda_graphs: [{name: d, phase: decode, batch_sizes: [2], share_pool: false}]\n");
  CHECK_FALSE(s.cuda_graphs.at(0).share_pool);
}

TEST_CASE("decode graphs are refused for a dynamic cache, whose shapes change every step", "[scenario][cuda_graphs]") {
  std::string text = "model: llama-tiny\nbatch_size: 2\nseq_len: 16\ndevice: a100-80gb\njob: {kind: generate}\n"
                     "cuda_graphs: [{name: d, phase: decode, batch_sizes: [2]}]\n";
  CHECK_THAT(load_error(text), Catch::Contains("static KV cache"));
}

TEST_CASE("decode graphs are refused outside a generate job", "[scenario][cuda_graphs]") {
  std::string text = "model: llama-tiny\nbatch_size: 2\nseq_len: 16\ndevice: a100-80gb\n"
                     "cuda_graphs: [{name: d, phase: decode, batch_sizes: [2]}]\n";
  CHECK_THAT(load_error(text), Catch::Contains("generate job"));
}

TEST_CASE("forward graphs belong to an inference job", "[scenario][cuda_graphs]") {
  const std::string head = "model: llama-tiny\nbatch_size: 2\nseq_len: 16\ndevice: a100-80gb\n";
  const std::string graphs = "cuda_graphs: [{name: f, phase: forward, batch_sizes: [2]}]\n";
  CHECK(load(head + "job: inference\n" + graphs).cuda_graphs.at(0).phase == CapturedPhase::Forward);
  CHECK_THAT(load_error(head + graphs), Catch::Contains("inference job"));
}

TEST_CASE("cuda_graphs are refused on the cpu", "[scenario][cuda_graphs]") {
  std::string text = "model: llama-tiny\nbatch_size: 2\nseq_len: 16\ndevice: cpu\n"
                     "job: {kind: generate, cache: static}\ncuda_graphs: [{name: d, phase: decode, batch_sizes: [2]}]\n";
  CHECK_THAT(load_error(text), Catch::Contains("GPU"));
}

TEST_CASE("a cuda_graphs entry names its line for a bad key, a repeated batch size or a missing field",
          "[scenario][cuda_graphs]") {
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: [{name: d, phase: decode, batch_size: [2]}]\n"),
             Catch::Contains("batch_size"));
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: [{name: d, phase: decode, batch_sizes: [2, 2]}]\n"),
             Catch::Contains("listed twice"));
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: [{phase: decode, batch_sizes: [2]}]\n"), Catch::Contains("'name'"));
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: [{name: d, phase: decode, batch_sizes: []}]\n"),
             Catch::Contains("non-empty"));
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: {name: d}\n"), Catch::Contains("is a list"));
  CHECK_THAT(load_error(kGenerate + "cuda_graphs: [{name: d, phase: decode, batch_sizes: [2]}]\n"),
             Catch::Contains("no error"));
}

}  // namespace
}  // namespace oomcast::scenario
