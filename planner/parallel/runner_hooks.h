// RunnerHooks: where a data-parallel engine joins the graph runner's forward and backward
// (module pre/post hooks, gradient-ready hooks), as DDP, FSDP and DeepSpeed do in PyTorch.
#pragma once

#include <cstdint>

namespace oomcast::planner {

class RunnerHooks {
 public:
  virtual ~RunnerHooks() = default;
  // Before and after forward op `op` runs (not called for checkpoint recomputation).
  virtual void before_forward_op(uint32_t op) = 0;
  virtual void after_forward_op(uint32_t op) = 0;
  // At backward position of `op`, before any recomputation it triggers; `recomputes_unit`
  // is true when this position re-runs the op's checkpointed block first.
  virtual void before_backward_op(uint32_t op, bool recomputes_unit) = 0;
  virtual void after_backward_op(uint32_t op) = 0;
  // Parameter `parameter`'s .grad is final for this backward (AccumulateGrad ran).
  virtual void parameter_grad_ready(int32_t parameter) = 0;
};

}  // namespace oomcast::planner
