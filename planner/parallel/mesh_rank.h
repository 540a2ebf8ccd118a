// MeshRank: one rank of a job with tensor, sequence, pipeline, context or expert parallelism
// (scenario/mesh_config.h): which pipeline stage it runs, how many layers, the order of its
// microbatches' forwards and backwards under the schedule, and the scenario it runs (the
// model cut to its stage and split by TP/CP/EP, the engine over the data-parallel shards).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// One forward or backward of one microbatch on a stage.
struct PipelineStep {
  bool forward = true;
  int64_t micro_batch = 0;
};

struct MeshRank {
  scenario::MeshConfig mesh;
  int64_t stage = 0;                  // the rank's place along the pipeline
  int64_t layers = 0;                 // decoder layers it holds (all its virtual chunks)
  int64_t in_flight = 1;              // microbatches whose activations it holds at once
  std::vector<PipelineStep> steps;    // its schedule for one optimizer step
  uint64_t tokens = 0;                // per microbatch on this rank (after the CP split)
  int64_t batch = 1;                  // sequences per microbatch
  int64_t hidden = 0;
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage + 1 == mesh.pipeline_parallel; }
};

// Layers of each model chunk (stages x virtual stages, in pipeline order): as given, or an
// even split with the remainder on the first chunks.
std::vector<int64_t> chunk_layers(const scenario::MeshConfig& mesh, int64_t layers);

// The forwards and backwards a stage runs, in order (torch 2.13 schedules.py): GPipe runs
// every forward then every backward; 1F1B warms up with min(microbatches, stages - stage)
// forwards and then alternates one backward, one forward. Zero bubble (ZB-H1) holds what 1F1B
// holds (Qi et al., ICLR 2024, §3.1) and interleaved 1F1B holds Megatron-LM's
// stages x (1 + (stages - 1) / (stages x virtual)) stage-microbatches on the first stage
// (megatron/training/theoretical_memory_usage.py); both keep 1F1B's order with that warm-up.
std::vector<PipelineStep> pipeline_steps(const scenario::MeshConfig& mesh, int64_t stage);

// The rank of `stage` (0 when there is no pipeline).
MeshRank mesh_rank(const scenario::Scenario& scenario, int64_t stage);

// The scenario that rank runs: the model's heads, KV heads, MLP widths (and the vocabulary
// when vocab_parallel) divided by TP, experts by EP, the sequence by CP, the layers cut to the
// stage; the data-parallel engine over data_parallel_shard() ranks, the mesh keys cleared.
scenario::Scenario rank_scenario(const scenario::Scenario& scenario, const MeshRank& rank);

// What the rank's graph adds to one microbatch's ops: the TP collectives' output buffers
// (DTensor's functional all-reduce writes a new tensor beside the partial sum), sequence
// parallel's split of the norm and residual activations, ring attention's K/V rotation
// buffers, expert parallel's all-to-all buffers.
void apply_mesh_to_graph(LayerGraph& graph, const MeshRank& rank);

// Samples per optimizer step over the whole job: batch_size x microbatches (pipeline) or
// grad_accum_steps, x the data-parallel shards x data_parallel_replicate. Context, tensor and
// pipeline ranks of one replica see the same samples (torchtitan's global batch).
int64_t global_batch_samples(const scenario::Scenario& scenario);

// "1f1b, 4 stages x 8 microbatches; TP 8 (sequence parallel); CP 2; EP 4; HSDP 2 x 4".
std::string describe_mesh(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
