// The per-parameter step of optimizer.in_backward (planner/optimizer_in_backward.h).
#include "planner/optimizer_in_backward.h"

namespace oomcast::planner {

OptimizerInBackward::OptimizerInBackward(std::vector<std::unique_ptr<OptimizerModel>> optimizers, ModelState* model,
                                         ScheduleWriter* writer)
    : optimizers_(std::move(optimizers)), model_(model), writer_(writer) {}

void OptimizerInBackward::parameter_grad_ready(int32_t parameter) {
  const auto index = static_cast<size_t>(parameter);
  if (index >= optimizers_.size() || !optimizers_[index]) return;
  int64_t& grad = model_->grad_slot[index];
  if (grad < 0) return;
  optimizers_[index]->step({1});
  writer_->free(static_cast<uint32_t>(grad));  // optimizer.zero_grad(set_to_none=True)
  grad = -1;
}

}  // namespace oomcast::planner
