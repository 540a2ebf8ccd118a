// Optimizer state and step temporaries, per ../shared/docs/training-memory-model.md §6.
#include "planner/optimizers.h"

#include "planner/torch_release_facts.h"

namespace oomcast::planner {

using scenario::OptimizerConfig;
using scenario::OptimizerImpl;
using scenario::OptimizerType;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

OptimizerModel::OptimizerModel(const OptimizerConfig& config, const PrecisionRules& precision,
                               std::vector<OptimizerParameter> params, ScheduleWriter* writer)
    : config_(config), precision_(precision), params_(std::move(params)), writer_(writer) {
  initialized_.assign(params_.size(), 0);
}

uint32_t OptimizerModel::state_name(size_t param, const char* suffix) {
  return writer_->intern(writer_->names_of(params_[param].name) + suffix);
}

void OptimizerModel::construct() {
  if (!precision_.fp32_master_weights) return;
  // fp32 master copies made when the optimizer wrapper is built (Apex O2 / DeepSpeed bf16).
  for (size_t p = 0; p < params_.size(); ++p) {
    writer_->alloc(state_name(p, ".master_fp32"), params_[p].numel * 4, TensorCategory::OptimizerState);
  }
}

void OptimizerModel::init_state(size_t p) {
  const OptimizerParameter& param = params_[p];
  const uint64_t bytes = param.numel * dtype_bytes(param.dtype);
  switch (config_.type) {
    case OptimizerType::Sgd:
      // momentum_buffer = torch.clone(grad).detach() on the first step.
      if (config_.momentum > 0.0) writer_->alloc(state_name(p, ".momentum_buffer"), bytes, TensorCategory::OptimizerState);
      break;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      // _init_group: step (a device scalar only for fused/capturable), exp_avg, exp_avg_sq.
      if (config_.impl == OptimizerImpl::Fused) writer_->alloc(state_name(p, ".step"), 4, TensorCategory::OptimizerState);
      writer_->alloc(state_name(p, ".exp_avg"), bytes, TensorCategory::OptimizerState);
      writer_->alloc(state_name(p, ".exp_avg_sq"), bytes, TensorCategory::OptimizerState);
      if (config_.amsgrad) writer_->alloc(state_name(p, ".max_exp_avg_sq"), bytes, TensorCategory::OptimizerState);
      break;
    case OptimizerType::Adafactor: {
      // torch.optim.Adafactor: row_var (shape with last dim 1) and col_var (dim -2 set to 1)
      // for matrices, a full variance for vectors; grad dtype.
      uint64_t element = dtype_bytes(param.dtype);
      if (param.shape.size() >= 2) {
        uint64_t cols = static_cast<uint64_t>(param.shape.back());
        uint64_t rows_total = param.numel / cols;
        uint64_t cols_total = param.numel / static_cast<uint64_t>(param.shape[param.shape.size() - 2]);
        writer_->alloc(state_name(p, ".row_var"), rows_total * element, TensorCategory::OptimizerState);
        writer_->alloc(state_name(p, ".col_var"), cols_total * element, TensorCategory::OptimizerState);
      } else {
        writer_->alloc(state_name(p, ".variance"), bytes, TensorCategory::OptimizerState);
      }
      break;
    }
    case OptimizerType::AdamW8bit: {
      if (!shared_buffers_) {
        shared_buffers_ = true;
        writer_->alloc(writer_->intern("bnb.qmap_dynamic"), 256 * 4, TensorCategory::OptimizerState);
        writer_->alloc(writer_->intern("bnb.qmap_udynamic"), 256 * 4, TensorCategory::OptimizerState);
      }
      // Optimizer2State.init_state: tensors under min_8bit_size (4096) keep fp32 state.
      if (param.numel < 4096) {
        writer_->alloc(state_name(p, ".state1"), param.numel * 4, TensorCategory::OptimizerState);
        writer_->alloc(state_name(p, ".state2"), param.numel * 4, TensorCategory::OptimizerState);
      } else {
        uint64_t blocks = ceil_div(param.numel, 256);
        writer_->alloc(state_name(p, ".state1"), param.numel, TensorCategory::OptimizerState);
        writer_->alloc(state_name(p, ".state2"), param.numel, TensorCategory::OptimizerState);
        writer_->alloc(state_name(p, ".absmax1"), blocks * 4, TensorCategory::OptimizerState);
        writer_->alloc(state_name(p, ".absmax2"), blocks * 4, TensorCategory::OptimizerState);
      }
      break;
    }
  }
}

void OptimizerModel::adam_temporaries(const std::vector<size_t>& params) {
  switch (config_.impl) {
    case OptimizerImpl::Fused:
      return;  // _fused_adam(w)_: no parameter-sized temporaries
    case OptimizerImpl::Foreach: {
      // _multi_tensor_adam: exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) holds one tensor per
      // parameter of the (device, dtype) bucket until the bucket's update is done.
      std::vector<uint32_t> slots;
      for (size_t p : params) {
        slots.push_back(writer_->alloc(state_name(p, ".exp_avg_sq_sqrt"),
                                       params_[p].numel * dtype_bytes(params_[p].dtype), TensorCategory::Temporary));
      }
      if (torch_release_facts(torch_version_).foreach_adam_denom_out_of_place) {
        // Before 2.0, denom = torch._foreach_add(exp_avg_sq_sqrt, eps) was out of place: a
        // second list the size of the parameters (the CPU captures of torch 1.13 show both).
        for (size_t p : params) {
          slots.push_back(writer_->alloc(state_name(p, ".denom"), params_[p].numel * dtype_bytes(params_[p].dtype),
                                         TensorCategory::Temporary));
        }
      }
      for (uint32_t slot : slots) writer_->free(slot);
      return;
    }
    case OptimizerImpl::SingleTensor:
    {
      // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): sqrt, then the division.
      // denom is a local of the loop over parameters: the previous parameter's is freed only
      // when the new one is bound, and the last one when the function returns (CPU captures of
      // torch 1.13: +sqrt, +denom, -sqrt, -previous denom).
      uint32_t previous_denom = UINT32_MAX;
      for (size_t p : params) {
        uint64_t bytes = params_[p].numel * dtype_bytes(params_[p].dtype);
        uint32_t sqrt_slot = writer_->alloc(state_name(p, ".sqrt"), bytes, TensorCategory::Temporary);
        uint32_t denom_slot = writer_->alloc(state_name(p, ".denom"), bytes, TensorCategory::Temporary);
        writer_->free(sqrt_slot);
        if (previous_denom != UINT32_MAX) writer_->free(previous_denom);
        previous_denom = denom_slot;
      }
      if (previous_denom != UINT32_MAX) writer_->free(previous_denom);
      return;
    }
  }
}

void OptimizerModel::adafactor_temporaries(const std::vector<size_t>& params) {
  // The single-tensor loop (the default) builds the full-size variance estimate per
  // parameter; foreach keeps one per parameter alive together ("~ sizeof(params) more").
  std::vector<uint32_t> slots;
  for (size_t p : params) {
    uint64_t bytes = params_[p].numel * dtype_bytes(params_[p].dtype);
    slots.push_back(writer_->alloc(state_name(p, ".var_estimate"), bytes, TensorCategory::Temporary));
    if (config_.impl != OptimizerImpl::Foreach) {
      writer_->free(slots.back());
      slots.pop_back();
    }
  }
  for (uint32_t slot : slots) writer_->free(slot);
}

void OptimizerModel::step(const std::vector<uint8_t>& has_grad) {
  std::vector<size_t> stepping;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (has_grad[p]) stepping.push_back(p);
  }
  // Master weights: the 16-bit grads are copied to fp32 grads of the masters for the step.
  std::vector<uint32_t> master_grads;
  if (precision_.fp32_master_weights) {
    for (size_t p : stepping) {
      master_grads.push_back(
          writer_->alloc(state_name(p, ".master_grad_fp32"), params_[p].numel * 4, TensorCategory::Temporary));
    }
  }
  for (size_t p : stepping) {
    if (!initialized_[p]) {
      initialized_[p] = 1;
      init_state(p);
    }
  }
  // A compiled step (compile scope optimizer) is one inductor graph whose kernels update the
  // parameters and states in place: no parameter-sized temporaries (validate/compiled/
  // gpt-optimizer.yaml measures none after the first call). The states are created as eagerly.
  if (config_.compiled_step) {
    for (uint32_t slot : master_grads) writer_->free(slot);
    return;
  }
  switch (config_.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      adam_temporaries(stepping);
      break;
    case OptimizerType::Adafactor:
      adafactor_temporaries(stepping);
      break;
    case OptimizerType::Sgd:
    case OptimizerType::AdamW8bit:
      break;  // in-place updates
  }
  for (uint32_t slot : master_grads) writer_->free(slot);
}

}  // namespace oomcast::planner
