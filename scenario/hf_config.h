// Reads a Hugging Face config.json (or the model folder holding one) into a ModelConfig of one
// of the built-in families; keys that change memory but are not modelled become warnings in
// ModelConfig::warnings, never silently dropped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenario/job_config.h"
#include "scenario/scenario.h"

namespace oomcast::scenario {

// `path` is a config.json file. Throws InputError naming the file and key.
ModelConfig load_hf_config(const std::string& path);

// The stored weights of a pre-quantized checkpoint, from the config.json's quantization_config
// (transformers' BitsAndBytesConfig: nf4/fp4 with double quant and compute dtype, or int8);
// nullopt when it has none. Throws InputError for a method oomcast does not model (GPTQ, AWQ,
// ...): planning those weights as unquantized would be silently wrong.
std::optional<WeightsConfig> checkpoint_weights(const std::string& config_path);

// The model_type values a config.json may have, sorted.
std::vector<std::string> supported_hf_model_types();

// The config.json's model_type when no family reads it (scenario/hf_capture.h then plans the
// real transformers class), or "" (a family reads it, or the file is bad input that
// load_hf_config reports).
std::string model_type_without_family(const std::string& path);

}  // namespace oomcast::scenario
