// The exact text of PyTorch's "CUDA out of memory" error, current and legacy forms (spec §5).
#pragma once

#include <cstdint>
#include <string>

namespace oomcast::sim {

// format_size from the allocator: "512 bytes", "1.50 KiB", "20.00 MiB", "4.50 GiB".
std::string format_size(uint64_t bytes);

// The numbers the message is built from, all as PyTorch computes them at the failure.
struct OomFigures {
  uint64_t alloc_size = 0;          // the segment size it tried to get (not the request)
  int device_index = 0;
  uint64_t device_total = 0;        // cudaMemGetInfo total
  uint64_t device_free = 0;         // cudaMemGetInfo free, after the allocator's releases
  bool nvml_available = true;
  uint64_t process_in_use = 0;      // NVML: this process (context + reserved + outside)
  bool memory_fraction_set = false;
  uint64_t allowed_bytes = 0;       // fraction x total
  uint64_t allocated_bytes = 0;     // allocated_bytes.all.current
  uint64_t reserved_bytes = 0;      // reserved_bytes.all.current
  uint64_t cached_in_private_pools = 0;  // free cached blocks of graph pools and MemPools (2.4+ text)
  bool expandable_segments = false;
  int torch_version = 206;          // 100*major + minor
};

// The message of torch.cuda.OutOfMemoryError in PyTorch 2.2 and later.
std::string current_oom_message(const OomFigures& figures);

// The message of PyTorch 1.10 - 2.0, the one most tutorials quote.
std::string legacy_oom_message(const OomFigures& figures);

// The message for a request of 1 EiB or more, which fails before any search.
inline const char* kOneExbibyteOomMessage = "CUDA out of memory. Tried to allocate more than 1EB memory.";

}  // namespace oomcast::sim
