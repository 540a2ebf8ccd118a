// A PEFT adapter_config.json (what save_pretrained writes beside the adapter weights, or
// LoraConfig(...).save_pretrained) read as it is into `training.trainable`: LoRA or IA3 with
// PEFT's own key names. Keys that may change memory and are not modelled (modules_to_save,
// rank_pattern, layers_to_transform, ...) become warnings; DoRA and the other PEFT methods are
// refused at their key, naming the file and line.
#pragma once

#include <string>
#include <vector>

#include "scenario/job_config.h"

namespace oomcast::scenario {

struct PeftAdapter {
  LoraConfig lora;                    // enabled for peft_type LORA
  Ia3Config ia3;                      // enabled for peft_type IA3
  std::vector<std::string> warnings;
};

// `path` is the JSON file, or a folder holding adapter_config.json. Throws InputError.
PeftAdapter read_peft_adapter_config(const std::string& path);

// True when a `training.trainable` word names such a file or folder (ends in .json, or is a
// folder with an adapter_config.json, relative to `base_dir`).
bool names_peft_adapter_config(const std::string& word, const std::string& base_dir);

}  // namespace oomcast::scenario
