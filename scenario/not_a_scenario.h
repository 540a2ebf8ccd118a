// The files people give `plan` by mistake (a Hugging Face config.json, a graph file): recognised
// by their keys, refused with what to write instead of a list of unknown keys.
#pragma once

#include <string>

#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// Throws InputError at the telling key when `root` is a model file rather than a scenario.
void reject_model_file_given_as_scenario(const YamlNode& root, const std::string& path);

}  // namespace oomcast::scenario
