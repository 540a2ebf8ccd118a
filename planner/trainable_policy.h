// Which parameters train and which linears get LoRA adapters or quantized weights, decided
// from the parameter's or module's qualified name (`transformer.h.3.attn.c_attn.weight`) so it
// works for every family and for graph files alike. Names follow model.named_parameters().
#pragma once

#include <string>

#include "planner/precision.h"
#include "scenario/job_config.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// True when `pattern` names `name`: equal, or a run of whole dotted components of it
// ("h.11" names "transformer.h.11.ln_1.weight", "wte" names "transformer.wte.weight"), or a
// glob with `*` over the whole name.
bool name_matches(const std::string& pattern, const std::string& name);

// requires_grad of a base-model parameter (LoRA adapters are always trainable).
bool parameter_trainable(const scenario::TrainableConfig& config, const std::string& parameter_name);

// PEFT's target_modules rule for the linear module `module` (its qualified name): a listed name
// equals the module's name or ends it after a dot; "all-linear" takes every linear but the
// output head (lm_head).
bool lora_targets(const scenario::LoraConfig& lora, const std::string& module);

// The base weights of linear `module` are stored quantized (weights.format int8/nf4/fp4 and
// the module not in skip_modules).
bool quantized_linear(const scenario::WeightsConfig& weights, const std::string& module);

// The dtype a 16-bit/fp32 `weights.format` (or a quantized format's compute dtype) gives the
// parameters; `fallback` (the precision's) when the format is the default.
DType weights_parameter_dtype(const scenario::WeightsConfig& weights, DType fallback);

// The precision rules with the job's overrides: parameter dtype from `weights`, fp32 master
// weights off with training.master_weights false.
PrecisionRules job_precision_rules(const scenario::Scenario& scenario);

// PEFT's enable_input_require_grads() is on for this scenario (explicitly, or by default when
// checkpointing runs with frozen parameters).
bool input_require_grads(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
