// Model catalogue: preset lookup in models/, model YAML files, Hugging Face config.json
// (gpt2, llama, mistral, bert, vit).
#include "scenario/model_catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "scenario/graph_file.h"
#include "scenario/model_families.h"

#ifndef OOMCAST_SOURCE_DIR
#define OOMCAST_SOURCE_DIR "."
#endif

namespace oomcast::planner {

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

// Checks the family, its dimension names and option names; fills nothing in.
void validate_model(const ModelConfig& model, const std::string& file, const YAML::Node* root) {
  const families::FamilySpec* spec = families::find_family(model.family);
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const auto& entry : families::family_specs()) names.emplace_back(entry.name);
    SourceLocation where = root ? at(file, (*root)["family"]) : SourceLocation{file, 0, 0, -1};
    throw InputError(where, "family", "unknown model family '" + model.family + "'" + did_you_mean(model.family, names));
  }
  std::vector<std::string> dim_names;
  for (const auto& entry : spec->dims) dim_names.emplace_back(entry.name);
  for (const auto& [name, value] : model.dims) {
    SourceLocation where = root ? at(file, (*root)["dims"][name]) : SourceLocation{file, 0, 0, -1};
    if (std::find(dim_names.begin(), dim_names.end(), name) == dim_names.end()) {
      throw InputError(where, name,
                       "unknown dimension '" + name + "' for family " + model.family + did_you_mean(name, dim_names));
    }
    if (value <= 0) throw InputError(where, name, "dimension '" + name + "' must be positive");
  }
  for (const auto& entry : spec->dims) {
    if (entry.default_value == 0 && model.dims.count(entry.name) == 0) {
      SourceLocation where = root ? at(file, (*root)["dims"]) : SourceLocation{file, 0, 0, -1};
      throw InputError(where, entry.name,
                       "model '" + model.name + "' (family " + model.family + ") needs dimension '" + entry.name +
                           "' (" + entry.meaning + ")");
    }
  }
  for (const auto& [name, value] : model.options) {
    if (std::find(spec->options.begin(), spec->options.end(), name) == spec->options.end()) {
      SourceLocation where = root ? at(file, (*root)["options"][name]) : SourceLocation{file, 0, 0, -1};
      throw InputError(where, name,
                       "unknown option '" + name + "' for family " + model.family + did_you_mean(name, spec->options));
    }
  }
  if (model.family != "resnet" && model.family != "mlp") {
    int64_t hidden = model.dims.count("hidden") ? model.dims.at("hidden") : 0;
    int64_t heads = model.dims.count("heads") ? model.dims.at("heads") : 0;
    if (hidden > 0 && heads > 0 && hidden % heads != 0) {
      throw InputError(SourceLocation{file, 0, 0, -1}, "heads", "hidden must be a multiple of heads");
    }
  }
}

ModelConfig load_model_yaml(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& error) {
    throw InputError(SourceLocation{path, error.mark.line + 1, error.mark.column + 1, -1}, "", error.msg);
  } catch (const YAML::BadFile&) {
    throw InputError(SourceLocation{path, 0, 0, -1}, "", "cannot read model file");
  }
  if (!root.IsMap()) throw InputError(SourceLocation{path, 1, 1, -1}, "", "a model file is a mapping");
  const std::vector<std::string> keys{"name", "family", "dims", "options"};
  ModelConfig model;
  model.source = path;
  model.name = fs::path(path).stem().string();
  for (const auto& entry : root) {
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
        model.options[entry.first.as<std::string>()] = entry.second.as<std::string>();
      }
    }
  } catch (const YAML::BadConversion& error) {
    throw InputError(SourceLocation{path, error.mark.line + 1, error.mark.column + 1, -1}, "",
                     "wrong type in model file (dimensions are integers)");
  }
  validate_model(model, path, &root);
  return model;
}

int64_t json_int(const nlohmann::json& config, const char* key, int64_t fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  return config[key].get<int64_t>();
}

int64_t json_required(const nlohmann::json& config, const char* key, const std::string& path) {
  if (!config.contains(key) || !config[key].is_number_integer()) {
    throw InputError(SourceLocation{path, 0, 0, -1}, key, std::string("config.json needs an integer '") + key + "'");
  }
  return config[key].get<int64_t>();
}

