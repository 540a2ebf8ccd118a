// The autocast op lists of aten/src/ATen/autocast_mode.cpp as names (facts, per device):
// CUDA's lower_precision_fp, fp32 and fp32_set_opt_dtype lists (torch 1.10 to 2.13 agree on the
// ops the planner meets), and the CPU's (TORCH_LIBRARY_IMPL(aten, AutocastCPU)), which leave
// softmax, log_softmax, layer_norm and the pointwise/reduction ops out (they fall through and
// run in the input's dtype) and put the losses, cross_entropy_loss included, in fp32.
#include "planner/autocast_lists.h"

#include <algorithm>
#include <initializer_list>

namespace oomcast::planner {

namespace {

bool listed(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Ops below a listed op (the kernels it dispatches to) see already-cast inputs: listing them
// with their caller keeps a graph file that records the inner name on the same class.
AutocastClass cuda_class(std::string_view name) {
  if (listed(name, {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "conv1d", "conv2d", "conv3d",
                    "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "addmv",
                    "mv", "addr", "chain_matmul", "prelu", "scaled_dot_product_attention",
                    "_scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                    "_scaled_dot_product_efficient_attention"})) {
    return AutocastClass::Lower;
  }
  if (listed(name, {"softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "native_layer_norm",
                    "group_norm", "native_group_norm", "nll_loss", "nll_loss_forward", "nll_loss2d", "mse_loss",
                    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "kl_div", "exp",
                    "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "pow", "softplus", "acos", "asin",
                    "cosh", "sinh", "tan", "erfinv", "sum", "prod", "cumsum", "cumprod", "logsumexp", "norm",
                    "linalg_vector_norm", "frobenius_norm", "dist", "cdist", "pdist", "renorm", "cosine_similarity"})) {
    return AutocastClass::Fp32;
  }
  return AutocastClass::None;
}

AutocastClass cpu_class(std::string_view name, int torch_version) {
  // conv_transpose moved from the CPU fp32 list (1.13's autocast_mode.cpp) to lower_precision_fp
  // in 2.x (measured: validate/results/torch-2.6-cpu.md for 1.13 and 2.6,
  // validate/op_facts/torch-2.13-cpu.tsv for 2.13).
  if (listed(name, {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})) {
    return torch_version < 200 ? AutocastClass::Fp32 : AutocastClass::Lower;
  }
  // prelu joined the CPU lower list in 2.x (validate/results/torch-2.6-cpu.md: 1.13 runs it as given).
  if (name == "prelu") return torch_version < 200 ? AutocastClass::None : AutocastClass::Lower;
  if (listed(name, {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "bmm", "mm", "linalg_vecdot",
                    "baddbmm", "addmm", "_addmm_activation", "addbmm", "linear", "matmul", "conv_tbc",
                    "scaled_dot_product_attention", "_native_multi_head_attention", "_scaled_dot_product_attention",
                    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                    "chain_matmul", "linalg_multi_dot"})) {
    return AutocastClass::Lower;
  }
  if (listed(name, {"avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile",
                    "stft", "cdist", "trace", "cholesky", "inverse", "pinverse", "max_pool3d", "max_unpool2d",
                    "max_unpool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "reflection_pad1d",
                    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "mse_loss",
                    "cosine_embedding_loss", "nll_loss", "nll_loss_forward", "nll_loss2d", "nll_loss_nd",
                    "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "l1_loss",
                    "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
                    "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
                    "binary_cross_entropy_with_logits", "linalg_solve", "linalg_cholesky", "linalg_inv",
                    "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_qr", "qr", "svd"})) {
    return AutocastClass::Fp32;
  }
  return AutocastClass::None;
}

}  // namespace

AutocastClass autocast_class(std::string_view name, AutocastDevice device, int torch_version) {
  return device == AutocastDevice::Cpu ? cpu_class(name, torch_version) : cuda_class(name);
}

const char* autocast_class_name(AutocastClass autocast) {
  switch (autocast) {
    case AutocastClass::None: return "none";
    case AutocastClass::Lower: return "lower";
    case AutocastClass::Fp32: return "fp32";
  }
  return "?";
}

}  // namespace oomcast::planner
