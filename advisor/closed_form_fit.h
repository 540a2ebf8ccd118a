// fit_closed_form(): a least-squares fit (Eigen) of peak memory against batch B and sequence
// length S from a handful of simulations, peak ≈ a + b·B + c·B·S + d·B·S², so users can
// reason about a scenario with a formula; a + b·B for models without a sequence (vision, MLP).
// A training step's allocated peak is the larger of two laws (peak_regimes.h): forward and
// backward, and the optimizer step. Each is fitted to its own phases' peaks and the formula
// is their max, because one polynomial across the point where they cross leaves a residual
// of several percent at the small-B·S corner where the step sets the peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "advisor/work_pool.h"

namespace oomcast::planner {

struct FitSample {
  int64_t batch = 0;
  int64_t seq_len = 0;
  double peak_bytes = 0;       // what was simulated
  double fitted_bytes = 0;     // what the formula gives
  bool step_sets_peak = false; // the optimizer step, not forward/backward, set the simulated peak
  double activation_peak_bytes = 0;  // the two regimes' simulated peaks (allocated metric only)
  double step_peak_bytes = 0;
  double residual() const { return peak_bytes - fitted_bytes; }
};

// a + b·B + c·B·S + d·B·S².
struct FitLaw {
  double a = 0, b = 0, c = 0, d = 0;  // bytes, bytes per sample, per token, per token x S
  double at(int64_t batch, int64_t seq_len, bool has_sequence) const;
};

struct ClosedFormFit {
  bool has_sequence = true;    // false: only a + b·B
  std::string metric;          // "peak_reserved_bytes" or "peak_allocated_bytes"
  double a = 0, b = 0, c = 0, d = 0;  // forward/backward (the whole peak without a step law)
  // The optimizer step's own law, for the allocated metric of a training job; the fitted peak
  // is then max(a + b·B + ..., step law).
  bool has_step_law = false;
  FitLaw step;
  std::vector<FitSample> samples;
  double max_abs_residual_bytes = 0;
  double max_relative_residual = 0;   // |residual| / simulated peak, worst sample

  FitLaw activations() const { return FitLaw{a, b, c, d}; }
  double predict(int64_t batch, int64_t seq_len) const;
  // "peak allocated ≈ max(1.51 GiB + 272.73 KiB·B + ..., 2.07 GiB + ...)"
  std::string formula() const;
  // The largest batch whose fitted peak stays within `budget_bytes` at `seq_len` (0 if none).
  int64_t batch_for_budget(double budget_bytes, int64_t seq_len) const;
};

enum class FitMetric { PeakReserved, PeakAllocated };

// Simulates the scenario at a few batch sizes around its own (and, for sequence models, at
// S/4, S/2 and S) on an unbounded copy of its device, then fits. Throws InputError when the
// scenario itself is invalid.
ClosedFormFit fit_closed_form(const Scenario& scenario, FitMetric metric = FitMetric::PeakReserved,
                              size_t jobs = default_jobs());

// The formula, the samples with their residuals and regimes, and the worst residual.
std::string render_fit_text(const ClosedFormFit& fit);
// {"formula", "metric", "has_sequence", "coefficients": {a, b, c, d}, "step_coefficients":
//  {a, b, c, d} or null, "samples": [{batch, seq_len, peak_bytes, fitted_bytes, residual_bytes,
//  peak_set_by}], "max_abs_residual_bytes", "max_relative_residual"}
std::string render_fit_json(const ClosedFormFit& fit);

}  // namespace oomcast::planner
