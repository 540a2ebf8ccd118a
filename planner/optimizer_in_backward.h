// Optimizer step in backward (optimizer.in_backward): torchtune's optimizer_in_bwd
// (torchtune/training/memory.py, create_optim_in_bwd_wrapper / register_optim_in_bwd_hooks,
// torchtune 0.6) and PyTorch's "How to save memory by fusing the optimizer step into the backward
// pass" tutorial: one optimizer per parameter, stepped by the parameter's
// register_post_accumulate_grad_hook, whose zero_grad(set_to_none) frees the .grad at once. No
// gradient outlives its AccumulateGrad, so the step's gradients never coexist.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/graph_runner.h"
#include "planner/optimizers.h"
#include "planner/parallel/runner_hooks.h"

namespace oomcast::planner {

class OptimizerInBackward : public RunnerHooks {
 public:
  // `optimizers[p]`: parameter p's own optimizer, null for a frozen one.
  OptimizerInBackward(std::vector<std::unique_ptr<OptimizerModel>> optimizers, ModelState* model,
                      ScheduleWriter* writer);

  void before_forward_op(uint32_t) override {}
  void after_forward_op(uint32_t) override {}
  void before_backward_op(uint32_t, bool) override {}
  void after_backward_op(uint32_t) override {}
  // The hook: step this parameter's optimizer, then .grad = None.
  void parameter_grad_ready(int32_t parameter) override;

 private:
  std::vector<std::unique_ptr<OptimizerModel>> optimizers_;
  ModelState* model_;
  ScheduleWriter* writer_;
};

}  // namespace oomcast::planner
