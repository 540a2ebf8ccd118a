// What one op of the layer graph costs the GPU: the FLOPs and bytes its forward and backward
// kernels move, and the time each takes on a device as the larger of compute and memory time
// (a roofline), with a floor for the launch. The step-time model (step_time.h) sums these.
#pragma once

#include "planner/layer_graph.h"
#include "planner/timing/op_cost_gemm.h"
#include "scenario/device_throughput.h"

namespace oomcast::planner {

// Fractions of the data-sheet peaks a kernel reaches (docs/step-time.md gives the evidence):
// large cuBLAS/cuDNN GEMMs whose tiles fill every SM in every wave reach 70-80% of the dense
// peak; op_cost_gemm.h takes the rest of a smaller GEMM's shortfall from its tiles and waves.
inline constexpr double kMatmulPeakFraction = 0.8;
// Elementwise and reduction kernels stream at 80-90% of HBM bandwidth (STREAM-like copies).
inline constexpr double kHbmFraction = 0.8;
// The shortest time an eagerly launched kernel holds the GPU: back-to-back launches of a
// short kernel run at ~3.8 µs each (NVIDIA Technical Blog, "Getting Started with CUDA Graphs",
// 2019: 2.9 µs kernels), so a kernel of less work still costs about that. A replayed CUDA
// graph launches without the CPU and pays no floor (generation_time.h).
inline constexpr double kKernelFloorSeconds = 4e-6;

struct OpCost {
  double flops = 0.0;        // tensor-core or FMA work
  double bytes = 0.0;        // bytes read and written in device memory
  double kernels = 0.0;      // launches (each at least kKernelFloorSeconds)
  DType compute_dtype = DType::Float32;
  bool matmul_class = false;  // linear, bmm, conv, fused attention
  bool flops_known = true;    // false: a matmul-class op of unknown FLOPs, timed by its bytes
  // The op's GEMMs, for tile and wave quantization (op_cost_gemm.h); empty: the FLOPs run at
  // the large-GEMM rate (fused attention, shapes that do not factor).
  std::vector<GemmShape> gemms;
};

OpCost forward_cost(const LayerGraph& graph, const OpNode& op);
// The backward of `op` (the gradients of its inputs that need one); zero when it records no
// autograd node.
OpCost backward_cost(const LayerGraph& graph, const OpNode& op);

// max(compute, bytes / (HBM × kHbmFraction), kernels × floor_seconds): compute is the FLOPs
// over the dtype's peak × kMatmulPeakFraction, each GEMM slowed by its tile and wave
// quantization on the device's SMs. floor_seconds is kKernelFloorSeconds eagerly, 0 for a
// replayed CUDA graph. This is the GPU's side only; step_time_host.h adds the CPU's.
double kernel_seconds(const OpCost& cost, scenario::OpKind kind, const scenario::DeviceThroughput& device,
                      double floor_seconds = kKernelFloorSeconds);

// The peak, TFLOP/s, a matmul-class op of this dtype runs at: the dtype's tensor cores, TF32
// for fp32 convolutions (cuDNN's default), plain FP32 for fp32 matmuls (PyTorch's default
// since 1.12); FP32 where the device lacks the dtype's tensor cores.
double matmul_peak_tflops(DType dtype, scenario::OpKind kind, const scenario::DeviceThroughput& device);

}  // namespace oomcast::planner
