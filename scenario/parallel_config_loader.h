// Reads a scenario's `parallel:` section (docs/scenario-format.md#parallel), including a
// DeepSpeed JSON config given as it is, and reconciles it with the rest of the scenario
// (precision, batch size, accumulation steps, the device's memory outside the allocator).
#pragma once

#include <string>

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// `root` is the scenario document's root map; `base_dir` resolves deepspeed_config paths.
// Call after precision, batch_size, grad_accum_steps and device are read. Throws InputError
// naming file, line and key.
void read_parallel_section(const YamlNode& root, const std::string& base_dir, Scenario& scenario);

// NCCL buffers assumed per rank when the scenario does not give parallel.nccl_buffer_mib.
uint64_t default_nccl_buffer_bytes(int64_t world_size);

}  // namespace oomcast::scenario
