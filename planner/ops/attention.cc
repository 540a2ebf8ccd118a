// Attention: the eager path nanoGPT writes (q@kᵀ, scale, masked_fill, softmax, dropout, @v),
// and the three SDPA backends (math, flash, memory-efficient) as §2.3 describes their saved
// sets and transients; plus HF's rotary embedding.
#include <stdexcept>

#include "base/input_error.h"
#include "planner/ops/cpu_gemm_buffer.h"
#include "planner/ops/op_catalogue.h"
#include "planner/torch_release_facts.h"

namespace oomcast::planner::ops {

using scenario::AttentionImpl;
using scenario::OpKind;

namespace {

uint64_t round_up(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// bmm saves each operand for the other's gradient; `autocast` is false inside an op that
// autocast already handled (SDPA math calls matmul below the autocast dispatch key).
// `inner` is the contracted dimension (head_dim for q@kᵀ, the key length for p@v); 0 when
// the caller does not know it (the op's FLOPs are then left to planner/timing/op_cost.cc).
// `matrices`, the batch of matrices (0 when unknown), places the CPU bf16 GEMM's buffers.
TensorId bmm(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b, uint64_t out_numel, bool copy_a,
             bool copy_b, bool autocast, uint64_t inner, uint64_t matrices) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  TensorId ac = a;
  TensorId bc = b;
  if (autocast) {
    ac = g.cast(a, rules.matmul_dtype(g.tensor(a).dtype), name + ".a_cast");
    bc = g.cast(b, rules.matmul_dtype(g.tensor(b).dtype), name + ".b_cast");
  }
  // matmul folds 4-D operands to 3-D with reshape: a head-split transpose cannot be viewed,
  // so it is copied, and bmm saves the copies.
  if (copy_a) ac = copy(g, name + ".a_contiguous", ac);
  if (copy_b) bc = copy(g, name + ".b_contiguous", bc);
  DType dtype = promote_types(g.tensor(ac).dtype, g.tensor(bc).dtype);
  TensorId out = g.activation(name + ".out", out_numel, dtype);
  bool a_requires_grad = g.tensor(ac).requires_grad;
  bool b_requires_grad = g.tensor(bc).requires_grad;
  OpNode& op = g.add_op(OpKind::Matmul, name, {ac, bc}, {out}, {GradRule::New, GradRule::New});
  op.uses_cublas = true;
  op.forward_flops = 2.0 * static_cast<double>(out_numel) * static_cast<double>(inner);
  if (b_requires_grad) op.saved.push_back(ac);
  if (a_requires_grad) op.saved.push_back(bc);
  // The CPU's bf16 GEMMs run matrix by matrix, each with its fp32 result (cpu_gemm_buffer.h).
  if (matrices > 0 && inner > 0) {
    const uint64_t m = g.tensor(ac).numel / matrices / inner, n = g.tensor(bc).numel / matrices / inner;
    if (m * n * matrices == out_numel) {
      add_cpu_bf16_gemm_buffers(g, op, name, dtype, m, n, inner, a_requires_grad, b_requires_grad);
    }
  }
  g.finish_op(op);
  return out;
}

// `mask`: an additive mask the math backend adds into the scores in place first (read, not saved).
TensorId plain_softmax(GraphBuilder& g, std::string_view leaf, TensorId x, std::vector<Transient> transients,
                       TensorId mask = kNoTensor) {
  std::string name(leaf);
  TensorId out = g.activation(name + ".out", g.tensor(x).numel, g.tensor(x).dtype);
  OpNode& op = mask == kNoTensor ? g.add_op(OpKind::Softmax, name, {x}, {out}, {GradRule::New})
                                 : g.add_op(OpKind::Softmax, name, {x, mask}, {out}, {GradRule::New, GradRule::None});
  op.saved.push_back(out);
  op.forward_transients = std::move(transients);
  g.finish_op(op);
  return out;
}

// SDPA's attn_mask as its backend receives it, for inputs of dtype `dtype` (after autocast):
// F.scaled_dot_product_attention converts a bool mask per call into a new tensor of q's
// dtype (attention.cpp convert_boolean_attn_mask: where(mask, 0, -inf), the mask's shape);
// autocast casts a float mask like q (sdpa is on its lower-precision list).
TensorId sdpa_mask_input(GraphBuilder& g, const std::string& name, const AttentionShape& shape, DType dtype) {
  const TensorId mask = shape.sdpa_mask;
  if (g.tensor(mask).dtype != DType::Bool) return g.cast(mask, g.precision().matmul_dtype(g.tensor(mask).dtype), name + ".mask_autocast");
  TensorId converted = g.activation(name + ".mask_float", g.tensor(mask).numel, dtype);
  OpNode& op = g.add_op(OpKind::Cast, name + ".mask_float", {mask}, {converted}, {GradRule::None});
  g.finish_op(op);
  return converted;
}

// The dropout probability the call applies: its own dropout_p in training (an SDPA call the
// capture recorded), else the scenario's.
double attention_dropout(const GraphBuilder& g, const AttentionShape& shape) {
  if (shape.dropout < 0.0) return g.active_dropout();
  return g.context().training ? shape.dropout : 0.0;
}

// SDPA's enable_gqa outside the flash kernels: the math backend repeats k and v to q's heads
// first (unsqueeze, expand, clone: a copy of q's element count each; torch 2.13's
// _scaled_dot_product_attention_math), and the copies are what its matmuls read and save.
TensorId repeat_heads(GraphBuilder& g, const std::string& leaf, TensorId x, const AttentionShape& shape) {
  if (shape.kv_heads <= 0 || shape.kv_heads == shape.heads) return x;
  return expand_copy(g, leaf, x, g.tensor(x).numel / static_cast<uint64_t>(shape.kv_heads) * static_cast<uint64_t>(shape.heads));
}

TensorId eager_attention(GraphBuilder& g, const std::string& name, TensorId q, TensorId k, TensorId v,
                         const AttentionShape& shape) {
  uint64_t scores_numel = static_cast<uint64_t>(shape.batch * shape.heads * shape.seq * shape.seq);
  uint64_t out_numel = static_cast<uint64_t>(shape.batch * shape.heads * shape.seq * shape.head_dim);
  const auto matrices = static_cast<uint64_t>(shape.batch * shape.heads);
  TensorId scores = bmm(g, name + ".qk", q, k, scores_numel, !shape.q_contiguous, !shape.k_contiguous, true,
                       static_cast<uint64_t>(shape.head_dim), matrices);
  TensorId att = scale(g, name + ".scale", scores);
  if (shape.score_softcap) {
    att = scale(g, name + ".softcap_div", att);
    att = tanh(g, name + ".softcap_tanh", att);  // saves its result
    att = scale(g, name + ".softcap_mul", att);
  }
  TensorId additive_mask = shape.additive_mask;
  if (shape.sdpa_mask != kNoTensor) additive_mask = sdpa_mask_input(g, name, shape, g.tensor(att).dtype);
  if (additive_mask != kNoTensor) {
    // scores + mask saves nothing, but type promotion makes the sum the wider of the two
    // dtypes: under autocast the fp16/bf16 scores meet an fp32 mask (fp32 parameters), so the
    // softmax, its saved result and the dropout all run in fp32.
    DType mask_dtype = g.tensor(additive_mask).dtype;
    DType sum_dtype = g.tensor(att).dtype == mask_dtype ? mask_dtype : DType::Float32;
    TensorId masked = g.activation(name + ".mask_add.out", scores_numel, sum_dtype);
    OpNode& op = g.add_op(OpKind::Add, name + ".mask_add", {att, additive_mask}, {masked},
                          {GradRule::New, GradRule::None});
    g.finish_op(op);
    att = masked;
  }
  if (shape.causal) {
    // bias[:, :, :T, :T] == 0 builds a bool mask per call; masked_fill saves it.
    uint64_t mask_numel = static_cast<uint64_t>(shape.seq * shape.seq);
    TensorId mask = constant(g, name + ".causal_mask", mask_numel, DType::Bool, shape.causal_mask_buffer);
    TensorId filled = g.activation(name + ".masked_fill.out", scores_numel, g.tensor(att).dtype);
    OpNode& op = g.add_op(OpKind::MaskedFill, name + ".masked_fill", {att, mask}, {filled},
                          {GradRule::New, GradRule::None});
    op.saved.push_back(mask);
    g.finish_op(op);
    att = filled;
  }
  TensorId probabilities = softmax(g, name + ".softmax", att);
  TensorId dropped = dropout_with(g, name + ".attn_dropout", probabilities, attention_dropout(g, shape));
  g.hold(dropped);  // `att` is a local of forward(): it lives until the module returns
  TensorId y = bmm(g, name + ".av", dropped, v, out_numel, false, !shape.v_contiguous, true,
                   static_cast<uint64_t>(shape.seq), matrices);
  return shape.heads_first ? y : copy(g, name + ".transpose_contiguous", y);
}

TensorId math_attention(GraphBuilder& g, const std::string& name, TensorId q, TensorId k, TensorId v,
                        const AttentionShape& shape) {
  const PrecisionRules& rules = g.precision();
  uint64_t scores_numel = static_cast<uint64_t>(shape.batch * shape.heads * shape.seq * shape.seq);
  uint64_t out_numel = static_cast<uint64_t>(shape.batch * shape.heads * shape.seq * shape.head_dim);
  // Autocast casts q, k, v to the low dtype (sdpa is a "lower" op); the math backend then
  // upcasts 16-bit inputs to fp32 (allow_fp16_bf16_reduction_math_sdp is off by default).
  TensorId qa = g.cast(q, rules.matmul_dtype(g.tensor(q).dtype), name + ".q_autocast");
  TensorId ka = g.cast(k, rules.matmul_dtype(g.tensor(k).dtype), name + ".k_autocast");
  TensorId va = g.cast(v, rules.matmul_dtype(g.tensor(v).dtype), name + ".v_autocast");
  DType original = g.tensor(qa).dtype;
  const TensorId mask = shape.sdpa_mask == kNoTensor ? kNoTensor : sdpa_mask_input(g, name, shape, original);
  TensorId q32 = g.cast(qa, DType::Float32, name + ".q_fp32");
  TensorId k32 = g.cast(ka, DType::Float32, name + ".k_fp32");
  TensorId v32 = g.cast(va, DType::Float32, name + ".v_fp32");
  // q * sqrt(scale) and k * sqrt(scale): scalar muls, nothing saved (any `scale` argument).
  TensorId q_scaled = scale(g, name + ".q_scale", q32);
  TensorId k_repeated = repeat_heads(g, name + ".k_repeat", k32, shape);
  v32 = repeat_heads(g, name + ".v_repeat", v32, shape);
  // the repeats are fresh [b, heads, s, d] tensors: matmul views them as 3-D without a copy
  const bool repeated = shape.kv_heads > 0 && shape.kv_heads != shape.heads;
  TensorId k_scaled = scale(g, name + ".k_scale", k_repeated);
  // The scalar muls keep their input's strides, so matmul copies q and kᵀ exactly when it
  // would copy the unscaled ones (the shape's *_contiguous flags), and v likewise.
  const auto matrices = static_cast<uint64_t>(shape.batch * shape.heads);
  TensorId scores = bmm(g, name + ".qk", q_scaled, k_scaled, scores_numel, !shape.q_contiguous,
                       !shape.k_contiguous && !repeated, false, static_cast<uint64_t>(shape.head_dim), matrices);
  std::vector<Transient> mask_transients;
  if (shape.causal) {
    // is_causal: a bool tril [s, s], then the float additive mask, added in place.
    uint64_t mask_numel = static_cast<uint64_t>(shape.seq * shape.seq);
    mask_transients.push_back(Transient{g.intern(name + ".causal_bool"), mask_numel, false});
    mask_transients.push_back(Transient{g.intern(name + ".causal_float"), mask_numel * 4, false});
  }
  TensorId probabilities = plain_softmax(g, name + ".safe_softmax", scores, std::move(mask_transients), mask);
  TensorId dropped = dropout_with(g, name + ".dropout", probabilities, attention_dropout(g, shape));
  TensorId y = bmm(g, name + ".av", dropped, v32, out_numel, false, !shape.v_contiguous && !repeated, false,
                   static_cast<uint64_t>(shape.seq), matrices);
  // The math backend returns (output.to(orig_dtype), attn.to(orig_dtype)); F.sdpa drops the
  // second, so it is a transient the size of the scores.
  TensorId result = g.cast(y, original, name + ".out_cast");
  g.cast(dropped, original, name + ".attn_cast");
  return shape.heads_first ? result : copy(g, name + ".transpose_contiguous", result);
}

TensorId fused_attention(GraphBuilder& g, const std::string& name, TensorId q, TensorId k, TensorId v,
                         const AttentionShape& shape, bool flash) {
  const PrecisionRules& rules = g.precision();
  TensorId qa = g.cast(q, rules.matmul_dtype(g.tensor(q).dtype), name + ".q_autocast");
  TensorId ka = g.cast(k, rules.matmul_dtype(g.tensor(k).dtype), name + ".k_autocast");
  TensorId va = g.cast(v, rules.matmul_dtype(g.tensor(v).dtype), name + ".v_autocast");
  DType dtype = g.tensor(qa).dtype;
  const TensorId mask = shape.sdpa_mask == kNoTensor ? kNoTensor : sdpa_mask_input(g, name, shape, dtype);
  // CUDA's flash kernel takes only 16-bit inputs; the CPU flash kernel takes fp32 too.
  if (flash && dtype == DType::Float32 && !g.context().cpu_kernels) {
    throw InputError(SourceLocation{}, "attention",
                     "flash attention needs fp16 or bf16 inputs; use precision amp_bf16/amp_fp16/pure_bf16 "
                     "or attention mem_efficient");
  }
  auto batch_heads = static_cast<uint64_t>(shape.batch * shape.heads);
  auto seq = static_cast<uint64_t>(shape.seq);
  auto head_dim = static_cast<uint64_t>(shape.head_dim);
  uint64_t out_numel = batch_heads * seq * head_dim;
  // The output is laid out [b, s, heads, d], so transpose(1, 2).contiguous() is a no-op.
  TensorId out = g.activation(name + ".out", out_numel, dtype);
  uint64_t lse_numel = flash ? batch_heads * seq : batch_heads * round_up(seq, 32);
  TensorId lse = g.activation(name + ".logsumexp", lse_numel, DType::Float32);
  std::vector<TensorId> outputs{out, lse};
  const bool cpu_flash = flash && g.context().cpu_kernels;
  if (cpu_flash) {
    // The CPU flash kernel returns empty philox tensors and keeps its scratch in per-thread
    // buffers (threads x q-block x kv-block floats, freed when the kernel returns; not modelled:
    // the thread count is the machine's, not the scenario's).
  } else if (flash) {
    outputs.push_back(g.activation(name + ".rng_state", 2, DType::Int64));
  } else {
    outputs.push_back(g.activation(name + ".philox_seed", 1, DType::Int64));
    outputs.push_back(g.activation(name + ".philox_offset", 1, DType::Int64));
  }
  // The mask the kernel reads: as it is on the CPU; CUDA's memory-efficient kernel pads its last
  // dimension to a multiple of 16 in a copy first (attention.cu preprocess_mask / pad_bias,
  // mem_eff_alignment 16), then expands it to [b, heads, s, s] as a view. Both save it.
  TensorId kernel_mask = mask;
  if (mask != kNoTensor && !cpu_flash) {
    const auto last = static_cast<uint64_t>(shape.sdpa_mask_last);
    if (last % 16 != 0) {
      kernel_mask = g.activation(name + ".mask_padded", g.tensor(mask).numel / last * round_up(last, 16), dtype);
      OpNode& pad = g.add_op(OpKind::Copy, name + ".mask_padded", {mask}, {kernel_mask}, {GradRule::None});
      g.finish_op(pad);
    }
  }
  std::vector<TensorId> inputs{qa, ka, va};
  std::vector<GradRule> rules_in{GradRule::New, GradRule::New, GradRule::New};
  if (kernel_mask != kNoTensor) {
    inputs.push_back(kernel_mask);
    rules_in.push_back(GradRule::None);
  }
  OpNode& op = g.add_op(OpKind::Attention, name, inputs, outputs, rules_in);
  op.saved = {qa, ka, va};
  if (kernel_mask != kNoTensor) op.saved.push_back(kernel_mask);
  op.saved.insert(op.saved.end(), outputs.begin(), outputs.end());
  // q@kᵀ and p@v, 2·s·s·d each per head; a causal kernel skips the blocks above the diagonal.
  op.forward_flops = 4.0 * static_cast<double>(batch_heads) * static_cast<double>(seq) * static_cast<double>(seq) *
                     static_cast<double>(head_dim) * (shape.causal ? 0.5 : 1.0);
  if (flash && !cpu_flash) {
    // flash_api.cpp mha_bwd: softmax_d fp32 [b, h, s_round128] and dq_accum fp32
    // [b, s_round128, h, d_round] next to dq, dk, dv; freed when the kernel returns.
    uint64_t seq_rounded = round_up(seq, 128);
    uint64_t dim_rounded = round_up(head_dim, head_dim <= 128 ? 32 : 64);
    op.backward_transients.push_back(Transient{g.intern(name + ".softmax_d"), batch_heads * seq_rounded * 4, true});
    op.backward_transients.push_back(
        Transient{g.intern(name + ".dq_accum"), batch_heads * seq_rounded * dim_rounded * 4, true});
  } else if (!flash) {
    // The memory-efficient backward's delta = rowsum(dO * O), fp32 [b, h, s] [mem].
    op.backward_transients.push_back(Transient{g.intern(name + ".delta"), batch_heads * seq * 4, true});
  }
  g.finish_op(op);
  return out;
}

}  // namespace

TensorId batched_matmul(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b, uint64_t out_numel,
                        bool copy_a, bool copy_b, uint64_t inner) {
  return bmm(g, leaf, a, b, out_numel, copy_a, copy_b, true, inner, /*matrices=*/0);
}

TensorId attention(GraphBuilder& g, std::string_view leaf, TensorId q, TensorId k, TensorId v,
                   const AttentionShape& shape) {
  return attention_with(g, leaf, q, k, v, shape, g.context().attention);
}

TensorId attention_with(GraphBuilder& g, std::string_view leaf, TensorId q, TensorId k, TensorId v,
                        const AttentionShape& shape, AttentionImpl impl) {
  std::string name(leaf);
  // CUDA's flash kernel refuses an attn_mask (sdp_utils.cpp: check_for_attn_mask is among
  // use_flash_attention's constraints, torch 2.x), so SDPA's dispatcher falls to the
  // memory-efficient kernel, which takes one; the CPU flash kernel takes masks
  // (sdp_utils_cpp.cpp use_flash_attention_cpp checks only the mask's shape).
  if (impl == AttentionImpl::Flash && shape.sdpa_mask != kNoTensor && !g.context().cpu_kernels) {
    impl = AttentionImpl::MemEfficient;
  }
  // The CPU's flash kernel takes no dropout (sdp_utils_cpp.cpp: check_for_dropout is among
  // use_flash_attention_cpp's constraints; a custom scale, masks and enable_gqa are taken), so a
  // call whose dropout is active runs the math backend: torch._fused_sdp_choice under 2.13 CPU
  // answers math for dropout_p 0.1 and flash for the same call without it.
  const bool fused = impl == AttentionImpl::Flash || impl == AttentionImpl::MemEfficient;
  if (fused && g.context().cpu_kernels && attention_dropout(g, shape) > 0.0 &&
      torch_release_facts(g.context().torch_version).cpu_sdpa_flash_without_dropout) {
    impl = AttentionImpl::SdpaMath;
  }
  switch (impl) {
    case AttentionImpl::Eager: return eager_attention(g, name, q, k, v, shape);
    case AttentionImpl::SdpaMath: return math_attention(g, name, q, k, v, shape);
    case AttentionImpl::Flash: return fused_attention(g, name, q, k, v, shape, true);
    case AttentionImpl::MemEfficient: return fused_attention(g, name, q, k, v, shape, false);
  }
  throw std::logic_error("unknown attention implementation");
}

TensorId rotary(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId cos, TensorId sin) {
  std::string name(leaf);
  uint64_t numel = g.tensor(x).numel;
  TensorId x_cos = mul(g, name + ".mul_cos", x, cos);
  // rotate_half: two slices (views whose backward zero-fills a full-size grad), neg, cat.
  TensorId first_half = g.view(x, name + ".x1", numel / 2);
  OpNode& slice1 = g.add_op(OpKind::View, name + ".x1", {x}, {first_half}, {GradRule::New});
  g.finish_op(slice1);
  TensorId second_half = g.view(x, name + ".x2", numel / 2);
  OpNode& slice2 = g.add_op(OpKind::View, name + ".x2", {x}, {second_half}, {GradRule::New});
  g.finish_op(slice2);
  TensorId negated = g.activation(name + ".neg", numel / 2, g.tensor(x).dtype);
  OpNode& neg = g.add_op(OpKind::Neg, name + ".neg", {second_half}, {negated}, {GradRule::New});
  g.finish_op(neg);
  TensorId rotated = cat(g, name + ".cat", negated, first_half);
  TensorId rotated_sin = mul(g, name + ".mul_sin", rotated, sin);
  return add(g, name + ".add", x_cos, rotated_sin);
}

TensorId partial_rotary(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId cos, TensorId sin,
                        int64_t rotary_dims, int64_t head_dim) {
  if (rotary_dims >= head_dim) return rotary(g, leaf, x, cos, sin);
  std::string name(leaf);
  const uint64_t numel = g.tensor(x).numel;
  const uint64_t rotated_numel = numel / static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(rotary_dims);
  TensorId rotated_part = slice(g, name + ".rot", x, rotated_numel);
  TensorId pass_part = slice(g, name + ".pass", x, numel - rotated_numel);
  TensorId embedded = rotary(g, name, rotated_part, cos, sin);
  return cat(g, name + ".cat", embedded, pass_part);
}

}  // namespace oomcast::planner::ops
