// Per-parameter dim-0 shard sizes of FSDP2, summed per FSDPParamGroup.
#include "planner/parallel/fsdp2_shards.h"

#include <algorithm>

namespace oomcast::planner {

namespace {

uint64_t padded_rows(uint64_t rows, uint64_t world) {
  const uint64_t ranks = std::max<uint64_t>(world, 1);
  return (rows + ranks - 1) / ranks;
}

}  // namespace

uint64_t fsdp2_padded_shard_numel(const LayerGraph& graph, int32_t parameter, uint64_t world) {
  const auto index = static_cast<size_t>(parameter);
  const uint64_t numel = graph.tensors[graph.parameters[index]].numel;
  uint64_t rows = numel;
  if (index < graph.parameter_shapes.size() && !graph.parameter_shapes[index].empty()) {
    rows = static_cast<uint64_t>(std::max<int64_t>(graph.parameter_shapes[index][0], 0));
  }
  if (rows == 0) return 0;
  const uint64_t per_row = numel / rows;
  return padded_rows(rows, world) * per_row;
}

std::vector<int64_t> fsdp2_shard_shape(const LayerGraph& graph, int32_t parameter, uint64_t world) {
  const auto index = static_cast<size_t>(parameter);
  if (index >= graph.parameter_shapes.size()) return {};
  std::vector<int64_t> shape = graph.parameter_shapes[index];
  if (!shape.empty() && shape[0] > 0) shape[0] = static_cast<int64_t>(padded_rows(static_cast<uint64_t>(shape[0]), world));
  return shape;
}

Fsdp2Shards fsdp2_shards(const LayerGraph& graph, const UnitGroups& groups, uint64_t world) {
  Fsdp2Shards shards;
  const size_t count = groups.params.size();
  shards.param_shard.resize(count);
  shards.group_shard.assign(count, 0);
  shards.group_trainable_shard.assign(count, 0);
  for (size_t g = 0; g < count; ++g) {
    for (int32_t parameter : groups.params[g]) {
      const uint64_t shard = fsdp2_padded_shard_numel(graph, parameter, world);
      shards.param_shard[g].push_back(shard);
      shards.group_shard[g] += shard;
      if (graph.parameter_requires_grad(parameter)) {
        shards.group_trainable_shard[g] += shard;
      }
    }
    shards.shard_elements += shards.group_shard[g];
    shards.trainable_shard_elements += shards.group_trainable_shard[g];
  }
  return shards;
}

}  // namespace oomcast::planner
