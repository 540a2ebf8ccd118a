// Tests of the closed-form fit: its residuals are small on bundled presets, where activations
// set the peak, where the optimizer step does, and where several moments take turns (FSDP,
// fp32 AdamW); a vision model gets a + b·B only.
#include "advisor/closed_form_fit.h"

#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::load_scenario;

namespace {

const std::string kScenarios = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/";

TEST_CASE("The closed-form fit of GPT-2 small is within 1% of every simulation") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.has_sequence);
  CHECK(fit.samples.size() == 12);
  CHECK(fit.max_relative_residual < 0.01);
  CHECK(fit.formula().find("·B·S²") != std::string::npos);
}

TEST_CASE("The closed-form fit of BERT-base is within 1% of every simulation, where the optimizer step sets the peak too") {
  // At the smallest batch x sequence the optimizer step, not the activations, sets BERT's
  // peak: the fit follows it with the step's own law (peak = max of the two).
  Scenario scenario = load_scenario(kScenarios + "bert-base-amp-fp16-t4.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.has_step_law);
  bool step_sets_a_peak = false, activations_set_a_peak = false;
  for (const auto& sample : fit.samples) {
    INFO("B " << sample.batch << " S " << sample.seq_len);
    CHECK(std::abs(sample.residual()) < 0.01 * sample.peak_bytes);
    (sample.step_sets_peak ? step_sets_a_peak : activations_set_a_peak) = true;
  }
  CHECK(step_sets_a_peak);
  CHECK(activations_set_a_peak);
  CHECK(fit.formula().find("max(") != std::string::npos);
  CHECK(render_fit_text(fit).find("optimizer step") != std::string::npos);
}

TEST_CASE("The fitted peak is the largest of the laws of the moments that set a simulated peak") {
  Scenario scenario = load_scenario(kScenarios + "bert-base-amp-fp16-t4.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  REQUIRE(fit.moments.size() >= 2);
  for (const auto& sample : fit.samples) {
    double largest = 0;
    for (const FitMoment& moment : fit.moments) largest = std::max(largest, moment.law.at(sample.batch, sample.seq_len, fit.has_sequence));
    CHECK(sample.fitted_bytes == Approx(largest));
    CHECK_FALSE(sample.peak_phase.empty());
  }
}

TEST_CASE("The closed-form fit of FSDP Llama-2-7B is within 1% of every simulation") {
  // With full checkpointing the peak is a backward moment holding a unit's gathered
  // parameters at few tokens and the loss's logits at many; one law across both left 7.18%.
  Scenario scenario = load_scenario(kScenarios + "llama-2-7b-fsdp-full-shard-8xh100.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.moments.size() >= 2);
  CHECK(fit.max_relative_residual < 0.01);
}

TEST_CASE("The closed-form fit of fp32 Llama-2-7B with AdamW is within 1% of every simulation") {
  // The optimizer step sets the peak up to B·S = 3·1024; beyond it forward/backward moments
  // do, at slopes one law did not follow (2.78%).
  Scenario scenario = load_scenario(kScenarios + "llama-2-7b-fp32-adamw-oom.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.has_step_law);
  CHECK(fit.max_relative_residual < 0.01);
}

TEST_CASE("A cpu scenario keeps the two-law fit of forward/backward and the optimizer step") {
  // The cpu device has no caching allocator to read moments from.
  Scenario scenario = load_scenario(kScenarios + "gpt2-tiny-cpu.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.moments.empty());
  CHECK(fit.max_relative_residual < 0.01);
}

TEST_CASE("The reserved-memory fit keeps one law: reserved memory is not given back between phases") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakReserved, 2);
  CHECK_FALSE(fit.has_step_law);
  CHECK(fit.formula().find("max(") == std::string::npos);
}

TEST_CASE("The closed-form fit picks up the S² term of eager attention") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml", {"attention=eager"});
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK(fit.max_relative_residual < 0.02);
  CHECK(fit.d > 0);
  // At B = 8, S = 1024 the quadratic term is a visible part of the peak.
  CHECK(fit.d * 8 * 1024.0 * 1024.0 > 0.1 * fit.predict(8, 1024));
}

TEST_CASE("A vision model is fitted as a + b·B with small residuals") {
  Scenario scenario = load_scenario(kScenarios + "resnet-50-sgd-momentum.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  CHECK_FALSE(fit.has_sequence);
  CHECK(fit.max_relative_residual < 0.02);
  CHECK(fit.formula().find("·B·S") == std::string::npos);
  int64_t batch = fit.batch_for_budget(fit.predict(200, scenario.seq_len), scenario.seq_len);
  CHECK(batch >= 199);
  CHECK(batch <= 200);
}

}  // namespace
}  // namespace oomcast::advisor
