// Model catalogue: preset lookup in models/, model YAML files, Hugging Face config.json
// files or model folders (read by scenario/hf_config.cc), and Hub ids found in the local cache.
#include "scenario/model_catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "base/bounded_file.h"
#include "base/edit_distance.h"
#include "base/name_numbers.h"
#include "base/input_error.h"
#include "scenario/graph_file.h"
#include "scenario/hf_capture.h"
#include "scenario/hf_config.h"
#include "scenario/hub_model_resolver.h"
#include "scenario/model_families.h"

#ifndef OOMCAST_SOURCE_DIR
#define OOMCAST_SOURCE_DIR "."
#endif

namespace oomcast::scenario {

namespace fs = std::filesystem;

namespace {

SourceLocation at(const std::string& file, const YAML::Node& node) {
  SourceLocation where;
  where.file = file;
  if (node.IsDefined() && node.Mark().line >= 0) {
    where.line = node.Mark().line + 1;  // yaml-cpp marks are 0-based
    where.column = node.Mark().column + 1;
  }
  return where;
}

// Checks the model against its family's schema, placing errors at the YAML key when known.
void validate_model(const ModelConfig& model, const std::string& file, const YAML::Node* root) {
  families::check_model(model, [&](const std::string& key) {
    if (root == nullptr) return SourceLocation{file, 0, 0, -1};
    if (key == "family" || key == "dims" || key == "options") return at(file, (*root)[key]);
    if ((*root)["dims"] && (*root)["dims"][key]) return at(file, (*root)["dims"][key]);
    if ((*root)["options"] && (*root)["options"][key]) return at(file, (*root)["options"][key]);
    if ((*root)["dims"]) return at(file, (*root)["dims"]);
    return SourceLocation{file, 0, 0, -1};
  });
}

// YAML's spellings of a boolean (yes, On, True) as the families read them.
std::string option_text(const std::string& text) {
  std::string lowered = text;
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lowered == "true" || lowered == "yes" || lowered == "on") return "true";
  if (lowered == "false" || lowered == "no" || lowered == "off") return "false";
  return text;
}

ModelConfig load_model_yaml(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(read_text_file(path, "", "model file"));
  } catch (const YAML::ParserException& error) {
    throw InputError(SourceLocation{path, error.mark.line + 1, error.mark.column + 1, -1}, "", error.msg);
  }
  if (!root.IsMap()) throw InputError(SourceLocation{path, 1, 1, -1}, "", "a model file is a mapping");
  const std::vector<std::string> keys{"name", "family", "dims", "options"};
  ModelConfig model;
  model.source = path;
  model.name = fs::path(path).stem().string();
  for (const auto& entry : root) {
    // A key that is a sequence or a mapping (`? [a, b]`) is no key of ours.
    if (!entry.first.IsScalar()) throw InputError(at(path, entry.first), "", "a model file's keys are names");
    std::string key = entry.first.as<std::string>();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      throw InputError(at(path, entry.first), key, "unknown key '" + key + "' in model" + did_you_mean(key, keys));
    }
  }
  try {
    if (root["name"]) model.name = root["name"].as<std::string>();
    if (!root["family"]) throw InputError(SourceLocation{path, 1, 1, -1}, "family", "a model needs a 'family'");
    model.family = root["family"].as<std::string>();
    if (root["dims"]) {
      for (const auto& entry : root["dims"]) {
        model.dims[entry.first.as<std::string>()] = entry.second.as<int64_t>();
      }
    }
    if (root["options"]) {
      for (const auto& entry : root["options"]) {
        model.options[entry.first.as<std::string>()] = option_text(entry.second.as<std::string>());
      }
    }
  } catch (const YAML::Exception& error) {
    // Every other yaml-cpp complaint (a non-scalar name or dimension, a wrong type) is bad input too.
    throw InputError(SourceLocation{path, error.mark.line + 1, error.mark.column + 1, -1}, "",
                     "wrong type in model file (names are text, dimensions are integers)");
  }
  validate_model(model, path, &root);
  return model;
}

ModelConfig checked_hf_config(const std::string& path) {
  const std::string without_family = model_type_without_family(path);
  if (!without_family.empty()) {
    // The repository the binary came from holds capture/ and .venv/ beside models/.
    const std::string models = models_directory();
    return captured_hf_model(path, without_family, models.empty() ? "" : fs::path(models).parent_path().string());
  }
  ModelConfig model = load_hf_config(path);
  validate_model(model, path, nullptr);
  return model;
}

bool looks_like_path(const std::string& reference) {
  return reference.find('/') != std::string::npos || reference.ends_with(".yaml") || reference.ends_with(".yml") ||
         reference.ends_with(".json");
}

}  // namespace

std::string models_directory() {
  std::error_code error;
  // The Python package sets it to the presets it carries (a wheel has no source tree).
  if (const char* packaged = std::getenv("OOMCAST_MODELS_DIR"); packaged && fs::is_directory(packaged, error)) {
    return packaged;
  }
  fs::path source = fs::path(OOMCAST_SOURCE_DIR) / "models";
  if (fs::is_directory(source, error)) return source.string();
  fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "models", error)) return (dir / "models").string();
    }
  }
  return "";
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::string dir = models_directory();
  if (dir.empty()) return names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelConfig resolve_model(const std::string& reference, const std::string& base_dir) {
  if (reference.empty()) throw InputError(SourceLocation{}, "model", "no model given");
  if (looks_like_path(reference)) {
    fs::path path(reference);
    if (path.is_relative() && !base_dir.empty()) path = fs::path(base_dir) / path;
    std::error_code error;
    if (!fs::exists(path, error)) {
      // Not a file here: a Hub id ("meta-llama/Llama-3.1-8B") is looked up in the local cache.
      if (looks_like_hub_id(reference)) {
        ModelConfig model = checked_hf_config(cached_hub_config(reference));
        model.name = reference;  // not the snapshot's hash folder
        return model;
      }
      throw InputError(SourceLocation{}, "model", "model file '" + path.string() + "' does not exist");
    }
    if (fs::is_directory(path, error)) {
      // A Hugging Face model folder (what from_pretrained takes): its config.json.
      fs::path config = path / "config.json";
      if (!fs::is_regular_file(config, error)) {
        throw InputError(SourceLocation{}, "model",
                         "model path '" + path.string() + "' is a directory without a config.json");
      }
      return checked_hf_config(config.string());
    }
    if (path.extension() == ".json") return checked_hf_config(path.string());
    if (is_graph_file(path.string())) return graph_model(path.string());  // docs/graph-format.md
    return load_model_yaml(path.string());
  }
  std::string dir = models_directory();
  fs::path preset = fs::path(dir) / (reference + ".yaml");
  std::error_code error;
  if (dir.empty() || !fs::exists(preset, error)) {
    // A bare name is a preset; a local folder or file of that name needs a path ('./name'),
    // and is what the user meant rather than a preset that merely looks alike.
    fs::path local(reference);
    if (!base_dir.empty()) local = fs::path(base_dir) / local;
    // Where './name' would resolve: beside the scenario.
    if (fs::exists(local, error)) {
      throw InputError(SourceLocation{}, "model",
                       "unknown model preset '" + reference + "'; '" + reference + "' is a local " +
                           (fs::is_directory(local, error) ? "folder" : "file") + ": write 'model: ./" + reference +
                           "' to use it");
    }
    throw InputError(SourceLocation{}, "model",
                     "unknown model preset '" + reference + "'" +
                         did_you_mean(reference, with_same_numbers(reference, preset_names())));
  }
  return load_model_yaml(preset.string());
}

}  // namespace oomcast::scenario
