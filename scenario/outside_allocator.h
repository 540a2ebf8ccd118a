// Applies the table of memory outside the caching allocator (scenario/outside_allocator.yaml)
// to a scenario's device: picks the CUDA release and module loading (scenario keys or their
// documented defaults), then the CUDA context and the cuBLAS workspace, and records where the
// context figure came from so reports can cite it.
#pragma once

#include <optional>
#include <string>

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"
#include "sim/allocator_config.h"

namespace oomcast::scenario {

// What a scenario says about memory outside the allocator; unset fields take the table's
// defaults for the torch release.
struct OutsideAllocatorRequest {
  std::optional<int> cuda_version;               // 1204 = 12.4
  std::optional<std::string> module_loading;     // "lazy" | "eager"
  bool context_given = false;                    // device.context_mib was set (kept as it is)
  std::optional<uint64_t> cublas_workspace_bytes;  // device.cublas_workspace_bytes or _config
};

// Fills `device` (a GPU; cpu is left alone) from the table: cuda_version, module_loading,
// cuda_context_bytes, context_source, model.context_bytes and cublas_workspace_bytes.
void resolve_outside_allocator(const OutsideAllocatorRequest& request, sim::TorchVersion torch_version,
                               DeviceConfig& device);

// Reads device.cuda_version, device.module_loading and device.cublas_workspace_config from
// `device_node` (the scenario's `device` section; a scalar or missing section has none) and
// fills `device`: cuda_version, module_loading, cuda_context_bytes and context_source,
// model.context_bytes (unless device.context_mib is given) and cublas_workspace_bytes (unless
// device.cublas_workspace_bytes is given). Does nothing on the cpu device. Bad values throw
// InputError at their key.
void apply_outside_allocator(const YamlNode& device_node, sim::TorchVersion torch_version, DeviceConfig& device);

}  // namespace oomcast::scenario
