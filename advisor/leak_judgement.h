// Leak judgement: whether memory keeps growing from iteration to iteration, judged over enough
// iterations to tell a leak from a warm-up or from the two-iteration cycle of the outputs a
// training loop holds, and the rule that no fix the doctor simulates is called "fits" while
// the job still leaks (a job that grows every iteration dies sooner or later on any device).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "advisor/predict.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

struct FixOutcome;  // whatif.h, which includes this header
struct OomPattern;

// Iterations a leak is judged over: iterations 1, 3, 5 and 7 (the same parity, so the loop's
// two-iteration cycle cannot pass for growth) must each peak higher than the one before.
inline constexpr int64_t kLeakJudgedIterations = 8;
// A deterministic steady state is exactly flat, so a rise of one allocator block (512 bytes)
// between same-parity iterations is growth, however small.
inline constexpr uint64_t kLeakGrowthFloor = 512;

struct GrowthJudgement {
  bool judged = false;             // the prediction has enough iterations to judge
  bool grows = false;
  double bytes_per_iteration = 0;  // (last peak - first peak) / iterations between them
  int32_t first_iteration = 1, last_iteration = 1;
  uint64_t first_peak = 0, last_peak = 0;
};

// Where a growing job ends: the growth, and the iteration it runs out of memory in — the one
// the leak window itself ran out in, or, when the window fits, extrapolated from the spare
// reserved memory at the growth per iteration.
struct LeakOutlook {
  GrowthJudgement growth;
  bool out_of_memory_simulated = false;  // the simulated window itself ran out
  int64_t oom_iteration = 0;             // 0-based, as the phase names count ("iterN/...")
  int64_t simulated_iterations = 0;
  // "the peak grows by 2.50 KiB per iteration (iterations 1..7): out of memory at about
  // iteration 7899552"
  std::string text() const;
  std::string end_text() const;  // "out of memory at about iteration 7899552 (...)"
};

// The highest allocated peak of each iteration's phases ("iterN/...").
std::map<int32_t, uint64_t> iteration_peaks(const Prediction& prediction);

// Growth over iterations 1, 3, 5, ... up to the last planned one (at least 1, 3, 5, 7 to be
// judged at all: fewer cannot tell steady growth from a settling allocator).
GrowthJudgement judge_growth(const Prediction& prediction);

// A cheap screen on a prediction of at least 4 iterations: iteration 3 peaks a block above
// iteration 1 (same parity). Only then is the job simulated over kLeakJudgedIterations.
bool may_grow(const Prediction& prediction);

// The scenario loaded with `overrides`, over at least kLeakJudgedIterations iterations.
Prediction predict_over_leak_window(const scenario::ScenarioSource& source, std::vector<std::string> overrides);

// The outlook of a prediction over at least kLeakJudgedIterations iterations; none when it
// does not grow.
std::optional<LeakOutlook> leak_outlook(const Prediction& over_window);

// The scenario loaded with `overrides`, simulated over the leak window and judged. Throws
// InputError when that many iterations cannot be planned (the schedule-size limit).
std::optional<LeakOutlook> judge_leak(const scenario::ScenarioSource& source, const std::vector<std::string>& overrides);

// True when the doctor's patterns report growth across iterations.
bool reports_growth(const std::vector<OomPattern>& patterns);

// When `patterns` report growth, every fix that fits is simulated again over
// kLeakJudgedIterations iterations; one that still grows is marked as not fitting, carries its
// outlook (FixOutcome::leak), and its cost says by how much it grows and when it runs out.
void judge_fixes_for_leaks(const scenario::ScenarioSource& source, const std::vector<OomPattern>& patterns,
                           std::vector<FixOutcome>* fixes, size_t jobs);

}  // namespace oomcast::advisor
