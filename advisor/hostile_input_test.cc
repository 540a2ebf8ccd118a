// [hostile] tests of the advisors: work limits, grids that overflow, axes the scenario does
// not know, sweeps that fail everywhere and searches over a value the scenario pins.
#include <catch2/catch.hpp>

#include <string>

#include "advisor/search.h"
#include "advisor/sweep.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::advisor {

using planner::plan_steps;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::load_scenario_text;

namespace {

using scenario::testing::error_of;

const char* kTiny = "model: gpt2-tiny\nbatch_size: 1\nseq_len: 64\niterations: 2\ndevice: a100-80gb\n";

TEST_CASE("A schedule beyond the work limit is refused naming the key that multiplies it", "[hostile]") {
  Scenario scenario = load_scenario_text(kTiny, "tiny.yaml", {"grad_accum_steps=1000000"});
  std::string error = error_of([&] { plan_steps(scenario); });
  CHECK(error.find("'grad_accum_steps'") != std::string::npos);
  CHECK(error.find("over the limit of 20000000") != std::string::npos);
}

TEST_CASE("A grid beyond the combination limit is refused with its size", "[hostile]") {
  std::vector<GridAxis> big(2);
  big[0].key = "batch_size";
  big[1].key = "seq_len";
  big[0].values.assign(100'001, "1");
  big[1].values.assign(100'001, "1");
  CHECK(combination_count(big) == size_t{100'001} * 100'001);
  std::string error = error_of([&] { run_sweep(ScenarioSource::yaml(kTiny, "tiny.yaml"), big, SweepOptions{}); });
  CHECK(error.find("combinations (100001 x 100001), over the limit of 100000") != std::string::npos);
}

TEST_CASE("Counting combinations saturates instead of wrapping", "[hostile]") {
  // Many small axes: 2^70 combinations would wrap to a small number.
  std::vector<GridAxis> axes(70);
  for (auto& axis : axes) axis.values = {"a", "b"};
  CHECK(combination_count(axes) == SIZE_MAX);
}

TEST_CASE("A sweep axis the scenario does not know is refused before the sweep", "[hostile]") {
  std::string error = error_of([] {
    run_sweep(ScenarioSource::yaml(kTiny, "tiny.yaml"), parse_grid("batch_szie=1,2"), SweepOptions{});
  });
  CHECK(error.find("axis 'batch_szie'") != std::string::npos);
  CHECK(error.find("did you mean 'batch_size'") != std::string::npos);
}

TEST_CASE("A sweep where every combination is rejected is an error", "[hostile]") {
  std::string error = error_of([] {
    run_sweep(ScenarioSource::yaml(kTiny, "tiny.yaml"), parse_grid("seq_len=200,300"), SweepOptions{});
  });
  CHECK(error.find("every combination was rejected") != std::string::npos);
  CHECK(error.find("max_positions") != std::string::npos);
}

TEST_CASE("Search refuses a parameter the scenario pins instead of answering nothing fits", "[hostile]") {
  SearchOptions options;
  options.param = SearchParam::SeqLen;
  std::string error = error_of([&] {
    search_max_fitting(ScenarioSource::yaml("model: vit-b-16\nbatch_size: 1\n", "vit.yaml"), options);
  });
  CHECK(error.find("--param image_size: the scenario does not let 'image_size' vary") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::advisor
