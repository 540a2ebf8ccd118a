// The command line of validate/cuda_replay, in plain C++ so CI runs it against a fake GPU:
//   cuda_replay TRACE [--segments] [--raw] [--alloc-conf CONF] [--csv FILE] [--probe-every N]
//   cuda_replay --context [--csv FILE]
// Exit codes: 0 done, 1 a CUDA call failed (everything freed), 2 bad input, 77 no GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "validate/device_replay_run.h"

namespace oomcast::validate {

// The process's CUDA context as measured when the runtime opened the device.
struct ContextMeasurement {
  std::string gpu_name;                    // "NVIDIA H200"
  int compute_capability = 0;              // 90
  int runtime_version = 0;                 // cudaRuntimeGetVersion: 13000
  int driver_version = 0;                  // cudaDriverGetVersion
  std::string module_loading;              // CUDA_MODULE_LOADING as set, or "unset"
  uint64_t total_bytes = 0;                // cudaMemGetInfo total
  uint64_t used_after_init_bytes = 0;      // total - free once the context exists
  // NVML's device used memory before and after the context was created. NVML and
  // cudaMemGetInfo count differently (NVML leaves out driver-reserved memory), so the context
  // is taken from NVML alone: after - before; without NVML, cudaMemGetInfo's used after init
  // (an upper bound: other processes and driver reservations are included).
  std::optional<uint64_t> nvml_used_before_bytes;
  std::optional<uint64_t> nvml_used_after_bytes;
  uint64_t context_bytes() const;
  std::string context_method() const;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  // Creates the context and measures it; returns an error text when there is no usable GPU.
  virtual std::optional<std::string> open(ContextMeasurement& measurement) = 0;
  virtual ReplayDevice& device() = 0;
};

// Parses the arguments, reads the trace, plans, runs and reports. Output goes to `out`
// (CSV unless --csv names a file, then the summary), messages to `err`.
int cuda_replay_main(int argc, const char* const* argv, DeviceRuntime& runtime, std::ostream& out, std::ostream& err);

// The CSV rows of a context measurement (mode "context", phase = the module loading).
void write_context_csv(std::ostream& out, const ContextMeasurement& measurement, bool header);

}  // namespace oomcast::validate
