// The search: exponential probe and bisection, then the neighbours, then the "fragmentation
// window": the values above the answer whose allocated peak still fits the budget. Reserved
// >= allocated, and allocated grows with the parameter, so no value beyond that window can
// fit; inside it only the allocator's caching decides, and that is where a larger value can
// fit after a smaller one failed.
#include "advisor/search.h"

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "base/edit_distance.h"
#include "base/input_error.h"
#include "base/progress.h"
#include "planner/families/families.h"
#include "advisor/predict.h"
#include "planner/jobs/training_job.h"

namespace oomcast::advisor {

using planner::plan_steps;
using scenario::GenerateConfig;
using scenario::JobKind;
using scenario::KvCacheKind;
using scenario::ModelConfig;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::parallel_engine_name;

namespace {

constexpr std::string_view kSearchTask = "search probes";  // the progress line

// The loader's bounds (scenario_loader.cc), repeated here so that with_parameter rejects
// exactly what `--set` would.
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
constexpr int64_t kMaxImageSize = int64_t{1} << 16;
constexpr int64_t kMaxGradAccum = int64_t{1} << 20;
constexpr int64_t kMaxNewTokens = int64_t{1} << 20;  // the loader's bound on job.new_tokens

// Default ceilings when --max is not given: beyond them a search is almost surely a typo,
// and grad_accum_steps multiplies the schedule's length.
constexpr int64_t kDefaultMaxBatch = 65536;
constexpr int64_t kDefaultMaxSeqLen = int64_t{1} << 20;
constexpr int64_t kDefaultMaxGradAccum = 1024;

InputError bad_value(const Scenario& scenario, const std::string& key, const std::string& message) {
  return InputError(SourceLocation{scenario.source_path, 0, 0, -1}, key, message);
}

bool has_learned_positions(const ModelConfig& model) { return model.family == "gpt2" || model.family == "bert"; }

// Evaluations by value, filled in parallel.
// Each value is loaded through the scenario's source as `--set KEY=value`, so every loader
// rule applies to it (DeepSpeed's micro-batch and train_batch_size, learned positions, ...)
// and the search never answers a value `oomcast plan` would reject.
class Evaluator {
 public:
  Evaluator(const ScenarioSource& source, const std::string& key, double margin, uint64_t margin_bytes, size_t jobs)
      : source_(source), key_(key), margin_(margin), margin_bytes_(margin_bytes), jobs_(jobs) {}

  const Evaluation& at(int64_t value) {
    evaluate_all({value});
    return cache_.at(value);
  }

  void evaluate_all(std::vector<int64_t> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    values.erase(std::remove_if(values.begin(), values.end(), [&](int64_t v) { return cache_.count(v) > 0; }),
                 values.end());
    std::vector<Evaluation> results(values.size());
    run_indexed(values.size(), jobs_, [&](size_t i) { results[i] = evaluate(values[i]); });
    for (auto& result : results) cache_.emplace(result.value, std::move(result));
  }

  bool known(int64_t value) const { return cache_.count(value) > 0; }
  const std::map<int64_t, Evaluation>& all() const { return cache_; }
  // The probes the search expects in all, for the progress line's share and time left.
  void expect(uint64_t probes) { expected_ = probes; }

 private:
  Evaluation evaluate(int64_t value) const {
    Evaluation evaluation;
    evaluation.value = value;
    try {
      const uint64_t done = probes_.fetch_add(1) + 1;
      report_progress(kSearchTask, done, std::max<uint64_t>(expected_.load(), done));
      Prediction prediction = predict(
          with_margin(source_.load({key_ + "=" + std::to_string(value)}), margin_, margin_bytes_));
      evaluation.fits = prediction.fits;
      evaluation.peak_allocated_bytes = prediction.peak_allocated_bytes;
      evaluation.peak_reserved_bytes = prediction.peak_reserved_bytes;
    } catch (const InputError& error) {
      evaluation.error = error.message();
    }
    return evaluation;
  }

