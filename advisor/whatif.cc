// diagnose(): the scenario's own prediction, the pattern detectors, the simulated fixes
// ranked by the peak reserved memory they save, the allocator setting to export when that is
// what makes the step fit, and the closed-form fit; plus the text and JSON renderings.
#include "advisor/whatif.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "advisor/leak_judgement.h"
#include "advisor/step_time_report.h"
#include "base/progress.h"
#include "planner/jobs/training_job.h"

namespace oomcast::advisor {

using planner::PlannedTrace;
using planner::plan_steps;
using scenario::Scenario;
using scenario::ScenarioSource;

Diagnosis diagnose(const ScenarioSource& source, const DiagnoseOptions& options) {
  auto start = std::chrono::steady_clock::now();
  // The doctor's stages, for the progress line: the scenario, patterns, fixes, leaks,
  // recommendation, fit.
  constexpr std::string_view kTask = "whatif stages";
  constexpr uint64_t kStages = 6;
  ScopedProgress progress(kTask, kStages);
  Scenario scenario = source.load();
  // The scenario's schedules by (batch, seq_len): its own, the pattern variants' and the
  // closed-form fit's grid overlap, and each is planned once.
  PlannedPoints points;
  std::shared_ptr<const PlannedTrace> plan = std::make_shared<const PlannedTrace>(plan_steps(scenario));
  if (PlannedPoints::shareable(scenario)) points.keep(scenario.batch_size, scenario.seq_len, plan);
  Prediction baseline = predict_planned(scenario, *plan);

  Diagnosis d;
  d.scenario_path = source.path;
  d.fits_simulated_iterations = baseline.fits;
  d.fits = baseline.fits;
  d.usable_bytes = baseline.usable_bytes;
  d.peak_allocated_bytes = baseline.peak_allocated_bytes;
  d.peak_reserved_bytes = baseline.peak_reserved_bytes;
  d.oom_message = baseline.oom_message;
  d.step_seconds = baseline.step_time.step_seconds;
  d.step_is_generation = baseline.step_time.generation;
  d.prompts = scenario.batch_size;
  report_progress(kTask, 1, kStages);
  d.patterns = detect_patterns(source, scenario, baseline, options.jobs, &d.leak, &points);
  d.fits = baseline.fits && !d.leak;  // a job that grows every iteration does not fit, whatever it simulates to
  report_progress(kTask, 2, kStages);
  d.fixes = simulate_fixes(source, scenario, baseline, *plan, options.jobs);
  report_progress(kTask, 3, kStages);
  judge_fixes_for_leaks(source, d.patterns, &d.fixes, options.jobs);  // a leaking fix never "fits"
  std::stable_sort(d.fixes.begin(), d.fixes.end(), [](const FixOutcome& a, const FixOutcome& b) {
    if (a.valid != b.valid) return a.valid;
    return a.saving_bytes() > b.saving_bytes();
  });
  if (!d.fits) {
    for (const auto& fix : d.fixes) {
      if (fix.valid && fix.fits_after && !fix.alloc_conf.empty()) {
        d.recommended_alloc_conf = fix.alloc_conf;
        break;
      }
    }
  }
  report_progress(kTask, 4, kStages);
  recommend(source, scenario, d, options.jobs);
  report_progress(kTask, 5, kStages);
  if (options.with_fit) d.fit = fit_closed_form(scenario, FitMetric::PeakAllocated, options.jobs, &points);
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

std::string render_whatif_text(const Diagnosis& d) {
  std::string text = fmt::format("whatif    {}\n", d.scenario_path);
  if (d.fits) {
    text += fmt::format("verdict   fits: peak reserved {} of {} usable\n", byte_text(d.peak_reserved_bytes),
                        byte_text(d.usable_bytes));
  } else if (d.fits_simulated_iterations && d.leak) {
    text += fmt::format("verdict   grows: fits the iterations simulated (peak reserved {} of {} usable), but {}\n",
                        byte_text(d.peak_reserved_bytes), byte_text(d.usable_bytes), d.leak->text());
  } else {
    text += fmt::format("verdict   OOM: the step needs {} reserved, {} usable\n", byte_text(d.peak_reserved_bytes),
                        byte_text(d.usable_bytes));
    if (d.leak) text += fmt::format("          and {}\n", d.leak->text());
  }
  text += "\npatterns\n";
  if (d.patterns.empty()) text += "  none recognised\n";
  for (const auto& p : d.patterns) {
    text += fmt::format("  * {} [{}]\n      {}\n      rule: {}\n", p.title, p.id, p.evidence, p.rule);
  }
  auto step = [](double seconds) { return seconds > 0.0 ? seconds_text(seconds) : std::string("n/a"); };
  if (d.step_seconds > 0.0) {
    text += d.step_is_generation
                ? fmt::format("step time {} to generate for all {} prompts in one generate() call; each fix's step is "
                              "all {} prompts, in as many calls as it makes (docs/step-time.md)\n",
                              step(d.step_seconds), d.prompts, d.prompts)
                : fmt::format("step time {} per optimizer step (docs/step-time.md)\n", step(d.step_seconds));
  }
  text += "\nfixes, ranked by simulated saving of peak reserved memory\n";
  text += fmt::format("  {:>2}  {:<62} {:>11} {:>11} {:>11}  {:>10}  {}\n", "#", "change", "before", "after", "saving",
                      "step after", "fits");
  int rank = 0;
  for (const auto& f : d.fixes) {
    if (!f.valid) continue;
    text += fmt::format("  {:>2}  {:<62} {:>11} {:>11} {:>11}  {:>10}  {}\n", ++rank, f.title, byte_text(f.peak_reserved_before),
                        byte_text(f.peak_reserved_after), byte_text(f.saving_bytes()), step(f.step_seconds_after),
                        f.fits_after ? "yes" : f.leak ? "grows" : "no");
    text += fmt::format("      --set {}; cost: {}\n", fmt::join(f.overrides, " --set "), f.cost);
  }
  for (const auto& f : d.fixes) {
    if (f.valid) continue;
    text += fmt::format("   -  {}: not possible here: {}\n", f.title, f.error);
  }
  if (d.recommended_alloc_conf) {
    text += fmt::format("\nthe allocator setting alone makes it fit:\n  export PYTORCH_CUDA_ALLOC_CONF={}\n",
                        *d.recommended_alloc_conf);
  }
  if (d.recommendation) {
    const Recommendation& r = *d.recommendation;
    text += fmt::format("\nrecommended (fits{} with the least step time): {}\n  --set {}\n  peak reserved {}, step {}{}\n",
                        d.leak ? " and stops the growth" : "", r.title, fmt::join(r.overrides, " --set "), byte_text(r.peak_reserved_bytes_after),
                        step(r.step_seconds_after),
                        d.step_seconds > 0.0 && r.step_seconds_after > 0.0
                            ? fmt::format(" ({:+.0f}% against the scenario's {})",
                                          100.0 * (r.step_seconds_after / d.step_seconds - 1.0), step(d.step_seconds))
                            : "");
  }
  for (const auto& note : d.recommendation_notes) {
    text += (d.recommendation ? "\nnote: " : "\nnothing recommended: ") + note + "\n";
  }
  if (d.fit) text += "\n" + render_fit_text(*d.fit);
  text += fmt::format("\n{:.2f} s\n", d.seconds);
  return text;
}

namespace {

nlohmann::ordered_json growth_json(const std::optional<LeakOutlook>& leak) {
  if (!leak) return nullptr;
  return {{"bytes_per_iteration", leak->growth.bytes_per_iteration},
          {"first_iteration", leak->growth.first_iteration},
          {"last_iteration", leak->growth.last_iteration},
          {"oom_iteration", leak->oom_iteration},
          {"oom_simulated", leak->out_of_memory_simulated},
          {"text", leak->text()}};
}

}  // namespace

std::string render_whatif_json(const Diagnosis& d) {
  nlohmann::ordered_json json;
  json["scenario"] = d.scenario_path;
  json["fits"] = d.fits;
  json["fits_simulated_iterations"] = d.fits_simulated_iterations;
  json["growth"] = growth_json(d.leak);
  json["usable_bytes"] = d.usable_bytes;
  json["peak_allocated_bytes"] = d.peak_allocated_bytes;
  json["peak_reserved_bytes"] = d.peak_reserved_bytes;
  json["oom_message"] = d.fits_simulated_iterations ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.oom_message);
  json["patterns"] = nlohmann::ordered_json::array();
  for (const auto& p : d.patterns) {
    json["patterns"].push_back({{"id", p.id}, {"title", p.title}, {"evidence", p.evidence}, {"rule", p.rule}});
  }
  json["fixes"] = nlohmann::ordered_json::array();
  for (const auto& f : d.fixes) {
    nlohmann::ordered_json row;
    row["id"] = f.id;
    row["title"] = f.title;
    row["overrides"] = f.overrides;
    row["valid"] = f.valid;
    row["error"] = f.valid ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.error);
    row["peak_reserved_before"] = f.peak_reserved_before;
    row["peak_reserved_after"] = f.peak_reserved_after;
    row["peak_allocated_before"] = f.peak_allocated_before;
    row["peak_allocated_after"] = f.peak_allocated_after;
    row["saving_bytes"] = f.saving_bytes();
    row["fits_after"] = f.fits_after;
    row["alloc_conf"] = f.alloc_conf.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.alloc_conf);
    row["cost"] = f.cost;
    row["peak_reserved_bytes_after"] = f.peak_reserved_after;
    row["step_seconds_before"] = f.step_seconds_before;
    row["step_seconds_after"] = f.step_seconds_after;
    row["fits"] = f.fits_after;
    row["growth"] = growth_json(f.leak);
    row["changes_goal"] = f.changes_goal;
    json["fixes"].push_back(std::move(row));
  }
  json["recommended_alloc_conf"] =
      d.recommended_alloc_conf ? nlohmann::ordered_json(*d.recommended_alloc_conf) : nlohmann::ordered_json(nullptr);
  json["step_seconds"] = d.step_seconds;
  json["step_is_generation"] = d.step_is_generation;  // step_seconds: all `prompts` in one generate() call
  json["prompts"] = d.step_is_generation ? nlohmann::ordered_json(d.prompts) : nlohmann::ordered_json(nullptr);
  if (d.recommendation) {
    const Recommendation& r = *d.recommendation;
    json["recommendation"] = {{"fix_ids", r.fix_ids},
                              {"title", r.title},
                              {"overrides", r.overrides},
                              {"peak_reserved_bytes_after", r.peak_reserved_bytes_after},
                              {"step_seconds_after", r.step_seconds_after},
                              {"fits", r.fits},
                              {"world_size", r.world_size > 0 ? nlohmann::ordered_json(r.world_size) : nlohmann::ordered_json(nullptr)},
                              {"sharding", r.sharding.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.sharding)},
                              {"changes_goal", r.changes_goal}};
  } else {
    json["recommendation"] = nullptr;
  }
  json["recommendation_notes"] = d.recommendation_notes;
  json["fit"] = d.fit ? nlohmann::ordered_json::parse(render_fit_json(*d.fit)) : nlohmann::ordered_json(nullptr);
  json["seconds"] = d.seconds;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
