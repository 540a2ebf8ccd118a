// The closed-form fit: simulate a small grid of (B, S), solve the least-squares problems with
// column-pivoting QR on a column-scaled design matrix (B·S² is ~10^7 times B, so unscaled
// columns would lose the small terms to rounding), one per moment that sets a sample's peak
// (or, as a fallback, for forward/backward and the optimizer step), and report every
// residual against the max of the laws.
#include "advisor/closed_form_fit.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/auto_checkpointing.h"
#include "advisor/byte_text.h"
#include "advisor/fit_moments.h"
#include "advisor/peak_regimes.h"
#include "advisor/steady_state.h"
#include "planner/families/families.h"
#include "advisor/predict.h"
#include "planner/jobs/training_job.h"

namespace oomcast::advisor {

using planner::plan_steps;
using scenario::CheckpointMode;
using scenario::ModelConfig;
using scenario::Scenario;

namespace {

std::vector<int64_t> unique_positive(std::vector<int64_t> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](int64_t v) { return v < 1; }), values.end());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

bool fits_sequence(const ModelConfig& model) { return !scenario::families::is_vision(model) && model.family != "mlp"; }

std::string signed_term(double value, const char* unit) {
  return fmt::format(" {} {}{}", value < 0 ? "-" : "+", byte_text(std::fabs(value)), unit);
}

std::string law_text(const FitLaw& law, bool has_sequence) {
  std::string text = byte_text(law.a) + signed_term(law.b, "·B");
  if (has_sequence) {
    text += signed_term(law.c, "·B·S");
    text += signed_term(law.d, "·B·S²");
  }
  return text;
}

// Least squares of `peaks` on the columns 1, B (, B·S, B·S²) of the samples.
FitLaw solve(const std::vector<FitSample>& samples, const std::vector<double>& peaks, bool use_sequence) {
  const Eigen::Index columns = use_sequence ? 4 : 2;
  Eigen::MatrixXd design(static_cast<Eigen::Index>(samples.size()), columns);
  Eigen::VectorXd target(static_cast<Eigen::Index>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    double b = static_cast<double>(samples[i].batch), s = static_cast<double>(samples[i].seq_len);
    auto row = static_cast<Eigen::Index>(i);
    design(row, 0) = 1.0;
    design(row, 1) = b;
    if (use_sequence) {
      design(row, 2) = b * s;
      design(row, 3) = b * s * s;
    }
    target(row) = peaks[i];
  }
  Eigen::VectorXd scale = design.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < columns; ++j) {
    if (scale(j) == 0.0) scale(j) = 1.0;
  }
  Eigen::MatrixXd scaled = design * scale.cwiseInverse().asDiagonal();
  Eigen::VectorXd solution = scaled.colPivHouseholderQr().solve(target).cwiseQuotient(scale);
  FitLaw law;
  law.a = solution(0);
  law.b = solution(1);
  if (use_sequence) {
    law.c = solution(2);
    law.d = solution(3);
  }
  return law;
}

}  // namespace

double FitLaw::at(int64_t batch, int64_t seq_len, bool has_sequence) const {
  double B = static_cast<double>(batch), S = static_cast<double>(seq_len);
  return a + b * B + (has_sequence ? c * B * S + d * B * S * S : 0.0);
}

FitLaw ClosedFormFit::law_at(int64_t batch, int64_t seq_len) const {
  if (!moments.empty()) {
    const FitMoment* top = &moments.front();
    for (const FitMoment& moment : moments) {
      if (moment.law.at(batch, seq_len, has_sequence) > top->law.at(batch, seq_len, has_sequence)) top = &moment;
    }
    return top->law;
  }
  if (has_step_law && step.at(batch, seq_len, has_sequence) > activations().at(batch, seq_len, has_sequence)) return step;
  return activations();
}

double ClosedFormFit::predict(int64_t batch, int64_t seq_len) const {
  return law_at(batch, seq_len).at(batch, seq_len, has_sequence);
}

std::string ClosedFormFit::formula() const {
  std::string text = metric == "peak_allocated_bytes" ? "peak allocated ≈ " : "peak reserved ≈ ";
  if (moments.size() == 1) return text + law_text(moments.front().law, has_sequence);
  if (!moments.empty()) {
    std::vector<std::string> laws;
    for (const FitMoment& moment : moments) laws.push_back(law_text(moment.law, has_sequence));
    return text + "max(" + fmt::format("{}", fmt::join(laws, ", ")) + ")";
  }
  if (!has_step_law) return text + law_text(activations(), has_sequence);
  return text + "max(" + law_text(activations(), has_sequence) + ", " + law_text(step, has_sequence) + ")";
}