// The dimensions every HF transformer config (llama, mistral, bert, vit) names the same way.
void read_encoder_dims(const nlohmann::json& config, const std::string& path, ModelConfig& model) {
  model.dims["layers"] = json_required(config, "num_hidden_layers", path);
  model.dims["hidden"] = json_required(config, "hidden_size", path);
  model.dims["heads"] = json_required(config, "num_attention_heads", path);
  model.dims["ffn_hidden"] = json_required(config, "intermediate_size", path);
}

ModelConfig load_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(SourceLocation{path, 0, 0, -1}, "", "cannot read config.json");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(SourceLocation{path, 0, 0, -1}, "", std::string("invalid JSON: ") + error.what());
  }
  ModelConfig model;
  model.source = path;
  model.name = fs::path(path).parent_path().filename().string();
  if (model.name.empty()) model.name = "hf-model";
  std::string type = config.value("model_type", "");
  if (type == "gpt2") {
    model.family = "gpt2";
    model.dims["layers"] = json_required(config, "n_layer", path);
    model.dims["hidden"] = json_required(config, "n_embd", path);
    model.dims["heads"] = json_required(config, "n_head", path);
    model.dims["vocab"] = json_required(config, "vocab_size", path);
    model.dims["max_positions"] = json_required(config, "n_positions", path);
    model.dims["ffn_hidden"] = json_int(config, "n_inner", 4 * model.dims["hidden"]);
    model.options["tied_embeddings"] = config.value("tie_word_embeddings", true) ? "true" : "false";
  } else if (type == "llama" || type == "mistral") {
    model.family = "llama";
    read_encoder_dims(config, path, model);
    model.dims["kv_heads"] = json_int(config, "num_key_value_heads", model.dims["heads"]);
    model.dims["vocab"] = json_required(config, "vocab_size", path);
    model.dims["max_positions"] = json_int(config, "max_position_embeddings", 4096);
    model.options["tied_embeddings"] = config.value("tie_word_embeddings", false) ? "true" : "false";
  } else if (type == "bert") {
    model.family = "bert";
    read_encoder_dims(config, path, model);
    model.dims["vocab"] = json_required(config, "vocab_size", path);
    model.dims["max_positions"] = json_int(config, "max_position_embeddings", 512);
    model.dims["type_vocab"] = json_int(config, "type_vocab_size", 2);
  } else if (type == "vit") {
    // HF ViT differs from torchvision's layout (separate q/k/v, a pooler); counted as torchvision.
    model.family = "vit";
    read_encoder_dims(config, path, model);
    model.dims["image_size"] = json_int(config, "image_size", 224);
    model.dims["patch_size"] = json_int(config, "patch_size", 16);
    model.dims["channels"] = json_int(config, "num_channels", 3);
    int64_t labels = config.contains("id2label") ? static_cast<int64_t>(config["id2label"].size()) : 1000;
    model.dims["num_classes"] = labels > 0 ? labels : 1000;
  } else {
    const std::vector<std::string> known{"gpt2", "llama", "mistral", "bert", "vit"};
    throw InputError(SourceLocation{path, 0, 0, -1}, "model_type",
                     "unsupported model_type '" + type + "' (supported: gpt2, llama, mistral, bert, vit)" +
                         did_you_mean(type, known));
  }
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
      throw InputError(SourceLocation{}, "model", "model file '" + path.string() + "' does not exist");
    }
    if (path.extension() == ".json") return load_hf_config(path.string());
    if (is_graph_file(path.string())) return graph_model(path.string());  // docs/graph-format.md
    return load_model_yaml(path.string());
  }
  std::string dir = models_directory();
  fs::path preset = fs::path(dir) / (reference + ".yaml");
  std::error_code error;
  if (dir.empty() || !fs::exists(preset, error)) {
    throw InputError(SourceLocation{}, "model",
                     "unknown model preset '" + reference + "'" + did_you_mean(reference, preset_names()));
  }
  return load_model_yaml(preset.string());
}

}  // namespace oomcast::planner
