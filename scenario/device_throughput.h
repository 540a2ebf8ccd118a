// DeviceThroughput: how fast a GPU computes and moves bytes, for the step-time model
// (planner/timing/step_time.h): dense peaks per dtype, HBM bandwidth, and the GPU-to-GPU links that
// collectives run over. Every figure's source is in device_profiles.cc and docs/step-time.md.
#pragma once

namespace oomcast::scenario {

struct DeviceThroughput {
  double fp32_tflops = 0.0;        // non-tensor-core FP32 (PyTorch's default for fp32 matmuls)
  double tf32_tflops = 0.0;        // TF32 tensor cores (cuDNN convolutions use it by default); 0: none
  double bf16_tflops = 0.0;        // dense BF16 tensor cores; 0: no bf16 tensor cores
  double fp16_tflops = 0.0;        // dense FP16 tensor cores, FP32 accumulate
  double hbm_gbps = 0.0;           // device memory bandwidth, GB/s
  double interconnect_gbps = 0.0;  // GPU-to-GPU inside a node, per direction, GB/s (NVLink or PCIe)
  double internode_gbps = 0.0;     // per GPU between nodes (its share of the network), GB/s
  int sm_count = 0;                // streaming multiprocessors (GEMM wave quantization); 0: unknown

  bool known() const { return fp32_tflops > 0.0 && hbm_gbps > 0.0; }
};

}  // namespace oomcast::scenario
