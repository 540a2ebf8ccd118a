// CNN ops of torchvision's ResNet: conv2d (autocast "lower" class), batch norm (runs in the
// input dtype), max pooling with int64 indices and adaptive average pooling (§2.4).
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId conv2d(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                const ConvShape& shape, int64_t* height, int64_t* width) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  TensorId x_compute = g.cast(x, rules.matmul_dtype(g.tensor(x).dtype), name + ".input_cast");
  TensorId w_compute = g.autocast_weight(weight);
  TensorId b_compute = bias == kNoTensor ? kNoTensor : g.autocast_weight(bias);
  *height = (*height + 2 * shape.padding - shape.kernel) / shape.stride + 1;
  *width = (*width + 2 * shape.padding - shape.kernel) / shape.stride + 1;
  uint64_t out_numel = static_cast<uint64_t>(g.context().batch * shape.out_channels * *height * *width);
  TensorId out = g.activation(name + ".out", out_numel, g.tensor(x_compute).dtype);
  std::vector<TensorId> inputs{x_compute, w_compute};
  std::vector<GradRule> grads{GradRule::New, GradRule::New};
  if (b_compute != kNoTensor) {
    inputs.push_back(b_compute);
    grads.push_back(GradRule::New);
  }
  bool x_requires_grad = g.tensor(x_compute).requires_grad;
  bool w_requires_grad = g.tensor(w_compute).requires_grad;
  OpNode& op = g.add_op(OpKind::Conv, name, std::move(inputs), {out}, std::move(grads));
  op.forward_flops = 2.0 * static_cast<double>(out_numel) * static_cast<double>(shape.in_channels) *
                     static_cast<double>(shape.kernel * shape.kernel);
  // convolution_backward needs the input for grad_weight and the weight for grad_input, but its
  // derivative is one formula for (input, weight, bias), so ConvolutionBackward0 saves both
  // whenever any of them needs a grad: a first conv (input without grad) under autocast keeps
  // its low-precision weight cast until its backward (validate/op_probe.py --bf16
  // conv2d_first: the weight cast a1 is freed in the backward).
  // The cuDNN workspace (algorithm dependent) is not modelled.
  if (w_requires_grad || x_requires_grad) {
    op.saved.push_back(x_compute);
    op.saved.push_back(w_compute);
  }
  if (g.context().cpu_kernels) {
    // mkldnn_convolution (CPU) reorders the weight into a weight-sized copy and computes into an
    // output-sized buffer before the output is made; both die inside the call
    // (validate/op_probe.py conv2d: +w +out_tmp -w +out -out_tmp, in fp32 and under bf16).
    uint64_t element = dtype_bytes(g.tensor(x_compute).dtype);
    op.forward_transients.push_back(Transient{g.intern(name + ".mkldnn_weight"), g.tensor(w_compute).numel * element, false});
    op.forward_transients.push_back(Transient{g.intern(name + ".mkldnn_output"), out_numel * element, false});
  }
  g.finish_op(op);
  return out;
}

TensorId batch_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    TensorId running_mean, TensorId running_var, int64_t channels) {
  std::string name(leaf);
  TensorId out = g.activation(name + ".out", g.tensor(x).numel, g.tensor(x).dtype);
  std::vector<TensorId> outputs{out};
  std::vector<TensorId> saved{x, weight, running_mean, running_var};
  if (g.context().training) {
    // Batch statistics: save_mean and save_invstd, fp32 [C]; running stats updated in place.
    TensorId save_mean = g.activation(name + ".save_mean", static_cast<uint64_t>(channels), DType::Float32);
    TensorId save_invstd = g.activation(name + ".save_invstd", static_cast<uint64_t>(channels), DType::Float32);
    outputs.push_back(save_mean);
    outputs.push_back(save_invstd);
    saved.push_back(save_mean);
    saved.push_back(save_invstd);
  }
  OpNode& op = g.add_op(OpKind::BatchNorm, name, {x, weight, bias, running_mean, running_var}, outputs,
                        {GradRule::New, GradRule::New, GradRule::New, GradRule::None, GradRule::None});
  op.saved = std::move(saved);
  g.finish_op(op);
  return out;
}

TensorId max_pool2d(GraphBuilder& g, std::string_view leaf, TensorId x, int64_t channels, int64_t* height,
                    int64_t* width) {
  std::string name(leaf);
  *height = (*height + 2 - 3) / 2 + 1;
  *width = (*width + 2 - 3) / 2 + 1;
  uint64_t out_numel = static_cast<uint64_t>(g.context().batch * channels * *height * *width);
  TensorId out = g.activation(name + ".out", out_numel, g.tensor(x).dtype);
  TensorId indices = g.activation(name + ".indices", out_numel, DType::Int64);
  OpNode& op = g.add_op(OpKind::Pool, name, {x}, {out, indices}, {GradRule::New});
  op.saved = {x, indices};
  g.finish_op(op);
  return out;
}

TensorId adaptive_avg_pool2d(GraphBuilder& g, std::string_view leaf, TensorId x, int64_t channels) {
  std::string name(leaf);
  uint64_t out_numel = static_cast<uint64_t>(g.context().batch * channels);
  TensorId out = g.activation(name + ".out", out_numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Pool, name, {x}, {out}, {GradRule::New});
  op.saved = {x};  // the input is saved although only its shape is needed
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
