// OOM texts, assembled piece by piece as PyTorch's allocator does (note the double spaces
// before "See documentation", which are in the original).
#include "sim/oom_message.h"

#include <cstdio>

#include "sim/allocator_release_facts.h"

namespace oomcast::sim {

std::string format_size(uint64_t bytes) {
  char buffer[64];
  if (bytes <= 1024) {
    std::snprintf(buffer, sizeof buffer, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes <= 1048576) {
    std::snprintf(buffer, sizeof buffer, "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes <= 1073741824) {
    std::snprintf(buffer, sizeof buffer, "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  }
  return buffer;
}

// 2.1 (PR #99699): the first "total capacity" text, with its typo, the max_split_size_mb
// hint and no URL.
std::string oom_message_2_1(const OomFigures& f) {
  std::string text = "CUDA out of memory. Tried to allocate " + format_size(f.alloc_size) + ". GPU " +
                     std::to_string(f.device_index) + " has a total capacty of " + format_size(f.device_total) +
                     " of which " + format_size(f.device_free) + " is free. ";
  if (f.nvml_available)
    text += "Including non-PyTorch memory, this process has " + format_size(f.process_in_use) + " memory in use. ";
  uint64_t unallocated = f.reserved_bytes > f.allocated_bytes ? f.reserved_bytes - f.allocated_bytes : 0;
  text += "Of the allocated memory " + format_size(f.allocated_bytes) + " is allocated by PyTorch, and " +
          format_size(unallocated) +
          " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
          "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
          "PYTORCH_CUDA_ALLOC_CONF";
  return text;
}

std::string current_oom_message(const OomFigures& f) {
  const AllocatorReleaseFacts& release = allocator_release_facts(f.torch_version);
  if (!release.oom_text_total_capacity) return legacy_oom_message(f);
  if (release.oom_text_capacity_typo) return oom_message_2_1(f);
  std::string text = "CUDA out of memory. Tried to allocate " + format_size(f.alloc_size) + ". GPU " +
                     std::to_string(f.device_index) + " has a total capacity of " + format_size(f.device_total) +
                     " of which " + format_size(f.device_free) + " is free. ";
  if (f.nvml_available)
    text += "Including non-PyTorch memory, this process has " + format_size(f.process_in_use) + " memory in use. ";
  if (f.memory_fraction_set && release.oom_text_allowed_bytes) text += format_size(f.allowed_bytes) + " allowed; ";
  uint64_t in_private_pools = release.oom_text_counts_private_pools ? f.cached_in_private_pools : 0;
  uint64_t allocated = f.allocated_bytes + in_private_pools;
  uint64_t unallocated = f.reserved_bytes > allocated ? f.reserved_bytes - allocated : 0;
  text += "Of the allocated memory " + format_size(allocated) + " is allocated by PyTorch, ";
  if (in_private_pools > 0) text += "with " + format_size(in_private_pools) + " allocated in private pools (e.g., CUDA Graphs), ";
  text += "and " + format_size(unallocated) + " is reserved by PyTorch but unallocated.";
  const bool hint = !(f.expandable_segments && release.oom_text_no_hint_when_expandable);
  if (hint)
    text += " If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  if (release.oom_text_docs_pytorch_org_url) {
    text += "  See documentation for Memory Management  "
            "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
  } else {
    text += "  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
  }
  return text;
}

std::string legacy_oom_message(const OomFigures& f) {
  std::string text = "CUDA out of memory. Tried to allocate " + format_size(f.alloc_size) + " (GPU " +
                     std::to_string(f.device_index) + "; " + format_size(f.device_total) + " total capacity; " +
                     format_size(f.allocated_bytes) + " already allocated; " + format_size(f.device_free) + " free; ";
  if (f.memory_fraction_set) text += format_size(f.allowed_bytes) + " allowed; ";
  text += format_size(f.reserved_bytes) +
          " reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
          "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
          "PYTORCH_CUDA_ALLOC_CONF";
  return text;
}

}  // namespace oomcast::sim
