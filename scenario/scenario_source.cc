// ScenarioSource: a scenario file or text plus overrides, reloadable with more overrides.
#include "scenario/scenario_source.h"

#include <utility>

#include "scenario/scenario_loader.h"

namespace oomcast::scenario {

ScenarioSource ScenarioSource::file(std::string path, std::vector<std::string> overrides) {
  ScenarioSource source;
  source.path = std::move(path);
  source.overrides = std::move(overrides);
  return source;
}

ScenarioSource ScenarioSource::yaml(std::string text, std::string name, std::vector<std::string> overrides) {
  ScenarioSource source;
  source.path = std::move(name);
  source.text = std::move(text);
  source.overrides = std::move(overrides);
  return source;
}

Scenario ScenarioSource::load(const std::vector<std::string>& extra) const {
  std::vector<std::string> all = overrides;
  all.insert(all.end(), extra.begin(), extra.end());
  return text ? load_scenario_text(*text, path, all) : load_scenario(path, all);
}

}  // namespace oomcast::scenario
