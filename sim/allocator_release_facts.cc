// The table of the allocator's per-release facts (sim/allocator_release_facts.h). Each row
// names where the behaviour comes from: the PyTorch pull request when it is known, else the
// file of the release the behaviour was read from (docs/allocator-model.md, "Version
// differences modelled"; /work/shared/docs/allocator-spec.md lists the stored sources).
#include "sim/allocator_release_facts.h"

#include <array>

namespace oomcast::sim {

namespace {

using Facts = AllocatorReleaseFacts;

constexpr AllocatorReleaseFactRow kRows[] = {
    {&Facts::oom_text_total_capacity, "oom_text_total_capacity", 201, 0,
     "PR #99699 (2.1): 'GPU N has a total capacity of X of which Y is free' replaces '(GPU N; X total capacity; ...)'"},
    {&Facts::oom_text_capacity_typo, "oom_text_capacity_typo", 201, 201,
     "c10/cuda/CUDACachingAllocator.cpp of 2.1: 'total capacty', the max_split_size_mb hint, no URL; fixed in 2.2"},
    {&Facts::oom_text_counts_private_pools, "oom_text_counts_private_pools", 204, 0,
     "PR #124673 (2.4): free blocks cached in private pools count as allocated and are named apart"},
    {&Facts::oom_text_allowed_bytes, "oom_text_allowed_bytes", 205, 0,
     "c10/cuda/CUDACachingAllocator.cpp of 2.5: 'N allowed;' after the NVML line when a memory fraction is set"},
    {&Facts::oom_text_docs_pytorch_org_url, "oom_text_docs_pytorch_org_url", 207, 0,
     "c10/cuda/CUDACachingAllocator.cpp of 2.7: the Memory Management link moves to docs.pytorch.org"},
    {&Facts::oom_text_no_hint_when_expandable, "oom_text_no_hint_when_expandable", 211, 0,
     "c10/cuda/CUDACachingAllocator.cpp of 2.11: the expandable_segments hint is left out when they are on"},
    {&Facts::conf_drops_any_whitespace, "conf_drops_any_whitespace", 209, 0,
     "c10/core/AllocatorConfig.cpp (2.9's AcceleratorAllocatorConfig lexer): every whitespace character is dropped"},
    {&Facts::conf_max_non_split_rounding_mb, "conf_max_non_split_rounding_mb", 206, 0,
     "c10/cuda/CUDAAllocatorConfig.cpp of 2.6: max_non_split_rounding_mb (default 20 MiB) replaces kLargeBuffer in "
     "get_free_block's oversize test"},
    {&Facts::conf_pinned_use_background_threads, "conf_pinned_use_background_threads", 206, 0,
     "c10/cuda/CUDAAllocatorConfig.cpp of 2.6: pinned_use_background_threads"},
    {&Facts::conf_split_size_accepts_20, "conf_split_size_accepts_20", 209, 0,
     "c10/core/AllocatorConfig.cpp of 2.9: 'must be >= 20' (2.8 and earlier: '> 20')"},
    {&Facts::conf_roundup_accepts_zero, "conf_roundup_accepts_zero", 204, 0,
     "PR #126833 (2.4): 0 in a roundup_power2_divisions list disables rounding for that interval"},
    {&Facts::conf_roundup_fill_after_last_key, "conf_roundup_fill_after_last_key", 209, 0,
     "c10/core/AllocatorConfig.cpp of 2.9 and its gtest: '>' fills from after the last key (2.8 and earlier "
     "overwrite that key's own entry)"},
    {&Facts::roundup_one_division_rounds, "roundup_one_division_rounds", 204, 0,
     "PR #126830 (2.4): a division count of 1 goes the 512-byte way (before, the division routine returned the "
     "size unchanged)"},
    {&Facts::mem_pool_use_on_oom, "mem_pool_use_on_oom", 208, 0, "PR #151487 (2.8): torch.cuda.MemPool(use_on_oom=)"},
    {&Facts::mem_pool_no_split, "mem_pool_no_split", 210, 0, "PR #169739 (2.10): torch.cuda.MemPool(no_split=)"},
    {&Facts::use_on_oom_pools_before_release, "use_on_oom_pools_before_release", 210, 0,
     "PR #169699 (2.10): use_on_oom pools are tried before any cached block is released (2.8 and 2.9: after the "
     "whole retry)"},
};

constexpr bool holds(const AllocatorReleaseFactRow& row, TorchVersion release) {
  return release >= row.first && (row.last == 0 || release <= row.last);
}

constexpr AllocatorReleaseFacts resolve(TorchVersion release) {
  AllocatorReleaseFacts facts;
  for (const AllocatorReleaseFactRow& row : kRows) {
    if (holds(row, release)) facts.*(row.fact) = true;
  }
  return facts;
}

// Releases are 100 * major + minor; 1.0 to 9.99 covers every version a scenario may name.
constexpr TorchVersion kFirstRelease = 100;
constexpr TorchVersion kLastRelease = 999;

constexpr auto kByRelease = [] {
  std::array<AllocatorReleaseFacts, kLastRelease - kFirstRelease + 1> table{};
  for (TorchVersion release = kFirstRelease; release <= kLastRelease; ++release)
    table[static_cast<size_t>(release - kFirstRelease)] = resolve(release);
  return table;
}();

}  // namespace

std::span<const AllocatorReleaseFactRow> allocator_release_fact_rows() { return kRows; }

const AllocatorReleaseFacts& allocator_release_facts(TorchVersion torch_version) {
  static const AllocatorReleaseFacts kBeforeFirst = resolve(0);
  if (torch_version < kFirstRelease) return kBeforeFirst;
  if (torch_version > kLastRelease) return kByRelease.back();
  return kByRelease[static_cast<size_t>(torch_version - kFirstRelease)];
}

}  // namespace oomcast::sim
