// PEFT adapter_config.json -> LoRA or IA3 (peft_adapter_config.h). Key names and defaults are
// PEFT's (peft 0.17, tuners/lora/config.py LoraConfig and tuners/ia3/config.py IA3Config). The
// JSON is read through the YAML reader (JSON is YAML), so every error has its line.
#include "scenario/peft_adapter_config.h"

#include <algorithm>
#include <filesystem>

#include "base/input_error.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

namespace fs = std::filesystem;

namespace {

// Keys that leave memory unchanged: provenance, initialisation, the adapter's scaling rule.
const std::vector<std::string> kNoMemoryEffect = {
    "peft_type", "base_model_name_or_path", "revision", "task_type", "inference_mode", "fan_in_fan_out",
    "init_lora_weights", "init_ia3_weights", "use_rslora", "megatron_config", "megatron_core", "loftq_config",
    "eva_config", "corda_config", "runtime_config", "auto_mapping", "peft_version", "layers_pattern",
    "alpha_pattern", "qalora_group_size", "ensure_weight_tying", "alora_invocation_tokens", "arrow_config"};

bool is_empty_value(const YamlNode& node) {
  if (node.is_missing() || node.kind() == YamlNode::Kind::Null) return true;
  if (node.is_map()) return node.keys().empty();
  if (node.is_sequence()) return node.items().empty();
  if (node.is_scalar()) {
    const std::string text = node.as_string();
    return text == "false" || text == "False";
  }
  return false;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// target_modules: a list of names, or a string, which PEFT reads as "all-linear" or a regex.
std::vector<std::string> target_modules(const YamlNode& node) {
  if (node.is_missing() || node.kind() == YamlNode::Kind::Null) {
    node.fail("'target_modules' is null: PEFT fills it from the model type when it wraps the model; "
              "write the module names the adapter was saved with");
  }
  if (node.is_scalar()) {
    const std::string text = node.as_string();
    if (text != "all-linear") {
      node.fail("'target_modules' '" + text + "' is a regular expression to PEFT, which is not modelled: list the module names");
    }
    return {text};
  }
  std::vector<std::string> names = node.as_string_list();
  if (names.empty()) node.fail("'target_modules' is empty: the adapter adapts nothing");
  return names;
}

}  // namespace

bool names_peft_adapter_config(const std::string& word, const std::string& base_dir) {
  fs::path path(word);
  if (path.is_relative()) path = fs::path(base_dir) / path;
  std::error_code error;
  return word.ends_with(".json") || fs::is_regular_file(path / "adapter_config.json", error);
}

PeftAdapter read_peft_adapter_config(const std::string& given) {
  std::error_code error;
  const std::string path = fs::is_directory(given, error) ? (fs::path(given) / "adapter_config.json").string() : given;
  if (!fs::is_regular_file(path, error)) {
    throw InputError(SourceLocation{}, "training.trainable", "PEFT adapter config '" + path + "' does not exist");
  }
  const YamlDocument document = YamlDocument::load_file(path);
  const YamlNode root = document.root();
  root.require_map();
  PeftAdapter adapter;
  std::vector<std::string> known = kNoMemoryEffect;
  auto warn_unless_empty = [&](const std::string& key, const std::string& why) {
    known.push_back(key);
    if (!is_empty_value(root.child(key))) adapter.warnings.push_back(path + ": '" + key + "' " + why);
  };
  const YamlNode type = root.child("peft_type");
  if (type.is_missing()) root.fail("no 'peft_type': not a PEFT adapter_config.json");
  const std::string method = type.as_string();
  if (method == "LORA") {
    LoraConfig& lora = adapter.lora;
    lora.enabled = true;
    // PEFT's defaults when a key is absent: r 8, lora_alpha 8, lora_dropout 0, bias "none".
    lora.r = root.integer_or("r", 8, 1, 1 << 16);
    lora.alpha = root.number_or("lora_alpha", 8.0, 0.0, 1e9);
    lora.dropout = root.number_or("lora_dropout", 0.0, 0.0, 0.999999);
    lora.target_modules = target_modules(root.child("target_modules"));
    lora.bias = root.choice_or("bias", "none", {"none", "all", "lora_only"});
    // peft.get_peft_model(autocast_adapter_dtype=True) by default: fp32 adapters on a 16-bit base.
    lora.autocast_adapter_dtype = true;
    const YamlNode dora = root.child("use_dora");
    if (!dora.is_missing() && dora.kind() != YamlNode::Kind::Null && dora.as_bool()) {
      dora.fail("'use_dora' (DoRA: the weight norm of W + BA per adapted linear) is not modelled yet");
    }
    known.insert(known.end(), {"r", "lora_alpha", "lora_dropout", "target_modules", "bias", "use_dora"});
    warn_unless_empty("modules_to_save", "is not modelled: PEFT trains a full copy of each listed module "
                                         "(weights, gradients and optimizer state), not planned");
    warn_unless_empty("rank_pattern", "is not modelled: the adapters are planned at r " + std::to_string(lora.r));
    warn_unless_empty("layers_to_transform", "is not modelled: adapters are planned on every layer");
    warn_unless_empty("exclude_modules", "is not modelled: every target module is planned with an adapter");
    warn_unless_empty("target_parameters", "is not modelled (adapters on nn.Parameter targets)");
    warn_unless_empty("trainable_token_indices", "is not modelled (trainable embedding rows)");
    warn_unless_empty("lora_bias", "is not modelled (a bias on lora_B)");
    warn_unless_empty("use_qalora", "is not modelled (QALoRA's pooled adapter input)");
    warn_unless_empty("layer_replication", "is not modelled (replicated layers)");
  } else if (method == "IA3") {
    Ia3Config& ia3 = adapter.ia3;
    ia3.enabled = true;
    ia3.target_modules = target_modules(root.child("target_modules"));
    const YamlNode feedforward = root.child("feedforward_modules");
    if (!is_empty_value(feedforward)) ia3.feedforward_modules = feedforward.as_string_list();
    for (const std::string& module : ia3.feedforward_modules) {
      if (std::find(ia3.target_modules.begin(), ia3.target_modules.end(), module) == ia3.target_modules.end()) {
        feedforward.fail("'feedforward_modules' " + module + " is not in target_modules (PEFT requires a subset)");
      }
    }
    known.insert(known.end(), {"target_modules", "feedforward_modules"});
    warn_unless_empty("modules_to_save", "is not modelled: PEFT trains a full copy of each listed module, not planned");
    warn_unless_empty("exclude_modules", "is not modelled: every target module is planned with a vector");
  } else {
    type.fail("PEFT method '" + method + "' is not modelled yet (LORA and IA3 are)");
  }
  std::vector<std::string> unknown;
  for (const auto& key : root.keys()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) unknown.push_back(key);
  }
  if (!unknown.empty()) {
    adapter.warnings.push_back(path + ": adapter_config.json keys not known, not planned (they may change memory): " +
                               joined(unknown));
  }
  return adapter;
}

}  // namespace oomcast::scenario
