// Tests of search_keep_global_batch(): it agrees with simulating every split of the global
// batch with its whole accumulation, shortening long accumulations does not change the peak,
// and the global batch is kept across data-parallel ranks.
#include "advisor/global_batch_search.h"

#include <catch2/catch.hpp>

#include "advisor/byte_text.h"
#include "advisor/predict.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::load_scenario_text;

namespace {

// gpt2-tiny on a 256 MiB GPU with no context and no cuBLAS workspaces: a few micro-batches fit.
const char* kTinyGpt2 = R"(
model: gpt2-tiny
batch_size: 1
seq_len: 128
precision: fp32
attention: eager
iterations: 2
device: {total_gib: 0.25, context_mib: 0, cublas_workspaces: 0}
)";

const char* kTinyLlamaDdp = R"(
model: llama-tiny
batch_size: 2
seq_len: 64
precision: amp_bf16
iterations: 2
device: {total_gib: 0.25, context_mib: 0, cublas_workspaces: 0}
parallel: {world_size: 4, nccl_buffer_mib: 0, ddp: {}}
)";

const char* kTinyLlamaZero2 = R"(
model: llama-tiny
batch_size: 2
seq_len: 64
iterations: 2
device: {total_gib: 0.25, context_mib: 0, cublas_workspaces: 0}
parallel: {world_size: 2, nccl_buffer_mib: 0, deepspeed: {bf16: {enabled: true}, zero_optimization: {stage: 2}}}
)";

GlobalBatchResult search(const char* yaml, int64_t global_batch, double margin = 0.05, uint64_t margin_bytes = 0,
                         std::vector<std::string> overrides = {}) {
  GlobalBatchOptions options;
  options.global_batch = global_batch;
  options.margin = margin;
  options.margin_bytes = margin_bytes;
  options.jobs = 2;
  return search_keep_global_batch(ScenarioSource::yaml(yaml, "test.yaml", std::move(overrides)), options);
}

// The largest micro-batch m dividing N / ranks whose whole accumulation N / (m x ranks) fits.
int64_t brute_force_micro_batch(const char* yaml, int64_t global_batch, int64_t ranks, double margin,
                                std::vector<std::string> overrides = {}) {
  int64_t best = 0;
  for (int64_t m = 1; m <= global_batch / ranks; ++m) {
    if ((global_batch / ranks) % m != 0) continue;
    std::vector<std::string> split = overrides;
    split.push_back("batch_size=" + std::to_string(m));
    split.push_back("grad_accum_steps=" + std::to_string(global_batch / ranks / m));
    Scenario s = load_scenario_text(yaml, "test.yaml", split);
    if (predict(with_margin(s, margin)).fits) best = m;
  }
  return best;
}

TEST_CASE("The keep-global-batch search finds the micro-batch a scan of every whole split finds") {
  // About 100 samples fit at once on this device: the answers lie inside the splits.
  for (int64_t global_batch : {256, 384, 480}) {
    GlobalBatchResult result = search(kTinyGpt2, global_batch);
    INFO("global batch " << global_batch);
    REQUIRE(result.best);
    CHECK(result.best->micro_batch > 1);
    CHECK(result.best->micro_batch < global_batch);
    CHECK(result.best->micro_batch == brute_force_micro_batch(kTinyGpt2, global_batch, 1, 0.05));
    CHECK(result.best->micro_batch * result.best->accum_steps == global_batch);
    CHECK(result.evaluated.size() < result.micro_batches.size());
  }
}

