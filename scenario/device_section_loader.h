// Readers of the scenario's `device` and `allocator` sections (docs/scenario-format.md), called
// by the scenario loader. Every error is an InputError at the YAML key that caused it.
#pragma once

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"
#include "sim/allocator_config.h"

namespace oomcast::scenario {

// The device: a known profile ("a100-80gb", "cpu"), or a custom GPU from `total_gib`; missing
// means an A100 80 GB.
DeviceConfig read_device(const YamlNode& node);

// The allocator settings as PyTorch would parse them from one PYTORCH_CUDA_ALLOC_CONF string;
// `memory_fraction` is written into `device`.
sim::AllocatorConfig read_allocator(const YamlNode& node, DeviceConfig& device);

}  // namespace oomcast::scenario
