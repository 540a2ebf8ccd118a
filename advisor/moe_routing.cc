// Both routing cases of a mixture-of-experts model (moe_routing.h): the scenario's case is
// the prediction already made; the other is one more plan and replay.
#include "advisor/moe_routing.h"

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/predict.h"

namespace oomcast::advisor {

using scenario::ModelConfig;
using scenario::MoeImbalance;
using scenario::Scenario;

namespace {

MoeRoutingCase case_of(const Prediction& prediction) {
  MoeRoutingCase c;
  c.peak_allocated_bytes = prediction.peak_allocated_bytes;
  c.peak_reserved_bytes = prediction.peak_reserved_bytes;
  c.fits = prediction.fits;
  c.spare_bytes = prediction.spare_bytes();
  c.capacity_set = !(prediction.scenario.device.is_cpu && prediction.usable_bytes >= (1ull << 59));
  return c;
}

std::string case_line(const char* name, const char* meaning, const MoeRoutingCase& c, bool reported) {
  std::string verdict = !c.capacity_set ? ""
                        : c.fits        ? fmt::format(" (fits, {} to spare)", byte_text(c.spare_bytes))
                                        : fmt::format(" (OOM, {} short)", byte_text(-c.spare_bytes));
  return fmt::format("  {:<9} {}: peak {} allocated, {} reserved{}{}\n", name, meaning,
                     byte_text(c.peak_allocated_bytes), byte_text(c.peak_reserved_bytes), verdict,
                     reported ? "  <- this report" : "");
}

nlohmann::ordered_json case_json(const MoeRoutingCase& c) {
  return {{"peak_allocated_bytes", c.peak_allocated_bytes},
          {"peak_reserved_bytes", c.peak_reserved_bytes},
          {"fits", c.fits},
          {"spare_bytes", c.spare_bytes}};
}

}  // namespace

bool has_experts(const ModelConfig& model) { return !model.graph && model.dims.count("experts") > 0; }

void add_moe_routing_cases(Prediction& prediction) {
  const Scenario& scenario = prediction.scenario;
  if (!has_experts(scenario.model)) return;
  Scenario other = scenario;
  const bool worst_reported = scenario.moe_imbalance == MoeImbalance::Worst;
  other.moe_imbalance = worst_reported ? MoeImbalance::Balanced : MoeImbalance::Worst;
  MoeRoutingCase reported = case_of(prediction);
  MoeRoutingCase planned_other = case_of(predict(other));
  MoeRoutingCases& cases = prediction.moe_routing;
  cases.planned = true;
  cases.reported = scenario.moe_imbalance;
  cases.worst = worst_reported ? reported : planned_other;
  cases.balanced = worst_reported ? planned_other : reported;
}

std::string moe_routing_text(const Prediction& prediction) {
  const MoeRoutingCases& cases = prediction.moe_routing;
  if (!cases.planned) return "";
  const bool worst = cases.reported == MoeImbalance::Worst;
  std::string text = "experts   token routing is data dependent; both cases planned (moe.imbalance picks the one "
                     "this report, search and sweep use):\n";
  text += case_line("balanced", "every expert gets its share of the tokens", cases.balanced, !worst);
  text += case_line("worst", "the busiest expert gets k times its share", cases.worst, worst);
  return text;
}

void add_moe_routing_json(const Prediction& prediction, nlohmann::ordered_json& json) {
  const MoeRoutingCases& cases = prediction.moe_routing;
  if (!cases.planned) {
    json["moe_routing"] = nullptr;
    return;
  }
  json["moe_routing"] = {{"reported", cases.reported == MoeImbalance::Worst ? "worst" : "balanced"},
                         {"balanced", case_json(cases.balanced)},
                         {"worst", case_json(cases.worst)}};
}

}  // namespace oomcast::advisor
