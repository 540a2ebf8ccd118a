// Model catalogue: resolves a model reference (preset name, model YAML file or Hugging Face
// config.json) into a ModelConfig and lists the presets in models/
// (parameter counts: planner/families/families.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace oomcast::scenario {

// Resolves a model reference: a preset name ("gpt2", "llama-2-7b"), a model YAML file, or a
// Hugging Face config.json path. `base_dir` is the directory relative paths are resolved
// against. Throws InputError (with did-you-mean for preset names).
ModelConfig resolve_model(const std::string& reference, const std::string& base_dir);

// Names of the presets found in the models/ directory, sorted.
std::vector<std::string> preset_names();

// The directory holding the preset YAML files (OOMCAST_SOURCE_DIR/models, or models/ next to
// the executable); empty when none is found.
std::string models_directory();

}  // namespace oomcast::scenario
