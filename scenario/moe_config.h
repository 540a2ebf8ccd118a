// The scenario's `moe` section: how mixture-of-experts routing is planned.
#pragma once

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// moe: {imbalance: worst | balanced}. Token routing is data dependent: `worst` (the default)
// gives the busiest expert k times its share (at most every token), `balanced` spreads the
// tokens evenly. Refused for models without experts.
void read_moe_section(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
