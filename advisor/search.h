// search_max_fitting(): the largest batch_size, seq_len or grad_accum_steps whose step fits
// with a margin of the device's usable memory left free. Exponential probe, then bisection,
// then a check of the neighbours, of every value fragmentation could still let fit, and of
// the values just below the answer, which fragmentation could make fail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advisor/closed_form_fit.h"
#include "advisor/length_distribution.h"
#include "advisor/length_risk.h"
#include "scenario/scenario.h"
#include "scenario/scenario_source.h"
#include "advisor/work_pool.h"

namespace oomcast::advisor {

// PromptLen and NewTokens: a generate job's job.prompt_len and job.new_tokens (its seq_len has
// no effect, so searching it is refused).
enum class SearchParam { BatchSize, SeqLen, GradAccumSteps, PromptLen, NewTokens };

// "batch_size", "seq_len" (also "image_size" for vision models), "grad_accum_steps",
// "job.prompt_len", "job.new_tokens".
// Throws InputError with a did-you-mean for other names.
SearchParam parse_search_param(const std::string& name);
// The scenario key the parameter is written as: image_size for vision models.
std::string search_param_key(SearchParam param, const scenario::Scenario& scenario);

// The scenario with the parameter set to `value`, as `--set KEY=value` would give it: the
// same bounds as the loader (batch_size ≤ 2^24, max_positions for learned position tables,
// fixed image size for ViT). Editing the struct skips re-reading the YAML per value;
// search_test checks that the two agree.
scenario::Scenario with_parameter(const scenario::Scenario& scenario, SearchParam param, int64_t value);

// The largest value with_parameter accepts for this scenario.
int64_t parameter_limit(const scenario::Scenario& scenario, SearchParam param);

// Memory the allocator may reserve on the scenario's device (predict's usable_bytes).
uint64_t usable_bytes_of(const scenario::Scenario& scenario);

// The scenario on a device whose usable memory is (1 - margin) x the original: `margin` is
// held back as memory used outside the allocator, so "fits" means the caching allocator
// (with its free-cache-and-retry) never needs that margin.
scenario::Scenario with_margin(const scenario::Scenario& scenario, double margin);
// The same with an absolute amount held back (`--margin 2GiB`); `margin_bytes` wins over the
// fraction when it is not 0. Throws InputError when it leaves nothing usable.
scenario::Scenario with_margin(const scenario::Scenario& scenario, double margin, uint64_t margin_bytes);

// One simulated value.
struct Evaluation {
  int64_t value = 0;
  bool fits = false;
  uint64_t peak_allocated_bytes = 0;  // demand, from an unbounded replay when it does not fit
  uint64_t peak_reserved_bytes = 0;
  std::string error;                  // the planner refused the value (a limit, not an OOM)
};

// Plans and replays `scenario` (already carrying the margin) with the parameter at `value`.
Evaluation evaluate_value(const scenario::Scenario& scenario, SearchParam param, int64_t value);

struct SearchOptions {
  SearchParam param = SearchParam::BatchSize;
  double margin = 0.05;         // fraction of usable memory left free
  uint64_t margin_bytes = 0;    // an absolute margin instead (`--margin 2GiB`), when not 0
  int64_t max_value = 0;        // 0: the parameter's default ceiling
  size_t jobs = default_jobs(); // values simulated at once
  // Values above the bisection's answer are scanned exhaustively while at most this many
  // could still fit; a bigger window is sampled first.
  int64_t exhaustive_window = 64;
  int64_t max_scan = 4096;      // the most values a non-monotone fallback scan evaluates
  bool with_fit = false;        // also fit peak ≈ a + b·B + c·B·S + d·B·S² (closed_form_fit.h)
  // --param seq_len over a data set's lengths: the search runs up to its longest (padded)
  // length unless max_value says otherwise, and the result carries the tail risk.
  std::optional<LengthDistribution> lengths;
  LengthRiskOptions length_options;
};

struct SearchResult {
  std::string scenario_path;
  SearchParam param = SearchParam::BatchSize;
  std::string param_key;
  double margin = 0.0;
  uint64_t margin_bytes = 0;            // the absolute margin, when one was given
  int64_t max_value = 0;
  uint64_t usable_bytes = 0;
  uint64_t budget_bytes = 0;            // usable x (1 - margin)
  // Data-parallel jobs: the search is per rank (one GPU's budget); the planned rank holds
  // the largest shard, so it is the busiest one.
  int64_t ranks = 1;
  std::string parallel_engine;          // "DDP", "FSDP", "DeepSpeed"; "" on one GPU
  // The largest value below which every simulated value fits (none: not even 1 fits).
  std::optional<int64_t> max_fitting;
  std::optional<int64_t> largest_fitting;  // the largest simulated value that fits, isolated or not
  std::vector<int64_t> isolated_fits;      // values above max_fitting that fit (above a failure)
  // Every value from consecutive_from to max_fitting was simulated and fits; below it only the
  // probes were. On a GPU the run is exhaustive_window values long (or reaches 1): the values
  // just below the answer are scanned as the fragmentation window above it is.
  int64_t consecutive_from = 0;
  // The first value above max_fitting was refused (a work or size limit), not out of memory:
  // the search stopped there; the refusal says why.
  std::optional<int64_t> refused_from;
  std::string refusal;
  bool non_monotone = false;            // some value fits above one that does not
  int64_t witness_fit = 0, witness_fail = 0;  // the pair that showed it
  // The window above the bisection's answer where allocated memory still fits the budget,
  // so only fragmentation could decide; [0, 0] when empty.
  int64_t window_from = 0, window_to = 0;
  bool scanned = false;                 // the window was evaluated value by value
  bool scan_truncated = false;          // ... but only its first max_scan values
  std::vector<Evaluation> evaluated;    // by value
  std::optional<ClosedFormFit> fit;     // with SearchOptions::with_fit
  std::optional<LengthRisk> length_risk;  // with SearchOptions::lengths
  double seconds = 0.0;
};

// Throws InputError for a bad scenario or option.
SearchResult search_max_fitting(const scenario::ScenarioSource& source, const SearchOptions& options);

// "5%" for a relative margin, "2.00 GiB" for an absolute one.
std::string margin_text(double fraction, uint64_t margin_bytes);

std::string render_search_text(const SearchResult& result);
// {"max_fitting", "largest_fitting", "isolated_fits", "consecutive_from", "param", "margin" (a fraction of usable), "margin_bytes", "non_monotone", "evaluated": [{value, fits,
//  peak_allocated_bytes, peak_reserved_bytes, error?}], "usable_bytes", "budget_bytes",
//  "max_value", "window": {from, to, scanned, truncated}, "fit" (with --fit), "length_risk" (with
//  a length distribution: length_risk.h), "seconds"}
std::string render_search_json(const SearchResult& result);

}  // namespace oomcast::advisor
