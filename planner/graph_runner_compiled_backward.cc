// GraphRunner::run_backward_program(): the backward of a torch.compile'd graph, run step by step
// from the program its compiled capture recorded (capture/compiled_capture.py), apart from the
// eager backward nodes of graph_runner.cc.
#include "planner/graph_runner.h"

#include <utility>
#include <vector>

namespace oomcast::planner {

// A compiled graph's backward (AOTAutograd's CompiledFunction, torch 2.13
// torch/_functorch/_aot_autograd/runtime_wrappers.py): it clears ctx's saved tensors on entry
// (maybe_clear_saved_tensors) and the compiled backward drops each input, saved tensor or
// incoming gradient, after its last use, as inductor's wrapper `del`s it
// (torch/_inductor/codegen/wrapper.py codegen_free); its outputs, the inputs' gradients, are
// delivered when the node returns.
void GraphRunner::run_backward_program(uint32_t op_index) {
  const OpNode& op = graph_.ops[op_index];
  std::vector<uint32_t> buffers;
  std::vector<std::pair<TensorId, int32_t>> produced;
  bool grad_output_live = true;
  auto release_grad_output = [&] {
    if (!grad_output_live) return;
    grad_output_live = false;
    for (TensorId out : op.outputs) {
      if (grad_of_[out] < 0) continue;
      release_grad(grad_of_[out]);
      grad_of_[out] = -1;
    }
  };
  for (const BackwardStep& step : op.backward_program) {
    switch (step.kind) {
      case BackwardStep::Kind::Alloc:
        if (buffers.size() <= step.index) buffers.resize(step.index + 1, 0);
        buffers[step.index] = writer_->alloc(name(step.name), step.bytes, TensorCategory::Temporary);
        break;
      case BackwardStep::Kind::Free:
        writer_->free(buffers[step.index]);
        break;
      case BackwardStep::Kind::ReleaseSaved:
        if (saved_acquired_[op_index][step.index]) {
          saved_acquired_[op_index][step.index] = 0;
          release(op.saved[step.index]);
        }
        break;
      case BackwardStep::Kind::ReleaseGradOutput:
        release_grad_output();
        break;
      case BackwardStep::Kind::Grad: {
        TensorId in = op.inputs[step.index];
        const TensorDesc& desc = graph_.tensors[in];
        if (!desc.requires_grad) break;
        TensorCategory category = TensorCategory::Temporary;
        if (desc.parameter >= 0) {
          auto p = static_cast<size_t>(desc.parameter);
          if (model_->grad_slot[p] < 0 && parameter_buffer_[p] < 0) category = TensorCategory::Gradient;
        }
        produced.emplace_back(in, new_grad(in, category));
        break;
      }
    }
  }
  release_grad_output();
  release_saved(op_index);
  deliver_input_grads(produced);
}

}  // namespace oomcast::planner
