// Tests of the what-if doctor: each OOM pattern is recognised on a scenario made to show it
// and not on a healthy one; fixes are simulated, ranked by saving, and the allocator
// setting is recommended when it alone makes the step fit.
#include "advisor/whatif.h"

#include <algorithm>

#include <catch2/catch.hpp>

#include "scenario/scenario_source.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

const std::string kScenarios = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/";
const std::string kGpt2Small = kScenarios + "gpt2-small-b8-amp-bf16.yaml";

Diagnosis doctor(const std::string& path, std::vector<std::string> overrides = {}) {
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  return diagnose(ScenarioSource::file(path, std::move(overrides)), options);
}

bool has_pattern(const Diagnosis& d, const std::string& id) {
  return std::any_of(d.patterns.begin(), d.patterns.end(), [&](const OomPattern& p) { return p.id == id; });
}

const FixOutcome* find_fix(const Diagnosis& d, const std::string& id) {
  for (const auto& fix : d.fixes) {
    if (fix.id == id) return &fix;
  }
  return nullptr;
}

TEST_CASE("A healthy scenario with room to spare shows no OOM pattern") {
  Diagnosis d = doctor(kGpt2Small);
  CHECK(d.fits);
  CHECK(d.patterns.empty());
}

TEST_CASE("Model states larger than the device are recognised") {
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=1.5"});
  CHECK_FALSE(d.fits);
  CHECK(has_pattern(d, "model_states_exceed_device"));
  CHECK_FALSE(has_pattern(doctor(kGpt2Small), "model_states_exceed_device"));
}

TEST_CASE("Activation memory linear in the batch is recognised under pressure") {
  Diagnosis d = doctor(kGpt2Small, {"batch_size=32", "device=a100-40gb"});
  CHECK(has_pattern(d, "activations_linear_in_batch"));
  CHECK_FALSE(has_pattern(d, "quadratic_attention"));  // flash attention: no S x S scores
}

TEST_CASE("Quadratic attention at long sequences is recognised with math attention, not with flash") {
  std::vector<std::string> tight = {"precision=fp32", "attention=sdpa_math", "device.total_gib=4"};
  CHECK(has_pattern(doctor(kGpt2Small, tight), "quadratic_attention"));
  CHECK_FALSE(has_pattern(doctor(kGpt2Small, {"device.total_gib=4"}), "quadratic_attention"));
}

TEST_CASE("Quadratic attention is not claimed where the optimizer step sets the peak at short sequences") {
  // BERT-base at batch 8 with memory-efficient attention: at S/4 the optimizer step sets the
  // peak, at S the (linear) activations do. The overall peak bends between them; the
  // forward/backward peak alone does not.
  const std::string bert = kScenarios + "bert-base-amp-fp16-t4.yaml";
  Diagnosis linear = doctor(bert, {"batch_size=8", "device.total_gib=3"});
  CHECK_FALSE(has_pattern(linear, "quadratic_attention"));
  Diagnosis eager = doctor(bert, {"batch_size=8", "device.total_gib=3", "attention=eager"});
  CHECK(has_pattern(eager, "quadratic_attention"));
}

TEST_CASE("Evaluation without no_grad and growth across iterations are recognised in the leak scenario") {
  Diagnosis d = doctor(kScenarios + "gpt2-eval-leak-without-no-grad.yaml");
  CHECK(has_pattern(d, "eval_without_no_grad"));
  CHECK(has_pattern(d, "growth_across_iterations"));
  const FixOutcome* no_grad = find_fix(d, "eval_no_grad");
  REQUIRE(no_grad);
  CHECK(no_grad->saving_bytes() > 0);
  Diagnosis fixed = doctor(kScenarios + "gpt2-eval-leak-without-no-grad.yaml",
                           {"eval.no_grad=true", "eval.accumulate_loss_without_item=false",
                            "training_loop.keep_losses_across_iterations=false"});
  CHECK_FALSE(has_pattern(fixed, "eval_without_no_grad"));
  CHECK_FALSE(has_pattern(fixed, "growth_across_iterations"));
}

TEST_CASE("Optimizer state created at the first step is recognised when the first step OOMs") {
  Diagnosis d = doctor(kScenarios + "llama-2-7b-fp32-adamw-oom.yaml");
  CHECK(has_pattern(d, "optimizer_state_at_first_step"));
  CHECK(has_pattern(d, "model_states_exceed_device"));
  const FixOutcome* adam8 = find_fix(d, "adamw8bit");
  REQUIRE(adam8);
  CHECK(adam8->fits_after);
  CHECK(d.fixes.front().saving_bytes() >= d.fixes.back().saving_bytes());
}

TEST_CASE("Fragmentation is recognised when reserved memory is far above allocated") {
  const char* mlp = R"(
model: {preset: mlp, input: 52429, hidden: 16, layers: 1, output: 10}
batch_size: 45
precision: fp32
optimizer: sgd
iterations: 2
device: {total_gib: 0.0341796875, context_mib: 0, cublas_workspaces: 0}
)";
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  Diagnosis d = diagnose(ScenarioSource::yaml(mlp, "mlp.yaml"), options);
  CHECK_FALSE(d.fits);
  CHECK(has_pattern(d, "fragmentation"));
  Diagnosis roomy = diagnose(ScenarioSource::yaml(mlp, "mlp.yaml", {"device.total_gib=1"}), options);
  CHECK_FALSE(has_pattern(roomy, "fragmentation"));
}

TEST_CASE("Fixes are ranked by simulated saving and carry before and after peaks") {
  Diagnosis d = doctor(kGpt2Small, {"precision=fp32", "attention=sdpa_math", "device.total_gib=4"});
  REQUIRE(d.fixes.size() >= 5);
  for (size_t i = 1; i < d.fixes.size(); ++i) {
    if (d.fixes[i].valid) CHECK(d.fixes[i - 1].saving_bytes() >= d.fixes[i].saving_bytes());
  }
  for (const auto& fix : d.fixes) {
    if (!fix.valid) continue;
    CHECK(fix.peak_reserved_before == d.peak_reserved_bytes);
    CHECK(fix.peak_reserved_after > 0);
  }
  const FixOutcome* micro = find_fix(d, "micro_batch");
  REQUIRE(micro);
  CHECK(micro->overrides.size() == 2);  // batch_size and grad_accum_steps together
}

TEST_CASE("The allocator setting is recommended when it alone makes the step fit") {
  // GPT-2 small at batch 8 needs 9.6 GiB of tensors but reserves 11.8 GiB with the default
  // allocator; a 10.8 GiB card with a 512 MiB context (10.3 GiB usable) fits it only with
  // expandable segments.
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=10.8", "device.context_mib=512"});
  CHECK_FALSE(d.fits);
  REQUIRE(d.recommended_alloc_conf);
  CHECK(*d.recommended_alloc_conf == "expandable_segments:True");
  CHECK(render_whatif_text(d).find("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") != std::string::npos);
  CHECK(render_whatif_json(d).find("\"recommended_alloc_conf\": \"expandable_segments:True\"") != std::string::npos);
  CHECK_FALSE(doctor(kGpt2Small).recommended_alloc_conf);  // fits already: nothing to recommend
}

}  // namespace
}  // namespace oomcast::advisor
