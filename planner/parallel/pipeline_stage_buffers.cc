// The buffers torch.distributed.pipelining (torch 2.13 stage.py, schedules.py) allocates around
// a stage, measured by validate/pipeline_parallel_capture.py:
// - step(x, target=y) gets the whole batch; _split_inputs and _split_tensor cut it into
//   microbatch views (tensor_split), so the batch is one allocation per input per step.
// - _prepare_forward_infra, at the first step, makes one receive buffer per microbatch for the
//   activations of a stage after the first (_setup_forward_recv_info); _prepare_backward_infra
//   one per microbatch for the gradients of a stage before the last (_create_grad_recv_info).
//   Both live in args_recv_info / grad_recv_info for the stage's life. The received
//   activation is the buffer itself (requires_grad_ on it), and backward starts from the
//   received gradient buffer, so neither is allocated per microbatch.
#include "planner/parallel/pipeline_stage_buffers.h"

#include <string>

namespace oomcast::planner {

namespace {

constexpr const char* kReceivedHiddenStates = "pipeline.received_hidden_states";

}  // namespace

std::vector<uint32_t> allocate_pipeline_batch(const LayerGraph& graph, const MeshRank& rank, ScheduleWriter* writer,
                                              bool first_step) {
  const auto microbatches = static_cast<uint64_t>(rank.mesh.microbatches());
  std::vector<uint32_t> batch;
  uint64_t hidden_bytes = 0;
  for (TensorId input : graph.inputs) {
    const TensorDesc& desc = graph.tensors[input];
    const std::string& name = graph.names[desc.name];
    if (name == kReceivedHiddenStates) {
      hidden_bytes = desc.bytes();
      continue;
    }
    batch.push_back(writer->alloc(writer->intern(name), desc.bytes() * microbatches, TensorCategory::Input));
  }
  if (!first_step) return batch;
  // A stage before the last receives gradients shaped like its output, the hidden states.
  if (!rank.last_stage() && hidden_bytes == 0 && graph.loss != kNoTensor) hidden_bytes = graph.tensors[graph.loss].bytes();
  for (uint64_t micro = 0; micro < microbatches && !rank.first_stage(); ++micro) {
    writer->alloc(writer->intern("pipeline.recv_activations.mb" + std::to_string(micro)), hidden_bytes,
                  TensorCategory::Communication);
  }
  for (uint64_t micro = 0; micro < microbatches && !rank.last_stage(); ++micro) {
    writer->alloc(writer->intern("pipeline.recv_grads.mb" + std::to_string(micro)), hidden_bytes,
                  TensorCategory::Communication);
  }
  return batch;
}

}  // namespace oomcast::planner
