// FSDP2 (torch.distributed.fsdp.fully_shard) shards every parameter on its own, on dim 0:
// FSDPParam chunks the parameter into world_size pieces with torch.chunk and pads each rank's
// piece to the size of the first, ceil(dim0 / world) rows (_get_dim0_padded_size), so a
// rank's shard of an [out, in] weight is ceil(out / world) x in elements whatever its rank.
// The all-gather of one FSDPParamGroup concatenates its parameters' padded shards; its output
// is world_size times that. Rank 0 always holds the full first chunk, so it is the busiest
// rank and the one planned (docs/distributed.md#fsdp2).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/parallel/parameter_groups.h"

namespace oomcast::planner {

// Elements of parameter `parameter`'s padded shard on one rank: ceil(dim0 / world) x the
// product of the other dims (a 0-dim parameter counts as one row).
uint64_t fsdp2_padded_shard_numel(const LayerGraph& graph, int32_t parameter, uint64_t world);
// The shape of that shard (the DTensor's local tensor on rank 0): dim 0 is ceil(dim0 / world).
std::vector<int64_t> fsdp2_shard_shape(const LayerGraph& graph, int32_t parameter, uint64_t world);

struct Fsdp2Shards {
  std::vector<std::vector<uint64_t>> param_shard;  // per group, per parameter (groups.params order)
  std::vector<uint64_t> group_shard;               // per group: elements of its all-gather input
  std::vector<uint64_t> group_trainable_shard;     // per group: of its requires_grad parameters
  uint64_t shard_elements = 0;                     // all groups
  uint64_t trainable_shard_elements = 0;
};

Fsdp2Shards fsdp2_shards(const LayerGraph& graph, const UnitGroups& groups, uint64_t world);

}  // namespace oomcast::planner
