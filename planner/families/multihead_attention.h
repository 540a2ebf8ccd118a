// nn.MultiheadAttention as a self-attention block (query, key and value the same tensor,
// need_weights=False): the packed in_proj (3d x d weight), the heads, out_proj. Shared by the
// families built on it: torchvision's ViT and nn.TransformerEncoderLayer.
#pragma once

#include <cstdint>

#include "planner/ops/graph_builder.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

struct MultiheadAttentionWeights {
  TensorId in_proj_weight = kNoTensor, in_proj_bias = kNoTensor, out_proj_weight = kNoTensor,
           out_proj_bias = kNoTensor;
};

// Registers the module's parameters under the current module path plus `module` in
// nn.MultiheadAttention's order: in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias.
MultiheadAttentionWeights multihead_attention_parameters(GraphBuilder& g, const std::string& module, int64_t hidden);

// self_attn(x, x, x, need_weights=False)[0] inside module `module`, as the scenario's torch
// release runs it (1.13's bmm/softmax/bmm, 2.x's scaled_dot_product_attention). `x` is
// [b, s, h] with batch_first (the module transposes it, so in_proj's matmul copies it), else
// [s, b, h]. The result is [s, b, h] in memory: with batch_first the caller sees a transposed
// view, which the next elementwise op's layout rules have to take into account.
TensorId multihead_self_attention(GraphBuilder& g, const std::string& module, const MultiheadAttentionWeights& w,
                                  TensorId x, const ops::AttentionShape& shape, int64_t hidden, bool batch_first);

}  // namespace oomcast::planner::families
