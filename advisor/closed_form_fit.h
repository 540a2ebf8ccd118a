// fit_closed_form(): a least-squares fit (Eigen) of peak memory against batch B and sequence
// length S from a handful of simulations, peak ≈ a + b·B + c·B·S + d·B·S², so users can
// reason about a scenario with a formula; a + b·B for models without a sequence (vision, MLP).
// A step's allocated peak is the largest of several laws, one per moment of the step that
// can set it: the optimizer step at small B·S, the loss's logits at large B·S, an FSDP
// unit's gathered parameters in between. One polynomial across the points where they cross
// bends and leaves residuals of several percent, so the fit finds, for every simulated (B, S),
// the event its peak is at (the same event index names the same moment in every sample's
// schedule, fit_moments.h), fits one law per such moment to what is live there in every
// sample, and takes their max. Where the schedules differ in structure (a cpu device, a
// steady-state window), it falls back to two laws: forward/backward and the optimizer step
// (peak_regimes.h), each fitted to its own phases' peaks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "advisor/planned_points.h"
#include "advisor/work_pool.h"

namespace oomcast::advisor {

struct FitSample {
  int64_t batch = 0;
  int64_t seq_len = 0;
  double peak_bytes = 0;       // what was simulated
  double fitted_bytes = 0;     // what the formula gives
  bool step_sets_peak = false; // the optimizer step, not forward/backward, set the simulated peak
  std::string peak_phase;      // the phase of the moment whose law gives fitted_bytes (moment fits)
  size_t peak_event = 0;       // and that moment's event
  double activation_peak_bytes = 0;  // the two regimes' simulated peaks (allocated metric only)
  double step_peak_bytes = 0;
  double residual() const { return peak_bytes - fitted_bytes; }
};

// a + b·B + c·B·S + d·B·S².
struct FitLaw {
  double a = 0, b = 0, c = 0, d = 0;  // bytes, bytes per sample, per token, per token x S
  double at(int64_t batch, int64_t seq_len, bool has_sequence) const;
};

// One moment of the step that sets some sample's peak: an event of the schedule, and the law
// of what is live there.
struct FitMoment {
  std::string phase;           // the phase mark it lies in: "iter1/backward"
  size_t event = 0;            // its index in the schedule
  bool optimizer_step = false; // in an optimizer-step phase
  FitLaw law;
};

struct ClosedFormFit {
  bool has_sequence = true;    // false: only a + b·B
  std::string metric;          // "peak_reserved_bytes" or "peak_allocated_bytes"
  // The law of the scenario's own peak: its moment's (moment fits), forward/backward (the
  // two-law fallback), or the whole peak (one law).
  double a = 0, b = 0, c = 0, d = 0;
  // The allocated metric: the fitted peak is the max over these moments' laws.
  std::vector<FitMoment> moments;
  // The two-law fallback: the optimizer step's own law; the fitted peak is then
  // max(a + b·B + ..., step law). With moments, true when one of them is in the optimizer
  // step, and `step` is the largest of those at the scenario's (B, S).
  bool has_step_law = false;
  FitLaw step;
  std::vector<FitSample> samples;
  double max_abs_residual_bytes = 0;
  double max_relative_residual = 0;   // |residual| / simulated peak, worst sample

  FitLaw activations() const { return FitLaw{a, b, c, d}; }
  double predict(int64_t batch, int64_t seq_len) const;
  // The law that gives the fitted peak at (B, S).
  FitLaw law_at(int64_t batch, int64_t seq_len) const;
  // "peak allocated ≈ max(1.51 GiB + 272.73 KiB·B + ..., 2.07 GiB + ...)"
  std::string formula() const;
  // The largest batch whose fitted peak stays within `budget_bytes` at `seq_len` (0 if none).
  int64_t batch_for_budget(double budget_bytes, int64_t seq_len) const;
};

enum class FitMetric { PeakReserved, PeakAllocated };

// Simulates the scenario at a few batch sizes around its own (and, for sequence models, at
// S/4, S/2 and S) on an unbounded copy of its device, then fits. Throws InputError when the
// scenario itself is invalid. `points`, when given, holds schedules of `scenario` already
// planned at some (B, S) of the grid (advisor/planned_points.h): those are replayed, not planned
// again.
ClosedFormFit fit_closed_form(const scenario::Scenario& scenario, FitMetric metric = FitMetric::PeakReserved,
                              size_t jobs = default_jobs(), PlannedPoints* points = nullptr);

// The formula, the samples with their residuals and regimes, and the worst residual.
std::string render_fit_text(const ClosedFormFit& fit);
// {"formula", "metric", "has_sequence", "coefficients": {a, b, c, d}, "step_coefficients":
//  {a, b, c, d} or null, "moments": [{phase, event, optimizer_step, coefficients}], "samples":
//  [{batch, seq_len, peak_bytes, fitted_bytes, residual_bytes, peak_set_by, peak_phase}],
//  "max_abs_residual_bytes", "max_relative_residual"}
std::string render_fit_json(const ClosedFormFit& fit);

}  // namespace oomcast::advisor