int64_t ClosedFormFit::batch_for_budget(double budget_bytes, int64_t seq_len) const {
  // The fitted peak grows with the batch in both laws: exponential probe, then bisection.
  if (predict(1, seq_len) > budget_bytes) return 0;
  const int64_t kLimit = int64_t{1} << 50;
  int64_t lo = 1, hi = 2;
  while (hi < kLimit && predict(hi, seq_len) <= budget_bytes) {
    lo = hi;
    hi *= 2;
  }
  if (hi >= kLimit) return lo;
  while (hi - lo > 1) {
    int64_t middle = lo + (hi - lo) / 2;
    (predict(middle, seq_len) <= budget_bytes ? lo : hi) = middle;
  }
  return lo;
}

namespace {

// Schedules share one structure when every sample has as many events and each peak's event
// is the same event (kind and tensor) in every sample: then one index names the same moment
// in each (fit_moments.h). A batch of 1 can change it (a copy PyTorch skips for a size-1 dim).
bool same_structure(const std::vector<AllocatedSeries>& series) {
  if (series.empty()) return false;
  const AllocatedSeries& first = series.front();
  return std::all_of(series.begin(), series.end(), [&](const AllocatedSeries& s) {
    if (s.allocated.empty() || s.allocated.size() != first.allocated.size()) return false;
    return std::all_of(series.begin(), series.end(),
                       [&](const AllocatedSeries& other) { return s.identity[other.peak_event] == first.identity[other.peak_event]; });
  });
}

// One law per moment that sets some sample's peak, each fitted to what every sample has
// allocated at that moment.
void fit_moments(const std::vector<AllocatedSeries>& series, bool use_sequence, ClosedFormFit& fit) {
  std::vector<size_t> events;
  for (const AllocatedSeries& s : series) events.push_back(s.peak_event);
  std::sort(events.begin(), events.end());
  events.erase(std::unique(events.begin(), events.end()), events.end());
  // Iterations of a steady loop repeat their moments: one law stands for all that hold the
  // same bytes in every sample.
  std::vector<std::vector<double>> kept;
  for (size_t event : events) {
    std::vector<double> live;
    for (const AllocatedSeries& s : series) live.push_back(static_cast<double>(s.allocated[event]));
    if (std::find(kept.begin(), kept.end(), live) != kept.end()) continue;
    kept.push_back(live);
    FitMoment moment;
    moment.event = event;
    moment.phase = series.front().phase_at(event);
    moment.optimizer_step = moment.phase.find("optimizer") != std::string::npos;
    moment.law = solve(fit.samples, live, use_sequence);
    fit.moments.push_back(std::move(moment));
  }
}

}  // namespace

