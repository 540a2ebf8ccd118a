// Tests that the what-if doctor keeps the job's goal: a full fine-tune is offered changes that
// still train every parameter (bf16 without master copies, ZeRO-Offload, more GPUs) before
// adapters that train something else, and a generate job gets generation fixes, never
// training ones, with its KV cache's growth reported as the cache and not as a leak.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "advisor/html_report_plan.h"
#include "advisor/whatif.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

const std::string kGpt2Small = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/gpt2-small-b8-amp-bf16.yaml";

// llama-tiny generating 32 tokens after a 256-token prompt for 8 prompts, prefill logits of
// every position (older transformers), on a 64 MiB GPU.
const char* kTinyGeneration = R"(
model: llama-tiny
batch_size: 8
seq_len: 256
precision: fp32
job: {kind: generate, new_tokens: 32, cache: dynamic, prefill_logits: full}
device: {total_gib: 0.0625, context_mib: 0, cublas_workspaces: 0}
)";

Diagnosis doctor(const ScenarioSource& source) {
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  return diagnose(source, options);
}

const FixOutcome* find_fix(const Diagnosis& d, const std::string& id) {
  for (const auto& fix : d.fixes) {
    if (fix.id == id) return &fix;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("A full fine-tune that does not fit is offered bf16 without master copies and ZeRO-Offload, and "
          "LoRA is marked as training something else") {
  const Diagnosis d = doctor(ScenarioSource::file(kGpt2Small, {"device.total_gib=1.5"}));
  REQUIRE_FALSE(d.fits);
  const FixOutcome* pure_bf16 = find_fix(d, "pure_bf16");
  REQUIRE(pure_bf16 != nullptr);
  CHECK(pure_bf16->valid);
  CHECK_FALSE(pure_bf16->changes_goal);
  const FixOutcome* offload = find_fix(d, "cpu_offload");
  REQUIRE(offload != nullptr);
  CHECK_FALSE(offload->changes_goal);
  const FixOutcome* lora = find_fix(d, "lora");
  if (lora == nullptr) lora = find_fix(d, "qlora");
  REQUIRE(lora != nullptr);
  CHECK(lora->changes_goal);
}

TEST_CASE("The recommendation for a full fine-tune keeps training every parameter when such a change fits") {
  // On 11 GiB both bf16 without master copies and LoRA fit alone.
  const Diagnosis d = doctor(ScenarioSource::file(kGpt2Small, {"device.total_gib=11"}));
  INFO(render_whatif_text(d));
  REQUIRE(d.recommendation);
  INFO(d.recommendation->title);
  CHECK(d.recommendation->fits);
  CHECK_FALSE(d.recommendation->changes_goal);
  for (const std::string& id : d.recommendation->fix_ids) CHECK((id != "lora" && id != "qlora"));
}

TEST_CASE("A generate job is offered generation fixes and no training fix") {
  const Diagnosis d = doctor(ScenarioSource::yaml(kTinyGeneration, "generate.yaml"));
  CHECK(find_fix(d, "prefill_logits_last") != nullptr);
  CHECK(find_fix(d, "static_cache") != nullptr);
  CHECK(find_fix(d, "smaller_batch") != nullptr);
  for (const char* training : {"checkpointing", "checkpointing_auto", "micro_batch", "adamw8bit", "adafactor", "lora",
                               "qlora", "pure_bf16", "cpu_offload"}) {
    INFO(training);
    CHECK(find_fix(d, training) == nullptr);
  }
}

namespace {

// The same generation on an A100's throughput figures and 20 MiB of memory (it needs 28 MiB
// reserved): the step time is modelled, and fewer prompts per call is one of the fixes.
const char* kTinyGenerationOnA100 = R"(
model: llama-tiny
batch_size: 8
seq_len: 256
precision: fp32
job: {kind: generate, new_tokens: 32, cache: dynamic, prefill_logits: full}
device: {profile: a100-40gb, total_gib: 0.02, context_mib: 0, cublas_workspaces: 0}
)";

// One generate() call of `source` with `overrides`, as the step-time model prices it.
double one_call_seconds(const ScenarioSource& source, const std::vector<std::string>& overrides, int64_t* batch) {
  const scenario::Scenario changed = source.load(overrides);
  *batch = changed.batch_size;
  return predict(changed).step_time.step_seconds;
}

}  // namespace

TEST_CASE("Fewer prompts per generate() call is priced as every call the scenario's prompts then take") {
  const ScenarioSource source = ScenarioSource::yaml(kTinyGenerationOnA100, "generate.yaml");
  const Diagnosis d = doctor(source);
  REQUIRE(d.step_is_generation);
  REQUIRE(d.step_seconds > 0.0);
  CHECK(d.prompts == 8);
  const FixOutcome* smaller = find_fix(d, "smaller_batch");
  REQUIRE(smaller != nullptr);
  REQUIRE(smaller->valid);
  int64_t batch = 0;
  const double call = one_call_seconds(source, smaller->overrides, &batch);
  REQUIRE(batch < 8);
  INFO("batch " << batch << ", one call " << call << " s, the fix's step " << smaller->step_seconds_after << " s");
  CHECK(smaller->step_seconds_after == Approx(call * static_cast<double>(8 / batch)).epsilon(1e-9));
  // Decode at these batches reads every weight once per token whatever the batch: the split
  // job takes longer than the one call it replaces, and the table says so.
  CHECK(smaller->step_seconds_after > d.step_seconds);
}

TEST_CASE("A generate job's recommendation is priced for all of the scenario's prompts, also when it combines "
          "fewer prompts per call with another fix") {
  // On 20 MiB a fix of its own fits; on 3 MiB only one prompt per call with a static cache does.
  for (const char* total_gib : {"device.total_gib=0.02", "device.total_gib=0.003"}) {
    const ScenarioSource source = ScenarioSource::yaml(kTinyGenerationOnA100, "generate.yaml", {total_gib});
    const Diagnosis d = doctor(source);
    REQUIRE_FALSE(d.fits);
    REQUIRE(d.recommendation);
    int64_t batch = 0;
    const double call = one_call_seconds(source, d.recommendation->overrides, &batch);
    INFO(total_gib << ": " << d.recommendation->title);
    CHECK(d.recommendation->step_seconds_after ==
          Approx(call * static_cast<double>((8 + batch - 1) / batch)).epsilon(1e-9));
  }
}

TEST_CASE("The what-if text says that a generate job's step time is all of its prompts") {
  const Diagnosis d = doctor(ScenarioSource::yaml(kTinyGenerationOnA100, "generate.yaml"));
  CHECK_THAT(render_whatif_text(d), Catch::Contains("to generate for all 8 prompts in one generate() call") &&
                                        Catch::Contains("each fix's step is all 8 prompts"));
  CHECK_THAT(render_whatif_json(d), Catch::Contains("\"prompts\": 8"));
}

TEST_CASE("A generation's growing KV cache is reported as the cache, never as a leak") {
  const Diagnosis d = doctor(ScenarioSource::yaml(kTinyGeneration, "generate.yaml"));
  CHECK_FALSE(d.leak);
  const bool leak_reported = std::any_of(d.patterns.begin(), d.patterns.end(),
                                         [](const OomPattern& p) { return p.id == "growth_across_iterations"; });
  CHECK_FALSE(leak_reported);
  const bool cache_reported =
      std::any_of(d.patterns.begin(), d.patterns.end(), [](const OomPattern& p) { return p.id == "kv_cache_growth"; });
  CHECK(cache_reported);
}

TEST_CASE("The what-if HTML page carries the recommendation the text ends with") {
  const ScenarioSource source = ScenarioSource::file(kGpt2Small, {"device.total_gib=11"});
  const Diagnosis d = doctor(source);
  REQUIRE(d.recommendation);
  const scenario::Scenario scenario = source.load();
  const planner::PlannedTrace planned = planner::plan_steps(scenario);
  const HtmlReport page = whatif_html_report(scenario, planned, predict_planned(scenario, planned), d);
  const bool carried = std::any_of(page.facts.begin(), page.facts.end(), [&](const auto& fact) {
    return fact.first == "recommended change" && fact.second.find(d.recommendation->title) != std::string::npos;
  });
  CHECK(carried);
}

}  // namespace oomcast::advisor
