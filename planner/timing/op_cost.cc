// Per-op FLOPs and bytes. Matmul-class ops carry their forward FLOPs from the op builders
// (OpNode::forward_flops); a linear of a captured graph without them is sized from its
// operands (x [r, in], W [out, in], y [r, out]: 2·r·in·out = 2·sqrt(|x|·|W|·|y|)). Backward
// runs one GEMM per operand that needs a gradient (2× forward when both do); a fused
// attention backward recomputes the scores and runs five matmuls to the forward's two (2.5×).
#include "planner/timing/op_cost.h"

#include <algorithm>
#include <cmath>

namespace oomcast::planner {

using scenario::DeviceThroughput;
using scenario::OpKind;

namespace {

bool launches_kernel(OpKind kind) {
  return kind != OpKind::View && kind != OpKind::ScopeEnd && kind != OpKind::Constant && kind != OpKind::Split;
}

bool is_matmul_class(OpKind kind) {
  return kind == OpKind::Linear || kind == OpKind::Matmul || kind == OpKind::Conv || kind == OpKind::Attention;
}

double tensor_bytes(const LayerGraph& graph, TensorId id) { return static_cast<double>(graph.tensors[id].bytes()); }

}  // namespace

OpCost forward_cost(const LayerGraph& graph, const OpNode& op) {
  OpCost cost;
  if (!launches_kernel(op.kind)) return cost;
  cost.kernels = 1.0;
  cost.matmul_class = is_matmul_class(op.kind);
  cost.compute_dtype = op.outputs.empty() ? DType::Float32 : graph.tensors[op.outputs[0]].dtype;
  double output_bytes = 0.0;
  for (TensorId out : op.outputs) output_bytes += tensor_bytes(graph, out);
  if (op.kind == OpKind::Embedding || op.kind == OpKind::Gather) {
    // A lookup reads the rows it returns, not the table.
    double index_bytes = 0.0;
    for (TensorId in : op.inputs) {
      if (!is_floating(graph.tensors[in].dtype)) index_bytes += tensor_bytes(graph, in);
    }
    cost.bytes = 2.0 * output_bytes + index_bytes;
    return cost;
  }
  double input_bytes = 0.0;
  for (TensorId in : op.inputs) input_bytes += tensor_bytes(graph, in);
  cost.bytes = input_bytes + output_bytes;
  cost.flops = op.forward_flops;
  if (cost.matmul_class && cost.flops > 0.0) cost.gemms = forward_gemms(graph, op);
  if (cost.matmul_class && cost.flops <= 0.0) {
    std::vector<TensorId> operands = matrix_operands(graph, op);
    bool has_parameter = std::any_of(operands.begin(), operands.end(), [&](TensorId id) {
      TensorRole role = graph.tensors[graph.tensors[id].storage].role;
      return role == TensorRole::Parameter || role == TensorRole::AutocastWeight;
    });
    if (op.kind == OpKind::Linear && operands.size() == 2 && has_parameter && !op.outputs.empty()) {
      double product = static_cast<double>(graph.tensors[operands[0]].numel) *
                       static_cast<double>(graph.tensors[operands[1]].numel) *
                       static_cast<double>(graph.tensors[op.outputs[0]].numel);
      cost.flops = 2.0 * std::sqrt(product);
    } else {
      cost.flops_known = false;
    }
  }
  return cost;
}

OpCost backward_cost(const LayerGraph& graph, const OpNode& op) {
  OpCost cost;
  if (!op.records_grad_node || !launches_kernel(op.kind)) return cost;
  OpCost forward = forward_cost(graph, op);
  cost.matmul_class = forward.matmul_class;
  cost.compute_dtype = forward.compute_dtype;
  cost.flops_known = forward.flops_known;
  // Reads the incoming gradients and what forward saved, writes the new input gradients.
  for (TensorId out : op.outputs) cost.bytes += tensor_bytes(graph, out);
  for (TensorId saved : op.saved) cost.bytes += tensor_bytes(graph, saved);
  double gradients = 0.0;
  for (size_t i = 0; i < op.inputs.size() && i < op.input_grads.size(); ++i) {
    const TensorDesc& input = graph.tensors[op.inputs[i]];
    if (op.input_grads[i] != GradRule::New || !input.requires_grad) continue;
    cost.bytes += tensor_bytes(graph, op.inputs[i]);
    gradients += 1.0;
  }
  if (gradients == 0.0) return OpCost{};
  if (forward.matmul_class) {
    if (op.kind == OpKind::Attention) {
      cost.flops = 2.5 * forward.flops;
      cost.kernels = 1.0;
    } else {
      double operands = 0.0;
      for (TensorId id : matrix_operands(graph, op)) {
        if (graph.tensors[id].requires_grad) operands += 1.0;
      }
      cost.flops = operands * forward.flops;
      cost.kernels = std::max(1.0, gradients);
      if (!forward.gemms.empty()) cost.gemms = backward_gemms(graph, op);
    }
  } else {
    cost.kernels = 1.0;
  }
  return cost;
}

double matmul_peak_tflops(DType dtype, OpKind kind, const DeviceThroughput& device) {
  double peak = 0.0;
  if (dtype == DType::BFloat16) peak = device.bf16_tflops;
  if (dtype == DType::Float16) peak = device.fp16_tflops;
  if (dtype == DType::Float32 && kind == OpKind::Conv) peak = device.tf32_tflops;
  return peak > 0.0 ? peak : device.fp32_tflops;
}

double kernel_seconds(const OpCost& cost, OpKind kind, const DeviceThroughput& device, double floor_seconds) {
  if (cost.kernels <= 0.0 || !device.known()) return 0.0;
  const double hbm = device.hbm_gbps * 1e9 * kHbmFraction;
  double memory = cost.bytes / hbm;
  double compute = 0.0;
  if (cost.flops > 0.0) {
    if (!cost.matmul_class) {
      compute = cost.flops / (device.fp32_tflops * 1e12);
    } else {
      const double rate = matmul_peak_tflops(cost.compute_dtype, kind, device) * 1e12 * kMatmulPeakFraction;
      const double tensor_peak = std::max(device.bf16_tflops, device.fp16_tflops);
      const GemmDevice gemm_device{rate, hbm, device.sm_count, tensor_peak * 1e12 * kMatmulPeakFraction};
      double gemm_flops = 0.0;
      for (const GemmShape& gemm : cost.gemms) {
        compute += gemm_seconds(gemm, gemm_device);
        gemm_flops += gemm.flops();
      }
      compute += std::max(0.0, cost.flops - gemm_flops) / rate;
    }
  }
  return std::max({compute, memory, cost.kernels * floor_seconds});
}

}  // namespace oomcast::planner
