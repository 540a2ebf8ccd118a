// DeepSpeed zero_optimization keys the planner models, by DeepSpeed's own names, shared by the
// YAML reader (parallel_config_loader.cc) and the DeepSpeed JSON reader.
#pragma once

#include <cstdint>
#include <string_view>

#include "scenario/parallel_config.h"

namespace oomcast::scenario::zero_keys {

struct CountKey {
  const char* name;
  int64_t ZeroConfig::*member;
};
inline constexpr CountKey kCounts[] = {
    {"reduce_bucket_size", &ZeroConfig::reduce_bucket_size},
    {"allgather_bucket_size", &ZeroConfig::allgather_bucket_size},
    {"stage3_prefetch_bucket_size", &ZeroConfig::stage3_prefetch_bucket_size},
    {"stage3_max_live_parameters", &ZeroConfig::stage3_max_live_parameters},
    {"stage3_max_reuse_distance", &ZeroConfig::stage3_max_reuse_distance},
    {"stage3_param_persistence_threshold", &ZeroConfig::stage3_param_persistence_threshold},
    {"sub_group_size", &ZeroConfig::sub_group_size},
};

struct FlagKey {
  const char* name;
  bool ZeroConfig::*member;
};
inline constexpr FlagKey kFlags[] = {
    {"contiguous_gradients", &ZeroConfig::contiguous_gradients},
    {"overlap_comm", &ZeroConfig::overlap_comm},
};

// HF Trainer's resolution of "auto" (transformers/integrations/deepspeed.py): buckets and
// thresholds from the model's hidden size.
inline int64_t auto_value(const char* name, int64_t hidden, int64_t fallback) {
  if (hidden <= 0) return fallback;
  const std::string_view key(name);
  if (key == "reduce_bucket_size") return hidden * hidden;
  if (key == "stage3_prefetch_bucket_size") return static_cast<int64_t>(0.9 * static_cast<double>(hidden * hidden));
  if (key == "stage3_param_persistence_threshold") return 10 * hidden;
  return fallback;
}

}  // namespace oomcast::scenario::zero_keys
