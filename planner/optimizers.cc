// Optimizer state and step temporaries, per ../shared/docs/training-memory-model.md §6.
#include "planner/optimizers.h"

#include <algorithm>

#include "planner/torch_release_facts.h"
#include "planner/trainable_policy.h"

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
    case OptimizerType::Muon:
      if (muon_parameter(p)) {
        // Muon._init_group: momentum_buffer = torch.zeros_like(p.grad).
        writer_->alloc(state_name(p, ".momentum_buffer"), bytes, TensorCategory::OptimizerState);
        break;
      }
      [[fallthrough]];  // the AdamW beside it
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
    case OptimizerType::AnyPrecisionAdamW:
      // State initialization: step (a CPU tensor), exp_avg (momentum_dtype), exp_avg_sq
      // (variance_dtype), compensation (compensation_buffer_dtype) with Kahan summation.
      writer_->alloc(state_name(p, ".exp_avg"), param.numel * (config_.momentum_fp32 ? 4 : 2), TensorCategory::OptimizerState);
      writer_->alloc(state_name(p, ".exp_avg_sq"), param.numel * (config_.variance_fp32 ? 4 : 2),
                     TensorCategory::OptimizerState);
      if (config_.kahan_summation) {
        writer_->alloc(state_name(p, ".compensation"), param.numel * (config_.compensation_fp32 ? 4 : 2),
                       TensorCategory::OptimizerState);
      }
      break;
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

bool OptimizerModel::muon_parameter(size_t p) const {
  if (config_.type != OptimizerType::Muon || params_[p].shape.size() != 2) return false;
  const std::string& name = writer_->names_of(params_[p].name);
  return std::none_of(config_.adamw_params.begin(), config_.adamw_params.end(),
                      [&](const std::string& pattern) { return name_matches(pattern, name); });
}

void OptimizerModel::cpu_bf16_gemm(size_t p, uint64_t m, uint64_t n, uint64_t k) {
  // oneDNN's fp32 result of a bf16 GEMM on the CPU (planner/ops/cpu_gemm_buffer.h): after the
  // bf16 output, freed before the op returns, for m·n·k > 16³.
  if (precision_.autocast_device != AutocastDevice::Cpu || m * n * k <= 4096) return;
  writer_->free(writer_->alloc(state_name(p, ".gemm_fp32_result"), m * n * 4 + 128, TensorCategory::Temporary));
}

void OptimizerModel::muon_step(const std::vector<size_t>& params) {
  // torch 2.13 _single_tensor_muon, per parameter: buf.lerp_(grad) in place; update =
  // grad.lerp(buf, momentum) with nesterov (a new tensor; rebinding it frees the previous
  // parameter's update); _zeropower_via_newtonschulz: X = update.bfloat16() (a copy unless
  // bf16), transposed to [m, n] with m <= n (a view), then ns_steps times gram = X @ X.T [m, m],
  // gram_update = addmm(gram, gram, gram) [m, m], X = addmm(X, gram_update, X) [m, n], each name
  // rebound (the new tensor before the old one dies); the grams die as it returns, the nesterov
  // tensor as `update` takes the result. param.add_(update) with a bf16 update and a wider
  // parameter copies the update to the parameter's dtype on the CPU (TensorIterator's input
  // promotion; CUDA kernels cast as they read).
  uint32_t previous_update = UINT32_MAX;
  for (size_t p : params) {
    const OptimizerParameter& param = params_[p];
    const uint64_t rows = static_cast<uint64_t>(param.shape[0]);
    const uint64_t cols = static_cast<uint64_t>(param.shape[1]);
    const uint64_t m = std::min(rows, cols);
    const uint64_t n = std::max(rows, cols);
    const uint64_t grad_bytes = param.numel * dtype_bytes(param.dtype);
    uint32_t nesterov = UINT32_MAX;
    if (config_.nesterov) nesterov = writer_->alloc(state_name(p, ".muon_nesterov"), grad_bytes, TensorCategory::Temporary);
    if (previous_update != UINT32_MAX) writer_->free(previous_update);
    uint32_t x = UINT32_MAX;  // the bf16 copy (owned here) or the update itself
    if (param.dtype != DType::BFloat16) x = writer_->alloc(state_name(p, ".muon_bf16"), param.numel * 2, TensorCategory::Temporary);
    uint32_t gram = UINT32_MAX;
    uint32_t gram_update = UINT32_MAX;
    for (int64_t step = 0; step < config_.ns_steps; ++step) {
      const uint32_t next_gram = writer_->alloc(state_name(p, ".muon_gram"), m * m * 2, TensorCategory::Temporary);
      cpu_bf16_gemm(p, m, m, n);
      if (gram != UINT32_MAX) writer_->free(gram);
      gram = next_gram;
      const uint32_t next_update = writer_->alloc(state_name(p, ".muon_gram_update"), m * m * 2, TensorCategory::Temporary);
      cpu_bf16_gemm(p, m, m, m);
      if (gram_update != UINT32_MAX) writer_->free(gram_update);
      gram_update = next_update;
      const uint32_t next_x = writer_->alloc(state_name(p, ".muon_orthogonalized"), m * n * 2, TensorCategory::Temporary);
      cpu_bf16_gemm(p, m, n, m);
      if (x != UINT32_MAX) writer_->free(x);
      x = next_x;
    }
    if (gram != UINT32_MAX) writer_->free(gram);
    if (gram_update != UINT32_MAX) writer_->free(gram_update);
    if (nesterov != UINT32_MAX) writer_->free(nesterov);
    if (param.dtype != DType::BFloat16 && precision_.autocast_device == AutocastDevice::Cpu) {
      writer_->free(writer_->alloc(state_name(p, ".muon_update_promoted"), grad_bytes, TensorCategory::Temporary));
    }
    previous_update = x;
  }
  if (previous_update != UINT32_MAX) writer_->free(previous_update);
}

