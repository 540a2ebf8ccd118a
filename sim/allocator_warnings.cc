// The interactions between PYTORCH_CUDA_ALLOC_CONF options that the allocator's code
// implies but its documentation does not spell out.
#include "sim/allocator_warnings.h"

#include "sim/allocator_release_facts.h"

namespace oomcast::sim {

std::vector<std::string> allocator_config_warnings(const AllocatorConfig& config, bool memory_fraction_set) {
  std::vector<std::string> warnings;
  const bool max_split_set = config.max_split_size != AllocatorConfig::kUnlimited;
  if (config.expandable_segments && max_split_set)
    warnings.push_back(
        "max_split_size_mb with expandable_segments:True: expandable blocks are split whatever their size, so it "
        "does not limit splitting; it only keeps cached blocks of max_split_size_mb or more from serving smaller "
        "requests (more pages get mapped), and the OOM retry does not release expandable blocks for it");
  if (config.garbage_collection_threshold > 0.0 && !memory_fraction_set)
    warnings.push_back(
        "garbage_collection_threshold has no effect: the allocator collects only when a per-process memory "
        "fraction is set (torch.cuda.set_per_process_memory_fraction)");
  if (config.garbage_collection_threshold > 0.0 && config.expandable_segments)
    warnings.push_back(
        "garbage_collection_threshold with expandable_segments:True: garbage collection frees only whole "
        "non-expandable segments, so it reclaims nothing here");
  const AllocatorReleaseFacts& release = allocator_release_facts(config.torch_version);
  if (release.conf_max_non_split_rounding_mb && !max_split_set && config.max_non_split_rounding_size != (20ull << 20))
    warnings.push_back(
        "max_non_split_rounding_mb has no effect without max_split_size_mb: it only bounds how much larger a "
        "cached block may be when it serves a request of max_split_size_mb or more");
  if (!release.roundup_one_division_rounds) {
    for (uint64_t divisions : config.roundup_power2_divisions) {
      if (divisions == 1) {
        warnings.push_back(
            "roundup_power2_divisions of 1 on torch 2.3 and earlier turns off even the 512-byte rounding for "
            "the sizes it covers (fixed in 2.4): blocks get odd sizes and split unaligned");
        break;
      }
    }
  }
  return warnings;
}

}  // namespace oomcast::sim
