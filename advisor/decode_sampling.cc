// decode_sampling_of(); see decode_sampling.h.
#include "advisor/decode_sampling.h"

#include <algorithm>
#include <string>
#include <vector>

namespace oomcast::advisor {

DecodeSampling decode_sampling_of(const Prediction& prediction) {
  DecodeSampling sampling;
  const scenario::JobSection& job = prediction.scenario.job.job;
  if (job.kind != scenario::JobKind::Generate) return sampling;
  sampling.total = std::max<int64_t>(job.generate.new_tokens - 1, 0);
  std::vector<int64_t> steps;
  for (const PhaseRow& row : prediction.phases) {
    const std::string& name = row.name;
    if (name.rfind("iter", 0) != 0 || !name.ends_with("/decode")) continue;
    steps.push_back(std::stoll(name.substr(4, name.size() - 4 - 7)));
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  sampling.planned = static_cast<int64_t>(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] == static_cast<int64_t>(i) + 1) sampling.dense = steps[i];
    if (i > 0) sampling.stride = std::max(sampling.stride, steps[i] - steps[i - 1]);
  }
  return sampling;
}

}  // namespace oomcast::advisor
