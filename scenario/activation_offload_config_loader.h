// Reads the scenario's `activation_offloading` section (scenario/activation_offload_config.h).
#pragma once

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// Reads `activation_offloading` into scenario.activation_offloading; throws InputError at the
// key for what is not modelled. Call after the model, checkpointing, job, loss and compile
// sections are read.
void read_activation_offloading_section(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
