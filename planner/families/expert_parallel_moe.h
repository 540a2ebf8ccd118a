// The experts of a sparse MoE block under expert parallelism: the rank's share of the routed
// choices dispatched to the ranks that hold their experts and combined back with all-to-alls
// (torchtitan's token dispatch), the local experts run on what the rank receives.
#pragma once

#include <cstdint>

#include "planner/families/moe_block.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

// Rows a rank's local experts receive from the whole expert-parallel group: every rank
// routes `tokens` x top_k choices; the busiest rank (the one holding expert 0, the busiest
// under moe.imbalance: worst) gets its local experts' share of the group's choices.
uint64_t expert_parallel_received_rows(uint64_t tokens, int64_t experts, int64_t top_k, int64_t expert_parallel,
                                       bool balanced);

// From the routing of `flat` [tokens, hidden] to the block's output [tokens, hidden], as
// validate/expert_parallel_capture.py runs it (torch 2.13, functional collectives'
// all_to_all_single_autograd): argsort of the chosen experts (sort's values and indices),
// the token of each choice, x[token_of] ([tokens x k, hidden]), the dispatch all-to-all into
// a new [received, hidden] tensor (its backward: an all-to-all of the gradient into a new
// tensor of the input's size), the local experts (one on every received row; several by HF's
// where/gather/index_add_ loop), the combine all-to-all back to [tokens x k, hidden], the
// routing weights gathered in that order and multiplied in, index_add_ into zeros.
TensorId expert_parallel_experts_forward(GraphBuilder& g, const MoeShape& shape,
                                         const families::MoeBlock& block, TensorId flat, const ops::Routing& routing,
                                         int64_t hidden, uint64_t tokens, int64_t top_k);

}  // namespace oomcast::planner::families
