// The device a recording (trace or snapshot) is replayed on, as `replay` and `doctor` take it
// (--device PROFILE, or --device-memory TOTAL) and the Python package's replay(): the CUDA
// context the process holds outside the allocator is counted, as `plan` counts it
// (scenario/outside_allocator.yaml), unless a context size is given.
#pragma once

#include <optional>
#include <string>

#include "sim/allocator_config.h"
#include "sim/device_model.h"

namespace oomcast::advisor {

struct ReplayDeviceRequest {
  std::string profile;            // a GPU profile: a100-80gb, h100-80gb, ...
  std::string device_memory;      // a card's total: 40GiB
  std::string context_memory;     // outside the allocator: 500MiB; empty: the device's CUDA context
  double memory_fraction = -1.0;  // set_per_process_memory_fraction; -1: not given
};

// The device the request describes, or nothing when it names none (an unbounded replay).
// Throws InputError (keys --device, --device-memory, --context-memory, --memory-fraction) for
// an unknown profile, both a profile and a total, a context or a fraction without a device,
// and a fraction outside (0, 1].
std::optional<sim::DeviceModel> replay_device(const ReplayDeviceRequest& request, sim::TorchVersion torch_version);

}  // namespace oomcast::advisor