void OptimizerModel::anyprecision_temporaries(const std::vector<size_t>& params) {
  // Per parameter: centered_variance = (exp_avg_sq.sqrt() / denom_correction).add_(eps) in the
  // variance dtype, and with Kahan summation temp_buffer = p.detach().clone(); both are loop
  // locals, freed when the next parameter rebinds them (the last ones when step returns).
  const uint64_t variance = config_.variance_fp32 ? 4 : 2;
  uint32_t previous_variance = UINT32_MAX;
  uint32_t previous_clone = UINT32_MAX;
  for (size_t p : params) {
    // Its state is made inside the loop, as the parameter is reached (len(state) == 0).
    if (!initialized_[p]) {
      initialized_[p] = 1;
      init_state(p);
    }
    const uint32_t sqrt = writer_->alloc(state_name(p, ".sqrt"), params_[p].numel * variance, TensorCategory::Temporary);
    const uint32_t centred = writer_->alloc(state_name(p, ".centered_variance"), params_[p].numel * variance, TensorCategory::Temporary);
    writer_->free(sqrt);
    if (previous_variance != UINT32_MAX) writer_->free(previous_variance);
    previous_variance = centred;
    if (config_.kahan_summation) {
      const uint32_t clone = writer_->alloc(state_name(p, ".kahan_temp_buffer"),
                                            params_[p].numel * dtype_bytes(params_[p].dtype), TensorCategory::Temporary);
      if (previous_clone != UINT32_MAX) writer_->free(previous_clone);
      previous_clone = clone;
    }
  }
  if (previous_variance != UINT32_MAX) writer_->free(previous_variance);
  if (previous_clone != UINT32_MAX) writer_->free(previous_clone);
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
  if (config_.type == OptimizerType::Muon) {
    // muon.step() (its states made in _init_group first), then the AdamW's step.
    std::vector<size_t> muon;
    std::vector<size_t> adamw;
    for (size_t p : stepping) (muon_parameter(p) ? muon : adamw).push_back(p);
    for (const std::vector<size_t>* group : {&muon, &adamw}) {
      for (size_t p : *group) {
        if (!initialized_[p]) {
          initialized_[p] = 1;
          init_state(p);
        }
      }
      if (group == &muon) {
        muon_step(muon);
      } else {
        adam_temporaries(adamw);
      }
    }
    for (uint32_t slot : master_grads) writer_->free(slot);
    return;
  }
  for (size_t p : stepping) {
    if (!initialized_[p] && config_.type != OptimizerType::AnyPrecisionAdamW) {
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
    case OptimizerType::AnyPrecisionAdamW:
      anyprecision_temporaries(stepping);
      break;
    case OptimizerType::Muon:  // stepped above
    case OptimizerType::Sgd:
    case OptimizerType::AdamW8bit:
      break;  // in-place updates
  }
  for (uint32_t slot : master_grads) writer_->free(slot);
}

}  // namespace oomcast::planner
