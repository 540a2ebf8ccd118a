// The config.json entry point: parses the file, checks it is a JSON object with a supported
// model_type, runs that type's reader and turns the keys no reader used into a warning.
#include "scenario/hf_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/bounded_file.h"
#include "base/input_error.h"
#include "scenario/hf_readers.h"

namespace oomcast::planner {

namespace hf {

const std::vector<ModelTypeReader>& model_type_readers() {
  static const std::vector<ModelTypeReader> readers = {
      {"bert", read_bert},       {"falcon", read_falcon},       {"gemma", read_gemma},   {"gemma2", read_gemma2},
      {"gpt2", read_gpt2},       {"gpt_neox", read_gpt_neox},   {"llama", read_llama},   {"mistral", read_mistral},
      {"mixtral", read_mixtral}, {"phi", read_phi},             {"phi3", read_phi3},     {"qwen2", read_qwen2},
      {"qwen2_moe", read_qwen2_moe}, {"qwen3", read_qwen3},     {"qwen3_moe", read_qwen3_moe}, {"vit", read_vit},
  };
  return readers;
}

}  // namespace hf

std::vector<std::string> supported_hf_model_types() {
  std::vector<std::string> names;
  for (const auto& entry : hf::model_type_readers()) names.emplace_back(entry.model_type);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

std::string model_type_without_family(const std::string& path) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(path, "", "config.json"));
  } catch (const std::exception&) {
    return "";
  }
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) return "";
  const std::string type = config["model_type"].get<std::string>();
  const auto& readers = hf::model_type_readers();
  const bool has_family = std::any_of(readers.begin(), readers.end(),
                                      [&](const hf::ModelTypeReader& entry) { return type == entry.model_type; });
  return has_family ? "" : type;
}

ModelConfig load_hf_config(const std::string& path) {
  const SourceLocation file{path, 0, 0, -1};
  const std::string text = read_text_file(path, "", "config.json");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(file, "", std::string("invalid JSON: ") + error.what());
  }
  if (!config.is_object()) {
    const std::string type = config.type_name();
    throw InputError(file, "", "a config.json is a JSON object of a model's settings, not " +
                                   std::string(type == "array" || type == "object" ? "an " : "a ") + type);
  }
  if (!config.contains("model_type") || !config["model_type"].is_string()) {
    throw InputError(file, "model_type", "config.json needs a string 'model_type' (supported: " +
                                             joined(supported_hf_model_types()) + ")");
  }
  const std::string type = config["model_type"].get<std::string>();
  const auto& readers = hf::model_type_readers();
  auto reader = std::find_if(readers.begin(), readers.end(),
                             [&](const hf::ModelTypeReader& entry) { return type == entry.model_type; });
  if (reader == readers.end()) {
    // No did-you-mean: a near name is a different architecture (mixtral is not mistral).
    throw InputError(file, "model_type",
                     "unsupported model_type '" + type + "' (supported: " + joined(supported_hf_model_types()) +
                         "); for another architecture, capture the model's layer graph from its PyTorch code "
                         "with capture/oomcast_capture.py and give that file as the model");
  }
  ModelConfig model;
  model.source = path;
  // The model folder's name, as from_pretrained's argument names it; a config.json given by a
  // bare or "./" path is named by the folder it sits in, not "" or ".".
  model.name = std::filesystem::absolute(path).lexically_normal().parent_path().filename().string();
  if (model.name.empty()) model.name = "hf-model";
  hf::HfConfigFields fields(config, path);
  reader->read(fields, model);
  for (const auto& note : fields.notes()) model.warnings.push_back(path + ": " + note);
  std::vector<std::string> unread = fields.unread_keys();
  if (!unread.empty()) {
    model.warnings.push_back(path + ": config.json keys not modelled (they may change memory): " + joined(unread));
  }
  return model;
}

}  // namespace oomcast::planner
