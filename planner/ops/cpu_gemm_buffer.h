// The fp32 result buffer of a bf16 GEMM on the CPU (oneDNN through ATen), which nn.Linear and
// the attention matmuls allocate beside their bf16 outputs under CPU autocast or pure bf16.
#pragma once

#include <cstdint>
#include <string>

#include "planner/ops/graph_builder.h"

namespace oomcast::planner::ops {

// The fp32 result buffer of a bf16 GEMM (m x k times k x n) on the CPU, 0 where there is none.
// ATen hands a bf16 GEMM with m·n·k > 16³ to oneDNN (mkldnn_bf16_gemm, on CPUs with
// avx512bw/vl/dq such as the validation machines'), which computes an fp32 m x n result (plus
// 128 B) after the bf16 output exists and frees it before returning. A bmm does this per matrix,
// one matrix at a time on one thread (the captures run one). Measured under torch 2.13
// (validate/op_probe.py linear and matmul4d with --bf16; issue 26); oneDNN pads small results
// (16 x 21 takes 16 x 24 floats), which this leaves out.
uint64_t cpu_bf16_gemm_buffer(const GraphBuilder& g, DType dtype, uint64_t m, uint64_t n, uint64_t k);

// Adds those buffers to a GEMM op `a` (m x k) times `b` (k x n), per matrix: the [m, n] result
// after the output; in the backward an [m, k] one after grad_a and a [k, n] one after grad_b,
// each freed before the next GEMM, so the larger stands for both, after the gradients.
void add_cpu_bf16_gemm_buffers(GraphBuilder& g, OpNode& op, const std::string& name, DType dtype, uint64_t m,
                               uint64_t n, uint64_t k, bool a_requires_grad, bool b_requires_grad);

}  // namespace oomcast::planner::ops
