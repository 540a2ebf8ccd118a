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
#include "planner/families/families.h"
#include "scenario/scenario_loader.h"
#include "advisor/search.h"
#include "planner/step_planner.h"
#include "advisor/whatif.h"

namespace oomcast::planner {

namespace {

constexpr double kPressureSpare = 0.10;          // spare below 10% of usable: "under pressure"
constexpr double kBatchShare = 0.30;             // batch-dependent bytes >= 30% of the peak
constexpr double kQuadraticShare = 0.20;         // d·B·S² >= 20% of the peak
constexpr double kEvalDrop = 0.05;               // eval peak drops >= 5% under no_grad
// A deterministic steady state is exactly flat, so a peak that rises in every steady-state
// iteration by at least one allocator block (512 bytes) is a leak, however small.
constexpr uint64_t kGrowthFloor = 512;
constexpr double kOptimizerShare = 0.10;         // optimizer state >= 10% of the peak
constexpr double kFragmentShare = 0.15;          // reserved - allocated >= 15% of reserved ...
constexpr double kFragmentFloor = 0.01;          // ... and >= 1% of usable memory

std::string pct(double fraction) { return fmt::format("{:.0f}%", fraction * 100.0); }

uint64_t category_bytes(const Prediction& p, TensorCategory category) {
  return p.breakdown[static_cast<size_t>(category)];
}

bool has_sequence(const ModelConfig& model) { return !families::is_vision(model) && model.family != "mlp"; }

// The highest allocated peak of each iteration's phases.
std::map<int32_t, uint64_t> iteration_peaks(const Prediction& p) {
  std::map<int32_t, uint64_t> peaks;
  for (const auto& row : p.phases) {
    if (row.name.rfind("iter", 0) != 0) continue;  // setup / end marks belong to no iteration
    peaks[row.iteration] = std::max(peaks[row.iteration], row.peak_allocated_bytes);
  }
  return peaks;
}

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

Variants simulate_variants(const ScenarioSource& source, const Scenario& s, size_t jobs) {
  Variants v;
  std::vector<std::function<void()>> work;
  if (2 * s.batch_size <= parameter_limit(s, SearchParam::BatchSize)) {
    work.push_back([&] { v.double_batch = predict(with_parameter(s, SearchParam::BatchSize, 2 * s.batch_size)); });
  }
  if (has_sequence(s.model) && s.seq_len >= 8) {
    work.push_back([&] { v.half_seq = predict(with_parameter(s, SearchParam::SeqLen, s.seq_len / 2)); });
    work.push_back([&] { v.quarter_seq = predict(with_parameter(s, SearchParam::SeqLen, s.seq_len / 4)); });
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
                                        size_t jobs) {
  std::vector<OomPattern> patterns;
  const double usable = static_cast<double>(base.usable_bytes);
  const double peak = static_cast<double>(base.peak_allocated_bytes);
  const bool pressure = !base.fits || static_cast<double>(base.spare_bytes()) < kPressureSpare * usable;
  Variants v = simulate_variants(source, s, jobs);

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
  if (pressure && v.half_seq && v.quarter_seq) {
    double x1 = static_cast<double>(s.seq_len / 4), x2 = static_cast<double>(s.seq_len / 2);
    double x3 = static_cast<double>(s.seq_len);
    double f1 = static_cast<double>(v.quarter_seq->peak_allocated_bytes);
    double f2 = static_cast<double>(v.half_seq->peak_allocated_bytes);
    double d = ((peak - f2) / (x3 - x2) - (f2 - f1) / (x2 - x1)) / (x3 - x1);
    double quadratic = d * x3 * x3;
    if (quadratic >= kQuadraticShare * peak) {
      patterns.push_back({"quadratic_attention", "attention memory quadratic in the sequence length",
                          fmt::format("the S² term is {} ({} of the peak) at seq_len {} with {} attention",
                                      byte_text(quadratic), pct(quadratic / peak), s.seq_len,
                                      attention_name(s.attention)),
                          fmt::format("under pressure and the S² term (the parabola through S/4, S/2, S) "
                                      ">= {} of the peak", pct(kQuadraticShare))});
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

  // 5. Growth across iterations (a leak): steady-state iterations (1, 2, ...) should peak alike.
  const Prediction& long_run = v.four_iterations ? *v.four_iterations : base;
  std::map<int32_t, uint64_t> peaks = iteration_peaks(long_run);
  if (peaks.size() >= 4) {
    bool rises_every_time = true;
    for (auto it = std::next(peaks.find(1)); it != peaks.end(); ++it) {
      rises_every_time = rises_every_time && it->second >= std::prev(it)->second + kGrowthFloor;
    }
    uint64_t first = peaks.at(1), last = peaks.rbegin()->second;
    if (rises_every_time) {
      double growth = static_cast<double>(last - first) / static_cast<double>(peaks.rbegin()->first - 1);
      patterns.push_back({"growth_across_iterations", "memory grows every iteration: something keeps tensors alive (a leak)",
                          fmt::format("the peak grows by {} per iteration ({} at iteration 1, {} at iteration {}); "
                                      "{} more after 10,000 iterations",
                                      byte_text(growth), byte_text(first), byte_text(last), peaks.rbegin()->first,
                                      byte_text(growth * 10000.0)),
                          "the peak rises by >= 512 bytes (one allocator block) in every iteration after the first "
                          "(simulated over at least 4 iterations)"});
    }
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

}  // namespace oomcast::planner
