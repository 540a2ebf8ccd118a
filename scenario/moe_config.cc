// Reads the scenario's `moe` section (scenario/moe_config.h).
#include "scenario/moe_config.h"

namespace oomcast::scenario {

void read_moe_section(const YamlNode& node, Scenario& scenario) {
  if (node.is_missing()) return;
  if (scenario.model.dims.count("experts") == 0) {
    node.fail("'moe' applies only to mixture-of-experts models; model '" + scenario.model.name + "' has no experts");
  }
  if (node.is_scalar()) node.fail("'moe' is a map: moe: {imbalance: worst | balanced}");
  node.reject_unknown_keys({"imbalance"});
  YamlNode imbalance = node.child("imbalance");
  if (imbalance.is_missing()) return;
  scenario.moe_imbalance = imbalance.as_choice({"worst", "balanced"}) == "balanced" ? MoeImbalance::Balanced
                                                                                   : MoeImbalance::Worst;
}

}  // namespace oomcast::scenario
