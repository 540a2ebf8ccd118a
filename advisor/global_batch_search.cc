// The keep-global-batch search: the splits of N are the divisors of N / ranks, few enough
// (at most a few hundred for any N a job uses) to search by index. A k-ary search with one
// probe per worker finds the largest micro-batch that fits; then every split above it whose
// allocated peak still fits the budget is simulated too, because there only the allocator's
// segments decide (search.cc's fragmentation window), and beyond it nothing can fit.
#include "advisor/global_batch_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>

#include "advisor/predict.h"
#include "base/input_error.h"
#include "base/progress.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::ScenarioSource;

namespace {

std::vector<int64_t> divisors_of(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

int64_t ranks_of(const Scenario& scenario) {
  return scenario.parallel.enabled() ? std::max<int64_t>(1, scenario.parallel.world_size) : 1;
}

constexpr std::string_view kSplitTask = "search splits of the global batch";  // the progress line

class SplitEvaluator {
 public:
  SplitEvaluator(const ScenarioSource& source, const GlobalBatchOptions& options, int64_t ranks)
      : source_(source), options_(options), ranks_(ranks) {}

  void evaluate_all(const std::vector<int64_t>& micro_batches) {
    std::vector<int64_t> todo;
    for (int64_t m : micro_batches) {
      if (!cache_.count(m) && std::find(todo.begin(), todo.end(), m) == todo.end()) todo.push_back(m);
    }
    std::vector<GlobalBatchCandidate> results(todo.size());
    run_indexed(todo.size(), options_.jobs, [&](size_t i) { results[i] = evaluate(todo[i]); });
    for (auto& r : results) cache_.emplace(r.micro_batch, std::move(r));
  }
  const GlobalBatchCandidate& at(int64_t micro_batch) {
    evaluate_all({micro_batch});
    return cache_.at(micro_batch);
  }
  const std::map<int64_t, GlobalBatchCandidate>& all() const { return cache_; }

 private:
  GlobalBatchCandidate evaluate(int64_t micro_batch) const {
    GlobalBatchCandidate c;
    c.micro_batch = micro_batch;
    c.accum_steps = options_.global_batch / (micro_batch * ranks_);
    c.evaluation.value = micro_batch;
    report_progress(kSplitTask, probes_.fetch_add(1) + 1, 0);
    try {
      // Loaded as `--set batch_size=m --set grad_accum_steps=k`, so the loader's rules (a
      // DeepSpeed JSON's micro-batch and accumulation) apply as they would to `plan`.
      Scenario s = source_.load({"batch_size=" + std::to_string(micro_batch),
                                 "grad_accum_steps=" + std::to_string(c.accum_steps)});
      if (ranks_of(s) != ranks_) {
        throw InputError(SourceLocation{s.source_path, 0, 0, -1}, "world_size",
                         "micro-batch " + std::to_string(micro_batch) + " changes the world size to " +
                             std::to_string(ranks_of(s)) + " (train_batch_size in the DeepSpeed config): set " +
                             "parallel.world_size to keep it");
      }
      c.planned_accum_steps = planned_accum_steps(s, c.accum_steps);
      s.grad_accum_steps = c.planned_accum_steps;
      Prediction p = predict(with_margin(s, options_.margin, options_.margin_bytes));
      c.evaluation.fits = p.fits;
      c.evaluation.peak_allocated_bytes = p.peak_allocated_bytes;
      c.evaluation.peak_reserved_bytes = p.peak_reserved_bytes;
      c.parallel_description = p.parallel.description;
    } catch (const InputError& error) {
      c.evaluation.error = error.message();
    }
    return c;
  }

  const ScenarioSource& source_;
  const GlobalBatchOptions& options_;
  int64_t ranks_;
  std::map<int64_t, GlobalBatchCandidate> cache_;
  mutable std::atomic<uint64_t> probes_{0};  // evaluations so far, for the progress line
};

}  // namespace

int64_t planned_accum_steps(const Scenario& scenario, int64_t accum_steps) {
  if (scenario.loop.keep_losses_across_iterations || accum_steps <= kMaxPlannedAccumSteps + 1) return accum_steps;
  return kMaxPlannedAccumSteps + accum_steps % 2;
}

GlobalBatchResult search_keep_global_batch(const ScenarioSource& source, const GlobalBatchOptions& options) {
  auto start = std::chrono::steady_clock::now();
  ScopedProgress progress(kSplitTask);
  if (!(options.margin >= 0.0 && options.margin < 1.0)) {  // nan included
    throw InputError(SourceLocation{}, "--margin", "--margin must be in [0%, 100%)");
  }
  Scenario original = source.load();
  GlobalBatchResult result;
  result.scenario_path = source.path;
  result.global_batch = options.global_batch;
  result.ranks = ranks_of(original);
  result.margin = options.margin;
  result.margin_bytes = options.margin_bytes;
  result.usable_bytes = usable_bytes_of(original);
  result.budget_bytes = usable_bytes_of(with_margin(original, options.margin, options.margin_bytes));
  if (options.global_batch < 1) {
    throw InputError(SourceLocation{}, "--keep-global-batch", "--keep-global-batch must be at least 1");
  }
  if (options.global_batch % result.ranks != 0) {
    throw InputError(SourceLocation{}, "--keep-global-batch",
                     "--keep-global-batch " + std::to_string(options.global_batch) + " is not a multiple of the " +
                         std::to_string(result.ranks) + " data-parallel ranks (micro-batch x accumulation x ranks " +
                         "must equal it)");
  }
  result.micro_batches = divisors_of(options.global_batch / result.ranks);
  const std::vector<int64_t>& splits = result.micro_batches;
  SplitEvaluator evaluator(source, options, result.ranks);
  auto fits = [&](int64_t index) { return evaluator.at(splits[static_cast<size_t>(index)]).evaluation.fits; };

  // k-ary search on the split index: lo fits (or is -1), hi does not (or is past the end).
  int64_t lo = -1, hi = static_cast<int64_t>(splits.size());
  const auto probes_per_round = static_cast<int64_t>(std::max<size_t>(1, options.jobs));
  while (hi - lo > 1) {
    std::vector<int64_t> indices, micro_batches;
    for (int64_t i = 1; i <= probes_per_round; ++i) indices.push_back(lo + (hi - lo) * i / (probes_per_round + 1));
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    indices.erase(std::remove_if(indices.begin(), indices.end(), [&](int64_t i) { return i <= lo || i >= hi; }),
                  indices.end());
    if (indices.empty()) indices.push_back(lo + 1);
    for (int64_t i : indices) micro_batches.push_back(splits[static_cast<size_t>(i)]);
    evaluator.evaluate_all(micro_batches);
    for (int64_t i : indices) {
      if (fits(i)) {
        lo = i;
      } else {
        hi = i;
        break;
      }
    }
  }
  // Above the answer: every split whose allocated peak fits the budget (allocated grows with
  // the micro-batch, so the first one that does not closes the window).
  for (int64_t i = lo + 1; i < static_cast<int64_t>(splits.size()); ++i) {
    const Evaluation& e = evaluator.at(splits[static_cast<size_t>(i)]).evaluation;
    if (e.error.empty() && e.peak_allocated_bytes > result.budget_bytes) break;
  }

  bool failed_below = false;
  bool any_valid = false;
  for (const auto& [micro, candidate] : evaluator.all()) {
    result.evaluated.push_back(candidate);
    if (candidate.evaluation.error.empty()) {
      any_valid = true;
      if (result.parallel_description.empty()) result.parallel_description = candidate.parallel_description;
    }
    if (candidate.evaluation.fits) {
      result.best = candidate;
      result.non_monotone = result.non_monotone || failed_below;
    } else {
      failed_below = true;
    }
  }
  if (!any_valid) {
    // Every split was rejected: the scenario pins what this search varies.
    throw InputError(SourceLocation{}, "--keep-global-batch",
                     "--keep-global-batch: the scenario does not let batch_size and grad_accum_steps vary: " +
                         result.evaluated.front().evaluation.error);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace oomcast::advisor
