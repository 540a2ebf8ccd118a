// The busiest rank's trainable shard pieces: per-rank totals are summed interval by interval
// (a difference array for the ranks an interval covers whole), so the cost is
// O(world + parameters), not O(world x parameters).
#include "planner/parallel/fsdp_rank_shards.h"

#include <algorithm>

namespace oomcast::planner {

namespace {

bool requires_grad(const LayerGraph& graph, int32_t parameter) {
  return graph.parameter_requires_grad(parameter);
}

uint64_t numel_of(const LayerGraph& graph, int32_t parameter) {
  return graph.tensors[graph.parameters[static_cast<size_t>(parameter)]].numel;
}

}  // namespace

FsdpRankShards fsdp_rank_shards(const LayerGraph& graph, const UnitGroups& groups, uint64_t world, bool sharded) {
  const uint64_t ranks = sharded ? std::max<uint64_t>(world, 1) : 1;
  FsdpRankShards shards;
  shards.trainable_pieces.resize(groups.params.size());
  shards.group_trainable.assign(groups.params.size(), 0);
  std::vector<uint64_t> partial(ranks, 0);    // elements added to single ranks
  std::vector<int64_t> whole(ranks + 1, 0);   // difference array of slice sizes for covered ranks
  auto slice_of = [&](size_t g) { return (groups.numel[g] + ranks - 1) / ranks; };
  for (size_t g = 0; g < groups.params.size(); ++g) {
    const uint64_t slice = slice_of(g);
    uint64_t offset = 0;
    for (int32_t parameter : groups.params[g]) {
      const uint64_t begin = offset;
      offset += numel_of(graph, parameter);
      if (!requires_grad(graph, parameter) || offset == begin) continue;
      shards.group_trainable[g] = 1;
      const uint64_t first = begin / slice;
      const uint64_t last = (offset - 1) / slice;
      if (first == last) {
        partial[first] += offset - begin;
        continue;
      }
      partial[first] += (first + 1) * slice - begin;
      partial[last] += offset - last * slice;
      if (last > first + 1) {
        whole[first + 1] += static_cast<int64_t>(slice);
        whole[last] -= static_cast<int64_t>(slice);
      }
    }
    if (shards.group_trainable[g]) shards.gradient_unit_elements += groups.numel[g];
  }
  int64_t running = 0;
  uint64_t best = 0;
  for (uint64_t r = 0; r < ranks; ++r) {
    running += whole[r];
    const uint64_t total = partial[r] + static_cast<uint64_t>(running);
    if (r == 0 || total > best) {
      best = total;
      shards.rank = r;
    }
  }
  for (size_t g = 0; g < groups.params.size(); ++g) {
    const uint64_t slice = slice_of(g);
    const uint64_t lo = shards.rank * slice;
    const uint64_t hi = lo + slice;
    uint64_t offset = 0;
    for (int32_t parameter : groups.params[g]) {
      const uint64_t begin = offset;
      offset += numel_of(graph, parameter);
      if (!requires_grad(graph, parameter)) continue;
      const uint64_t inside_begin = std::max(begin, lo);
      const uint64_t inside_end = std::min(offset, hi);
      if (inside_end <= inside_begin) continue;
      shards.trainable_pieces[g].push_back(ShardPiece{parameter, inside_end - inside_begin});
      shards.trainable_elements += inside_end - inside_begin;
    }
  }
  return shards;
}

}  // namespace oomcast::planner
