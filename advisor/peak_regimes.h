// peak_regimes(): a training step's allocated peak is the larger of two laws. In forward and
// backward it is model states plus saved activations, which grow with batch and sequence; in
// the optimizer step it is model states plus the step's temporaries (and the optimizer state
// the first step creates), nearly independent of them. At small B·S the step sets the peak, at
// large B·S the activations do, and a single curve fitted across both bends where they cross.
// Fitting or differencing each regime's own peak removes that artefact (closed_form_fit.cc,
// the quadratic-attention detector in whatif_patterns.cc).
#pragma once

#include <cstdint>
#include <string>

#include "advisor/predict.h"

namespace oomcast::advisor {

struct PeakRegimes {
  uint64_t activations = 0;     // highest allocated in every phase but the optimizer step
  uint64_t optimizer_step = 0;  // highest allocated in the optimizer step phases (0: none)
  bool step_sets_peak() const { return optimizer_step > activations; }
};

// From the prediction's phase rows (the whole schedule, peaks per phase mark).
PeakRegimes peak_regimes(const Prediction& prediction);

// "the optimizer step" or "forward/backward activations": which regime sets the peak.
std::string peak_regime_name(const PeakRegimes& regimes);

}  // namespace oomcast::advisor
