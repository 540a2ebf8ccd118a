// The model-parallel dimensions of the job's device mesh under `parallel:`: tensor parallel
// (with sequence parallel, async TP, vocab-parallel embedding and loss), pipeline parallel
// (stages, layers per stage, schedule, microbatches, virtual stages), context parallel, expert
// parallel and HSDP's replicate degree, as torchtitan's ParallelDims and Megatron-LM's
// arguments name them (docs/scenario-format.md#model-parallel). The data-parallel engine
// (ddp, fsdp2, ...) shards over what is left of the world: world / (replicate x cp x tp x pp).
#pragma once

#include <cstdint>
#include <vector>

namespace oomcast::scenario {

// torch.distributed.pipelining's schedules (torch 2.13 schedules.py): ScheduleGPipe,
// Schedule1F1B, ScheduleInterleaved1F1B (virtual stages), ScheduleInterleavedZeroBubble.
enum class PipelineSchedule { GPipe, OneForwardOneBackward, Interleaved1F1B, ZeroBubble };

struct MeshConfig {
  int64_t tensor_parallel = 1;
  bool sequence_parallel = false;   // norms, dropout and residuals split along the sequence
  bool async_tensor_parallel = false;
  // torchtitan's default with TP: the embedding RowwiseParallel on the vocabulary and the output
  // ColwiseParallel with loss_parallel, so the logits stay split by vocabulary.
  bool vocab_parallel = true;
  int64_t pipeline_parallel = 1;
  PipelineSchedule pipeline_schedule = PipelineSchedule::OneForwardOneBackward;
  int64_t pipeline_microbatches = 0;       // 0: one per stage (torchtitan's default)
  int64_t pipeline_virtual_stages = 1;     // model chunks per rank (interleaved schedules)
  std::vector<int64_t> layers_per_stage;   // empty: even split, the first stages take the rest
  int64_t planned_stage = -1;              // the stage whose schedule is the prediction; -1: the busiest
  int64_t context_parallel = 1;
  int64_t expert_parallel = 1;
  int64_t data_parallel_replicate = 1;     // HSDP: replicas of the FSDP2 shard group

  bool model_parallel() const {
    return tensor_parallel > 1 || pipeline_parallel > 1 || context_parallel > 1 || expert_parallel > 1;
  }
  int64_t non_data_parallel() const { return tensor_parallel * pipeline_parallel * context_parallel; }
  int64_t microbatches() const { return pipeline_microbatches > 0 ? pipeline_microbatches : pipeline_parallel; }
};

const char* pipeline_schedule_name(PipelineSchedule schedule);

}  // namespace oomcast::scenario
