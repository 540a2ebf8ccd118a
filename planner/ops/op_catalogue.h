// The op catalogue: one function per PyTorch op (or fixed op sequence) that appends it to a
// GraphBuilder with its outputs, forward transients, what autograd saves (guards applied),
// how backward allocates, and its autocast class (../shared/docs/training-memory-model.md §2-3).
// Sizes are element counts; dtypes follow the inputs and the precision regime.
#pragma once

#include <cstdint>
#include <string_view>

#include "planner/ops/graph_builder.h"

namespace oomcast::planner::ops {

// ---- linear.cc: nn.Linear (addmm / mm on the flattened input), autocast "lower" class.
// `bias` may be kNoTensor. Saves the (cast) input if the weight needs a gradient and the
// (cast) weight if the input does.
// `copy_input`: the input is a non-contiguous 3-D view (nn.MultiheadAttention's transposed
// query), so matmul's reshape copies it and the copy is what gets saved.
TensorId linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                int64_t in_features, int64_t out_features, bool copy_input = false);

// ---- embedding.cc: nn.Embedding; not autocast. Saves only the indices.
TensorId embedding(GraphBuilder& g, std::string_view leaf, TensorId indices, TensorId weight, int64_t dim);

// ---- norm.cc
// nn.LayerNorm (autocast fp32 class): saves input, weight, bias, mean and rstd (fp32 [rows]).
// `noncontiguous_input`: x is a permuted layout (ViT's residual stream after
// nn.MultiheadAttention returns a transposed view); the kernels take `input.expect_contiguous()`,
// an input-sized copy that dies inside the op, in forward and again in backward.
TensorId layer_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    int64_t hidden, bool noncontiguous_input = false);
// HF LlamaRMSNorm written in Python: x.to(fp32), pow(2).mean(-1), rsqrt, mul, .to(dtype), weight *.
TensorId rms_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, int64_t hidden);
// Gemma's RMSNorm: the whole norm in fp32, times (1 + weight.float()), then type_as(x).
TensorId offset_rms_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, int64_t hidden);

// ---- elementwise.cc
TensorId gelu(GraphBuilder& g, std::string_view leaf, TensorId x);           // saves its input
TensorId silu(GraphBuilder& g, std::string_view leaf, TensorId x);           // saves its input
TensorId tanh(GraphBuilder& g, std::string_view leaf, TensorId x);           // saves its result
// relu saves its result; in place (nn.ReLU(inplace=True)) it writes into x's storage.
TensorId relu(GraphBuilder& g, std::string_view leaf, TensorId x, bool in_place);
// Type-promoting add (residual); saves nothing. `in_place` (out += identity) reuses a's storage.
TensorId add(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b, bool in_place = false);
// Tensor * tensor, broadcasting b over a: saves b if a needs a gradient and a if b does.
TensorId mul(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b);
// Tensor * Python scalar: saves nothing.
TensorId scale(GraphBuilder& g, std::string_view leaf, TensorId x);
// nn.Dropout: with p > 0 in training, a new output plus a bool mask (saved); else x itself.
TensorId dropout(GraphBuilder& g, std::string_view leaf, TensorId x);
// The same with its own probability (a LoRA adapter's lora_dropout); 0 returns x.
TensorId dropout_with(GraphBuilder& g, std::string_view leaf, TensorId x, double p);
// softmax(x, -1): autocast runs it in fp32 (bf16 inputs are cast first, fp16 use the
// half_to_float kernel). Saves its result.
TensorId softmax(GraphBuilder& g, std::string_view leaf, TensorId x);
// A new tensor computed without autograd history (masks, arange, cos/sin tables).
TensorId constant(GraphBuilder& g, std::string_view leaf, uint64_t numel, DType dtype,
                  TensorId from = kNoTensor);

// ---- view.cc
// A view (reshape, transpose, select, flatten): no allocation; backward passes the grad on.
TensorId view(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel);
// tensor.split(...) into equal views; backward cats the pieces' grads into one new tensor.
std::vector<TensorId> split(GraphBuilder& g, std::string_view leaf, TensorId x, int pieces);
// x[..., start:start+n]: a view; its backward zero-fills a grad of x's full size.
TensorId slice(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel);
// .contiguous() / reshape of a non-viewable tensor: a copy; backward passes the grad on.
TensorId copy(GraphBuilder& g, std::string_view leaf, TensorId x);
// A copy that changes the element count (repeat_kv's expand+reshape, torch.cat with a
// class token); backward produces a new grad of the input's size.
TensorId expand_copy(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel);
// torch.cat((a, b)): a new tensor; backward gives each input a slice view of the grad.
TensorId cat(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b);

