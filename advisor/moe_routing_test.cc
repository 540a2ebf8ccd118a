// Tests for the balanced and worst MoE routing cases that plan reports side by side.
#include <catch2/catch.hpp>

#include "advisor/moe_routing.h"
#include "advisor/predict.h"
#include "advisor/report.h"
#include "scenario/scenario_loader.h"

using namespace oomcast::advisor;
using oomcast::scenario::MoeImbalance;
using oomcast::scenario::Scenario;
using oomcast::scenario::load_scenario;

namespace {

Scenario tiny_mixtral(MoeImbalance imbalance) {
  Scenario scenario =
      load_scenario(std::string(OOMCAST_SOURCE_DIR) + "/validate/scenarios/mixtral-tiny-4x2-imbalanced.yaml");
  scenario.moe_imbalance = imbalance;
  return scenario;
}

}  // namespace

TEST_CASE("an MoE plan carries the balanced and the worst routing peak, the worst the larger",
          "[advisor][moe]") {
  Prediction prediction = predict(tiny_mixtral(MoeImbalance::Worst));
  add_moe_routing_cases(prediction);
  const MoeRoutingCases& cases = prediction.moe_routing;
  REQUIRE(cases.planned);
  CHECK(cases.reported == MoeImbalance::Worst);
  CHECK(cases.worst.peak_allocated_bytes == prediction.peak_allocated_bytes);
  CHECK(cases.worst.peak_allocated_bytes > cases.balanced.peak_allocated_bytes);
}

TEST_CASE("the balanced case planned on its own equals the balanced line of a worst-case plan",
          "[advisor][moe]") {
  Prediction worst = predict(tiny_mixtral(MoeImbalance::Worst));
  add_moe_routing_cases(worst);
  Prediction balanced = predict(tiny_mixtral(MoeImbalance::Balanced));
  add_moe_routing_cases(balanced);
  CHECK(worst.moe_routing.balanced.peak_allocated_bytes == balanced.peak_allocated_bytes);
  CHECK(balanced.moe_routing.worst.peak_allocated_bytes == worst.peak_allocated_bytes);
  CHECK(balanced.moe_routing.reported == MoeImbalance::Balanced);
}

TEST_CASE("the text and JSON reports show one line per routing case for MoE and none for a dense model",
          "[advisor][moe]") {
  Prediction moe = predict(tiny_mixtral(MoeImbalance::Worst));
  add_moe_routing_cases(moe);
  std::string text = render_text(moe);
  CHECK(text.find("  balanced  every expert gets its share") != std::string::npos);
  CHECK(text.find("  worst     the busiest expert gets k times its share") != std::string::npos);
  nlohmann::json json = nlohmann::json::parse(render_json(moe));
  CHECK(json["moe_routing"]["reported"] == "worst");
  CHECK(json["moe_routing"]["worst"]["peak_allocated_bytes"] == moe.peak_allocated_bytes);

  Prediction dense = predict(load_scenario(std::string(OOMCAST_SOURCE_DIR) + "/validate/scenarios/qwen2-tiny-adamw.yaml"));
  add_moe_routing_cases(dense);
  CHECK_FALSE(dense.moe_routing.planned);
  CHECK(render_text(dense).find("experts   token routing") == std::string::npos);
  CHECK(nlohmann::json::parse(render_json(dense))["moe_routing"].is_null());
}
