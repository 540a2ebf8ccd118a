// What one op of the layer graph costs the GPU: the FLOPs and bytes its forward and backward
// kernels move, and the time each takes on a device as the larger of compute and memory time
// (a roofline), with a floor for the launch. The step-time model (step_time.h) sums these.
#pragma once

#include "planner/layer_graph.h"
#include "scenario/device_throughput.h"

namespace oomcast::planner {

// Fractions of the data-sheet peaks a kernel reaches (docs/step-time.md gives the evidence):
// large cuBLAS/cuDNN GEMMs reach 70-80% of dense tensor-core peak, and whole-model MFU of
// well-tuned LLM training is 0.45-0.55 (Megatron-LM, PaLM), so 0.7 for the matmuls leaves the
// rest of the gap to the memory-bound ops timed separately.
inline constexpr double kMatmulPeakFraction = 0.7;
// Elementwise and reduction kernels stream at 80-90% of HBM bandwidth (STREAM-like copies).
inline constexpr double kHbmFraction = 0.8;
// The shortest an eager PyTorch op takes: CPU dispatch and launch (~5 µs per op), which the
// GPU cannot hide when its kernels are shorter.
inline constexpr double kOpFloorSeconds = 5e-6;

struct OpCost {
  double flops = 0.0;        // tensor-core or FMA work
  double bytes = 0.0;        // bytes read and written in device memory
  double kernels = 0.0;      // launches (each at least kOpFloorSeconds)
  DType compute_dtype = DType::Float32;
  bool matmul_class = false;  // linear, bmm, conv, fused attention
  bool flops_known = true;    // false: a matmul-class op of unknown FLOPs, timed by its bytes
};

OpCost forward_cost(const LayerGraph& graph, const OpNode& op);
// The backward of `op` (the gradients of its inputs that need one); zero when it records no
// autograd node.
OpCost backward_cost(const LayerGraph& graph, const OpNode& op);

// max(FLOPs / (peak of its dtype × kMatmulPeakFraction), bytes / (HBM × kHbmFraction)), at
// least `floor_seconds` per kernel (kOpFloorSeconds eagerly; 0 for a replayed CUDA graph,
// whose launches need no CPU).
double kernel_seconds(const OpCost& cost, OpKind kind, const DeviceThroughput& device,
                      double floor_seconds = kOpFloorSeconds);

// The peak, TFLOP/s, a matmul-class op of this dtype runs at: the dtype's tensor cores, TF32
// for fp32 convolutions (cuDNN's default), plain FP32 for fp32 matmuls (PyTorch's default
// since 1.12); FP32 where the device lacks the dtype's tensor cores.
double matmul_peak_tflops(DType dtype, OpKind kind, const DeviceThroughput& device);

}  // namespace oomcast::planner
