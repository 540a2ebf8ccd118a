// A training framework's own config (a torchtune recipe, a torchtitan TOML, an Axolotl YAML,
// Hugging Face Trainer/TRL arguments) translated into a scenario: the scenario YAML it stands
// for, which of the file's keys were used and which ignored, and warnings for the keys that
// may change memory but are not modelled. The scenario text is then loaded as any scenario
// (scenario_loader.h), so every scenario rule and `--set` applies to it unchanged.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/input_error.h"

namespace oomcast::scenario {

struct RecipeTranslation {
  std::string format;                    // "torchtune recipe", "torchtitan TOML", ...
  std::string source_path;               // the framework's file
  YAML::Node scenario;                   // the mapped scenario, a map
  std::vector<std::string> used_keys;    // the file's keys that became scenario keys
  std::vector<std::string> ignored_keys; // keys read and known to leave memory unchanged
  std::vector<std::string> warnings;     // keys that may change memory but are not modelled
  // Where the file wrote the value of a scenario key ("model" -> base_model's line), so an
  // error of the mapped scenario at that key names the file's own line.
  std::map<std::string, std::pair<SourceLocation, std::string>> origins;

  // The mapped scenario as YAML, led by comments naming the source and its used/ignored keys.
  std::string scenario_text() const;
};

// The keys the user sets with `--set` (the part before '='), so a reader leaves a value the
// recipe does not have (seq_len, world size, device) to the override instead of refusing.
class OverriddenKeys {
 public:
  explicit OverriddenKeys(const std::vector<std::string>& overrides);
  // True when an override sets `dotted` or a key inside it ("parallel" covers "parallel.world_size").
  bool sets(const std::string& dotted) const;

 private:
  std::vector<std::string> keys_;
};

// Which framework wrote the file at `path`, from its extension and its top-level keys:
// "torchtune", "torchtitan", "axolotl", "hf_trainer", or nullopt for a scenario (or any other
// file, which the scenario loader then reads and refuses as it always did).
std::optional<std::string> recipe_kind(const std::string& path);

// Translates the framework file at `path` (recipe_kind must have named it). Throws InputError
// naming the file, line and key for a value it cannot map.
RecipeTranslation translate_recipe(const std::string& path, const std::vector<std::string>& overrides);

// The mapped scenario of a framework's config with the keys it used and ignored and its
// warnings as comments (`--print-scenario`); nullopt for any other file.
std::optional<std::string> recipe_scenario_text(const std::string& path, const std::vector<std::string>& overrides = {});

// The scenario's device when the file names none: a warning says which was planned.
void note_default_device(RecipeTranslation& translation, const OverriddenKeys& overridden);

}  // namespace oomcast::scenario

namespace oomcast::scenario {

// Sorts a framework file's keys into used, ignored and warned as a reader goes, so that no key
// is dropped silently: a key the reader does not know is a warning (it may change memory).
class RecipeKeyLedger {
 public:
  RecipeKeyLedger(RecipeTranslation& translation, std::string reader) : translation_(translation), reader_(std::move(reader)) {}
  void use(const std::string& key);
  void ignore(const std::string& key);
  // A key that may change memory and is not modelled: its own warning line.
  void unmodelled(const std::string& key, const std::string& why);
  bool classified(const std::string& key) const;
  // Lists the file's keys (`all`, dotted, in file order) in the translation: used, ignored
  // (marked so, or in `no_memory_effect`), and every other one in one warning as unknown.
  void classify_rest(const std::vector<std::string>& all, const std::vector<std::string>& no_memory_effect);

 private:
  RecipeTranslation& translation_;
  std::string reader_;
  std::vector<std::string> used_;
  std::vector<std::string> ignored_;
  std::vector<std::string> warned_;
};

}  // namespace oomcast::scenario
