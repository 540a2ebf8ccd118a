// The two peak regimes of a step, read from the phase rows the step planner marks
// ("iterN/[mbM/]forward", ".../backward", "iterN/optimizer", "iterN/zero_grad", ...).
#include "advisor/peak_regimes.h"

#include <algorithm>

namespace oomcast::advisor {

PeakRegimes peak_regimes(const Prediction& prediction) {
  PeakRegimes regimes;
  for (const auto& row : prediction.phases) {
    const bool step = row.name.find("optimizer") != std::string::npos;
    uint64_t& peak = step ? regimes.optimizer_step : regimes.activations;
    peak = std::max<uint64_t>(peak, row.peak_allocated_bytes);
  }
  return regimes;
}

std::string peak_regime_name(const PeakRegimes& regimes) {
  return regimes.step_sets_peak() ? "the optimizer step" : "forward/backward activations";
}

}  // namespace oomcast::advisor
