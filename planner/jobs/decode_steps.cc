// planned_generation_steps(); see decode_steps.h.
#include "planner/jobs/decode_steps.h"

#include <algorithm>

namespace oomcast::planner {

std::vector<int64_t> planned_generation_steps(int64_t new_tokens, int64_t max_planned) {
  std::vector<int64_t> steps;
  if (new_tokens <= 0) return steps;
  steps.push_back(0);
  const int64_t decode_steps = new_tokens - 1;  // steps 1 .. new_tokens - 1
  max_planned = std::max<int64_t>(max_planned, 2);
  if (decode_steps <= max_planned) {
    for (int64_t step = 1; step <= decode_steps; ++step) steps.push_back(step);
    return steps;
  }
  // Each dense end takes at most a quarter of the budget; the rest is the strided middle.
  const int64_t dense = std::max<int64_t>(1, std::min(kDenseDecodeSteps, max_planned / 4));
  const int64_t head_end = dense;                  // steps 1 .. head_end
  const int64_t tail_begin = new_tokens - dense;   // steps tail_begin .. new_tokens - 1
  const int64_t middle_budget = max_planned - 2 * dense;
  const int64_t middle_length = tail_begin - head_end - 1;  // steps strictly between
  for (int64_t step = 1; step <= head_end; ++step) steps.push_back(step);
  if (middle_budget > 0 && middle_length > 0) {
    // ceil(middle_length / (middle_budget + 1)): evenly spaced, never touching the dense ends.
    const int64_t stride = std::max<int64_t>(1, (middle_length + middle_budget) / (middle_budget + 1));
    for (int64_t step = head_end + stride; step < tail_begin; step += stride) steps.push_back(step);
  }
  for (int64_t step = tail_begin; step < new_tokens; ++step) steps.push_back(step);
  return steps;
}

}  // namespace oomcast::planner
