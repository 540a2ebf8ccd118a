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

// A model given as a Hugging Face config.json (a family's or not) with a `compile:` key: replaced
// by the graph file of its compiled capture (captured_compiled_hf_model, on fake tensors), so
// families and configs are planned compiled through the one path a model file takes. Called
// once the device is known (the capture decides inductor's layout per device kind); anything
// else is left as it is. Throws InputError at the compile key when the capture cannot run.
void capture_compiled_config(const YamlNode& node, bool device_is_cpu, ModelConfig& model);

}  // namespace oomcast::scenario
