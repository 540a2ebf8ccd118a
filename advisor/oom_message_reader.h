// read_oom_message(): the inverse of sim/oom_message: PyTorch's "CUDA out of memory" text, in
// each format torch has printed (spec §5: the 1.x "(GPU 0; X total capacity; ...)" with
// "reserved in total by PyTorch" or the older "cached", 2.1's "total capacty", 2.2+'s "total
// capacity ... Of the allocated memory ...", private pools, allowed bytes, process lines),
// turned back into the figures it was built from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oomcast::advisor {

enum class OomMessageFormat {
  Cached,       // <= 1.4 or so: "...; F free; C cached)"
  Legacy,       // 1.5 - 2.0: "...; F free; R reserved in total by PyTorch)"
  Torch21,      // 2.1: "GPU d has a total capacty of ..." (sic), max_split_size_mb hint
  Current,      // 2.2+: "GPU d has a total capacity of ..."
  OverOneExbibyte,  // "Tried to allocate more than 1EB memory."
};

// A line "Process 562167 has 15.25 GiB memory in use." (pid 0: "this process").
struct ProcessUsage {
  int64_t pid = 0;
  bool this_process = false;
  uint64_t bytes = 0;
};

// The figures of one message. Sizes are format_size's two-decimal values turned back into
// bytes, so each is exact to within half a unit of its last digit.
struct OomMessageFigures {
  OomMessageFormat format = OomMessageFormat::Current;
  std::string backend = "CUDA";        // "HIP" on ROCm builds
  uint64_t alloc_size = 0;             // "Tried to allocate": the segment size it tried (spec §5.2)
  int device_index = 0;
  uint64_t device_total = 0;
  uint64_t device_free = 0;
  std::vector<ProcessUsage> processes;  // 2.1+ with NVML
  std::optional<uint64_t> allowed_bytes;  // set_per_process_memory_fraction
  // allocated_bytes as printed: 2.4+ includes the free blocks cached in private pools.
  uint64_t allocated_by_pytorch = 0;
  uint64_t in_private_pools = 0;       // 2.4+: "with X allocated in private pools"
  uint64_t reserved_unallocated = 0;   // 2.1+ prints it; legacy: reserved - allocated
  uint64_t reserved = 0;               // legacy prints it; 2.1+: allocated + unallocated
  bool reserved_known = true;          // false for the "cached" format (C is the cache, not all reserved)
};

// Finds the message inside `text` (a traceback, a log) and reads it. Returns none when the
// text holds no allocator OOM message ("CUDA error: out of memory" from cuBLAS or NCCL is not
// one: it does not come from the caching allocator).
std::optional<OomMessageFigures> read_oom_message(const std::string& text);

// Parses "546.00 MiB", "0 bytes", "1.02 GiB" (format_size's output) into bytes.
std::optional<uint64_t> parse_format_size(const std::string& number, const std::string& unit);

const char* format_name(OomMessageFormat format);

}  // namespace oomcast::advisor
