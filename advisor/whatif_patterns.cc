// The doctor's pattern detectors. Each compares simulated numbers (the scenario's own
// prediction and a few variants of it) with a threshold it states in `rule`. Patterns that
// only matter when memory is tight are reported under pressure only: the step does not fit,
// or less than kPressureSpare of usable memory is left.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/leak_judgement.h"
#include "advisor/peak_regimes.h"
#include "planner/families/families.h"
#include "scenario/scenario_loader.h"
#include "advisor/search.h"
#include "planner/jobs/training_job.h"
#include "advisor/whatif.h"

namespace oomcast::advisor {

using planner::TensorCategory;
using scenario::ModelConfig;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::attention_name;

namespace {

constexpr double kPressureSpare = 0.10;          // spare below 10% of usable: "under pressure"
constexpr double kBatchShare = 0.30;             // batch-dependent bytes >= 30% of the peak
constexpr double kQuadraticShare = 0.20;         // d·B·S² >= 20% of the peak
constexpr double kEvalDrop = 0.05;               // eval peak drops >= 5% under no_grad
constexpr double kOptimizerShare = 0.10;         // optimizer state >= 10% of the peak
constexpr double kFragmentShare = 0.15;          // reserved - allocated >= 15% of reserved ...
constexpr double kFragmentFloor = 0.01;          // ... and >= 1% of usable memory

std::string pct(double fraction) { return fmt::format("{:.0f}%", fraction * 100.0); }

uint64_t category_bytes(const Prediction& p, TensorCategory category) {
  return p.breakdown[static_cast<size_t>(category)];
}

bool has_sequence(const ModelConfig& model) { return !scenario::families::is_vision(model) && model.family != "mlp"; }

uint64_t eval_peak(const Prediction& p) {
  uint64_t peak = 0;
  for (const auto& row : p.phases) {
    if (row.name.find("eval") != std::string::npos) peak = std::max(peak, row.peak_allocated_bytes);
  }
  return peak;
}

// Variants of the scenario the detectors compare with; empty when not applicable.
struct Variants {
  std::optional<Prediction> double_batch, half_seq, quarter_seq, eval_no_grad, four_iterations;
};

Variants simulate_variants(const ScenarioSource& source, const Scenario& s, size_t jobs, PlannedPoints* points) {
  Variants v;
  std::vector<std::function<void()>> work;
  if (2 * s.batch_size <= parameter_limit(s, SearchParam::BatchSize)) {
    work.push_back([&] {
      v.double_batch = predict_sharing(with_parameter(s, SearchParam::BatchSize, 2 * s.batch_size), points);
    });
  }
  if (has_sequence(s.model) && s.seq_len >= 8) {
    work.push_back([&] { v.half_seq = predict_sharing(with_parameter(s, SearchParam::SeqLen, s.seq_len / 2), points); });
    work.push_back([&] { v.quarter_seq = predict_sharing(with_parameter(s, SearchParam::SeqLen, s.seq_len / 4), points); });
  }
  if (s.eval.enabled && !s.eval.no_grad) {
    work.push_back([&] { v.eval_no_grad = predict(source.load({"eval.no_grad=true"})); });
  }
  if (s.iterations < 4) {
    work.push_back([&] { v.four_iterations = predict(source.load({"iterations=4"})); });
  }
  run_indexed(work.size(), jobs, [&](size_t i) { work[i](); });
  return v;
}

}  // namespace

std::vector<OomPattern> detect_patterns(const ScenarioSource& source, const Scenario& s, const Prediction& base,
                                        size_t jobs, std::optional<LeakOutlook>* leak, PlannedPoints* points) {
  std::vector<OomPattern> patterns;
  const double usable = static_cast<double>(base.usable_bytes);
  const double peak = static_cast<double>(base.peak_allocated_bytes);
  const bool pressure = !base.fits || static_cast<double>(base.spare_bytes()) < kPressureSpare * usable;
  Variants v = simulate_variants(source, s, jobs, points);

  // 1. Model states alone exceed the device.
  uint64_t states = category_bytes(base, TensorCategory::Parameter) + category_bytes(base, TensorCategory::Gradient) +
                    category_bytes(base, TensorCategory::OptimizerState);
  if (!s.device.is_cpu && static_cast<double>(states) >= usable) {
    patterns.push_back({"model_states_exceed_device",
                        "model states alone exceed the device: OOM on the first batch whatever its size",
                        fmt::format("parameters + gradients + optimizer state = {} at the peak, usable {}",
                                    byte_text(states), byte_text(base.usable_bytes)),
                        "model-state bytes at the peak >= usable memory"});
  }

  // 2. Activation memory linear in batch.
  if (pressure && v.double_batch) {
    double per_sample = (static_cast<double>(v.double_batch->peak_allocated_bytes) - peak) /
                        static_cast<double>(s.batch_size);
    double share = per_sample * static_cast<double>(s.batch_size) / peak;
    if (share >= kBatchShare) {
      patterns.push_back({"activations_linear_in_batch", "activation memory grows linearly with the batch",
                          fmt::format("{} per sample: {} of the {} peak at batch_size {} (batch {} peaks at {})",
                                      byte_text(per_sample), pct(share), byte_text(peak), s.batch_size,
                                      2 * s.batch_size, byte_text(v.double_batch->peak_allocated_bytes)),
                          fmt::format("under pressure and the batch-dependent share of the peak >= {} "
                                      "(from simulating 2x the batch)", pct(kBatchShare))});
    }
  }

  // 3. Quadratic attention: through the three points (S/4, S/2, S) the parabola
  // a + c·x + d·x² has d = [(f(S) - f(S/2)) / (S/2) - (f(S/2) - f(S/4)) / (S/4)] / (3S/4).
  // f is the forward/backward peak, not the step's: where the optimizer step sets the peak at
  // short S and activations at long S, the overall peak bends and would fake an S² term.
  if (pressure && v.half_seq && v.quarter_seq) {
    double x1 = static_cast<double>(s.seq_len / 4), x2 = static_cast<double>(s.seq_len / 2);
    double x3 = static_cast<double>(s.seq_len);
    PeakRegimes r1 = peak_regimes(*v.quarter_seq), r2 = peak_regimes(*v.half_seq), r3 = peak_regimes(base);
    double f1 = static_cast<double>(r1.activations), f2 = static_cast<double>(r2.activations);
    double f3 = static_cast<double>(r3.activations);
    double d = ((f3 - f2) / (x3 - x2) - (f2 - f1) / (x2 - x1)) / (x3 - x1);
    double quadratic = d * x3 * x3;
    if (quadratic >= kQuadraticShare * peak) {
      patterns.push_back({"quadratic_attention", "attention memory quadratic in the sequence length",
                          fmt::format("the S² term is {} ({} of the peak) at seq_len {} with {} attention{}",
                                      byte_text(quadratic), pct(quadratic / peak), s.seq_len,
                                      attention_name(s.attention),
                                      r1.step_sets_peak() == r3.step_sets_peak()
                                          ? std::string()
                                          : fmt::format(" (the peak is set by {} at seq_len {} and by {} at {}: the "
                                                        "term is fitted to the forward/backward peaks alone)",
                                                        peak_regime_name(r1), s.seq_len / 4, peak_regime_name(r3),
                                                        s.seq_len)),
                          fmt::format("under pressure and the S² term of the forward/backward peak (the parabola "
                                      "through S/4, S/2, S) >= {} of the peak", pct(kQuadraticShare))});
    }
  }

  // 4. Evaluation without no_grad.
  if (v.eval_no_grad) {
    double with_grad = static_cast<double>(eval_peak(base));
    double without = static_cast<double>(eval_peak(*v.eval_no_grad));
    if (with_grad > 0 && (with_grad - without) >= kEvalDrop * with_grad) {
      patterns.push_back({"eval_without_no_grad", "evaluation runs without torch.no_grad(): it saves activations for a backward that never comes",
                          fmt::format("evaluation peaks at {} with grad, {} under no_grad", byte_text(with_grad),
                                      byte_text(without)),
                          fmt::format("eval enabled with no_grad: false, and no_grad lowers the eval peak by >= {}",
                                      pct(kEvalDrop))});
    }
  }

  // 5. Growth across iterations (a leak), judged over 8 iterations (leak_judgement.h) when a
  // 4-iteration run shows iteration 3 above iteration 1. A generation's iterations are its
  // decode steps, whose KV cache grows by design: that is reported as the cache, not a leak.
  const bool generates = s.job.job.kind == scenario::JobKind::Generate;
  const Prediction& short_run = v.four_iterations ? *v.four_iterations : base;
  GrowthJudgement growth = generates ? GrowthJudgement{} : judge_growth(base);
  std::optional<LeakOutlook> outlook = generates ? std::nullopt : leak_outlook(base);
  if (generates) {
    // Live memory at the first and the last planned decode step: what the cache (and input_ids)
    // grew by in between.
    const PhaseRow* first = nullptr;
    const PhaseRow* last = nullptr;
    for (const PhaseRow& row : base.phases) {
      if (!row.name.ends_with("/decode")) continue;
      if (!first) first = &row;
      last = &row;
    }
    if (first && last && last->allocated_bytes >= first->allocated_bytes + kLeakGrowthFloor) {
      const double growth = static_cast<double>(last->allocated_bytes - first->allocated_bytes);
      patterns.push_back({"kv_cache_growth", "the KV cache grows with every generated token (by design, not a leak)",
                          fmt::format("live memory grows by {} from {} to {} ({} of the peak)", byte_text(growth),
                                      first->name, last->name, pct(growth / peak)),
                          "a generate job whose live memory rises by >= 512 bytes (one block) from its first "
                          "decode step to its last; never judged as a leak"});
    }
  }
  if (!generates && !growth.judged && may_grow(short_run)) {
    Prediction window = predict_over_leak_window(source, {});
    growth = judge_growth(window);
    outlook = leak_outlook(window);
  }
  if (leak) *leak = outlook;
  if (growth.grows) {
    patterns.push_back({"growth_across_iterations", "memory grows every iteration: something keeps tensors alive (a leak)",
                        fmt::format("the peak grows by {} per iteration ({} at iteration {}, {} at iteration {}); "
                                    "{} on {}",
                                    byte_text(growth.bytes_per_iteration), byte_text(growth.first_peak),
                                    growth.first_iteration, byte_text(growth.last_peak), growth.last_iteration,
                                    outlook ? outlook->end_text() : std::string("it never settles"), s.device.display_name.empty() ? s.device.profile : s.device.display_name),
                        fmt::format("the peak rises by >= 512 bytes (one allocator block) from each of iterations "
                                    "1, 3, 5, 7 to the next (simulated over {} iterations)", kLeakJudgedIterations)});
  }

  // 6. Optimizer state created at the first step.
  const ScheduleLocation& where = base.fits ? base.peak_at : base.oom_at;
  uint64_t optimizer_state = category_bytes(base, TensorCategory::OptimizerState);
  if (pressure && where.iteration == 0 && where.phase.find("optimizer") != std::string::npos &&
      static_cast<double>(optimizer_state) >= kOptimizerShare * peak) {
    patterns.push_back({"optimizer_state_at_first_step",
                        "the optimizer creates its state at the first step(): the first iteration's step is the peak",
                        fmt::format("{} at {}; optimizer state {} ({} of the peak)", base.fits ? "peak" : "OOM",
                                    where.phase, byte_text(optimizer_state),
                                    pct(static_cast<double>(optimizer_state) / peak)),
                        fmt::format("under pressure, the peak (or OOM) is in iteration 0's optimizer phase and "
                                    "optimizer state >= {} of the peak", pct(kOptimizerShare))});
  }

  // 7. Fragmentation: reserved far above allocated.
  if (pressure && !s.device.is_cpu) {
    double reserved = static_cast<double>(base.peak_reserved_bytes);
    double gap = reserved - peak;
    if (gap >= kFragmentShare * reserved && gap >= kFragmentFloor * usable) {
      patterns.push_back({"fragmentation", "fragmentation: the allocator reserves far more than tensors need",
                          fmt::format("peak reserved {} vs peak allocated {}: {} ({}) cached but not usable",
                                      byte_text(reserved), byte_text(peak), byte_text(gap), pct(gap / reserved)),
                          fmt::format("under pressure and peak reserved - peak allocated >= {} of reserved and >= {} of usable",
                                      pct(kFragmentShare), pct(kFragmentFloor))});
    }
  }
  return patterns;
}

}  // namespace oomcast::advisor
