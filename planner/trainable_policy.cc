// Name matching for trainable patterns, LoRA targets and quantized modules; the precision
// overrides of the weights section.
#include "planner/trainable_policy.h"

#include <algorithm>

namespace oomcast::planner {

using scenario::CheckpointMode;
using scenario::Ia3Config;
using scenario::JobConfig;
using scenario::JobKind;
using scenario::LoraConfig;
using scenario::Scenario;
using scenario::TrainableConfig;
using scenario::TrainableKind;
using scenario::WeightFormat;
using scenario::WeightsConfig;

namespace {

bool glob_match(const char* pattern, const char* text) {
  while (*pattern) {
    if (*pattern == '*') {
      while (*pattern == '*') ++pattern;
      if (!*pattern) return true;
      for (const char* rest = text; *rest; ++rest) {
        if (glob_match(pattern, rest)) return true;
      }
      return false;
    }
    if (*text == '\0' || *pattern != *text) return false;
    ++pattern;
    ++text;
  }
  return *text == '\0';
}

bool ends_with_component(const std::string& name, const std::string& suffix) {
  if (name == suffix) return true;
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         name[name.size() - suffix.size() - 1] == '.';
}

// The module part of a parameter name: "a.b.weight" -> "a.b".
std::string module_of(const std::string& parameter_name) {
  size_t dot = parameter_name.rfind('.');
  return dot == std::string::npos ? std::string() : parameter_name.substr(0, dot);
}

}  // namespace

bool name_matches(const std::string& pattern, const std::string& name) {
  if (pattern.find('*') != std::string::npos) return glob_match(pattern.c_str(), name.c_str());
  if (pattern == name) return true;
  // A run of whole components: the pattern bounded by dots (or the ends) inside the name.
  for (size_t at = name.find(pattern); at != std::string::npos; at = name.find(pattern, at + 1)) {
    bool starts = at == 0 || name[at - 1] == '.';
    size_t end = at + pattern.size();
    bool ends = end == name.size() || name[end] == '.';
    if (starts && ends) return true;
  }
  return false;
}

bool parameter_trainable(const TrainableConfig& config, const std::string& parameter_name) {
  bool trainable = config.kind == TrainableKind::All;
  if (config.kind == TrainableKind::Patterns) {
    trainable = std::any_of(config.patterns.begin(), config.patterns.end(),
                            [&](const std::string& pattern) { return name_matches(pattern, parameter_name); });
  }
  if (config.lora.enabled && ends_with_component(parameter_name, "bias")) {
    // PEFT's bias="all" trains every bias; "lora_only" those of the adapted modules.
    if (config.lora.bias == "all") trainable = true;
    if (config.lora.bias == "lora_only" && lora_targets(config.lora, module_of(parameter_name))) trainable = true;
  }
  for (const std::string& pattern : config.freeze) {
    if (name_matches(pattern, parameter_name)) trainable = false;
  }
  return trainable;
}

bool lora_targets(const LoraConfig& lora, const std::string& module) {
  if (!lora.enabled) return false;
  for (const std::string& target : lora.target_modules) {
    if (target == "all-linear") {
      if (!ends_with_component(module, "lm_head")) return true;
    } else if (ends_with_component(module, target)) {
      return true;
    }
  }
  return false;
}

bool ia3_targets(const Ia3Config& ia3, const std::string& module) {
  if (!ia3.enabled) return false;
  return std::any_of(ia3.target_modules.begin(), ia3.target_modules.end(),
                     [&](const std::string& target) { return ends_with_component(module, target); });
}

bool ia3_feedforward(const Ia3Config& ia3, const std::string& module) {
  // IA3Model._check_target_module_feedforward: a plain key.endswith(target_key).
  return std::any_of(ia3.feedforward_modules.begin(), ia3.feedforward_modules.end(), [&](const std::string& target) {
    return module.size() >= target.size() && module.compare(module.size() - target.size(), target.size(), target) == 0;
  });
}

bool quantized_linear(const WeightsConfig& weights, const std::string& module) {
  if (!weights.quantized()) return false;
  return std::none_of(weights.skip_modules.begin(), weights.skip_modules.end(),
                      [&](const std::string& skip) { return name_matches(skip, module); });
}

DType weights_parameter_dtype(const WeightsConfig& weights, DType fallback) {
  WeightFormat format = weights.quantized() ? weights.compute_dtype : weights.format;
  if (weights.quantized() && format == WeightFormat::Default) format = WeightFormat::Bf16;
  switch (format) {
    case WeightFormat::Fp32: return DType::Float32;
    case WeightFormat::Fp16: return DType::Float16;
    case WeightFormat::Bf16: return DType::BFloat16;
    default: return fallback;
  }
}

PrecisionRules job_precision_rules(const Scenario& scenario) {
  PrecisionRules rules = precision_rules(scenario.precision);
  const JobConfig& job = scenario.job;
  rules.parameter_dtype = weights_parameter_dtype(job.weights, rules.parameter_dtype);
  // prepare_model_for_kbit_training: the parameters left unquantized are fp32 (the 4-bit
  // matmuls keep bnb_4bit_compute_dtype, planner/ops/linear_variants.cc).
  if (job.training.prepare_kbit && job.weights.quantized()) rules.parameter_dtype = DType::Float32;
  if (!rules.autocast) rules.low_dtype = rules.parameter_dtype;
  rules.autocast_device = scenario.device.is_cpu ? AutocastDevice::Cpu : AutocastDevice::Cuda;
  rules.torch_version = scenario.allocator.torch_version;
  if (!job.training.master_weights) rules.fp32_master_weights = false;
  return rules;
}

bool input_require_grads(const Scenario& scenario) {
  const TrainableConfig& training = scenario.job.training;
  if (training.input_require_grads >= 0) return training.input_require_grads == 1;
  return training.any_frozen() && scenario.checkpointing.mode != CheckpointMode::None &&
         scenario.job.job.kind == JobKind::Train;
}

}  // namespace oomcast::planner
