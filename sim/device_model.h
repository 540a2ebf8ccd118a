// DeviceModel: what the GPU looks like from the allocator's side: total memory, memory held
// outside the allocator (CUDA context, NCCL, other processes) and the per-process fraction.
#pragma once

#include <cstdint>

namespace oomcast::sim {

struct DeviceModel {
  uint64_t total_bytes = 80ull << 30;          // cudaMemGetInfo total
  uint64_t context_bytes = 0;                  // this process, outside the allocator (context, cuBLAS handles)
  uint64_t other_process_bytes = 0;            // used by other processes on the same GPU
  double memory_fraction = 0.0;                // set_per_process_memory_fraction; 0 = not set
  int device_index = 0;                        // the "GPU N" of the OOM text
  bool nvml_available = true;                  // the OOM text lists per-process usage only with NVML

  // Bytes cudaMalloc can still hand out when the allocator holds `reserved` bytes.
  uint64_t free_bytes(uint64_t reserved) const {
    uint64_t used = context_bytes + other_process_bytes + reserved;
    return used >= total_bytes ? 0 : total_bytes - used;
  }
  // What the allocator may reserve: the total less what lives outside it, capped by
  // set_per_process_memory_fraction (which PyTorch takes of the total).
  uint64_t usable_bytes() const {
    uint64_t outside = context_bytes + other_process_bytes;
    uint64_t usable = total_bytes > outside ? total_bytes - outside : 0;
    if (memory_fraction > 0.0) {
      const auto allowed = static_cast<uint64_t>(memory_fraction * static_cast<double>(total_bytes));
      usable = usable < allowed ? usable : allowed;
    }
    return usable;
  }
  // A device with effectively unlimited memory (for replaying recorded snapshots).
  static DeviceModel unlimited() {
    DeviceModel device;
    device.total_bytes = 1ull << 60;
    return device;
  }
};

}  // namespace oomcast::sim
