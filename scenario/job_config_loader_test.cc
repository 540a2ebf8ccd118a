// Tests of the job, training, weights and loading sections of a scenario.
#include "scenario/job_config_loader.h"

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kBase = "model: gpt2-tiny\nbatch_size: 2\nseq_len: 32\n";

Scenario load(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return load_scenario_text(kBase + extra, "s.yaml", overrides);
}

std::string load_error(const std::string& extra) {
  return error_of([&] { load(extra); });
}

TEST_CASE("job: inference runs as many batches as iterations and holds the loss by default", "[scenario][jobs]") {
  Scenario s = load("iterations: 4\njob: inference\n");
  CHECK(s.job.job.kind == JobKind::Inference);
  CHECK(s.job.job.batches == 4);
  CHECK(s.job.job.eval_mode);
  CHECK(s.job.job.held_outputs == std::vector<std::string>{"loss"});
}

TEST_CASE("a job override reaches inside the shorthand", "[scenario][jobs]") {
  Scenario s = load("job: inference\n", {"job.outputs=logits", "job.batches=2"});
  CHECK_FALSE(s.job.job.compute_loss);
  CHECK(s.job.job.batches == 2);
  CHECK(s.job.job.held_outputs == std::vector<std::string>{"logits"});
}

TEST_CASE("holding a loss that the job does not compute is an error at the key", "[scenario][jobs]") {
  CHECK_THAT(load_error("job: {kind: inference, outputs: logits, held_outputs: [loss]}\n"),
             Catch::Contains("s.yaml:4") && Catch::Contains("job.held_outputs"));
}

TEST_CASE("lora written directly under training says it goes under training.trainable", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {lora: {r: 16, target_modules: [c_attn]}}\n"),
             Catch::Contains("s.yaml:4") && Catch::Contains("training.lora") && Catch::Contains("training.trainable"));
}

TEST_CASE("LoRA needs target_modules and reads PEFT's names", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {trainable: {lora: {r: 8}}}\n"), Catch::Contains("target_modules"));
  Scenario s = load("training: {trainable: {lora: {r: 16, lora_alpha: 32, lora_dropout: 0.05, target_modules: [c_attn]}}}\n");
  CHECK(s.job.training.lora.enabled);
  CHECK(s.job.training.lora.r == 16);
  CHECK(s.job.training.lora.alpha == 32.0);
  CHECK(s.job.training.lora.dropout == 0.05);
  CHECK(s.job.training.kind == TrainableKind::None);
}

TEST_CASE("training nothing in a training job is an error that names the forward-only jobs", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {trainable: none}\n"), Catch::Contains("job: inference"));
}

TEST_CASE("quantized weights on the cpu device are an error", "[scenario][jobs]") {
  CHECK_THAT(load_error("device: cpu\nweights: nf4\n"), Catch::Contains("bitsandbytes"));
}

TEST_CASE("master_weights false applies only to pure_bf16", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {master_weights: false}\n"), Catch::Contains("pure_bf16"));
  CHECK_FALSE(load("precision: pure_bf16\ntraining: {master_weights: false}\n").job.training.master_weights);
}

TEST_CASE("an unknown key in the job section gets a did-you-mean", "[scenario][jobs]") {
  CHECK_THAT(load_error("job: {kind: inference, bacthes: 3}\n"), Catch::Contains("batches"));
}

}  // namespace
}  // namespace oomcast::scenario
