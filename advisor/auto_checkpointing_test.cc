// Tests of checkpointing: auto end to end: the choice fits the device with the margin and
// recomputes less than checkpointing every block.
#include <catch2/catch.hpp>

#include "advisor/auto_checkpointing.h"
#include "advisor/predict.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

const std::string kGpt2Small = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/gpt2-small-b8-amp-bf16.yaml";

Prediction plan_with(std::vector<std::string> overrides) {
  return predict(ScenarioSource::file(kGpt2Small, std::move(overrides)).load());
}

TEST_CASE("Auto checkpointing fits where none does not, recomputing less than full checkpointing") {
  Prediction none = plan_with({"device.total_gib=11"});
  Prediction full = plan_with({"device.total_gib=11", "checkpointing=full"});
  Prediction automatic = plan_with({"device.total_gib=11", "checkpointing=auto"});
  REQUIRE_FALSE(none.fits);
  REQUIRE(full.fits);
  CHECK(automatic.fits);
  CHECK(automatic.step_time.recompute_seconds > 0.0);
  CHECK(automatic.step_time.recompute_seconds < full.step_time.recompute_seconds);
  const double target = static_cast<double>(automatic.usable_bytes) * (1.0 - automatic.scenario.checkpointing.margin_fraction);
  CHECK(static_cast<double>(automatic.peak_reserved_bytes) <= target);
}

TEST_CASE("Auto checkpointing checkpoints nothing when the step already fits") {
  Prediction automatic = plan_with({"checkpointing=auto"});
  CHECK(automatic.fits);
  CHECK(automatic.step_time.recompute_seconds == 0.0);
  CHECK(auto_checkpointing_summary(automatic.scenario.checkpointing).rfind("0 of 12 blocks", 0) == 0);
}

}  // namespace
}  // namespace oomcast::advisor
