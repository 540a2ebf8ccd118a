// What the caching allocator, its PYTORCH_CUDA_ALLOC_CONF parser and its OOM text do
// differently between PyTorch releases, as one table of facts keyed by release ranges
// (sim/allocator_release_facts.cc), so a new release is a new row, not a new branch in the
// code. The simulator resolves a release's facts once (allocator_release_facts) and reads
// booleans on its hot paths. The planner's own per-release facts (what autograd saves) are
// planner/torch_release_facts.yaml; sim/ stays free of YAML, so this table is C++ data.
#pragma once

#include <span>

#include "sim/allocator_config.h"

namespace oomcast::sim {

struct AllocatorReleaseFacts {
  // OOM text
  bool oom_text_total_capacity = false;          // "GPU 0 has a total capacity of ..." (else the legacy text)
  bool oom_text_capacity_typo = false;           // 2.1's "capacty", max_split_size_mb hint, no URL
  bool oom_text_counts_private_pools = false;    // "with X allocated in private pools (e.g., CUDA Graphs)"
  bool oom_text_allowed_bytes = false;           // "N allowed;" in the total-capacity text
  bool oom_text_docs_pytorch_org_url = false;    // the docs.pytorch.org link (else pytorch.org)
  bool oom_text_no_hint_when_expandable = false; // no expandable_segments hint when already on
  // PYTORCH_CUDA_ALLOC_CONF
  bool conf_drops_any_whitespace = false;        // tabs and newlines dropped too (else only spaces)
  bool conf_max_non_split_rounding_mb = false;   // the key exists, and bounds oversize cached blocks
  bool conf_pinned_use_background_threads = false;
  bool conf_split_size_accepts_20 = false;       // max_split_size_mb (and friends) accept 20: ">= 20"
  bool conf_roundup_accepts_zero = false;        // 0 in a division list disables rounding there
  bool conf_roundup_fill_after_last_key = false; // '>' fills from after the last key, not at it
  // Allocation
  bool roundup_one_division_rounds = false;      // a division count of 1 rounds to 512 B (else a bug skips it)
  bool mem_pool_use_on_oom = false;              // torch.cuda.MemPool(use_on_oom=...)
  bool mem_pool_no_split = false;                // torch.cuda.MemPool(no_split=...)
  bool use_on_oom_pools_before_release = false;  // use_on_oom pools are tried before any cache is freed
};

// One row of the table: the fact holds for releases first..last (100 * major + minor; last 0:
// every later release), with where it comes from.
struct AllocatorReleaseFactRow {
  bool AllocatorReleaseFacts::*fact;
  const char* name;
  TorchVersion first;
  TorchVersion last;
  const char* source;
};

// The table itself, in the order the fields above are declared.
std::span<const AllocatorReleaseFactRow> allocator_release_fact_rows();

// The facts of one release; resolved once per release and kept.
const AllocatorReleaseFacts& allocator_release_facts(TorchVersion torch_version);

}  // namespace oomcast::sim
