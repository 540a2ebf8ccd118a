// The doctor's recommendation: of the simulated fixes, and of their combinations of two or
// three (from different groups, drawn from the cheapest ones that save memory), the one that
// fits with the least step time. When nothing fits on the scenario's GPUs: the fewest GPUs,
// with the sharding that fits fastest, each planned through the parallel planner.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "advisor/whatif.h"
#include "base/input_error.h"

namespace oomcast::advisor {

using scenario::JobKind;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::parallel_engine_name;

namespace {

// Fixes that combinations are drawn from: the cheapest in step time among those that save
// memory or speed the step up (bf16 may cost memory but pays for checkpointing). Six
// give 15 pairs and 20 triples, enough to cover the usual stacks (bf16 + flash +
// checkpointing, 8-bit Adam + micro-batching) at a bounded cost.
constexpr size_t kCombinationPool = 6;
// GPU counts tried for a single-GPU job that nothing makes fit.
constexpr int64_t kGpuCounts[] = {2, 4, 8, 16, 32, 64, 128, 256};

struct Trial {
  Recommendation recommendation;
  bool valid = false;
  std::optional<LeakOutlook> leak;  // fits the simulated iterations but still grows
  bool leak_unjudged = false;       // the leak window could not be planned
};

// Simulates the trial; when the scenario leaks, one that fits is simulated again over the
// leak window (leak_judgement.h) and fits only if it stops growing.
void run_trial(const ScenarioSource& source, const Scenario& original, bool judge_leaks, Trial& trial) {
  try {
    Scenario changed = source.load(trial.recommendation.overrides);
    Prediction p = predict(changed);
    trial.recommendation.peak_reserved_bytes_after = p.peak_reserved_bytes;
    trial.recommendation.step_seconds_after = job_step_seconds(original, changed, p.step_time.step_seconds);
    trial.recommendation.fits = p.fits;
    trial.valid = true;
  } catch (const InputError&) {
    trial.valid = false;  // a combination the scenario rules reject (e.g. two precisions)
    return;
  }
  if (!judge_leaks || !trial.recommendation.fits) return;
  try {
    trial.leak = judge_leak(source, trial.recommendation.overrides);
  } catch (const InputError&) {
    trial.leak_unjudged = true;  // unjudged is not "fits"
  }
  if (trial.leak || trial.leak_unjudged) trial.recommendation.fits = false;
}

// Step times within this fraction of each other count as equal (the model is not that
// precise): then fewer changes, then the lower peak, win.
constexpr double kSameStepTime = 0.01;

// Least step time first; fewer changes, then the lower peak, break ties.
bool faster(const Recommendation& a, const Recommendation& b) {
  const double larger = std::max(a.step_seconds_after, b.step_seconds_after);
  if (std::abs(a.step_seconds_after - b.step_seconds_after) > kSameStepTime * larger) {
    return a.step_seconds_after < b.step_seconds_after;
  }
  if (a.fix_ids.size() != b.fix_ids.size()) return a.fix_ids.size() < b.fix_ids.size();
  return a.peak_reserved_bytes_after < b.peak_reserved_bytes_after;
}

Recommendation from_fix(const FixOutcome& fix) {
  Recommendation r;
  r.changes_goal = fix.changes_goal;
  r.fix_ids = {fix.id};
  r.title = fix.title;
  r.overrides = fix.overrides;
  r.peak_reserved_bytes_after = fix.peak_reserved_after;
  r.step_seconds_after = fix.step_seconds_after;
  r.fits = fix.fits_after;
  return r;
}

Recommendation combine(const std::vector<const FixOutcome*>& fixes) {
  Recommendation r;
  for (const FixOutcome* fix : fixes) {
    r.changes_goal = r.changes_goal || fix->changes_goal;
    r.fix_ids.push_back(fix->id);
    r.title += (r.title.empty() ? "" : " + ") + fix->title;
    for (const std::string& o : fix->overrides) {
      if (std::find(r.overrides.begin(), r.overrides.end(), o) == r.overrides.end()) r.overrides.push_back(o);
    }
  }
  return r;
}

std::vector<Trial> gpu_trials(const Scenario& scenario, int64_t world) {
  std::vector<Trial> trials;
  auto add = [&](std::string sharding, std::string parallel) {
    Trial t;
    t.recommendation.world_size = world;
    t.recommendation.sharding = sharding;
    t.recommendation.title = fmt::format("{} GPUs with {}", world, sharding);
    t.recommendation.overrides = {parallel};
    trials.push_back(std::move(t));
  };
  if (!scenario.parallel.enabled()) {
    add("FSDP2 (fully_shard)", fmt::format("parallel={{world_size: {}, fsdp2: {{}}}}", world));
    add("FSDP FULL_SHARD", fmt::format("parallel={{world_size: {}, fsdp: {{sharding_strategy: FULL_SHARD}}}}", world));
    add("DeepSpeed ZeRO-2", fmt::format("parallel={{world_size: {}, deepspeed: {{zero_optimization: {{stage: 2}}}}}}", world));
    add("DeepSpeed ZeRO-3", fmt::format("parallel={{world_size: {}, deepspeed: {{zero_optimization: {{stage: 3}}}}}}", world));
  } else {
    add(std::string("its ") + parallel_engine_name(scenario.parallel.engine) + " setting",
        fmt::format("parallel.world_size={}", world));
  }
  return trials;
}

}  // namespace

void recommend(const ScenarioSource& source, const Scenario& scenario, Diagnosis& d, size_t jobs) {
  if (d.fits) return;
  // The fix rows are judged already (judge_fixes_for_leaks); combinations and GPU counts are
  // judged here, so a recommendation never fits while the leak keeps growing.
  const bool judge_leaks = reports_growth(d.patterns);
  // The job's goal first: a change that trains something else (LoRA for a full fine-tune) is
  // recommended only when nothing that keeps the goal fits, more GPUs included.
  std::optional<Recommendation> best;
  std::optional<Recommendation> best_changing_goal;
  std::optional<Trial> fastest_growing;  // fits the simulated iterations, still grows
  auto consider = [&](const Recommendation& r) {
    std::optional<Recommendation>& slot = r.changes_goal ? best_changing_goal : best;
    if (r.fits && (!slot || faster(r, *slot))) slot = r;
  };
  auto consider_trial = [&](const Trial& t) {
    if (!t.valid) return;
    consider(t.recommendation);
    if (t.leak && (!fastest_growing || faster(t.recommendation, fastest_growing->recommendation))) fastest_growing = t;
  };
  for (const FixOutcome& fix : d.fixes) {
    if (fix.valid) consider_trial(Trial{from_fix(fix), true, fix.leak, false});
  }
  // When the scenario leaks, the fixes that undo a cause of the growth come first: no
  // combination without them can stop it, however much memory it saves.
  auto leak_first = [&](const FixOutcome& fix) { return judge_leaks && fix.leak_cause; };
  std::vector<const FixOutcome*> pool;
  for (const FixOutcome& fix : d.fixes) {
    const bool faster_step = fix.step_seconds_after > 0.0 && fix.step_seconds_after < fix.step_seconds_before;
    if (fix.valid && (fix.saving_bytes() > 0 || faster_step || leak_first(fix))) pool.push_back(&fix);
  }
  std::stable_sort(pool.begin(), pool.end(), [&](const FixOutcome* a, const FixOutcome* b) {
    if (leak_first(*a) != leak_first(*b)) return leak_first(*a);
    return a->step_seconds_after < b->step_seconds_after;
  });
  if (pool.size() > kCombinationPool) pool.resize(kCombinationPool);
  std::vector<Trial> trials;
  for (size_t i = 0; i < pool.size(); ++i) {
    for (size_t j = i + 1; j < pool.size(); ++j) {
      if (pool[i]->group == pool[j]->group) continue;
      trials.push_back(Trial{combine({pool[i], pool[j]}), false, std::nullopt, false});
      for (size_t k = j + 1; k < pool.size(); ++k) {
        if (pool[k]->group == pool[i]->group || pool[k]->group == pool[j]->group) continue;
        trials.push_back(Trial{combine({pool[i], pool[j], pool[k]}), false, std::nullopt, false});
      }
    }
  }
  run_indexed(trials.size(), jobs, [&](size_t i) { run_trial(source, scenario, judge_leaks, trials[i]); });
  for (const Trial& t : trials) consider_trial(t);
  if (best) {
    d.recommendation = best;
    return;
  }
  auto note_growth = [&] {
    if (!fastest_growing) return;
    d.recommendation_notes.push_back(fmt::format(
        "the fastest change that fits the iterations simulated, {}, does not stop the leak: {}",
        fastest_growing->recommendation.title, fastest_growing->leak->text()));
  };
  auto settle_for_another_goal = [&](const std::string& tried) {
    if (!best_changing_goal) return false;
    d.recommendation = best_changing_goal;
    d.recommendation_notes.push_back("nothing that keeps the job's goal fits (" + tried + "): the recommendation " +
                                     "changes what trains");
    return true;
  };
  // Nothing fits on these GPUs: more of them, sharded.
  if (scenario.device.is_cpu || scenario.job.job.kind != JobKind::Train) {
    note_growth();
    settle_for_another_goal("no fix or combination of up to three");
    return;
  }
  const int64_t current = scenario.parallel.enabled() ? scenario.parallel.world_size : 1;
  int64_t tried = current;
  for (int64_t world : kGpuCounts) {
    if (world <= current) continue;
    std::vector<Trial> gpus = gpu_trials(scenario, world);
    run_indexed(gpus.size(), jobs, [&](size_t i) { run_trial(source, scenario, judge_leaks, gpus[i]); });
    tried = world;
    for (const Trial& t : gpus) consider_trial(t);
    if (best) {
      d.recommendation = best;
      return;
    }
  }
  note_growth();
  const std::string tried_text = fmt::format(
      "no fix or combination of up to three fits{}, nor {} GPUs with {}", judge_leaks ? " and stops the growth" : "", tried,
      scenario.parallel.enabled() ? "the scenario's sharding" : "FSDP2, FSDP FULL_SHARD or DeepSpeed ZeRO-2/3");
  if (settle_for_another_goal(tried_text)) return;
  d.recommendation_notes.push_back(tried_text);
}

}  // namespace oomcast::advisor
