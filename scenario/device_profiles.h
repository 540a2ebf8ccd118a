// Device profiles: what each GPU looks like to a PyTorch process (cudaMemGetInfo total, CUDA
// context, cuBLAS workspaces), plus `cpu` for comparing with traces recorded on a CPU.
// Every number's source is in device_profiles.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scenario/device_throughput.h"
#include "scenario/scenario.h"

namespace oomcast::scenario {

struct DeviceProfile {
  std::string name;                  // canonical key: "a100-80gb", "rtx-3090", "cpu"
  std::string display_name;          // "A100-80GB"
  uint64_t total_bytes = 0;          // cudaMemGetInfo total (what the OOM text calls capacity)
  uint64_t context_bytes = 0;        // CUDA context fallback; the value used comes from outside_allocator.yaml
  uint64_t cublas_workspace_bytes = 0;  // one cuBLAS workspace, allocated through the allocator
  int64_t cublas_workspaces = 0;     // workspaces a process running backward holds
  int compute_capability = 0;        // 80 = sm_80; 0 for cpu
  double host_link_gbps = 0.0;       // effective PCIe host<->GPU bandwidth, GB/s (sources in .cc)
  double peak_tflops = 0.0;          // dense bf16/fp16 tensor-core peak, TFLOP/s (spec sheets)
  DeviceThroughput throughput;       // per-dtype peaks and bandwidths for the step-time model
  bool is_cpu = false;
};

// The cuBLAS workspace PyTorch allocates per (handle, stream) on a GPU of this compute
// capability: 32 MiB on sm_90, else 8,519,680 B (../shared/docs/allocator-spec.md §9).
uint64_t default_cublas_workspace_bytes(int compute_capability);

// The CUDA context used when no row of scenario/outside_allocator.yaml matches.
inline constexpr uint64_t kDefaultContextBytes = 512ull << 20;

// Workspaces held by a process that runs backward: the forward thread's and the autograd
// thread's cuBLAS handles each get one (../shared/docs/allocator-spec.md §14 C5).
inline constexpr int64_t kTrainingCublasWorkspaces = 2;

// All profiles, GPUs first, `cpu` last.
const std::vector<DeviceProfile>& device_profiles();

// The canonical names, for "did you mean" and documentation.
std::vector<std::string> device_profile_names();

// Finds a profile by name, ignoring case, spaces, dashes and underscores ("RTX 3090",
// "rtx-3090" and "rtx3090" are the same); nullptr when there is none.
const DeviceProfile* find_device_profile(std::string_view name);

// " (did you mean 'a100-80gb'?)" for a near-miss name, "" when nothing is close. A name that
// begins profile names is matched by prefix first: "a100" is closer to "a10g" by edit
// distance than to "a100-80gb".
std::string device_did_you_mean(std::string_view name);

// The scenario's device section for a profile, before any per-scenario adjustments, with the
// outside-allocator figures of the default torch release.
DeviceConfig device_config_from_profile(const DeviceProfile& profile);

}  // namespace oomcast::scenario
