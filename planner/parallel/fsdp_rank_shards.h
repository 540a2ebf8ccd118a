// Which trainable elements of each FSDP unit's flat parameter fall into one rank's shard.
// FSDP1 concatenates a unit's parameters into one flat parameter, pads it to a multiple of
// the world size and gives rank r the r-th equal slice. With use_orig_params=True the
// optimizer steps the original parameters as flat views into that slice (a parameter outside
// the slice is a size-0 tensor with no .grad, a frozen one has .grad None), so optimizer
// state is per rank and per parameter piece, and ranks differ: the one planned is the rank
// whose slices hold the most trainable elements.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/parallel/parameter_groups.h"

namespace oomcast::planner {

struct ShardPiece {
  int32_t parameter = -1;
  uint64_t numel = 0;  // elements of the parameter inside the rank's slice
};

struct FsdpRankShards {
  uint64_t rank = 0;
  std::vector<std::vector<ShardPiece>> trainable_pieces;  // per group, in flat-parameter order
  std::vector<uint8_t> group_trainable;                  // per group: holds a requires_grad parameter
  uint64_t trainable_elements = 0;                       // sum of the pieces
  uint64_t gradient_unit_elements = 0;                   // elements of the groups with a trainable parameter
};

// `sharded` false (NO_SHARD): every rank holds whole flat parameters.
FsdpRankShards fsdp_rank_shards(const LayerGraph& graph, const UnitGroups& groups, uint64_t world, bool sharded);

}  // namespace oomcast::planner
