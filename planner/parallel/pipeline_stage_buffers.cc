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
// - forward_one_chunk keeps the stage's output tuple in fwd_cache[microbatch] until
//   backward_one_chunk pops it: the last stage's logits outlive the loss computed from them,
//   and an earlier stage's sent hidden states die with their microbatch's backward.
// - schedules.py: ScheduleGPipe waits on every forward's and every backward's send after the
//   last backward (fwd_sends_to_wait, bwd_sends_to_wait), so the sent hidden states and the
//   sent input gradients live until then; Schedule1F1B's steady state and cooldown are done
//   with a backward's send (the P2POp list bwd_sends, the work send_work) after the next
//   backward.
#include "planner/parallel/pipeline_stage_buffers.h"

#include <algorithm>
#include <string>

namespace oomcast::planner {

namespace {

constexpr const char* kReceivedHiddenStates = "pipeline.received_hidden_states";
constexpr const char* kLogits = "logits";

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
  // Under a multi-stage schedule every local stage (rank, rank + stages, ...) has its own
  // buffers: all but the job's first stage receive activations, all but its last gradients
  // (measured: interleaved 1F1B, 2 ranks x 2 stages, validate/pipeline_parallel_capture.py).
  const int64_t local = rank.mesh.pipeline_virtual_stages;
  const int64_t receiving_activations = local - (rank.first_stage() ? 1 : 0);
  const int64_t receiving_grads = local - (rank.last_stage() ? 1 : 0);
  for (int64_t stage = 0; stage < receiving_activations; ++stage) {
    for (uint64_t micro = 0; micro < microbatches; ++micro) {
      writer->alloc(writer->intern("pipeline.recv_activations.mb" + std::to_string(micro)), hidden_bytes,
                    TensorCategory::Communication);
    }
  }
  for (int64_t stage = 0; stage < receiving_grads; ++stage) {
    for (uint64_t micro = 0; micro < microbatches; ++micro) {
      writer->alloc(writer->intern("pipeline.recv_grads.mb" + std::to_string(micro)), hidden_bytes,
                    TensorCategory::Communication);
    }
  }
  return batch;
}

std::vector<std::string> pipeline_held_outputs(const MeshRank& rank, const std::vector<std::string>& caller_held) {
  std::vector<std::string> held = caller_held;
  if (rank.last_stage() && std::find(held.begin(), held.end(), kLogits) == held.end()) held.emplace_back(kLogits);
  return held;
}

StageTensorLife stage_tensor_life(const MeshRank& rank, const std::string& output,
                                  const std::vector<std::string>& caller_held) {
  const bool gpipe = rank.mesh.pipeline_schedule == scenario::PipelineSchedule::GPipe;
  if (output == "input_grad") return gpipe ? StageTensorLife::EndOfBackwards : StageTensorLife::NextBackward;
  if (!rank.last_stage() && (output == "hidden_states" || output == "loss")) {
    // Sent on: ScheduleGPipe keeps every forward's send work (and so the output) until after
    // the backwards; 1F1B's send is done when backward_one_chunk pops fwd_cache.
    return gpipe ? StageTensorLife::EndOfBackwards : StageTensorLife::ThisBackward;
  }
  if (rank.last_stage() && output == kLogits &&
      std::find(caller_held.begin(), caller_held.end(), kLogits) == caller_held.end()) {
    return StageTensorLife::ThisBackward;
  }
  return StageTensorLife::Caller;
}

}  // namespace oomcast::planner
