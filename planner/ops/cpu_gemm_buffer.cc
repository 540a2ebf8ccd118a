// The fp32 result buffers of bf16 GEMMs on the CPU (planner/ops/cpu_gemm_buffer.h).
#include "planner/ops/cpu_gemm_buffer.h"

#include <algorithm>

namespace oomcast::planner::ops {

uint64_t cpu_bf16_gemm_buffer(const GraphBuilder& g, DType dtype, uint64_t m, uint64_t n, uint64_t k) {
  // aten/src/ATen/native/mkldnn/Matmul.cpp mkldnn_gemm: no oneDNN for m * n * k <= 16 * 16 * 16.
  if (!g.context().cpu_kernels || dtype != DType::BFloat16 || m * n * k <= 16 * 16 * 16) return 0;
  return m * n * 4 + 128;
}

void add_cpu_bf16_gemm_buffers(GraphBuilder& g, OpNode& op, const std::string& name, DType dtype, uint64_t m,
                               uint64_t n, uint64_t k, bool a_requires_grad, bool b_requires_grad) {
  const uint64_t forward = cpu_bf16_gemm_buffer(g, dtype, m, n, k);
  if (forward == 0) return;  // m * n * k is the same for the backward's GEMMs
  op.forward_transients.push_back(Transient{g.intern(name + ".fp32_result"), forward, true});
  uint64_t backward = 0;
  if (a_requires_grad) backward = std::max(backward, cpu_bf16_gemm_buffer(g, dtype, m, k, n));
  if (b_requires_grad) backward = std::max(backward, cpu_bf16_gemm_buffer(g, dtype, k, n, m));
  if (backward) op.backward_transients.push_back(Transient{g.intern(name + ".fp32_grad"), backward, true});
}

}  // namespace oomcast::planner::ops
