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

namespace oomcast::scenario {

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

// The config.json as a JSON object; InputError for invalid JSON or another top-level type.
nlohmann::json read_config_object(const std::string& path) {
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
  return config;
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
  const nlohmann::json config = read_config_object(path);
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

std::optional<WeightsConfig> checkpoint_weights(const std::string& config_path) {
  const SourceLocation file{config_path, 0, 0, -1};
  const nlohmann::json config = read_config_object(config_path);
  if (!config.contains("quantization_config")) return std::nullopt;
  const nlohmann::json& q = config["quantization_config"];
  if (!q.is_object()) throw InputError(file, "quantization_config", "'quantization_config' must be an object");
  auto text = [&](const char* key, const std::string& fallback) {
    return q.contains(key) && q[key].is_string() ? q[key].get<std::string>() : fallback;
  };
  auto flag = [&](const char* key) { return q.contains(key) && q[key].is_boolean() && q[key].get<bool>(); };
  const std::string method = text("quant_method", "bitsandbytes");
  if (method != "bitsandbytes") {
    throw InputError(file, "quantization_config",
                     "the checkpoint is quantized with " + method +
                         ", which oomcast does not model; planning it as unquantized weights would be wrong. Give "
                         "'weights:' in the scenario to say how its weights are stored (e.g. weights: nf4 for 4-bit)");
  }
  WeightsConfig weights;
  if (flag("load_in_4bit")) {
    // BitsAndBytesConfig's defaults: quant type fp4, no double quant, compute dtype float32.
    weights.format = text("bnb_4bit_quant_type", "fp4") == "nf4" ? WeightFormat::Nf4 : WeightFormat::Fp4;
    weights.double_quant = flag("bnb_4bit_use_double_quant");
    const std::string compute = text("bnb_4bit_compute_dtype", "float32");
    weights.compute_dtype = compute == "bfloat16"  ? WeightFormat::Bf16
                            : compute == "float16" ? WeightFormat::Fp16
                                                   : WeightFormat::Fp32;
  } else if (flag("load_in_8bit")) {
    weights.format = WeightFormat::Int8;
  } else {
    throw InputError(file, "quantization_config", "a bitsandbytes quantization_config needs load_in_4bit or load_in_8bit");
  }
  if (q.contains("llm_int8_skip_modules") && q["llm_int8_skip_modules"].is_array()) {
    weights.skip_modules.clear();
    for (const auto& name : q["llm_int8_skip_modules"]) {
      if (name.is_string()) weights.skip_modules.push_back(name.get<std::string>());
    }
    // transformers keeps the output head unquantized whatever the list says (get_keys_to_not_convert).
    if (std::find(weights.skip_modules.begin(), weights.skip_modules.end(), "lm_head") == weights.skip_modules.end()) {
      weights.skip_modules.push_back("lm_head");
    }
  }
  return weights;
}

}  // namespace oomcast::scenario