ClosedFormFit fit_closed_form(const Scenario& scenario, FitMetric metric, size_t jobs, PlannedPoints* points) {
  ClosedFormFit fit;
  fit.has_sequence = fits_sequence(scenario.model);
  fit.metric = metric == FitMetric::PeakAllocated ? "peak_allocated_bytes" : "peak_reserved_bytes";
  const int64_t B = scenario.batch_size, S = scenario.seq_len;
  std::vector<int64_t> batches = unique_positive({B / 4, B / 2, B, 2 * B});
  if (batches.size() < 3) batches = {1, 2, 3, 4};
  std::vector<int64_t> seqs = fit.has_sequence ? unique_positive({S / 4, S / 2, S}) : std::vector<int64_t>{S};
  for (int64_t batch : batches) {
    for (int64_t seq : seqs) {
      FitSample sample;
      sample.batch = batch;
      sample.seq_len = seq;
      fit.samples.push_back(sample);
    }
  }
  // An unbounded device: the fit describes demand, not where the step would die.
  Scenario unbounded = scenario;
  sim::DeviceModel device = sim::DeviceModel::unlimited();
  device.context_bytes = scenario.device.model.context_bytes;
  unbounded.device.model = device;
  // Moments need every event's allocated bytes: a GPU device's allocator, and the whole
  // schedule planned (no steady-state window).
  const bool by_moments = metric == FitMetric::PeakAllocated && !scenario.device.is_cpu &&
                          scenario.iterations <= kPlanWholeUpToIterations;
  std::vector<AllocatedSeries> series(by_moments ? fit.samples.size() : 0);
  run_indexed(fit.samples.size(), jobs, [&](size_t i) {
    Scenario s = unbounded;
    s.batch_size = fit.samples[i].batch;
    s.seq_len = fit.samples[i].seq_len;
    FitSample& sample = fit.samples[i];
    PeakRegimes regimes;
    if (by_moments) {
      // A point planned already is replayed; one planned here is not kept (the grid's
      // schedules together would hold a dozen traces in memory at once).
      std::shared_ptr<const planner::PlannedTrace> kept =
          points != nullptr && PlannedPoints::shareable(s) ? points->find(s.batch_size, s.seq_len) : nullptr;
      if (kept) {
        series[i] = replay_allocated_series(s, *kept);
      } else {
        if (s.checkpointing.mode == CheckpointMode::Auto && s.checkpointing.units.empty()) s = resolve_auto_checkpointing(s);
        series[i] = replay_allocated_series(s, plan_steps(s));
      }
      sample.peak_bytes = static_cast<double>(series[i].peak_allocated);
      regimes = series[i].regimes;
    } else {
      Prediction prediction = predict(s);
      sample.peak_bytes = static_cast<double>(
          metric == FitMetric::PeakAllocated ? prediction.peak_allocated_bytes : prediction.peak_reserved_bytes);
      regimes = peak_regimes(prediction);
    }
    sample.step_sets_peak = regimes.step_sets_peak();
    sample.activation_peak_bytes = static_cast<double>(regimes.activations);
    sample.step_peak_bytes = static_cast<double>(regimes.optimizer_step);
  });

  // With one sequence length the B·S and B·S² columns are multiples of B: fit a + b·B only.
  const bool use_sequence = fit.has_sequence && seqs.size() >= 3;
  fit.has_sequence = use_sequence;
  if (by_moments && same_structure(series)) {
    fit_moments(series, use_sequence, fit);
    series.clear();
    for (const FitMoment& moment : fit.moments) {
      if (!moment.optimizer_step) continue;
      if (!fit.has_step_law || moment.law.at(B, S, use_sequence) > fit.step.at(B, S, use_sequence)) fit.step = moment.law;
      fit.has_step_law = true;
    }
    FitLaw own = fit.law_at(B, S);
    fit.a = own.a;
    fit.b = own.b;
    fit.c = own.c;
    fit.d = own.d;
  } else {
    // Reserved memory is never given back between phases, so only the allocated peak splits
    // into the two regimes; a job without an optimizer step has one.
    fit.has_step_law = metric == FitMetric::PeakAllocated &&
                       std::all_of(fit.samples.begin(), fit.samples.end(), [](const FitSample& s) {
                         return s.step_peak_bytes > 0 && s.activation_peak_bytes > 0;
                       });
    std::vector<double> activation_peaks, step_peaks;
    for (const auto& sample : fit.samples) {
      activation_peaks.push_back(fit.has_step_law ? sample.activation_peak_bytes : sample.peak_bytes);
      step_peaks.push_back(sample.step_peak_bytes);
    }
    FitLaw activations = solve(fit.samples, activation_peaks, use_sequence);
    fit.a = activations.a;
    fit.b = activations.b;
    fit.c = activations.c;
    fit.d = activations.d;
    if (fit.has_step_law) fit.step = solve(fit.samples, step_peaks, use_sequence);
  }
  for (auto& sample : fit.samples) {
    sample.fitted_bytes = fit.predict(sample.batch, sample.seq_len);
    if (!fit.moments.empty()) {
      const FitLaw law = fit.law_at(sample.batch, sample.seq_len);
      for (const FitMoment& moment : fit.moments) {
        if (moment.law.at(sample.batch, sample.seq_len, use_sequence) == law.at(sample.batch, sample.seq_len, use_sequence)) {
          sample.peak_phase = moment.phase;
          sample.peak_event = moment.event;
          break;
        }
      }
    }
    double residual = std::fabs(sample.residual());
    fit.max_abs_residual_bytes = std::max(fit.max_abs_residual_bytes, residual);
    if (sample.peak_bytes > 0) fit.max_relative_residual = std::max(fit.max_relative_residual, residual / sample.peak_bytes);
  }
  return fit;
}

