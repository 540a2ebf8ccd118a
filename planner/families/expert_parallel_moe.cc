// The experts of a sparse MoE block under expert parallelism, planned as
// validate/expert_parallel_capture.py runs them for real on gloo (torchtitan's token
// dispatch: torchtitan/distributed/expert_parallel.py, the counts exchanged with one
// all_to_all_single, the rows with torch.distributed._functional_collectives'
// all_to_all_single_autograd, which allocates its output and, in backward, a new tensor for
// the gradient of its input).
#include "planner/families/expert_parallel_moe.h"

#include <string>
#include <vector>

namespace oomcast::planner::families {

uint64_t expert_parallel_received_rows(uint64_t tokens, int64_t experts, int64_t top_k, int64_t expert_parallel,
                                       bool balanced) {
  const std::vector<uint64_t> counts =
      expert_token_counts(tokens * static_cast<uint64_t>(expert_parallel), experts, top_k, balanced);
  const int64_t local = experts / expert_parallel;
  uint64_t rows = 0;
  for (int64_t e = 0; e < local; ++e) rows += counts[static_cast<size_t>(e)];
  return rows;
}

TensorId expert_parallel_experts_forward(GraphBuilder& g, const MoeShape& shape,
                                         const families::MoeBlock& block, TensorId flat, const ops::Routing& routing,
                                         int64_t hidden, uint64_t tokens, int64_t top_k) {
  const auto choices = tokens * static_cast<uint64_t>(top_k);
  const auto width = static_cast<uint64_t>(hidden);
  const DType dtype = g.tensor(flat).dtype;
  const int64_t local = shape.experts / shape.expert_parallel;
  const uint64_t received_rows = expert_parallel_received_rows(tokens, shape.experts, top_k, shape.expert_parallel,
                                                               !g.context().moe_worst_case);
  // argsort(stable=True) runs sort: int64 values and indices, the values dropped at once.
  TensorId sort_values = ops::constant(g, "ep.sort.values", choices, DType::Int64, routing.selected);
  TensorId order = ops::constant(g, "ep.sort.indices", choices, DType::Int64, routing.selected);
  (void)sort_values;
  g.hold(order);
  TensorId token_of = ops::constant(g, "ep.token_of", choices, DType::Int64, order);
  g.hold(token_of);
  TensorId routed = ops::gather_rows(g, "ep.routed", flat, token_of, choices * width);
  TensorId received = ops::expand_copy(g, "ep.dispatch_all_to_all", routed, received_rows * width);
  TensorId expert_out;
  if (local == 1) {
    expert_out = families::dense_mlp_forward(g, "experts.0", block.experts.front(), received, false);
  } else {
    // HF's loop over the local experts on the received rows, each its share of them.
    const std::vector<uint64_t> counts = families::expert_token_counts(
        tokens * static_cast<uint64_t>(shape.expert_parallel), shape.experts, top_k, !g.context().moe_worst_case);
    TensorId expert_of_row = ops::constant(g, "ep.expert_of_row", received_rows, DType::Int64, order);
    g.hold(expert_of_row);
    expert_out = ops::constant(g, "ep.local_out", received_rows * width, dtype);
    for (int64_t e = 0; e < local; ++e) {
      const uint64_t rows = counts[static_cast<size_t>(e)];
      if (rows == 0) continue;
      const std::string prefix = "experts." + std::to_string(e);
      g.begin_scope();
      TensorId where = ops::constant(g, prefix + ".where", rows, DType::Int64, expert_of_row);
      g.hold(where);
      TensorId current = ops::gather_rows(g, prefix + ".current_state", received, where, rows * width);
      TensorId out = families::dense_mlp_forward(g, prefix, block.experts[static_cast<size_t>(e)], current, false);
      expert_out = ops::index_add(g, prefix + ".index_add", expert_out, where, out);
      g.end_scope();
    }
  }
  TensorId combined = ops::expand_copy(g, "ep.combine_all_to_all", expert_out, choices * width);
  // routing_weights.view(-1)[order, None]: a [choices, 1] gather, then the broadcasting mul.
  TensorId weight = ops::gather_rows(g, "ep.routing_weight", routing.weights, order, choices);
  TensorId weighted = ops::mul(g, "ep.weighted", combined, weight);
  TensorId final_states = ops::constant(g, "final_hidden_states", tokens * width, dtype);
  return ops::index_add(g, "ep.index_add", final_states, token_of, weighted);
}

}  // namespace oomcast::planner::families
