// nn.MultiheadAttention's self-attention forward (F.multi_head_attention_forward) for the
// torch release the scenario names; see multihead_attention.h.
#include "planner/families/multihead_attention.h"

#include <vector>

#include "planner/torch_release_facts.h"

namespace oomcast::planner::families {

using scenario::AttentionImpl;

MultiheadAttentionWeights multihead_attention_parameters(GraphBuilder& g, const std::string& module, int64_t hidden) {
  MultiheadAttentionWeights w;
  w.in_proj_weight = g.parameter(module + ".in_proj_weight", {3 * hidden, hidden});
  w.in_proj_bias = g.parameter(module + ".in_proj_bias", {3 * hidden});
  w.out_proj_weight = g.parameter(module + ".out_proj.weight", {hidden, hidden});
  w.out_proj_bias = g.parameter(module + ".out_proj.bias", {hidden});
  return w;
}

namespace {

// torch 2.x's F.multi_head_attention_forward has no eager path: with need_weights=False (what
// nn.TransformerEncoderLayer and torchvision's EncoderBlock pass) it always calls
// F.scaled_dot_product_attention, whose dispatcher picks the kernel. `attention: eager` therefore
// means that choice. On the CPU (sdp_utils_cpp) it is the flash kernel unless dropout is active
// (the CPU flash kernel takes no dropout; then the math backend); checked under torch 2.6 by
// validate/torch_releases.py (transformer-encoder, ViT). The CUDA choice (flash for 16-bit on
// sm80+, else memory-efficient) is not modelled: eager stays the materialized-scores plan there.
AttentionImpl torch_2_kernel(const GraphBuilder& g) {
  const AttentionImpl asked = g.context().attention;
  if (asked != AttentionImpl::Eager || !g.context().cpu_kernels) return asked;
  if (!torch_release_facts(g.context().torch_version).cpu_sdpa_flash_without_dropout) return AttentionImpl::SdpaMath;
  return g.active_dropout() > 0.0 ? AttentionImpl::SdpaMath : AttentionImpl::Flash;
}

}  // namespace

TensorId multihead_self_attention(GraphBuilder& g, const std::string& module, const MultiheadAttentionWeights& w,
                                  TensorId x, const ops::AttentionShape& shape, int64_t hidden, bool batch_first) {
  const bool torch_1 = !torch_release_facts(g.context().torch_version).multihead_attention_calls_sdpa;
  const auto scores_numel = static_cast<uint64_t>(shape.batch * shape.heads * shape.seq * shape.seq);
  const auto heads_numel = static_cast<uint64_t>(shape.batch * shape.seq * hidden);
  g.push_module(module);
  g.begin_scope();
  g.hold(x);  // the query argument lives until forward returns
  // batch_first: the query is transposed to [s, b, h], so linear's matmul copies it.
  TensorId proj = ops::linear(g, "in_proj", x, w.in_proj_weight, w.in_proj_bias, hidden, 3 * hidden,
                              /*copy_input=*/batch_first);
  TensorId attn = kNoTensor;
  if (torch_1) {
    // torch 1.13's F.multi_head_attention_forward: linear(q, w, b).chunk(3, -1), then
    // q, k, v = x.contiguous().view(s, b * heads, d).transpose(0, 1) (three copies; proj dies
    // after the third), q_scaled = q / sqrt(d), bmm(q_scaled, k^T), softmax, dropout,
    // bmm(attn, v), transpose(0, 1).contiguous(). bmm saves its strided operands as they are;
    // the q copy is a local until the function returns (validate/op_probe.py mha).
    std::vector<TensorId> chunks = ops::split(g, "in_proj_chunk", proj, 3);
    TensorId q = ops::copy(g, "q_contiguous", chunks[0]);
    TensorId k = ops::copy(g, "k_contiguous", chunks[1]);
    TensorId v = ops::copy(g, "v_contiguous", chunks[2]);
    g.hold(q);
    TensorId q_scaled = ops::scale(g, "q_scaled", q);
    TensorId scores = ops::batched_matmul(g, "qk", q_scaled, k, scores_numel, false, false,
                                                static_cast<uint64_t>(shape.head_dim));
    TensorId probabilities = ops::softmax(g, "softmax", scores);
    probabilities = ops::dropout(g, "attn_dropout", probabilities);
    TensorId weighted = ops::batched_matmul(g, "av", probabilities, v, heads_numel, false, false,
                                                  static_cast<uint64_t>(shape.seq));
    attn = ops::copy(g, "attn_output_contiguous", weighted);
  } else {
    // proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    TensorId packed = ops::copy(g, "in_proj_packed", proj);
    std::vector<TensorId> qkv = ops::split(g, "qkv", packed, 3);
    const AttentionImpl impl = torch_2_kernel(g);
    // q, k, v are [s, b*heads, d] chunks viewed as [b, heads, s, d]: b and heads merge again,
    // so matmul views each as 3-D without a copy (and bmm saves views of `packed`).
    ops::AttentionShape viewable = shape;
    viewable.q_contiguous = viewable.k_contiguous = viewable.v_contiguous = true;
    attn = ops::attention_with(g, "attention", qkv[0], qkv[1], qkv[2], viewable, impl);
    // attn_output.permute(2, 0, 1, 3).contiguous(): [s, b, ...] order, a copy after the CUDA
    // kernels (their output is [b, s, heads, d]); the CPU flash kernel lays its output out as
    // the query is, [s, b, heads, d] here, so the permute is already contiguous (torch 2.6).
    const bool cpu_flash = impl == AttentionImpl::Flash && g.context().cpu_kernels;
    if ((impl == AttentionImpl::Flash || impl == AttentionImpl::MemEfficient) && !cpu_flash) {
      attn = ops::copy(g, "attn_output_contiguous", attn);
    }
  }
  TensorId out = ops::linear(g, "out_proj", attn, w.out_proj_weight, w.out_proj_bias, hidden, hidden);
  g.end_scope();
  g.pop_module();
  return out;
}

}  // namespace oomcast::planner::families
