// allocate_pipeline_batch(): what torch.distributed.pipelining allocates around a stage's
// microbatches, apart from the stage module's own ops: the whole batch a schedule's step()
// receives (split into views, one per microbatch) and, at the first step, the receive buffers
// the stage keeps for good; and the stage's outputs its fwd_cache keeps per microbatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/schedule_writer.h"

namespace oomcast::planner {

// Allocates the step's whole batch (every graph input but the received hidden states, times
// the microbatches) and returns its slots, which the caller frees after the step. With
// `first_step`, then allocates the stage's kept buffers (never freed).
std::vector<uint32_t> allocate_pipeline_batch(const LayerGraph& graph, const MeshRank& rank, ScheduleWriter* writer,
                                              bool first_step);

// The outputs a stage's runner keeps past its forward: the caller's, and on the last stage the
// logits, which PipelineStage.forward_one_chunk puts in fwd_cache (with the stage's inputs)
// and backward_one_chunk pops. A stage before the last sends its output and keeps it the same
// way: its output is the graph's loss there, held until backward already.
std::vector<std::string> pipeline_held_outputs(const MeshRank& rank, const std::vector<std::string>& caller_held);

// How long a tensor a stage's runner hands back after a microbatch's backward lives.
enum class StageTensorLife {
  Caller,             // the training loop's (a held loss): as without a pipeline
  ThisBackward,       // fwd_cache's entry, popped by backward_one_chunk
  NextBackward,       // a send 1F1B waits on (or whose P2POp it rebinds) after the next backward
  EndOfBackwards,     // a send ScheduleGPipe waits on after every backward
};

// `output` is a finish_step name: "logits" (added by pipeline_held_outputs), a stage before the
// last's output ("hidden_states" or "loss", which no training loop binds there), or
// "input_grad" (the gradient sent to the previous stage, GraphRunner::set_input_grad_sent).
StageTensorLife stage_tensor_life(const MeshRank& rank, const std::string& output,
                                  const std::vector<std::string>& caller_held);

}  // namespace oomcast::planner