  const ScenarioSource& source_;
  std::string key_;
  double margin_;
  uint64_t margin_bytes_;
  size_t jobs_;
  std::map<int64_t, Evaluation> cache_;
  mutable std::atomic<uint64_t> probes_{0};  // evaluations so far, for the progress line
  std::atomic<uint64_t> expected_{0};
};

// `count` values spread evenly over the open interval (lo, hi).
std::vector<int64_t> spread(int64_t lo, int64_t hi, int64_t count) {
  std::vector<int64_t> values;
  int64_t inside = hi - lo - 1;
  if (inside <= 0) return values;
  count = std::min(count, inside);
  for (int64_t i = 1; i <= count; ++i) values.push_back(lo + (hi - lo) * i / (count + 1));
  values.erase(std::unique(values.begin(), values.end()), values.end());
  values.erase(std::remove_if(values.begin(), values.end(), [&](int64_t v) { return v <= lo || v >= hi; }),
               values.end());
  return values;
}

// A parameter the scenario pins (ViT's image size, a DeepSpeed micro-batch written in its
// JSON) has nothing to search: say so instead of answering "nothing fits".
void check_parameter_varies(const ScenarioSource& source, const Scenario& scenario, SearchParam param,
                            const std::string& key) {
  const GenerateConfig& generate = scenario.job.job.generate;
  const bool generates = scenario.job.job.kind == JobKind::Generate;
  if (generates && param == SearchParam::SeqLen) {
    throw InputError(SourceLocation{}, "--param",
                     "--param " + key + " has no effect on a generate job (it runs job.prompt_len " +
                         std::to_string(generate.prompt_len) + "): search --param job.prompt_len or job.new_tokens");
  }
  if (!generates && (param == SearchParam::PromptLen || param == SearchParam::NewTokens)) {
    throw InputError(SourceLocation{}, "--param", "--param " + key + " needs a generate job (job: {kind: generate})");
  }
  int64_t current = param == SearchParam::BatchSize   ? scenario.batch_size
                    : param == SearchParam::SeqLen    ? scenario.seq_len
                    : param == SearchParam::PromptLen ? generate.prompt_len
                    : param == SearchParam::NewTokens ? generate.new_tokens
                                                      : scenario.grad_accum_steps;
  int64_t other = current > 1 ? current - 1 : current + 1;
  try {
    source.load({key + "=" + std::to_string(other)});
  } catch (const InputError& error) {
    throw InputError(SourceLocation{}, "--param",
                     "--param " + key + ": the scenario does not let '" + key + "' vary (" + key + "=" +
                         std::to_string(other) + " is rejected: " + error.message() + ")");
  }
}

}  // namespace

SearchParam parse_search_param(const std::string& name) {
  if (name == "batch_size") return SearchParam::BatchSize;
  if (name == "seq_len" || name == "image_size") return SearchParam::SeqLen;
  if (name == "grad_accum_steps") return SearchParam::GradAccumSteps;
  if (name == "job.prompt_len" || name == "prompt_len") return SearchParam::PromptLen;
  if (name == "job.new_tokens" || name == "new_tokens") return SearchParam::NewTokens;
  throw InputError(SourceLocation{}, "--param",
                   "--param must be batch_size, seq_len (image_size), grad_accum_steps, job.prompt_len or "
                   "job.new_tokens; got '" + name + "'" +
                       did_you_mean(name, {"batch_size", "seq_len", "image_size", "grad_accum_steps", "job.prompt_len",
                                           "job.new_tokens"}));
}

std::string search_param_key(SearchParam param, const Scenario& scenario) {
  switch (param) {
    case SearchParam::BatchSize: return "batch_size";
    case SearchParam::SeqLen: return scenario::families::is_vision(scenario.model) ? "image_size" : "seq_len";
    case SearchParam::GradAccumSteps: return "grad_accum_steps";
    case SearchParam::PromptLen: return "job.prompt_len";
    case SearchParam::NewTokens: return "job.new_tokens";
  }
  return "?";
}

int64_t parameter_limit(const Scenario& scenario, SearchParam param) {
  switch (param) {
    case SearchParam::BatchSize: return kMaxBatch;
    case SearchParam::GradAccumSteps: return kMaxGradAccum;
    case SearchParam::PromptLen: return kMaxSeqLen;
    case SearchParam::NewTokens: return kMaxNewTokens;
    case SearchParam::SeqLen:
      if (scenario.model.family == "vit") return scenario::families::default_sequence_length(scenario.model);
      if (scenario::families::is_vision(scenario.model)) return kMaxImageSize;
      if (has_learned_positions(scenario.model)) return scenario::families::dim(scenario.model, "max_positions");
      return kMaxSeqLen;
  }
  return 1;
}

Scenario with_parameter(const Scenario& scenario, SearchParam param, int64_t value) {
  const std::string key = search_param_key(param, scenario);
  if (value < 1) throw bad_value(scenario, key, "'" + key + "' must be at least 1, got " + std::to_string(value));
  if (param == SearchParam::SeqLen && scenario.model.family == "vit" &&
      value != scenario::families::default_sequence_length(scenario.model)) {
    throw bad_value(scenario, key, "'image_size' is fixed by the ViT model (" +
                                       std::to_string(scenario::families::default_sequence_length(scenario.model)) +
                                       "); set model.image_size to change it");
  }
  int64_t limit = parameter_limit(scenario, param);
  if (value > limit) {
    throw bad_value(scenario, key, "'" + key + "' " + std::to_string(value) + " is above its limit " +
                                       std::to_string(limit) +
                                       (param == SearchParam::SeqLen && has_learned_positions(scenario.model)
                                            ? " (the model's max_positions)"
                                            : ""));
  }
  Scenario edited = scenario;
  switch (param) {
    case SearchParam::BatchSize: edited.batch_size = value; break;
    case SearchParam::SeqLen: edited.seq_len = value; break;
    case SearchParam::GradAccumSteps: edited.grad_accum_steps = value; break;
    case SearchParam::PromptLen: edited.job.job.generate.prompt_len = value; break;
    case SearchParam::NewTokens: edited.job.job.generate.new_tokens = value; break;
  }
  GenerateConfig& generate = edited.job.job.generate;
  if (param == SearchParam::PromptLen || param == SearchParam::NewTokens) {
    // As the loader: a dynamic cache's max_cache_len follows the lengths; a static one must hold them.
    const int64_t needed = generate.prompt_len + generate.new_tokens;
    if (generate.cache == KvCacheKind::Static && generate.max_cache_len < needed) {
      throw bad_value(scenario, key, "'job.max_cache_len' " + std::to_string(generate.max_cache_len) +
                                         " is shorter than prompt_len + new_tokens " + std::to_string(needed));
    }
    if (generate.cache != KvCacheKind::Static) generate.max_cache_len = needed;
  }
  return edited;
}

uint64_t usable_bytes_of(const Scenario& scenario) {
  return scenario.device.model.usable_bytes();
}

Scenario with_margin(const Scenario& scenario, double margin) {
  if (margin <= 0.0) return scenario;
  if (std::isnan(margin) || margin >= 1.0) throw InputError(SourceLocation{}, "--margin", "--margin must be below 100%");
  Scenario edited = scenario;
  sim::DeviceModel& model = edited.device.model;
  uint64_t outside = model.context_bytes + model.other_process_bytes;
  uint64_t free_of_outside = model.total_bytes > outside ? model.total_bytes - outside : 0;
  // Both bounds of usable_bytes_of shrink by the same factor, so the result is exactly
  // (1 - margin) x usable whichever bound applies.
  model.other_process_bytes += static_cast<uint64_t>(margin * static_cast<double>(free_of_outside));
  if (model.memory_fraction > 0.0) model.memory_fraction *= 1.0 - margin;
  return edited;
}

Scenario with_margin(const Scenario& scenario, double margin, uint64_t margin_bytes) {
  if (margin_bytes == 0) return with_margin(scenario, margin);
  const uint64_t usable = usable_bytes_of(scenario);
  if (margin_bytes >= usable) {
    throw InputError(SourceLocation{}, "--margin",
                     fmt::format("--margin {} leaves nothing: the device has {} usable", byte_text(margin_bytes),
                                 byte_text(usable)));
  }
  // The fraction of usable memory that is `margin_bytes`: both bounds of usable_bytes_of
  // shrink by it, so the budget is usable - margin_bytes (to within a byte of rounding).
  return with_margin(scenario, static_cast<double>(margin_bytes) / static_cast<double>(usable));
}

Evaluation evaluate_value(const Scenario& scenario, SearchParam param, int64_t value) {
  Evaluation evaluation;
  evaluation.value = value;
  try {
    Scenario edited = with_parameter(scenario, param, value);
    Prediction prediction = predict_planned(edited, plan_steps(edited));
    evaluation.fits = prediction.fits;
    evaluation.peak_allocated_bytes = prediction.peak_allocated_bytes;
    evaluation.peak_reserved_bytes = prediction.peak_reserved_bytes;
  } catch (const InputError& error) {
    evaluation.error = error.message();
  }
  return evaluation;
}

SearchResult search_max_fitting(const ScenarioSource& source, const SearchOptions& options) {
  auto start = std::chrono::steady_clock::now();
  ScopedProgress progress(kSearchTask);
  if (!(options.margin >= 0.0 && options.margin < 1.0)) {  // nan included
    throw InputError(SourceLocation{}, "--margin", "--margin must be in [0%, 100%)");
  }
  Scenario original = source.load();
  SearchResult result;
  result.scenario_path = source.path;
  result.param = options.param;
  result.param_key = search_param_key(options.param, original);
  result.margin = options.margin;
  result.margin_bytes = options.margin_bytes;
  int64_t limit = parameter_limit(original, options.param);
  int64_t ceiling = options.max_value > 0 ? options.max_value
                    : options.param == SearchParam::BatchSize ? kDefaultMaxBatch
                    : options.param == SearchParam::GradAccumSteps ? kDefaultMaxGradAccum
                                                                   : kDefaultMaxSeqLen;
  if (options.lengths) {
    if (options.param != SearchParam::SeqLen || scenario::families::is_vision(original.model) || original.model.family == "mlp") {
      throw InputError(SourceLocation{}, "--seq-len-distribution",
                       "--seq-len-distribution needs --param seq_len on a model with a sequence");
    }
    // Nothing longer than the longest padded micro-batch (or than the rows, when packing) is needed.
    int64_t longest = padded_quantile(*options.lengths, 1.0, 1, options.length_options.pad_to_multiple_of);
    if (options.length_options.batching == Batching::Pack) longest = std::max(longest, original.seq_len);
    if (options.max_value == 0) ceiling = longest;
  }
  result.max_value = std::min(ceiling, limit);
  result.usable_bytes = usable_bytes_of(original);
  if (original.parallel.enabled()) {
    result.ranks = std::max<int64_t>(1, original.parallel.world_size);
    result.parallel_engine = parallel_engine_name(original.parallel.engine);
  }
  Scenario scenario = with_margin(original, options.margin, options.margin_bytes);
  result.budget_bytes = usable_bytes_of(scenario);
  const int64_t max_value = result.max_value;
  check_parameter_varies(source, original, options.param, result.param_key);
  Evaluator evaluator(source, result.param_key, options.margin, options.margin_bytes, options.jobs);
  // Doubling up to the first failure, then bisecting: about two probes per bit of max_value,
  // and the answer's two neighbours; the fragmentation window adds its own once it is known.
  const auto bits = static_cast<uint64_t>(std::bit_width(static_cast<uint64_t>(max_value)));
  evaluator.expect(2 * bits + 2);
  // Each later stage knows its values before it simulates them: the line's total follows.
  auto expect_more = [&](const std::vector<int64_t>& values) {
    const auto unknown = std::count_if(values.begin(), values.end(), [&](int64_t v) { return !evaluator.known(v); });
    evaluator.expect(evaluator.all().size() + static_cast<uint64_t>(unknown));
  };

  // 1. Exponential probe 1, 2, 4, ... until a value fails, then 2. bisection. One value at a
  // time: each answer decides the next probe, and extra parallel probes cost more than they
  // save on a step this cheap (threads share the page-fault path of one process).
  int64_t lo = 0;             // the largest value known to fit (0: none)
  int64_t hi = max_value + 1; // the smallest value known not to fit
  for (int64_t probe = 1; lo < max_value; probe = std::min(probe * 2, max_value)) {
    if (!evaluator.at(probe).fits) {
      hi = probe;
      break;
    }
    lo = probe;
  }
  while (hi - lo > 1) {
    int64_t middle = lo + (hi - lo) / 2;
    (evaluator.at(middle).fits ? lo : hi) = middle;
  }
  // 3. The neighbours of the answer.
  std::vector<int64_t> neighbours;
  if (lo > 1) neighbours.push_back(lo - 1);
  if (lo + 1 <= max_value) neighbours.push_back(lo + 1);
  evaluator.evaluate_all(neighbours);

  // 4. The fragmentation window (lo + 1, window_to]: values whose allocated peak fits the budget.
  if (lo < max_value) {
    auto allocated_fits = [&](int64_t v) {
      const Evaluation& e = evaluator.at(v);
      return e.error.empty() && e.peak_allocated_bytes <= result.budget_bytes;
    };
    int64_t below = lo + 1;  // allocated fits at `below` (or below is the first failing value)
    int64_t above = max_value + 1;
    for (const auto& [value, e] : evaluator.all()) {
      if (value > below && e.error.empty() && e.peak_allocated_bytes > result.budget_bytes) {
        above = value;
        break;
      }
    }
    if (allocated_fits(below)) {
      while (above - below > 1) {
        std::vector<int64_t> probes = spread(below, above, 1);
        evaluator.evaluate_all(probes);
        for (int64_t probe : probes) {
          if (allocated_fits(probe)) {
            below = probe;
          } else {
            above = probe;
            break;
          }
        }
      }
      if (below > lo + 1) {
        result.window_from = lo + 2;
        result.window_to = below;
      }
    }
    if (result.window_to > 0) {
      int64_t size = result.window_to - result.window_from + 1;
      bool sample_only = size > options.exhaustive_window;
      std::vector<int64_t> values;
      if (sample_only) {
        values = spread(result.window_from - 1, result.window_to + 1, options.exhaustive_window);
      } else {
        for (int64_t v = result.window_from; v <= result.window_to; ++v) values.push_back(v);
      }
      expect_more(values);
      evaluator.evaluate_all(values);
      bool any_fits = std::any_of(values.begin(), values.end(), [&](int64_t v) { return evaluator.at(v).fits; });
      result.scanned = !sample_only;
      if (sample_only && any_fits) {
        // Non-monotone for sure: scan the window value by value (as far as max_scan allows).
        int64_t last = std::min(result.window_to, result.window_from + options.max_scan - 1);
        values.clear();
        for (int64_t v = result.window_from; v <= last; ++v) values.push_back(v);
        expect_more(values);
        evaluator.evaluate_all(values);
        result.scanned = true;
        result.scan_truncated = last < result.window_to;
      }
    }
  }

  // 5. Below the answer: near the budget the caching allocator, not the tensors, decides, and a
  // value the probes skipped below the answer can fail as well (with --max 59 the fragmenting
  // MLP of search_test probes 1..32 and 59, all fitting, while 42..49 do not). The
  // exhaustive_window values below the answer are simulated one by one; a failure among them
  // lowers the answer and the window follows it down (max_scan values at most), so the answer
  // ends on a run of simulated fits. The cpu device has no caching allocator: nothing to scan.
  auto answer_so_far = [&]() -> std::optional<int64_t> {
    std::optional<int64_t> answer;
    for (const auto& [value, e] : evaluator.all()) {
      if (!e.fits) break;
      answer = value;
    }
    return answer;
  };
  if (!original.device.is_cpu) {
    int64_t scanned_below = 0;
    for (std::optional<int64_t> answer = answer_so_far(); answer && scanned_below < options.max_scan;) {
      std::vector<int64_t> values;
      for (int64_t v = std::max<int64_t>(1, *answer - options.exhaustive_window); v < *answer; ++v) {
        if (!evaluator.known(v) && scanned_below + static_cast<int64_t>(values.size()) < options.max_scan) {
          values.push_back(v);
        }
      }
      if (values.empty()) break;
      expect_more(values);
      evaluator.evaluate_all(values);
      scanned_below += static_cast<int64_t>(values.size());
      const std::optional<int64_t> lowered = answer_so_far();
      if (lowered == answer) break;  // the window below held no failure
      answer = lowered;
    }
  }

  // The answer is the largest value below which every simulated value fits: one that fits
  // above a failure fits at the allocator's edge (one more tensor, another layout, and it does
  // not), so it is reported as an isolated fit, not as the answer; non-monotone then.
  std::optional<int64_t> first_fail;
  for (const auto& [value, e] : evaluator.all()) {
    result.evaluated.push_back(e);
    if (e.fits) {
      result.largest_fitting = value;
      if (!first_fail) {
        result.max_fitting = value;
      } else {
        result.isolated_fits.push_back(value);
        result.non_monotone = true;
        result.witness_fail = *first_fail;
        result.witness_fit = value;
      }
    } else if (!first_fail) {
      first_fail = value;
    }
  }
  // The run of consecutive values, each simulated, that fit up to the answer.
  if (result.max_fitting) {
    result.consecutive_from = *result.max_fitting;
    while (result.consecutive_from > 1 && evaluator.known(result.consecutive_from - 1) &&
           evaluator.at(result.consecutive_from - 1).fits) {
      --result.consecutive_from;
    }
  }
  // A refusal above the answer ended the search: it is a limit, never "does not fit".
  for (const auto& [value, e] : evaluator.all()) {
    if (e.fits || (result.max_fitting && value < *result.max_fitting)) continue;
    if (!e.error.empty()) {
      result.refused_from = value;
      result.refusal = e.error;
    }
    break;
  }
  if (!result.max_fitting && result.refused_from) {
    throw InputError(SourceLocation{source.path}, result.param_key,
                     result.param_key + " = " + std::to_string(*result.refused_from) + " is refused: " + result.refusal);
  }
  if (options.with_fit) result.fit = fit_closed_form(original, FitMetric::PeakAllocated, options.jobs);
  if (options.lengths) {
    result.length_risk = assess_length_risk(*options.lengths, result, original, options.length_options);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace oomcast::advisor