TEST_CASE("A long accumulation planned as four or five micro-steps peaks exactly as the whole one") {
  for (const char* yaml : {kTinyGpt2, kTinyLlamaDdp, kTinyLlamaZero2}) {
    for (int64_t accum : {12, 13}) {
      Scenario whole = load_scenario_text(yaml, "test.yaml", {"grad_accum_steps=" + std::to_string(accum)});
      Scenario shortened = whole;
      shortened.grad_accum_steps = planned_accum_steps(whole, accum);
      CHECK(shortened.grad_accum_steps == (accum % 2 == 0 ? 4 : 5));
      Prediction a = predict(whole), b = predict(shortened);
      INFO(yaml << " accum " << accum);
      CHECK(a.peak_allocated_bytes == b.peak_allocated_bytes);
      CHECK(a.peak_reserved_bytes == b.peak_reserved_bytes);
    }
  }
}

TEST_CASE("A loop that keeps every loss alive plans its whole accumulation") {
  Scenario s = load_scenario_text(kTinyGpt2, "test.yaml", {"training_loop.keep_losses_across_iterations=true"});
  CHECK(planned_accum_steps(s, 64) == 64);
}

TEST_CASE("With data-parallel ranks, micro-batch x accumulation x ranks is the global batch") {
  // On a 10 MiB device a micro-batch of 8 fits and 16 does not.
  const std::vector<std::string> small_device = {"device.total_gib=0.01"};
  GlobalBatchResult result = search(kTinyLlamaDdp, 64, 0.05, 0, small_device);
  CHECK(result.ranks == 4);
  CHECK(result.micro_batches == std::vector<int64_t>{1, 2, 4, 8, 16});
  REQUIRE(result.best);
  CHECK(result.best->micro_batch < 16);
  CHECK(result.best->micro_batch * result.best->accum_steps * 4 == 64);
  CHECK(result.best->micro_batch == brute_force_micro_batch(kTinyLlamaDdp, 64, 4, 0.05, small_device));
  CHECK(render_global_batch_text(result).find("per rank") != std::string::npos);
}

TEST_CASE("A global batch that the ranks do not divide is an input error") {
  CHECK_THROWS_WITH(search(kTinyLlamaDdp, 66), Catch::Contains("not a multiple of the 4 data-parallel ranks"));
}

TEST_CASE("A DeepSpeed config that pins the accumulation is an input error naming it") {
  GlobalBatchOptions options;
  options.global_batch = 256;
  options.jobs = 2;
  ScenarioSource source = ScenarioSource::file(std::string(OOMCAST_SOURCE_DIR) + "/scenarios/llama-2-70b-zero3-offload.yaml");
  CHECK_THROWS_WITH(search_keep_global_batch(source, options), Catch::Contains("gradient_accumulation_steps"));
}

TEST_CASE("An absolute margin holds back that many bytes of usable memory") {
  GlobalBatchResult relative = search(kTinyGpt2, 256, 0.0);
  REQUIRE(relative.best);
  // A margin that leaves 1 MiB less than the best split reserves.
  uint64_t margin = relative.usable_bytes - relative.best->evaluation.peak_reserved_bytes + (uint64_t{1} << 20);
  GlobalBatchResult absolute = search(kTinyGpt2, 256, 0.0, margin);
  CHECK(static_cast<double>(absolute.budget_bytes) ==
        Approx(static_cast<double>(relative.usable_bytes - margin)).margin(2));
  REQUIRE(absolute.best);
  CHECK(absolute.best->micro_batch < relative.best->micro_batch);
  CHECK(render_global_batch_text(absolute).find("minus a " + byte_text(margin) + " margin") != std::string::npos);
}

TEST_CASE("A margin as large as the device is an input error") {
  CHECK_THROWS_WITH(search(kTinyGpt2, 64, 0.0, uint64_t{1} << 30), Catch::Contains("leaves nothing"));
}

TEST_CASE("When no split fits the answer says so") {
  GlobalBatchOptions options;
  options.global_batch = 8;
  options.jobs = 2;
  GlobalBatchResult result =
      search_keep_global_batch(ScenarioSource::yaml(kTinyGpt2, "test.yaml", {"device.total_gib=0.001"}), options);
  CHECK_FALSE(result.best);
  CHECK(render_global_batch_json(result).find("\"micro_batch\": null") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::advisor
