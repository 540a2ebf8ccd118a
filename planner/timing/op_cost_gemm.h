// How well a GEMM of a given shape fills the GPU: cuBLAS splits the output into tiles, one
// thread block each, and runs them in waves of (SMs × tiles resident per SM); a grid that
// leaves SMs idle in its last (or only) wave, or tiles that hang over the matrix edge, wastes
// that share of the peak (NVIDIA, "Matrix Multiplication Background User's Guide", tile and
// wave quantization). op_cost.h times a matmul-class op's GEMMs with this efficiency.
#pragma once

#include <vector>

#include "planner/layer_graph.h"

namespace oomcast::planner {

// batch × [m, k] · [k, n]: the output has batch × m × n elements, each a k-long dot product.
struct GemmShape {
  double batch = 1.0;
  double m = 0.0;
  double n = 0.0;
  double k = 0.0;
  double flops() const { return 2.0 * batch * m * n * k; }
};

// What a GEMM runs on: the rate a large GEMM of its dtype reaches (peak × the large-GEMM
// fraction), the bandwidth split-K's partial sums stream at, the SM count (0: unknown), and
// the device's 16-bit tensor-core rate, which the tiles' operand reuse is sized for.
struct GemmDevice {
  double flops_per_second = 0.0;
  double hbm_bytes_per_second = 0.0;
  int sm_count = 0;
  double tensor_flops_per_second = 0.0;  // 0: no tensor cores (the GEMM's own rate stands)
};

// The seconds a GEMM of this shape takes: the fastest, over cuBLAS's usual tile shapes and
// split-K factors, of waves × the time of one wave — a wave runs SMs × resident tiles; a tile
// that reuses each operand load over fewer outputs than a 128×128 tile does at the
// tensor-core rate runs slower in proportion (a slower math rate, FP32 without tensor cores,
// needs proportionally less reuse) — plus, with split-K, writing and reading back the fp32
// partial sums. With an unknown SM count the GEMM runs at the large-GEMM rate.
double gemm_seconds(const GemmShape& gemm, const GemmDevice& device);

// gemm_seconds as a share of the large-GEMM rate: flops / (rate × seconds), in (0, 1].
double gemm_wave_efficiency(const GemmShape& gemm, const GemmDevice& device);

// The matrix operands of a matmul-class op: its inputs, less the bias (the smallest of three).
std::vector<TensorId> matrix_operands(const LayerGraph& graph, const OpNode& op);

// The GEMMs of a matmul-class op's forward kernel, their dimensions recovered from the
// operands' and output's sizes and the op's forward FLOPs (the graph keeps element counts, not
// shapes). Empty for fused attention (its own kernels, not tiled GEMMs) and for ops whose
// sizes do not factor into a GEMM.
std::vector<GemmShape> forward_gemms(const LayerGraph& graph, const OpNode& op);

// The backward GEMMs of the same op: the input gradient dA = dC · Bᵀ (batch × [m, n]·[n, k])
// when the first matrix operand needs a gradient, the weight gradient dB = Aᵀ · dC
// (batch × [k, m]·[m, n]) when the second does.
std::vector<GemmShape> backward_gemms(const LayerGraph& graph, const OpNode& op);

}  // namespace oomcast::planner
