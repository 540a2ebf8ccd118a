// Reads `compile:` (a scenario) and `compiled:` (a graph file) into a CompileConfig, and checks a
// scenario's compile settings against its torch release, its device and its model's capture.
#pragma once

#include "scenario/compile_config.h"
#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// `compile: true | false | {mode, fullgraph, dynamic, scope, activation_memory_budget}`.
// `graph_file_keys` also accepts the capture's `graphs` and `graph_breaks`. Throws InputError
// naming the key on an unknown key or a bad value.
CompileConfig read_compile_map(const YamlNode& node, bool graph_file_keys);

// The scenario's `compile` key, read after the device, the torch release and the model: every
// option needs the release that introduced it, cudagraph modes a GPU, and the plan a graph file
// captured compiled with the same settings (capture/oomcast_capture.py --compile). Fills
// scenario.compile; throws InputError at the offending key otherwise.
void read_compile_section(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
