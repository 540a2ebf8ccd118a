// Reads a DeepSpeed JSON config file as users pass it to deepspeed.initialize: the modelled
// keys (zero_optimization, bf16/fp16, batch sizes), "auto" values resolved as Hugging Face's
// Trainer does, and every other key listed as not modelled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenario/parallel_config.h"

namespace oomcast::scenario {

enum class HalfPrecision { Unset, Disabled, Bf16, Fp16 };

struct DeepSpeedJson {
  ZeroConfig zero;
  bool overlap_comm_given = false;
  HalfPrecision half = HalfPrecision::Unset;     // Unset: absent or "auto"
  std::vector<std::string> half_auto;            // "bf16" / "fp16" whose enabled is "auto" (HF Trainer)
  std::optional<int64_t> micro_batch;            // train_micro_batch_size_per_gpu
  std::optional<int64_t> grad_accum;             // gradient_accumulation_steps
  std::optional<int64_t> train_batch_size;
  std::vector<std::string> warnings;
};

// `hidden` is the model's hidden size for "auto" buckets (0 when unknown). Throws InputError
// naming the file, line and key.
DeepSpeedJson read_deepspeed_json(const std::string& path, int64_t hidden);

}  // namespace oomcast::scenario
