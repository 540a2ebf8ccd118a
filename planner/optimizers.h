// Optimizer steps (../shared/docs/training-memory-model.md §6): lazily created state (SGD momentum, Adam(W)
// exp_avg/exp_avg_sq [+max_exp_avg_sq], Adafactor factored variances, bitsandbytes 8-bit
// AdamW), the temporaries each implementation makes (single-tensor, foreach, fused), and
// fp32 master weights for pure_bf16; torch.optim.Muon with its AdamW, and AnyPrecisionAdamW.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/precision.h"
#include "scenario/scenario.h"
#include "planner/schedule_writer.h"

namespace oomcast::planner {

struct OptimizerParameter {
  uint32_t name = 0;              // trace name of the parameter
  uint64_t numel = 0;
  DType dtype = DType::Float32;   // the dtype the optimizer steps in (fp32 for master weights)
  std::vector<int64_t> shape;
};

class OptimizerModel {
 public:
  OptimizerModel(const scenario::OptimizerConfig& config, const PrecisionRules& precision, std::vector<OptimizerParameter> params,
                 ScheduleWriter* writer);

  // Allocates what exists from construction on (fp32 master copies for pure_bf16).
  void construct();
  // One optimizer.step(): `has_grad[i]` tells which parameters have a .grad (the others are
  // skipped, as torch skips p.grad is None).
  void step(const std::vector<uint8_t>& has_grad);
  // The PyTorch release whose torch.optim code runs (allocator.torch_version; 113 = 1.13),
  // where releases allocate differently.
  void set_torch_version(int version) { torch_version_ = version; }

 private:
  uint32_t state_name(size_t param, const char* suffix);
  void init_state(size_t param);
  void adam_temporaries(const std::vector<size_t>& params);
  void adafactor_temporaries(const std::vector<size_t>& params);
  // torch.optim.Muon (2-D parameters not in adamw_params) and the AdamW beside it.
  bool muon_parameter(size_t param) const;
  void muon_step(const std::vector<size_t>& params);
  void anyprecision_temporaries(const std::vector<size_t>& params);
  void cpu_bf16_gemm(size_t param, uint64_t m, uint64_t n, uint64_t k);

  scenario::OptimizerConfig config_;
  PrecisionRules precision_;
  std::vector<OptimizerParameter> params_;
  ScheduleWriter* writer_;
  std::vector<uint8_t> initialized_;
  bool shared_buffers_ = false;   // bitsandbytes' qmaps
  int torch_version_ = 206;
};

}  // namespace oomcast::planner
