// Reads the scenario sections that describe the job around the model: `job` (train,
// inference, forward), `training` (trainable subset, LoRA, master weights), `weights` (storage
// format of the base weights) and `loading` (how the model gets onto the device).
// docs/scenario-format.md#job documents them.
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// The top-level keys these sections add to a scenario.
const std::vector<std::string>& job_section_keys();

// `root` is the scenario's root map. Call after precision, checkpointing, the device and the
// training loop are read (cross-section rules are checked here). Throws InputError naming
// file, line and key.
void read_job_sections(const YamlNode& root, Scenario& scenario);

const char* job_kind_name(JobKind kind);
const char* weight_format_name(WeightFormat format);

}  // namespace oomcast::scenario
