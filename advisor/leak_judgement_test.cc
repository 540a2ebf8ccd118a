// Tests of the leak judgement: growth is judged over iterations 1, 3, 5, 7 (so the two-iteration
// cycle of held outputs is no leak and a short run is not judged), and a fix that lets the job
// keep growing is never called "fits", nor is the scenario itself or a recommended combination.
#include "advisor/leak_judgement.h"

#include <algorithm>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "advisor/whatif.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

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

TEST_CASE("A scenario that fits its simulated iterations but grows every iteration is not called fits") {
  // On an H200 the leak scenario's 4 iterations fit; over 8 the peak keeps rising.
  Diagnosis d = doctor({"device=h200"});
  CHECK(d.fits_simulated_iterations);
  CHECK_FALSE(d.fits);
  REQUIRE(d.leak);
  CHECK(d.leak->growth.bytes_per_iteration > 0);
  CHECK_FALSE(d.leak->out_of_memory_simulated);
  CHECK(d.leak->oom_iteration > d.leak->simulated_iterations);
  const std::string text = render_whatif_text(d);
  CHECK(text.find("verdict   grows: fits the iterations simulated") != std::string::npos);
  CHECK(text.find("out of memory at about iteration " + std::to_string(d.leak->oom_iteration)) != std::string::npos);
  nlohmann::json json = nlohmann::json::parse(render_whatif_json(d));
  CHECK(json["fits"] == false);
  CHECK(json["fits_simulated_iterations"] == true);
  CHECK(json["growth"]["oom_iteration"] == d.leak->oom_iteration);
  CHECK(json["growth"]["bytes_per_iteration"].get<double>() == Approx(d.leak->growth.bytes_per_iteration));
}

TEST_CASE("The out-of-memory iteration of a growing job is extrapolated from the room left at its growth") {
  Prediction p = with_iteration_peaks({900, 1000, 1600, 2000, 2600, 3000, 3600, 4000});
  p.fits = true;
  p.usable_bytes = 10000;
  p.peak_reserved_bytes = 4000;
  std::optional<LeakOutlook> outlook = leak_outlook(p);
  REQUIRE(outlook);
  // 500 bytes per iteration from iteration 1 to 7; 6000 bytes of room: 12 more after the 8.
  CHECK(outlook->simulated_iterations == 8);
  CHECK(outlook->oom_iteration == 20);
  CHECK_FALSE(leak_outlook(with_iteration_peaks({900, 1000, 5000, 1000, 5000, 1000, 5000, 1000})));
}

TEST_CASE("Every fix row that fits the iterations simulated but grows carries its growth") {
  Diagnosis d = doctor({"device=h200"});
  nlohmann::json json = nlohmann::json::parse(render_whatif_json(d));
  size_t growing = 0;
  for (const auto& row : json["fixes"]) {
    INFO(row["id"]);
    if (!row["growth"].is_null()) {
      ++growing;
      CHECK(row["fits"] == false);
      CHECK(row["growth"]["bytes_per_iteration"].get<double>() > 0);
    }
  }
  CHECK(growing > 0);
  CHECK(render_whatif_text(d).find("grows\n") != std::string::npos);  // the table's fits column
}

TEST_CASE("A recommended combination stops the growth; the combination that fit before it came in grows") {
  // Before combinations were judged over the leak window, LoRA + flash attention was
  // recommended here: it fits 4 iterations, and keeps every evaluation graph alive.
  const ScenarioSource source = ScenarioSource::file(kLeak);
  const std::vector<std::string> lora_flash = {
      "training.trainable={lora: {r: 16, alpha: 32, dropout: 0.05, target_modules: [c_attn]}}", "attention=flash"};
  CHECK(predict(source.load(lora_flash)).fits);
  CHECK(judge_leak(source, lora_flash));
  Diagnosis d = doctor();
  REQUIRE(d.recommendation);
  CHECK(d.recommendation->fits);
  CHECK_FALSE(judge_leak(source, d.recommendation->overrides));
  const std::vector<std::string>& ids = d.recommendation->fix_ids;
  CHECK(std::find(ids.begin(), ids.end(), "loss_item") != ids.end());  // the kept training losses grow in any case
  CHECK(render_whatif_text(d).find("recommended (fits and stops the growth") != std::string::npos);
}

TEST_CASE("A scenario that does not grow keeps its simulated verdict and no growth") {
  Diagnosis d = doctor({"training_loop.keep_losses_across_iterations=false", "eval.accumulate_loss_without_item=false",
                        "eval.no_grad=true"});
  CHECK(d.fits_simulated_iterations);
  CHECK(d.fits);
  CHECK_FALSE(d.leak);
  CHECK(nlohmann::json::parse(render_whatif_json(d))["growth"].is_null());
  CHECK(render_whatif_text(d).find("verdict   fits:") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::advisor
