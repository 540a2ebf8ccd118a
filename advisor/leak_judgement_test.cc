// Tests of the leak judgement: growth is judged over iterations 1, 3, 5, 7 (so the two-iteration
// cycle of held outputs is no leak and a short run is not judged), and a fix that lets the job
// keep growing is never called "fits".
#include "advisor/leak_judgement.h"

#include <algorithm>

#include <catch2/catch.hpp>

namespace oomcast::planner {
namespace {

const std::string kLeak = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/gpt2-eval-leak-without-no-grad.yaml";

// A prediction whose iteration i peaks at peaks[i] (one phase row per iteration).
Prediction with_iteration_peaks(const std::vector<uint64_t>& peaks) {
  Prediction p;
  p.phases.push_back(PhaseRow{"setup", 0, 0, 0, 1000, 1000});
  for (size_t i = 0; i < peaks.size(); ++i) {
    auto iteration = static_cast<int32_t>(i);
    p.phases.push_back(PhaseRow{"iter" + std::to_string(i) + "/forward", iteration, 0, 0, peaks[i] / 2, peaks[i]});
    p.phases.push_back(PhaseRow{"iter" + std::to_string(i) + "/backward", iteration, 0, 0, peaks[i], peaks[i]});
  }
  return p;
}

const FixOutcome* find_fix(const Diagnosis& d, const std::string& id) {
  for (const auto& fix : d.fixes) {
    if (fix.id == id) return &fix;
  }
  return nullptr;
}

Diagnosis doctor(std::vector<std::string> overrides = {}) {
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  return diagnose(ScenarioSource::file(kLeak, std::move(overrides)), options);
}

TEST_CASE("Peaks that rise from each odd iteration to the next over 8 iterations are growth") {
  GrowthJudgement growth = judge_growth(with_iteration_peaks({900, 1000, 1600, 2000, 2600, 3000, 3600, 4000}));
  CHECK(growth.judged);
  CHECK(growth.grows);
  CHECK(growth.first_iteration == 1);
  CHECK(growth.last_iteration == 7);
  CHECK(growth.bytes_per_iteration == Approx(3000.0 / 6.0));
}

TEST_CASE("Peaks that alternate between two values every iteration are no leak") {
  // The outputs the loop holds until the next forward swap between two blocks.
  GrowthJudgement growth = judge_growth(with_iteration_peaks({900, 1000, 5000, 1000, 5000, 1000, 5000, 1000}));
  CHECK(growth.judged);
  CHECK_FALSE(growth.grows);
}

TEST_CASE("Growth that stops after a few iterations is no leak") {
  GrowthJudgement growth = judge_growth(with_iteration_peaks({900, 1000, 2000, 3000, 4000, 4000, 4000, 4000}));
  CHECK_FALSE(growth.grows);
}

TEST_CASE("Fewer than 8 iterations are not enough to judge a leak") {
  GrowthJudgement growth = judge_growth(with_iteration_peaks({900, 1000, 2000, 3000}));
  CHECK_FALSE(growth.judged);
  CHECK_FALSE(growth.grows);
  CHECK(may_grow(with_iteration_peaks({900, 1000, 2000, 3000})));
  CHECK_FALSE(may_grow(with_iteration_peaks({900, 1000, 1200, 1300})));  // iteration 3 within a block of 1
}

TEST_CASE("A fix that fits while the leak keeps growing is not called fits") {
  Diagnosis d = doctor();
  REQUIRE(std::any_of(d.patterns.begin(), d.patterns.end(),
                      [](const OomPattern& p) { return p.id == "growth_across_iterations"; }));
  // A smaller micro-batch lowers the peak of 4 iterations below the device, but every
  // evaluation still keeps its graph alive.
  const FixOutcome* micro = find_fix(d, "micro_batch");
  REQUIRE(micro);
  CHECK_FALSE(micro->fits_after);
  CHECK(micro->cost.find("does not stop the leak") != std::string::npos);
  for (const auto& fix : d.fixes) {
    INFO(fix.id);
    CHECK_FALSE(fix.fits_after);  // every fix alone leaves a growing job (the kept losses, or the eval graphs)
  }
}

TEST_CASE("A fix that leaves a small leak is not called fits and says how long the job has") {
  // With the training losses freed, evaluation under grad mode keeps its graphs and, summed
  // without .item(), its 4 losses a iteration (one 512-byte block each). no_grad ends the graphs'
  // growth, not the losses'.
  Diagnosis d = doctor({"training_loop.keep_losses_across_iterations=false"});
  const FixOutcome* no_grad = find_fix(d, "eval_no_grad");
  REQUIRE(no_grad);
  CHECK(no_grad->peak_reserved_after < d.usable_bytes);
  CHECK_FALSE(no_grad->fits_after);
  CHECK(no_grad->cost.find("grows by 2.00 KiB per iteration") != std::string::npos);
  CHECK(no_grad->cost.find("more iterations") != std::string::npos);
}

TEST_CASE("Fixes of a job that does not leak are judged as simulated") {
  Diagnosis d = doctor({"training_loop.keep_losses_across_iterations=false", "eval.accumulate_loss_without_item=false"});
  CHECK(std::none_of(d.patterns.begin(), d.patterns.end(),
                     [](const OomPattern& p) { return p.id == "growth_across_iterations"; }));
  const FixOutcome* no_grad = find_fix(d, "eval_no_grad");
  REQUIRE(no_grad);
  CHECK(no_grad->fits_after);
  CHECK(no_grad->cost.find("leak") == std::string::npos);
}

}  // namespace
}  // namespace oomcast::planner
