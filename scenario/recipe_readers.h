// The framework readers behind translate_recipe (recipe_translation.h), one per file:
// recipe_torchtune.cc, recipe_torchtitan.cc, recipe_axolotl.cc, recipe_hf_trainer.cc. Each
// fills `translation.scenario` and sorts every key of the file into used, ignored or warned.
#pragma once

#include <charconv>
#include <string>
#include <vector>

#include "scenario/recipe_translation.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

void read_torchtune_recipe(const YamlNode& root, const std::string& text, const OverriddenKeys& overridden,
                           RecipeTranslation& translation);
void read_torchtitan_toml(const std::string& path, const OverriddenKeys& overridden, RecipeTranslation& translation);
void read_axolotl_config(const YamlNode& root, const OverriddenKeys& overridden, RecipeTranslation& translation);
void read_hf_trainer_args(const YamlNode& root, const OverriddenKeys& overridden, RecipeTranslation& translation);

// Framework configs write `key: null` (or leave the value empty) for "not set": the readers
// treat such a key as absent, where a scenario would refuse it.
inline bool given(const YamlNode& node) { return !node.is_missing() && node.kind() != YamlNode::Kind::Null; }
inline bool flag_or(const YamlNode& map, const std::string& key, bool fallback) {
  return given(map.child(key)) ? map.child(key).as_bool() : fallback;
}
inline int64_t integer_or_null(const YamlNode& map, const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  return given(map.child(key)) ? map.child(key).as_integer(min, max) : fallback;
}
// A number checked against [min, max], as its shortest text ("0.05", not 0.050000000000000003),
// for the mapped scenario.
inline std::string decimal_or_null(const YamlNode& map, const std::string& key, double fallback, double min, double max) {
  const double value = given(map.child(key)) ? map.child(key).as_number(min, max) : fallback;
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}
inline std::string text_or(const YamlNode& map, const std::string& key, const std::string& fallback) {
  return given(map.child(key)) ? map.child(key).as_string() : fallback;
}
inline std::string choice_or_null(const YamlNode& map, const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& choices) {
  return given(map.child(key)) ? map.child(key).as_choice(choices) : fallback;
}

// Marks every key of `map` whose value is null as ignored: "not set" changes nothing.
inline void ignore_unset_keys(const YamlNode& map, RecipeKeyLedger& ledger) {
  for (const auto& key : map.keys()) {
    if (!given(map.child(key))) ledger.ignore(key);
  }
}

// Hugging Face TrainingArguments' `optim` names onto the scenario's optimizer map; throws at
// `optim` for a name with no modelled optimizer. Shared by the Trainer and Axolotl readers.
YAML::Node hf_optimizer(const YamlNode& optim);

}  // namespace oomcast::scenario
