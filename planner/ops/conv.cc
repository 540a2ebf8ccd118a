// CNN ops of torchvision's ResNet: conv2d (autocast "lower" class), batch norm (runs in the
// input dtype), max pooling with int64 indices and adaptive average pooling (§2.4).
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

namespace {

uint64_t round_up_to_block(int64_t channels) { return static_cast<uint64_t>((channels + 15) / 16 * 16); }

// mkldnn_convolution and its backward on the CPU (oneDNN, torch 2.13), measured by
// validate/op_probe.py (conv2d, conv2d_64ch and --table; in/out channel sweeps): with 16 or more
// input channels oneDNN works in a channel-blocked layout (channels padded to 16) and reorders
// the input, the weight and the output; with fewer it reorders the weight only.
//   forward:  [input reorder] + weight reorder + output buffer, the reorders freed before the
//             output is made, the buffer after it.
//   backward, grad_input: grad_output reorder + weight reorder + grad_input buffer (padded),
//             all freed before the grad is made; then grad_weight: grad_output reorder +
//             [input reorder] + grad_weight buffer, alive with the grads.
// oneDNN's bf16 backward-weights scratchpad of a blocked (16+ input channels) convolution with a
// kernel above 1x1, allocated after the grad_weight buffer and freed with the reorders: the fp32
// weight gradient it accumulates, the transposed source (C_in x H x rnd_up(ceil((W + 2p) / s), 2)
// x s bf16) and transposed grad_output (C_out x H_out x rnd_up(W_out, 2) bf16), plus the fp32 bias
// gradient (with a bias) and 8580 B, independent of the batch. Measured on torch 2.13 CPU (AVX512_BF16):
// exact for 16..512 channels, 3x3 at 1x1..32x32 (odd widths too) and stride 2, 5x5 within 4 B
// (64->64 3x3: 174,724 B at 8x8, 426,628 B at 32x32; 256->256 at 4x4: 2,389,380 B). The 1x1
// kernels' scratch follows another rule, not modelled.
uint64_t bf16_weight_grad_scratch(const ConvShape& shape, bool bias, int64_t in_height, int64_t in_width,
                                  int64_t out_height, int64_t out_width) {
  const auto even = [](int64_t v) { return static_cast<uint64_t>((v + 1) / 2 * 2); };
  const auto cin = static_cast<uint64_t>(shape.in_channels);
  const auto cout = static_cast<uint64_t>(shape.out_channels);
  const auto stride = static_cast<uint64_t>(shape.stride);
  const uint64_t padded_width = static_cast<uint64_t>(in_width + 2 * shape.padding);
  const uint64_t source = 2 * cin * static_cast<uint64_t>(in_height) *
                          even(static_cast<int64_t>((padded_width + stride - 1) / stride)) * stride;
  const uint64_t grad_output = 2 * cout * static_cast<uint64_t>(out_height) * even(out_width);
  const uint64_t weight = cout * cin * static_cast<uint64_t>(shape.kernel * shape.kernel) * 4;
  return weight + source + grad_output + (bias ? 4 * cout : 0) + 8580;
}

void add_onednn_buffers(GraphBuilder& g, const std::string& name, OpNode& op, const ConvShape& shape,
                        uint64_t in_numel, uint64_t out_numel, bool x_requires_grad, bool w_requires_grad,
                        const int64_t (&sizes)[4]) {
  const uint64_t element = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  const bool blocked = shape.in_channels >= 16;
  const uint64_t in_positions = in_numel / static_cast<uint64_t>(shape.in_channels);
  const uint64_t out_positions = out_numel / static_cast<uint64_t>(shape.out_channels);
  const uint64_t kernel_area = static_cast<uint64_t>(shape.kernel * shape.kernel);
  const uint64_t in_padded = in_positions * round_up_to_block(shape.in_channels) * element;
  const uint64_t out_bytes = (blocked ? out_positions * round_up_to_block(shape.out_channels) : out_numel) * element;
  const uint64_t weight_padded =
      round_up_to_block(shape.out_channels) * round_up_to_block(shape.in_channels) * kernel_area * element;
  const uint64_t weight_bytes =
      blocked ? weight_padded : static_cast<uint64_t>(shape.out_channels * shape.in_channels) * kernel_area * element;
  auto buffer = [&](const char* what, uint64_t bytes, bool after_outputs, bool dies_early) {
    return Transient{g.intern(name + ".mkldnn_" + what), bytes, after_outputs, dies_early};
  };
  if (blocked) op.forward_transients.push_back(buffer("input", in_padded, false, true));
  op.forward_transients.push_back(buffer("weight", weight_bytes, false, true));
  op.forward_transients.push_back(buffer("output", out_bytes, false, false));
  if (x_requires_grad) {
    op.backward_transients.push_back(buffer("grad_output", out_bytes, false, true));
    op.backward_transients.push_back(buffer("weight", weight_padded, false, true));
    op.backward_transients.push_back(buffer("grad_input", in_padded, false, true));
  }
  if (w_requires_grad) {
    op.backward_transients.push_back(buffer("grad_output", out_bytes, true, false));
    if (blocked) op.backward_transients.push_back(buffer("input", in_padded, true, false));
    op.backward_transients.push_back(buffer("grad_weight", weight_bytes, true, false));
    if (blocked && element == 2 && shape.kernel > 1) {
      // Real order: grad_input, then the grad_weight step's reorders, buffer and this scratch, all
      // freed before grad_weight itself is made. Placed before the grads (dying before them) it
      // meets the grad_input step's reorders and buffer, the same sizes as the grad_weight step's
      // (padded grad_output, padded input, the bf16 weight); what that leaves out, the grad_input
      // already made or, without one, the grad_weight step's own buffers, is added to it.
      const uint64_t alongside = x_requires_grad ? in_numel * element : out_bytes + in_padded + weight_bytes;
      const uint64_t scratch = bf16_weight_grad_scratch(shape, op.inputs.size() > 2, sizes[0], sizes[1], sizes[2], sizes[3]);
      op.backward_transients.push_back(buffer("weight_grad_scratch", scratch + alongside, false, true));
    }
  }
}

// ATen's ConvParams::use_mkldnn (Convolution.cpp, torch 2.x) on the CPU: bf16 and fp16 inputs
// always go to oneDNN; an fp32 convolution does unless it is a 1x1 with stride 1 and a batch
// under 16 run single-threaded ("THNN is faster when single-threaded"), or a batch of one with
// at most 20480 input elements and a kernel of at most 3x3 ("native is faster"). The thread count
// is validate/capture.py's (one); multi-threaded runs take oneDNN for the 1x1 case too.
// Measured (torch 2.13 CPU, the allocation hook): a [4, 32, 40, 40] 1x1 32->16 conv allocates its
// output only, forward and backward; the same at batch 16, stride 2 or two threads adds the
// reorders and buffers below.
bool runs_onednn(const GraphBuilder& g, const ConvShape& shape, DType dtype, uint64_t in_numel) {
  if (dtype != DType::Float32) return true;
  const int64_t batch = g.context().batch;
  constexpr int threads = 1;
  const bool one_by_one_fast = shape.stride == 1 && batch < 16 && shape.kernel == 1 && threads == 1;
  const bool native_faster = shape.kernel <= 3 && batch <= 1 && in_numel <= 20480;
  return !one_by_one_fast && !native_faster;
}

// The native (THNN) fp32 kernel, _slow_conv2d_forward/backward: a 1x1 with stride 1 and no
// padding multiplies the input as it is; otherwise it unfolds the input into columns
// [b, C_in * k * k, H_out * W_out], alive while the output is made, and again after the grads
// for the weight's (probe: 8->16 3x3 on [1, 8, 16, 16]: +73728 +out -73728; backward
// +grad_input +grad_bias +grad_weight +73728 -73728).
void add_native_buffers(GraphBuilder& g, const std::string& name, OpNode& op, const ConvShape& shape,
                        uint64_t out_numel, bool w_requires_grad) {
  if (shape.kernel == 1 && shape.stride == 1 && shape.padding == 0) return;
  const uint64_t columns = out_numel / static_cast<uint64_t>(shape.out_channels) *
                           static_cast<uint64_t>(shape.in_channels * shape.kernel * shape.kernel) *
                           dtype_bytes(g.tensor(op.inputs[0]).dtype);
  op.forward_transients.push_back(Transient{g.intern(name + ".columns"), columns, false, false});
  if (w_requires_grad) op.backward_transients.push_back(Transient{g.intern(name + ".columns"), columns, true, false});
}

}  // namespace

using scenario::OpKind;

TensorId conv2d(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                const ConvShape& shape, int64_t* height, int64_t* width) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  TensorId x_compute = g.cast(x, rules.matmul_dtype(g.tensor(x).dtype), name + ".input_cast");
  TensorId w_compute = g.autocast_weight(weight);
  TensorId b_compute = bias == kNoTensor ? kNoTensor : g.autocast_weight(bias);
  const int64_t in_height = *height, in_width = *width;
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
    const uint64_t in_numel = g.tensor(x_compute).numel;
    if (runs_onednn(g, shape, g.tensor(x_compute).dtype, in_numel)) {
      const int64_t sizes[4] = {in_height, in_width, *height, *width};
      add_onednn_buffers(g, name, op, shape, in_numel, out_numel, x_requires_grad, w_requires_grad, sizes);
    } else {
      add_native_buffers(g, name, op, shape, out_numel, w_requires_grad);
    }
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
