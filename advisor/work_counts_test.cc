// Regression guards on how much simulation each answer costs, counted (sim::WorkCounters),
// never timed: an accidental second plan or replay of the same point fails here, where a
// timing would only drift in bench/.
#include <catch2/catch.hpp>

#include "advisor/auto_checkpointing.h"
#include "advisor/closed_form_fit.h"
#include "advisor/planned_points.h"
#include "advisor/predict.h"
#include "advisor/sweep.h"
#include "advisor/whatif.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"
#include "sim/work_counters.h"

namespace oomcast::advisor {

using planner::plan_steps;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::load_scenario;

namespace {

const std::string kScenarios = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/";

TEST_CASE("predicting a short job plans it once and replays each of its events once") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  const size_t events = plan_steps(scenario).trace.events.size();
  const sim::WorkCounters before = sim::work_counters();
  predict(scenario);
  const sim::WorkCounters work = sim::work_counters().since(before);
  CHECK(work.plans_built == 1);
  CHECK(work.replays == 1);
  CHECK(work.events_replayed == events);
}

TEST_CASE("the closed-form fit plans and replays each of its points once for either metric") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  for (FitMetric metric : {FitMetric::PeakAllocated, FitMetric::PeakReserved}) {
    const sim::WorkCounters before = sim::work_counters();
    ClosedFormFit fit = fit_closed_form(scenario, metric, 2);
    const sim::WorkCounters work = sim::work_counters().since(before);
    INFO("metric " << fit.metric);
    CHECK(work.plans_built == fit.samples.size());
    CHECK(work.replays == fit.samples.size());
  }
}

TEST_CASE("what-if's closed-form fit replays each fit point once and plans only the points the doctor has not planned") {
  // gpt2-small at B=8, S=1024: the fit's grid (B/4..2B by S/4..S) holds the scenario itself and
  // the pattern variants 2B, S/2 and S/4, planned already by the doctor.
  const ScenarioSource source = ScenarioSource::file(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  sim::WorkCounters before = sim::work_counters();
  diagnose(source, options);
  const sim::WorkCounters without_fit = sim::work_counters().since(before);
  options.with_fit = true;
  before = sim::work_counters();
  Diagnosis diagnosis = diagnose(source, options);
  const sim::WorkCounters with_fit = sim::work_counters().since(before);
  REQUIRE(diagnosis.fit);
  constexpr uint64_t kPlannedByTheDoctor = 4;  // (B, S), (2B, S), (B, S/2), (B, S/4)
  CHECK(with_fit.plans_built - without_fit.plans_built == diagnosis.fit->samples.size() - kPlannedByTheDoctor);
  CHECK(with_fit.replays - without_fit.replays == diagnosis.fit->samples.size());
}

TEST_CASE("a point planned for the scenario's device is kept once and found again by its batch and length") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  REQUIRE(PlannedPoints::shareable(scenario));
  PlannedPoints points;
  const sim::WorkCounters before = sim::work_counters();
  const Prediction first = predict_sharing(scenario, &points);
  const Prediction again = predict_sharing(scenario, &points);
  const sim::WorkCounters work = sim::work_counters().since(before);
  CHECK(work.plans_built == 1);
  CHECK(work.replays == 2);
  CHECK(first.peak_reserved_bytes == again.peak_reserved_bytes);
  CHECK(points.find(scenario.batch_size, scenario.seq_len) != nullptr);
  CHECK(points.find(scenario.batch_size * 2, scenario.seq_len) == nullptr);
}

TEST_CASE("a scenario whose checkpointing is still to be chosen for its device shares no planned points") {
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml", {"checkpointing=auto"});
  CHECK_FALSE(PlannedPoints::shareable(scenario));
  PlannedPoints points;
  predict_sharing(scenario, &points);
  CHECK(points.size() == 0);
}

TEST_CASE("a sweep plans the combinations that differ only in allocator settings once and replays each") {
  const ScenarioSource source = ScenarioSource::file(kScenarios + "gpt2-small-b8-amp-bf16.yaml");
  SweepOptions options;
  options.jobs = 2;
  const sim::WorkCounters before = sim::work_counters();
  SweepResult result = run_sweep(source, parse_grid("batch_size=1,2 allocator.expandable_segments=false,true"), options);
  const sim::WorkCounters work = sim::work_counters().since(before);
  REQUIRE(result.rows.size() == 4);
  CHECK(work.plans_built == 2);
  CHECK(work.replays == 4);
}

TEST_CASE("predicting a checkpointing: auto job plans nothing beyond what choosing the checkpoints simulated") {
  // gpt2-small squeezed onto 6 GiB, so that the choice checkpoints some blocks.
  Scenario scenario = load_scenario(kScenarios + "gpt2-small-b8-amp-bf16.yaml", {"checkpointing=auto", "device.total_gib=6"});
  sim::WorkCounters before = sim::work_counters();
  const Scenario resolved = resolve_auto_checkpointing(scenario);
  const sim::WorkCounters choosing = sim::work_counters().since(before);
  before = sim::work_counters();
  const Prediction prediction = predict(scenario);
  const sim::WorkCounters predicting = sim::work_counters().since(before);
  REQUIRE(choosing.plans_built >= 1);
  CHECK(predicting.plans_built == choosing.plans_built);
  CHECK(predicting.replays == choosing.replays);
  // And the answer is the resolved scenario's own prediction.
  const Prediction of_resolved = predict(resolved);
  CHECK(prediction.peak_reserved_bytes == of_resolved.peak_reserved_bytes);
  CHECK(prediction.peak_allocated_bytes == of_resolved.peak_allocated_bytes);
  CHECK(prediction.fits == of_resolved.fits);
}

}  // namespace
}  // namespace oomcast::advisor
