// Recognises a framework's config file and translates it into scenario text (recipe_translation.h).
#include "scenario/recipe_translation.h"

#include <algorithm>
#include <filesystem>

#include "base/bounded_file.h"
#include "base/input_error.h"
#include "scenario/recipe_readers.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Keys only a torchtune recipe writes: components, and the recipe-level switches.
bool looks_like_torchtune(const YAML::Node& root) {
  for (const char* section : {"model", "tokenizer", "optimizer", "checkpointer", "loss"}) {
    if (root[section] && root[section].IsMap() && root[section]["_component_"]) return true;
  }
  return root["enable_activation_checkpointing"].IsDefined() || root["optimizer_in_bwd"].IsDefined();
}

}  // namespace

std::string RecipeTranslation::scenario_text() const {
  YAML::Emitter out;
  out << scenario;
  std::string text = "# " + format + " " + source_path + " as a scenario\n";
  text += "# used: " + (used_keys.empty() ? std::string("nothing") : joined(used_keys)) + "\n";
  if (!ignored_keys.empty()) text += "# ignored (no memory effect): " + joined(ignored_keys) + "\n";
  for (const auto& warning : warnings) text += "# warning: " + warning + "\n";
  return text + out.c_str() + "\n";
}

OverriddenKeys::OverriddenKeys(const std::vector<std::string>& overrides) {
  for (const auto& entry : overrides) keys_.push_back(entry.substr(0, entry.find('=')));
}

bool OverriddenKeys::sets(const std::string& dotted) const {
  for (const auto& key : keys_) {
    if (key == dotted || key.starts_with(dotted + ".") || dotted.starts_with(key + ".")) return true;
  }
  return false;
}

void RecipeKeyLedger::use(const std::string& key) {
  if (!classified(key)) used_.push_back(key);
}

void RecipeKeyLedger::ignore(const std::string& key) {
  if (!classified(key)) ignored_.push_back(key);
}

void RecipeKeyLedger::unmodelled(const std::string& key, const std::string& why) {
  if (classified(key)) return;
  warned_.push_back(key);
  translation_.warnings.push_back(translation_.source_path + ": '" + key + "' " + why);
}

bool RecipeKeyLedger::classified(const std::string& key) const {
  return contains(used_, key) || contains(ignored_, key) || contains(warned_, key);
}

void RecipeKeyLedger::classify_rest(const std::vector<std::string>& all, const std::vector<std::string>& no_memory_effect) {
  // In the file's order; a key the reader marked used but the file lacks is not listed.
  std::vector<std::string> unknown;
  for (const auto& key : all) {
    if (contains(used_, key)) {
      translation_.used_keys.push_back(key);
    } else if (contains(ignored_, key) || (!contains(warned_, key) && contains(no_memory_effect, key))) {
      translation_.ignored_keys.push_back(key);
    } else if (!contains(warned_, key)) {
      unknown.push_back(key);
    }
  }
  if (!unknown.empty()) {
    translation_.warnings.push_back(translation_.source_path + ": keys the " + reader_ +
                                    " reader does not know, not planned (they may change memory): " + joined(unknown));
  }
}

std::optional<std::string> recipe_kind(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".toml") return "torchtitan";
  if (extension != ".yaml" && extension != ".yml" && extension != ".json") return std::nullopt;
  YAML::Node root;
  try {
    root = YAML::Load(read_text_file(path, "", "scenario"));
  } catch (const YAML::Exception&) {
    return std::nullopt;  // the scenario loader reports the syntax error with its position
  } catch (const InputError&) {
    return std::nullopt;
  }
  if (!root.IsMap()) return std::nullopt;
  if (looks_like_torchtune(root)) return "torchtune";  // before the Trainer: both write output_dir
  if (root["base_model"]) return "axolotl";
  for (const char* key : {"per_device_train_batch_size", "model_name_or_path", "optim", "output_dir"}) {
    if (root[key]) return "hf_trainer";
  }
  return std::nullopt;
}

RecipeTranslation translate_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  const std::optional<std::string> kind = recipe_kind(path);
  RecipeTranslation translation;
  translation.source_path = path;
  translation.scenario = YAML::Node(YAML::NodeType::Map);
  const OverriddenKeys overridden(overrides);
  if (kind == "torchtitan") {
    translation.format = "torchtitan TOML";
    read_torchtitan_toml(path, overridden, translation);
  } else {
    const std::string text = read_text_file(path, "", "recipe");
    const YamlDocument document = YamlDocument::parse(text, path);
    if (kind == "torchtune") {
      translation.format = "torchtune recipe";
      read_torchtune_recipe(document.root(), text, overridden, translation);
    } else if (kind == "axolotl") {
      translation.format = "Axolotl config";
      read_axolotl_config(document.root(), overridden, translation);
    } else if (kind == "hf_trainer") {
      translation.format = "Hugging Face Trainer arguments";
      read_hf_trainer_args(document.root(), overridden, translation);
    } else {
      throw InputError(SourceLocation{path, 0, 0, -1}, "", "not a torchtune, torchtitan, Axolotl or Trainer config");
    }
  }
  note_default_device(translation, overridden);
  return translation;
}

std::optional<std::string> recipe_scenario_text(const std::string& path, const std::vector<std::string>& overrides) {
  if (!recipe_kind(path)) return std::nullopt;
  return translate_recipe(path, overrides).scenario_text();
}

void note_default_device(RecipeTranslation& translation, const OverriddenKeys& overridden) {
  if (translation.scenario["device"] || overridden.sets("device")) return;
  // scenario-format.md's default; said aloud because the framework's file never names the GPU.
  translation.warnings.push_back(translation.source_path +
                                 ": the file names no GPU model: planned on a100-80gb (--set device=PROFILE)");
}

}  // namespace oomcast::scenario
