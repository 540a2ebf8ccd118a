// allocate_pipeline_batch(): what torch.distributed.pipelining allocates around a stage's
// microbatches, apart from the stage module's own ops: the whole batch a schedule's step()
// receives (split into views, one per microbatch) and, at the first step, the receive buffers
// the stage keeps for good.
#pragma once

#include <cstdint>
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

}  // namespace oomcast::planner
