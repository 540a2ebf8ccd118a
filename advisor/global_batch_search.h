// search_keep_global_batch(): `oomcast search --keep-global-batch N`. Users keep the global
// batch (what the learning rate was tuned for) and trade micro-batch against gradient
// accumulation: micro_batch x grad_accum_steps x data-parallel ranks = N. The answer is the
// largest micro-batch that fits with the margin left free, and its accumulation steps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advisor/search.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

// Accumulation steps k > kMaxPlannedAccumSteps + 1 are planned as 4 or 5 micro-steps (the same
// parity as k): micro-step 0 creates the gradients, the last one reduces them and steps the
// optimizer, and the ones between repeat the same tensors, with the outputs the loop holds
// alternating between two blocks (so the parity keeps the allocator's layout). A loop that
// keeps every loss alive grows with each micro-step and is planned whole.
inline constexpr int64_t kMaxPlannedAccumSteps = 4;
int64_t planned_accum_steps(const scenario::Scenario& scenario, int64_t accum_steps);

struct GlobalBatchOptions {
  int64_t global_batch = 0;      // N
  double margin = 0.05;          // as SearchOptions
  uint64_t margin_bytes = 0;
  size_t jobs = default_jobs();
};

// One (micro-batch, accumulation) split of the global batch, simulated.
struct GlobalBatchCandidate {
  int64_t micro_batch = 0;
  int64_t accum_steps = 0;       // N / (micro_batch x ranks)
  int64_t planned_accum_steps = 0;  // what was simulated (planned_accum_steps())
  Evaluation evaluation;         // evaluation.value = micro_batch
  std::string parallel_description;  // the planned rank's engine ("" on one GPU)
};

struct GlobalBatchResult {
  std::string scenario_path;
  int64_t global_batch = 0;
  int64_t ranks = 1;             // data-parallel world size (1 without a parallel: section)
  std::string parallel_description;  // "DeepSpeed ZeRO-3, 8 ranks", "" on one GPU
  double margin = 0.0;
  uint64_t margin_bytes = 0;
  uint64_t usable_bytes = 0;     // per rank: one GPU's
  uint64_t budget_bytes = 0;
  std::vector<int64_t> micro_batches;  // every divisor of N / ranks, the splits there are
  std::vector<GlobalBatchCandidate> evaluated;  // by micro-batch
  std::optional<GlobalBatchCandidate> best;      // the largest micro-batch that fits
  bool non_monotone = false;     // a larger micro-batch fits above one that does not
  double seconds = 0.0;
};

// Throws InputError when N is not a multiple of the ranks, or the scenario pins the
// micro-batch or the accumulation (a DeepSpeed JSON that sets them).
GlobalBatchResult search_keep_global_batch(const scenario::ScenarioSource& source, const GlobalBatchOptions& options);

std::string render_global_batch_text(const GlobalBatchResult& result);
// {"global_batch", "ranks", "micro_batch" (null: none fits), "grad_accum_steps", "margin",
//  "margin_bytes", "usable_bytes", "budget_bytes", "non_monotone", "evaluated": [{micro_batch,
//  grad_accum_steps, planned_grad_accum_steps, fits, peak_allocated_bytes, peak_reserved_bytes,
//  error?}], "seconds", "scenario"}
std::string render_global_batch_json(const GlobalBatchResult& result);

}  // namespace oomcast::advisor
