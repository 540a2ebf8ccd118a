// Growth across iterations, and the fixes that do not stop it.
#include "advisor/leak_judgement.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/whatif.h"
#include "base/input_error.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::ScenarioSource;

std::map<int32_t, uint64_t> iteration_peaks(const Prediction& p) {
  std::map<int32_t, uint64_t> peaks;
  for (const auto& row : p.phases) {
    if (row.name.rfind("iter", 0) != 0) continue;  // setup / end marks belong to no iteration
    peaks[row.iteration] = std::max(peaks[row.iteration], row.peak_allocated_bytes);
  }
  return peaks;
}

GrowthJudgement judge_growth(const Prediction& prediction) {
  GrowthJudgement judgement;
  std::map<int32_t, uint64_t> peaks = iteration_peaks(prediction);
  // Iteration 0 creates the optimizer state and the gradients: growth is judged from 1 on.
  std::vector<uint64_t> same_parity;
  for (int32_t i = 1; peaks.count(i); i += 2) same_parity.push_back(peaks.at(i));
  if (same_parity.size() < 4) return judgement;
  judgement.judged = true;
  judgement.grows = true;
  for (size_t k = 1; k < same_parity.size(); ++k) {
    judgement.grows = judgement.grows && same_parity[k] >= same_parity[k - 1] + kLeakGrowthFloor;
  }
  judgement.first_iteration = 1;
  judgement.last_iteration = static_cast<int32_t>(1 + 2 * (same_parity.size() - 1));
  judgement.first_peak = same_parity.front();
  judgement.last_peak = same_parity.back();
  if (judgement.grows) {
    judgement.bytes_per_iteration = static_cast<double>(judgement.last_peak - judgement.first_peak) /
                                    static_cast<double>(judgement.last_iteration - judgement.first_iteration);
  }
  return judgement;
}

bool may_grow(const Prediction& prediction) {
  std::map<int32_t, uint64_t> peaks = iteration_peaks(prediction);
  return peaks.count(1) && peaks.count(3) && peaks.at(3) >= peaks.at(1) + kLeakGrowthFloor;
}

Prediction predict_over_leak_window(const ScenarioSource& source, std::vector<std::string> overrides) {
  Scenario scenario = source.load(overrides);
  if (scenario.iterations < kLeakJudgedIterations) scenario.iterations = kLeakJudgedIterations;
  return predict(scenario);
}

std::string LeakOutlook::end_text() const {
  return out_of_memory_simulated
             ? fmt::format("out of memory at iteration {} (simulated)", oom_iteration)
             : fmt::format("out of memory at about iteration {} ({} more iterations after the {} simulated)", oom_iteration,
                           oom_iteration - simulated_iterations, simulated_iterations);
}

std::string LeakOutlook::text() const {
  return fmt::format("the peak grows by {} per iteration (iterations {}..{}): {}", byte_text(growth.bytes_per_iteration),
                     growth.first_iteration, growth.last_iteration, end_text());
}

std::optional<LeakOutlook> leak_outlook(const Prediction& p) {
  GrowthJudgement growth = judge_growth(p);
  if (!growth.grows) return std::nullopt;
  LeakOutlook outlook;
  outlook.growth = growth;
  std::map<int32_t, uint64_t> peaks = iteration_peaks(p);
  outlook.simulated_iterations = peaks.empty() ? 0 : peaks.rbegin()->first + 1;
  if (!p.fits) {
    outlook.out_of_memory_simulated = true;
    outlook.oom_iteration = p.oom_at.iteration;
  } else {
    // The reserved peak grows as the allocated one does, in segment steps: the room left after
    // the window runs out after about room / growth more iterations.
    const double room = std::max(0.0, static_cast<double>(p.usable_bytes) - static_cast<double>(p.peak_reserved_bytes));
    const double more = std::floor(room / growth.bytes_per_iteration);
    constexpr double kLongest = 1e15;  // a printable iteration count; any real job ends before
    outlook.oom_iteration = outlook.simulated_iterations + static_cast<int64_t>(std::min(more, kLongest));
  }
  return outlook;
}

std::optional<LeakOutlook> judge_leak(const ScenarioSource& source, const std::vector<std::string>& overrides) {
  return leak_outlook(predict_over_leak_window(source, overrides));
}

bool reports_growth(const std::vector<OomPattern>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [](const OomPattern& p) { return p.id == "growth_across_iterations"; });
}

void judge_fixes_for_leaks(const ScenarioSource& source, const std::vector<OomPattern>& patterns,
                           std::vector<FixOutcome>* fixes, size_t jobs) {
  if (!reports_growth(patterns)) return;
  std::vector<size_t> fitting;
  for (size_t i = 0; i < fixes->size(); ++i) {
    if ((*fixes)[i].valid && (*fixes)[i].fits_after) fitting.push_back(i);
  }
  run_indexed(fitting.size(), jobs, [&](size_t k) {
    FixOutcome& fix = (*fixes)[fitting[k]];
    try {
      std::optional<LeakOutlook> leak = judge_leak(source, fix.overrides);
      if (!leak) return;
      fix.fits_after = false;
      fix.leak = leak;
      fix.cost += "; does not stop the leak: " + leak->text();
    } catch (const InputError& error) {
      // The fix loaded once already; over more iterations it can hit the schedule-size limit.
      // Unjudged is not "fits".
      fix.fits_after = false;
      fix.cost += "; the leak could not be judged over " + std::to_string(kLeakJudgedIterations) +
                  " iterations: " + error.message();
    }
  });
}

}  // namespace oomcast::advisor
