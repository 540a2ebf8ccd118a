// The scenario's `loss` section (docs/scenario-format.md#loss): how the training loss is taken
// over the logits (torchtune's chunked cross-entropy).
#pragma once

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// Reads `loss` into scenario.loss; throws InputError at the key for what is not modelled.
// Call after the model, training_loop and job sections are read.
void read_loss_section(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