// ---- attention.cc
struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t seq = 1;
  int64_t head_dim = 1;
  bool causal = true;
  TensorId causal_mask_buffer = kNoTensor;  // nanoGPT's registered `bias` (eager only)
  // k / v already laid out contiguously as [b, heads, s, d] (repeat_kv's expand + reshape
  // copies): the eager path's matmul views kᵀ and v as 3-D without a copy and bmm saves them
  // as they are (validate/op_probe.py matmul4d_contig).
  bool k_contiguous = false;
  bool v_contiguous = false;
  // q is a fresh contiguous [b, heads, s, d] (GPT-NeoX's torch.cat of the rotated and
  // pass-through parts): matmul views it as 3-D without a copy.
  bool q_contiguous = false;
  // Gemma 2's attn_logit_softcapping in eager attention: scores / cap, tanh, * cap before the
  // mask (SDPA and flash attention take no extra tensors for it).
  bool score_softcap = false;
  // Hugging Face's BERT-style eager attention adds an extended attention mask ([b, 1, 1, s],
  // built once per forward in the parameters' dtype) to the scores before the softmax.
  TensorId additive_mask = kNoTensor;
  // F.scaled_dot_product_attention's attn_mask (bool or additive float), broadcastable to
  // [b, heads, s, s]; `sdpa_mask_last` is its last dimension (1 or s). Each call converts a
  // bool mask to q's dtype (0 / -inf); the CPU flash and CUDA memory-efficient kernels take
  // the mask and save it, CUDA's flash kernel refuses one (attention.cc).
  TensorId sdpa_mask = kNoTensor;
  int64_t sdpa_mask_last = 1;
  // The result stays SDPA's [b, heads, s, d] (no transpose(1, 2).contiguous() copy after it).
  bool heads_first = false;
  // SDPA's enable_gqa: k and v have kv_heads (dividing heads); 0 means heads.
  int64_t kv_heads = 0;
  // The call's own dropout_p (an SDPA call recorded by the capture), applied in training; below 0
  // the scenario's `dropout` applies. On the CPU a call with dropout runs the math backend.
  double dropout = -1.0;
};
// Scaled dot-product attention of q, k, v ([b, heads, s, d] views) with the scenario's
// implementation (eager as nanoGPT writes it, SDPA math, flash, memory-efficient). Returns
// y laid out as [b, s, heads, d] (the input of the output projection).
TensorId attention(GraphBuilder& g, std::string_view leaf, TensorId q, TensorId k, TensorId v,
                   const AttentionShape& shape);
// The same with the implementation given (a caller whose code picks its own kernel).
TensorId attention_with(GraphBuilder& g, std::string_view leaf, TensorId q, TensorId k, TensorId v,
                        const AttentionShape& shape, scenario::AttentionImpl impl);
// batched matmul of two 4-D tensors as torch.matmul does it: operands that cannot be viewed
// as 3-D are copied first, and bmm saves the (copied) operands. `inner` (the contracted
// dimension) gives the op its FLOPs for the step-time model; 0 leaves them unknown.
TensorId batched_matmul(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b, uint64_t out_numel,
                        bool copy_a, bool copy_b, uint64_t inner = 0);
// HF rotary embedding: x*cos + rotate_half(x)*sin; saves only cos and sin.
TensorId rotary(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId cos, TensorId sin);
// Partial rotary (GPT-NeoX, Phi): the first `rotary_fraction` of each head is rotated
// (x[..., :r] sliced, rotary, then cat with the pass-through slice x[..., r:]).
TensorId partial_rotary(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId cos, TensorId sin,
                        int64_t rotary_dims, int64_t head_dim);

// ---- loss.cc
// F.cross_entropy(logits, targets) = log_softmax (fp32 under autocast) + nll_loss. Returns the
// 0-dim loss.
TensorId cross_entropy(GraphBuilder& g, std::string_view leaf, TensorId logits, TensorId targets,
                       int64_t classes);

// ---- conv.cc (torchvision ResNet pieces)
struct ConvShape {
  int64_t in_channels = 0, out_channels = 0, kernel = 1, stride = 1, padding = 0;
};
// nn.Conv2d without bias on [b, C, H, W]; `height`/`width` are updated to the output size.
TensorId conv2d(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                const ConvShape& shape, int64_t* height, int64_t* width);
// nn.BatchNorm2d: training uses batch statistics (saves input, weight, running stats,
// save_mean, save_invstd); eval uses the running stats.
TensorId batch_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    TensorId running_mean, TensorId running_var, int64_t channels);
// nn.MaxPool2d(3, 2, 1): output plus int64 indices (both the input and indices are saved).
TensorId max_pool2d(GraphBuilder& g, std::string_view leaf, TensorId x, int64_t channels, int64_t* height,
                    int64_t* width);
// nn.AdaptiveAvgPool2d((1, 1)): saves its input.
TensorId adaptive_avg_pool2d(GraphBuilder& g, std::string_view leaf, TensorId x, int64_t channels);

// ---- moe.cc: the mixture-of-experts router and token dispatch.
struct Routing {
  TensorId probabilities = kNoTensor;  // softmax of the router logits, fp32 [tokens, experts]
  TensorId weights = kNoTensor;        // top-k weights in the model's dtype [tokens, k]
  TensorId selected = kNoTensor;       // int64 expert indices [tokens, k]
};
// softmax(logits, dtype=float32), topk(k), optional renormalisation, .to(weights_dtype).
Routing top_k_routing(GraphBuilder& g, std::string_view leaf, TensorId logits, int64_t experts, int64_t top_k,
                      bool normalize, DType weights_dtype);
// source[index] (advanced indexing of rows): a new tensor of `numel`; saves the index.
TensorId gather_rows(GraphBuilder& g, std::string_view leaf, TensorId source, TensorId index, uint64_t numel);
// accumulator.index_add_(0, index, source) in place; saves the index.
TensorId index_add(GraphBuilder& g, std::string_view leaf, TensorId accumulator, TensorId index, TensorId source);
// torch.sigmoid: saves its result.
TensorId sigmoid(GraphBuilder& g, std::string_view leaf, TensorId x);
// A mean (or sum) reducing x to `numel` elements.
TensorId mean_rows(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel);

// ---- python_activations.cc
// HF's NewGELUActivation (gelu_new) as the chain of ops its Python runs.
TensorId gelu_tanh_python(GraphBuilder& g, std::string_view leaf, TensorId x);

}  // namespace oomcast::planner::ops
