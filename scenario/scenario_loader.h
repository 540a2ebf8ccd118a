// Loads a scenario YAML file (docs/scenario-format.md) into a Scenario, applying
// `--set dotted.key=value` overrides. Every error is an InputError naming file, line, column
// and key, with a "did you mean" for near-miss keys and values.
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace oomcast::scenario {

// Reads and validates the scenario at `path`. `overrides` are "dotted.key=value" strings
// ("batch_size=32", "model.layers=4", "allocator.expandable_segments=true"), applied in order
// on top of the file; an override of an unknown key is an error. The model reference is
// resolved relative to the scenario's directory.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

// The same for scenario text already in memory; `path` is used in messages and as the base
// for relative model paths. For tests and tools that generate scenarios.
Scenario load_scenario_text(const std::string& text, const std::string& path,
                            const std::vector<std::string>& overrides = {});

// Choice names as they are written in scenario files ("amp_bf16", "flash", "adamw").
const char* precision_name(Precision precision);
const char* attention_name(AttentionImpl attention);
const char* checkpoint_mode_name(CheckpointMode mode);
const char* optimizer_type_name(OptimizerType type);
const char* optimizer_impl_name(OptimizerImpl impl);

}  // namespace oomcast::scenario
