// Reads the model-parallel keys of a scenario's `parallel:` section into MeshConfig and checks
// them against the world size and the model (docs/scenario-format.md#model-parallel).
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// The keys this reader owns, torchtitan's and Megatron-LM's spellings, for the section's
// unknown-key check.
const std::vector<std::string>& mesh_keys();

// `node` is the `parallel:` map. Call once the engine and world_size are read. Throws
// InputError naming the key for a mesh the world or the model cannot hold.
void read_mesh_keys(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
