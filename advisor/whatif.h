// diagnose(): the what-if doctor. Names the OOM patterns a scenario shows, each detected from
// simulated numbers against a stated threshold, and ranks single changes (mixed precision,
// checkpointing, flash attention, micro-batching, 8-bit Adam / Adafactor, allocator settings,
// no_grad for evaluation, ZeRO / offload) by the peak memory each saves when simulated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advisor/closed_form_fit.h"
#include "advisor/leak_judgement.h"
#include "advisor/planned_points.h"
#include "advisor/predict.h"
#include "scenario/scenario_source.h"
#include "advisor/work_pool.h"

namespace oomcast::advisor {

// One recognised pattern.
struct OomPattern {
  std::string id;         // "model_states_exceed_device", "activations_linear_in_batch", ...
  std::string title;      // one line for people
  std::string evidence;   // the simulated numbers that show it
  std::string rule;       // the threshold used
};

// One simulated change. A fix keeps the job's goal (the same model trained the same way, or
// the same generation) unless `changes_goal` says otherwise.
struct FixOutcome {
  std::string id;                       // "mixed_precision", "checkpointing", ...
  std::string title;                    // "bf16 autocast (precision: amp_bf16)"
  std::vector<std::string> overrides;   // what was changed, as --set would take it
  bool valid = true;                    // false: the scenario rules reject it (error says why)
  std::string error;
  uint64_t peak_reserved_before = 0;
  uint64_t peak_reserved_after = 0;
  uint64_t peak_allocated_before = 0;
  uint64_t peak_allocated_after = 0;
  bool fits_after = false;             // fits and, when the scenario leaks, stops growing
  std::optional<LeakOutlook> leak;     // set when it fits the simulated iterations but still grows
  std::string alloc_conf;               // PYTORCH_CUDA_ALLOC_CONF for allocator fixes
  std::string cost;                     // what the change costs (recomputation, throughput)
  // One optimizer step of the same effective batch, before and after (planner/timing/step_time.h);
  // 0 when the step-time model has no figures for the device.
  double step_seconds_before = 0.0;
  double step_seconds_after = 0.0;
  std::string group;                    // fixes of one group are alternatives (never combined)
  bool leak_cause = false;              // undoes something that makes memory grow every iteration
  bool changes_goal = false;            // trains something else (LoRA, QLoRA): recommended only when
                                        // nothing that keeps the job's goal fits
  int64_t saving_bytes() const {
    return static_cast<int64_t>(peak_reserved_before) - static_cast<int64_t>(peak_reserved_after);
  }
};

// The cheapest way to fit: one fix, or a combination of at most three, that fits with the
// least step time; or, when none fits on the scenario's GPUs, the fewest GPUs (and the
// sharding) that fit, planned through the parallel planner (whatif_recommend.cc).
struct Recommendation {
  std::vector<std::string> fix_ids;     // the fixes combined; empty for a GPU-count suggestion
  std::string title;
  std::vector<std::string> overrides;
  uint64_t peak_reserved_bytes_after = 0;
  double step_seconds_after = 0.0;
  bool fits = false;
  int64_t world_size = 0;               // set for a GPU-count suggestion
  std::string sharding;                 // "FSDP FULL_SHARD", "DeepSpeed ZeRO-3", ...
  bool changes_goal = false;            // one of its fixes trains something else (FixOutcome)
};

struct Diagnosis {
  std::string scenario_path;
  // Fits and does not grow: a job whose peak grows every iteration dies sooner or later, so
  // "fits" never means "fits the iterations simulated" alone.
  bool fits = false;
  bool fits_simulated_iterations = false;  // the scenario's own iterations fit
  std::optional<LeakOutlook> leak;         // the scenario's growth, when it grows
  uint64_t usable_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  std::string oom_message;
  std::vector<OomPattern> patterns;
  std::vector<FixOutcome> fixes;        // valid ones by saving, largest first; invalid last
  // Set when the scenario does not fit and an allocator setting alone makes it fit.
  std::optional<std::string> recommended_alloc_conf;
  std::optional<ClosedFormFit> fit;
  double step_seconds = 0.0;            // the scenario's own step time (0: not modelled)
  // step_seconds is one generate() call of the scenario's batch_size prompts, not an optimizer
  // step; every fix's and the recommendation's step time is then all of those prompts
  // (job_step_seconds), however many calls the change makes of them.
  bool step_is_generation = false;
  int64_t prompts = 0;                  // with step_is_generation: the scenario's batch_size
  std::optional<Recommendation> recommendation;  // none when it already fits or nothing found fits
  std::vector<std::string> recommendation_notes; // what was tried when nothing fits
  double seconds = 0.0;
};

struct DiagnoseOptions {
  size_t jobs = default_jobs();
  bool with_fit = true;                 // also fit peak ≈ a + b·B + c·B·S + d·B·S²
};

// Throws InputError when the scenario itself is invalid; a fix the rules reject is a row.
Diagnosis diagnose(const scenario::ScenarioSource& source, const DiagnoseOptions& options = {});

// Pattern detection alone (whatif_patterns.cc), given the scenario's own prediction.
// `leak`, when given, receives the scenario's own growth outlook (none when it does not grow).
// `points`, when given, holds the scenario's schedules by (batch, seq_len): the variants that
// change only those reuse them and keep theirs there (for the closed-form fit).
std::vector<OomPattern> detect_patterns(const scenario::ScenarioSource& source, const scenario::Scenario& scenario,
                                        const Prediction& baseline, size_t jobs,
                                        std::optional<LeakOutlook>* leak = nullptr, PlannedPoints* points = nullptr);
// What a change's step costs the job the scenario states (whatif_fixes.cc), from the step-time
// model's seconds for one step of the changed scenario. A training fix keeps the effective
// batch, so one optimizer step is the job's step either way. A generate job's step is every
// prompt of the scenario (batch_size of them): a change with fewer prompts per generate() call
// runs ceil(batch_size / its batch_size) calls, each priced by the model, so splitting the batch
// is never shown as the per-call saving it is not.
double job_step_seconds(const scenario::Scenario& original, const scenario::Scenario& changed, double step_seconds);

// The fixes that apply to `scenario` (whatif_fixes.cc), simulated, unranked.
std::vector<FixOutcome> simulate_fixes(const scenario::ScenarioSource& source, const scenario::Scenario& scenario,
                                       const Prediction& baseline, const planner::PlannedTrace& baseline_plan, size_t jobs);

// The recommendation (whatif_recommend.cc): combinations of the simulated fixes, then GPU counts.
void recommend(const scenario::ScenarioSource& source, const scenario::Scenario& scenario, Diagnosis& diagnosis, size_t jobs);

std::string render_whatif_text(const Diagnosis& diagnosis);
// {"scenario", "fits" (and does not grow), "fits_simulated_iterations", "growth": {bytes_per_iteration,
//  first_iteration, last_iteration, oom_iteration, oom_simulated} or null, "usable_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
//  "oom_message", "patterns": [{id, title, evidence, rule}], "fixes": [{id, title, overrides,
//  valid, error, peak_reserved_before, peak_reserved_after, peak_allocated_before,
//  peak_allocated_after, saving_bytes, fits_after, alloc_conf, cost, peak_reserved_bytes_after,
//  step_seconds_before, step_seconds_after, fits, growth}], "recommended_alloc_conf", "step_seconds",
//  "step_is_generation", "prompts" (the scenario's batch_size for a generate job, else null),
//  "recommendation": {fix_ids, title, overrides, peak_reserved_bytes_after, step_seconds_after,
//  fits, world_size, sharding} or null, "recommendation_notes", "fit", "seconds"}
std::string render_whatif_json(const Diagnosis& diagnosis);

}  // namespace oomcast::advisor
