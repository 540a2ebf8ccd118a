// ScenarioSource: where a scenario comes from (a file or YAML text) plus the --set overrides
// the user gave, so search, sweep and what-if can reload it with extra overrides and get
// exactly what `oomcast plan --set ...` would get.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace oomcast::scenario {

struct ScenarioSource {
  std::string path;                       // the file, or the name used in messages for `text`
  std::optional<std::string> text;        // YAML held in memory (tests, generated scenarios)
  std::vector<std::string> overrides;     // "dotted.key=value", applied in order

  static ScenarioSource file(std::string path, std::vector<std::string> overrides = {});
  static ScenarioSource yaml(std::string text, std::string name, std::vector<std::string> overrides = {});

  // Loads the scenario with `extra` overrides applied after the source's own. Throws
  // InputError exactly as load_scenario does.
  Scenario load(const std::vector<std::string>& extra = {}) const;
};

}  // namespace oomcast::scenario
