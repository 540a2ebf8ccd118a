// Tests of the closed-form fit: its residuals are small on bundled presets, where activations
// set the peak and where the optimizer step does, and a vision model gets a + b·B only.
#include "advisor/closed_form_fit.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"

namespace oomcast::planner {
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

TEST_CASE("The fitted peak is the larger of the forward/backward law and the optimizer-step law") {
  Scenario scenario = load_scenario(kScenarios + "bert-base-amp-fp16-t4.yaml");
  ClosedFormFit fit = fit_closed_form(scenario, FitMetric::PeakAllocated, 2);
  REQUIRE(fit.has_step_law);
  for (const auto& sample : fit.samples) {
    double activations = fit.activations().at(sample.batch, sample.seq_len, fit.has_sequence);
    double step = fit.step.at(sample.batch, sample.seq_len, fit.has_sequence);
    CHECK(sample.fitted_bytes == Approx(std::max(activations, step)));
  }
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
}  // namespace oomcast::planner
