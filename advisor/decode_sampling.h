// Whether a generation was planned on a sample of its decode steps (planner/jobs/
// decode_steps.h), read from its prediction: each planned decode step is a phase
// "iter{t}/decode", and the scenario says how many there are.
#pragma once

#include <cstdint>

#include "advisor/predict.h"

namespace oomcast::advisor {

struct DecodeSampling {
  int64_t total = 0;    // the job's decode steps (job.new_tokens - 1)
  int64_t planned = 0;  // planned and replayed
  int64_t dense = 0;    // planned one after another at the start (and as many at the end)
  int64_t stride = 1;   // the widest gap between planned steps
  bool sampled() const { return planned < total; }
};

// All zero for a job that does not generate.
DecodeSampling decode_sampling_of(const Prediction& prediction);

}  // namespace oomcast::advisor