std::string render_fit_text(const ClosedFormFit& fit) {
  std::string text = "closed-form fit (least squares over " + std::to_string(fit.samples.size()) + " simulations):\n";
  const char* what = fit.metric == "peak_allocated_bytes" ? "peak allocated" : "peak reserved";
  if (fit.moments.size() > 1) {
    text += fmt::format("  {} ≈ max over the {} moments that set a simulated peak (one law each: what is live there)\n",
                        what, fit.moments.size());
    for (const FitMoment& moment : fit.moments) {
      text += fmt::format("    {:<36} ≈ {}\n",
                          fmt::format("{}, event {}{}", moment.phase, moment.event, moment.optimizer_step ? " (optimizer step)" : ""),
                          law_text(moment.law, fit.has_sequence));
    }
  } else if (fit.has_step_law && fit.moments.empty()) {
    text += "  " + std::string(what) + " ≈ max(forward/backward, optimizer step)\n";
    text += "    forward/backward  ≈ " + law_text(fit.activations(), fit.has_sequence) + "\n";
    text += "    optimizer step    ≈ " + law_text(fit.step, fit.has_sequence) + "\n";
  } else {
    text += "  " + fit.formula() + "\n";
  }
  text += fit.has_sequence ? "  (B = batch_size, S = seq_len)\n" : "  (B = batch_size)\n";
  const bool by_moment = fit.moments.size() > 1;
  text += fmt::format("  {:>6} {:>7} {:>14} {:>14} {:>12}{}\n", "B", "S", "simulated", "formula", "residual",
                      fit.has_step_law || by_moment ? "  peak set by" : "");
  for (const auto& sample : fit.samples) {
    std::string set_by = by_moment           ? fmt::format("  {}, event {}", sample.peak_phase, sample.peak_event)
                         : !fit.has_step_law ? ""
                         : sample.step_sets_peak ? "  optimizer step"
                                                 : "  forward/backward";
    text += fmt::format("  {:>6} {:>7} {:>14} {:>14} {:>12}{}\n", sample.batch, sample.seq_len,
                        byte_text(sample.peak_bytes), byte_text(sample.fitted_bytes), byte_text(sample.residual()), set_by);
  }
  text += fmt::format("  worst residual {} ({:.2f}% of its peak)\n", byte_text(fit.max_abs_residual_bytes),
                      fit.max_relative_residual * 100.0);
  return text;
}

std::string render_fit_json(const ClosedFormFit& fit) {
  nlohmann::ordered_json json;
  json["formula"] = fit.formula();
  json["metric"] = fit.metric;
  json["has_sequence"] = fit.has_sequence;
  json["coefficients"] = {{"a", fit.a}, {"b", fit.b}, {"c", fit.c}, {"d", fit.d}};
  json["step_coefficients"] =
      fit.has_step_law ? nlohmann::ordered_json{{"a", fit.step.a}, {"b", fit.step.b}, {"c", fit.step.c}, {"d", fit.step.d}}
                       : nlohmann::ordered_json(nullptr);
  json["moments"] = nlohmann::ordered_json::array();
  for (const FitMoment& moment : fit.moments) {
    json["moments"].push_back(
        {{"phase", moment.phase},
         {"event", moment.event},
         {"optimizer_step", moment.optimizer_step},
         {"coefficients", {{"a", moment.law.a}, {"b", moment.law.b}, {"c", moment.law.c}, {"d", moment.law.d}}}});
  }
  json["samples"] = nlohmann::ordered_json::array();
  for (const auto& sample : fit.samples) {
    json["samples"].push_back({{"batch", sample.batch},
                               {"seq_len", sample.seq_len},
                               {"peak_bytes", sample.peak_bytes},
                               {"fitted_bytes", sample.fitted_bytes},
                               {"residual_bytes", sample.residual()},
                               {"peak_set_by", sample.step_sets_peak ? "optimizer_step" : "forward_backward"},
                               {"peak_phase", sample.peak_phase.empty() ? nlohmann::ordered_json(nullptr)
                                                                        : nlohmann::ordered_json(sample.peak_phase)}});
  }
  json["max_abs_residual_bytes"] = fit.max_abs_residual_bytes;
  json["max_relative_residual"] = fit.max_relative_residual;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
