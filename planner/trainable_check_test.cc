// A training job that would train nothing is refused, with the name the user meant.
#include "planner/trainable_check.h"

#include <catch2/catch.hpp>

#include "planner/planner_test_support.h"

namespace oomcast::planner {

using scenario::Scenario;
using scenario::TrainableKind;

namespace {

Scenario lora_job(std::vector<std::string> targets) {
  Scenario s = scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  s.job.training.kind = TrainableKind::None;
  s.job.training.lora.enabled = true;
  s.job.training.lora.r = 4;
  s.job.training.lora.target_modules = std::move(targets);
  return s;
}

TEST_CASE("LoRA target_modules that match no module are refused with PEFT's keyword as the suggestion",
          "[planner][jobs][lora]") {
  const std::string error = scenario::testing::error_of([] { plan_steps(lora_job({"all_linear"})); });
  CHECK_THAT(error, Catch::Contains("target_modules [all_linear] adapt no module"));
  CHECK_THAT(error, Catch::Contains("did you mean 'all-linear'"));
}

TEST_CASE("a misspelt LoRA target is refused naming the module it was meant to be", "[planner][jobs][lora]") {
  const std::string error = scenario::testing::error_of([] { plan_steps(lora_job({"q_prj", "v_prj"})); });
  CHECK_THAT(error, Catch::Contains("did you mean 'q_proj'"));
  CHECK_THAT(error, Catch::Contains("did you mean 'v_proj'"));
}

TEST_CASE("LoRA targets of which one matches plan as PEFT does", "[planner][jobs][lora]") {
  CHECK(scenario::testing::error_of([] { plan_steps(lora_job({"q_proj", "nothing_here"})); }) == "no error");
}

TEST_CASE("trainable patterns that leave every parameter frozen are refused", "[planner][jobs]") {
  Scenario s = scenario::testing::cpu_scenario("gpt2-tiny", 2, 32);
  s.job.training.kind = TrainableKind::Patterns;
  s.job.training.patterns = {"nothing"};
  CHECK_THAT(scenario::testing::error_of([&] { plan_steps(s); }), Catch::Contains("no parameter trains"));
  Scenario frozen = scenario::testing::cpu_scenario("gpt2-tiny", 2, 32);
  frozen.job.training.freeze = {"*"};
  CHECK_THAT(scenario::testing::error_of([&] { plan_steps(frozen); }), Catch::Contains("no parameter trains"));
}

}  // namespace
}  // namespace oomcast::planner
