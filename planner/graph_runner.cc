// GraphRunner: reference counting of storages and gradients over one forward/backward.
// The rules are ../shared/docs/training-memory-model.md §1: saved tensors die after their node's backward,
// Python references at the last use (or scope end), gradients are summed in place, .grad
// steals the first incoming buffer and accumulates in place afterwards.
#include "planner/graph_runner.h"
#include "planner/op_reads.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace oomcast::planner {

namespace {
// torch.get_rng_state(): the CPU generator's state (mt19937 and the normal-sampling cache) as a
// uint8 tensor; 5,056 B in the captures (validate/ vit-tiny-amp-ckpt: one per checkpointed block).
constexpr uint64_t kCpuRngStateBytes = 5056;
constexpr uint32_t kNoSlot = UINT32_MAX;
}  // namespace

GraphRunner::GraphRunner(const LayerGraph& graph, ExecutionOrder order, const CheckpointPlan& checkpoints,
                         ModelState* model, ScheduleWriter* writer, const std::vector<std::string>& caller_held)
    : graph_(graph), order_(std::move(order)), checkpoints_(checkpoints), model_(model), writer_(writer) {
  const size_t num_tensors = graph_.tensors.size();
  release_at_.resize(order_.order.size());
  held_.assign(num_tensors, 0);
  caller_keeps_.assign(num_tensors, 0);
  for (const auto& [output_name, tensor] : graph_.named_outputs) {
    held_[tensor] = 1;
    if (std::find(caller_held.begin(), caller_held.end(), output_name) != caller_held.end()) caller_keeps_[tensor] = 1;
  }
  if (graph_.loss != kNoTensor) held_[graph_.loss] = 1;  // loss.backward() needs it
  for (uint32_t position = 0; position < order_.order.size(); ++position) {
    for (TensorId out : graph_.ops[order_.order[position]].outputs) {
      if (!is_tracked(out) || held_[out]) continue;
      int32_t last = order_.last_use[out];
      release_at_[static_cast<size_t>(last >= 0 ? last : static_cast<int32_t>(position))].push_back(out);
    }
  }
  parameter_uses_.assign(graph_.parameters.size(), 0);
  for (const OpNode& op : graph_.ops) {
    if (!op.records_grad_node) continue;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorDesc& desc = graph_.tensors[op.inputs[i]];
      if (desc.parameter >= 0 && op.input_grads[i] != GradRule::None) ++parameter_uses_[static_cast<size_t>(desc.parameter)];
    }
  }
  graph_leaf_.assign(num_tensors, 0);
  for (const OpNode& op : graph_.ops) {
    if (op.records_grad_node) continue;
    for (TensorId out : op.outputs) {
      if (graph_.tensors[out].requires_grad && is_tracked(out)) graph_leaf_[out] = 1;
    }
  }
  unit_external_kept_.resize(static_cast<size_t>(graph_.num_units));
  unit_internal_kept_.resize(static_cast<size_t>(graph_.num_units));
  internal_kept_unit_.assign(num_tensors, -1);
  std::vector<int32_t> producer_unit(num_tensors, -2);
  for (const OpNode& op : graph_.ops) {
    for (TensorId out : op.outputs) producer_unit[out] = op.unit;
  }
  for (size_t unit = 0; unit < checkpoints_.unit_kept.size(); ++unit) {
    for (TensorId tensor : checkpoints_.unit_kept[unit]) {
      if (producer_unit[tensor] == static_cast<int32_t>(unit)) {
        internal_kept_unit_[tensor] = static_cast<int32_t>(unit);
        unit_internal_kept_[unit].push_back(tensor);
      } else {
        unit_external_kept_[unit].push_back(tensor);
      }
    }
  }
  slot_.assign(num_tensors, kNoSlot);
  kept_by_caller_.assign(num_tensors, 0);
  recompute_ref_.assign(num_tensors, 0);
  refs_.assign(num_tensors, 0);
  grad_of_.assign(num_tensors, -1);
  grad_name_cache_.assign(num_tensors, 0);
  saved_acquired_.resize(graph_.ops.size());
  dropped_savers_.resize(num_tensors);
  for (uint32_t op = 0; op < graph_.ops.size(); ++op) {
    saved_acquired_[op].assign(graph_.ops[op].saved.size(), 0);
    const std::vector<uint8_t>& dropped = checkpoints_.saved_dropped[op];
    for (uint32_t i = 0; i < dropped.size(); ++i) {
      if (dropped[i]) dropped_savers_[graph_.tensors[graph_.ops[op].saved[i]].storage].emplace_back(op, i);
    }
  }
  unit_recomputed_.assign(static_cast<size_t>(graph_.num_units), 0);
  unit_rng_state_slot_.assign(static_cast<size_t>(graph_.num_units), -1);
  unit_held_outputs_.resize(static_cast<size_t>(graph_.num_units));
  parameter_buffer_.assign(graph_.parameters.size(), -1);
  parameter_pending_.assign(graph_.parameters.size(), 0);
}

bool GraphRunner::is_tracked(TensorId tensor) const {
  TensorRole role = graph_.tensors[graph_.tensors[tensor].storage].role;
  return role == TensorRole::Activation || role == TensorRole::AutocastWeight;
}

void GraphRunner::acquire(TensorId tensor) {
  TensorId storage = graph_.tensors[tensor].storage;
  if (!is_tracked(storage)) return;
  ++refs_[storage];
}

void GraphRunner::release(TensorId tensor) {
  TensorId storage = graph_.tensors[tensor].storage;
  if (!is_tracked(storage)) return;
  if (refs_[storage] == 0) throw std::logic_error("planner released a dead tensor: " + graph_.names[graph_.tensors[tensor].name]);
  if (--refs_[storage] == 0) {
    if (!kept_by_caller_[storage]) writer_->free(slot_[storage]);
    kept_by_caller_[storage] = 0;
    slot_[storage] = kNoSlot;
  }
}

uint32_t GraphRunner::keep_storage(TensorId tensor) {
  TensorId storage = graph_.tensors[tensor].storage;
  if (!is_tracked(storage) || slot_[storage] == kNoSlot) return UINT32_MAX;
  kept_by_caller_[storage] = 1;
  return slot_[storage];
}

void GraphRunner::alloc_output(TensorId tensor, bool reuse_live) {
  const TensorDesc& desc = graph_.tensors[tensor];
  if (!is_tracked(tensor)) return;
  if (desc.owns_storage(tensor)) {
    if (slot_[tensor] != kNoSlot) {
      if (!reuse_live) throw std::logic_error("planner allocated a live tensor twice: " + graph_.names[desc.name]);
    } else {
      slot_[tensor] = writer_->alloc(name(desc.name), desc.bytes(), TensorCategory::Activation);
    }
  }
  acquire(tensor);
}

void GraphRunner::run_transients(const std::vector<Transient>& transients, bool after_outputs,
                                 std::vector<uint32_t>* slots) {
  for (const Transient& transient : transients) {
    if (transient.after_outputs != after_outputs) continue;
    slots->push_back(writer_->alloc(name(transient.name), transient.bytes, TensorCategory::Temporary));
  }
}

void GraphRunner::free_early_transients(const std::vector<Transient>& transients, std::vector<uint32_t>* slots) {
  size_t next = 0;
  size_t kept = 0;
  for (const Transient& transient : transients) {
    if (transient.after_outputs) continue;
    const uint32_t slot = (*slots)[next++];
    if (transient.dies_before_outputs) {
      writer_->free(slot);
    } else {
      (*slots)[kept++] = slot;
    }
  }
  slots->resize(kept);
}

void GraphRunner::maybe_workspace(bool backward_thread) {
  if (!model_->gpu_workspaces || model_->workspaces_created >= model_->workspace_count) return;
  bool& has = backward_thread ? model_->backward_workspace : model_->forward_workspace;
  if (has) return;
  has = true;
  ++model_->workspaces_created;
  writer_->alloc(writer_->intern(backward_thread ? "cublas_workspace.autograd_thread" : "cublas_workspace.main_thread"),
                 model_->workspace_bytes, TensorCategory::Workspace);
}

void GraphRunner::run_forward_op(uint32_t op_index, int32_t position) {
  const OpNode& op = graph_.ops[op_index];
  writer_->set_op(name(op.name));
  if (op.uses_cublas) maybe_workspace(false);
  if (op.unit >= 0 && checkpoints_.unit_checkpointed[static_cast<size_t>(op.unit)] &&
      position == checkpoints_.unit_first_position[static_cast<size_t>(op.unit)]) {
    for (TensorId tensor : unit_external_kept_[static_cast<size_t>(op.unit)]) acquire(tensor);
    // torch.utils.checkpoint (preserve_rng_state=True, every device) keeps
    // fwd_cpu_state = torch.get_rng_state(), the CPU generator's state. The reentrant kind keeps
    // it as a plain ctx attribute: it lives as long as the graph (the caller's loss), not until
    // the backward. The non-reentrant kind keeps it in the recompute closure of its frame, which
    // goes with the block's saved inputs at the end of the block's backward (measured: validate/
    // scenarios/llama-tiny-amp-ckpt-nonreentrant.yaml, torch 2.13).
    const uint32_t state = writer_->alloc(writer_->intern("checkpoint.fwd_cpu_state"), kCpuRngStateBytes,
                                          TensorCategory::Activation);
    const auto unit = static_cast<size_t>(op.unit);
    if (checkpoints_.unit_reentrant[unit]) {
      rng_state_slots_.push_back(state);
    } else {
      if (unit_rng_state_slot_[unit] >= 0) writer_->free(static_cast<uint32_t>(unit_rng_state_slot_[unit]));
      unit_rng_state_slot_[unit] = state;
    }
  }
  std::vector<uint32_t>& transients = transient_slots_;
  transients.clear();
  run_transients(op.forward_transients, false, &transients);
  free_early_transients(op.forward_transients, &transients);
  for (TensorId out : op.outputs) alloc_output(out, false);
  for (TensorId out : op.outputs) {
    if (!graph_leaf_[out]) continue;
    acquire(out);
    leaves_held_.push_back(out);
  }
  if (op.records_grad_node && grad_mode_run_) {
    const std::vector<uint8_t>& dropped = checkpoints_.saved_dropped[op_index];
    for (size_t i = 0; i < op.saved.size(); ++i) {
      // An offloaded tensor's pack hook keeps a host copy: autograd holds no device storage.
      if (!dropped[i] && !offloaded(op_index, i)) {
        acquire(op.saved[i]);
        saved_acquired_[op_index][i] = 1;
      }
    }
  }
  for (TensorId out : op.outputs) {
    if (internal_kept_unit_[out] >= 0) acquire(out);
  }
  run_transients(op.forward_transients, true, &transients);
  for (uint32_t slot : transients) writer_->free(slot);
  for (TensorId tensor : release_at_[static_cast<size_t>(position)]) release(tensor);
}

void GraphRunner::end_unit_backward(size_t unit) {
  for (TensorId tensor : unit_held_outputs_[unit]) release(tensor);
  unit_held_outputs_[unit].clear();
  free_unit_rng_state(unit);
}

void GraphRunner::free_unit_rng_state(size_t unit) {
  if (unit_rng_state_slot_[unit] < 0) return;
  writer_->free(static_cast<uint32_t>(unit_rng_state_slot_[unit]));
  unit_rng_state_slot_[unit] = -1;
}

void GraphRunner::forward() { forward(std::function<void()>{}); }

void GraphRunner::forward(const std::function<void()>& model_returned) {
  grad_mode_run_ = true;
  rng_state_slots_.clear();
  auto logits = graph_.named_outputs.find("logits");
  const TensorId model_output = logits == graph_.named_outputs.end() ? kNoTensor : logits->second;
  bool returned = !model_returned;
  for (uint32_t position = 0; position < order_.order.size(); ++position) {
    const OpNode& op = graph_.ops[order_.order[position]];
    if (model_->hooks) model_->hooks->before_forward_op(order_.order[position]);
    run_forward_op(order_.order[position], static_cast<int32_t>(position));
    if (model_->hooks) model_->hooks->after_forward_op(order_.order[position]);
    if (!returned && std::find(op.outputs.begin(), op.outputs.end(), model_output) != op.outputs.end()) {
      returned = true;
      model_returned();
    }
  }
  if (!returned) model_returned();
  // The caller drops the outputs it does not bind (`loss = model(x, y)[1]`) as the forward
  // returns; what their grad nodes saved stays (capture llama-tiny-sgd-dropout: the logits
  // are freed right after the loss, before backward).
  dropped_.assign(graph_.tensors.size(), 0);
  for (const auto& [output_name, tensor] : graph_.named_outputs) {
    if (caller_keeps_[tensor] || tensor == graph_.loss) continue;
    TensorId storage = graph_.tensors[tensor].storage;
    if (!is_tracked(storage) || slot_[storage] == kNoSlot) continue;
    release(tensor);
    dropped_[tensor] = 1;
  }
}

void GraphRunner::recompute_unit(size_t unit) {
  unit_recomputed_[unit] = 1;
  // CheckpointFunction.backward recomputes inside torch.random.fork_rng, which keeps a copy of
  // the current CPU RNG state until the recomputed forward returns.
  writer_->set_op(writer_->intern("checkpoint.fork_rng"));
  uint32_t fork_state = writer_->alloc(writer_->intern("checkpoint.fork_rng_state"), kCpuRngStateBytes,
                                       TensorCategory::Temporary);
  std::vector<TensorId> release_at_end;
  auto first = static_cast<uint32_t>(checkpoints_.unit_first_position[unit]);
  auto stop = checkpoints_.unit_recompute_stop[unit];
  for (uint32_t position = first; static_cast<int32_t>(position) <= stop; ++position) {
    uint32_t op_index = order_.order[position];
    if (!checkpoints_.recomputed[op_index]) continue;
    const OpNode& op = graph_.ops[op_index];
    writer_->set_op(name(op.name));
    std::vector<uint32_t>& transients = transient_slots_;
    transients.clear();
    run_transients(op.forward_transients, false, &transients);
    free_early_transients(op.forward_transients, &transients);
    for (TensorId out : op.outputs) {
      alloc_output(out, /*reuse_live=*/true);
      recompute_ref_[out] = is_tracked(out) ? 1 : 0;
      // Every node of the block that saved this tensor (and had it dropped) gets it back.
      if (!graph_.tensors[out].owns_storage(out)) continue;
      for (const auto& [saver, index] : dropped_savers_[out]) {
        if (saved_acquired_[saver][index]) continue;
        acquire(graph_.ops[saver].saved[index]);
        saved_acquired_[saver][index] = 1;
      }
    }
    run_transients(op.forward_transients, true, &transients);
    for (uint32_t slot : transients) writer_->free(slot);
    // Program references of the recomputed tensors end at their last recomputed read.
    for_each_read(op, [&](TensorId in) {
      if (checkpoints_.recompute_last_use[in] == static_cast<int32_t>(position) && recompute_ref_[in]) {
        recompute_ref_[in] = 0;
        release(in);
      }
    });
    for (TensorId out : op.outputs) {
      if (!is_tracked(out)) continue;
      int32_t last = checkpoints_.recompute_last_use[out];
      if (last == INT32_MAX) {
        release_at_end.push_back(out);
      } else if (last < static_cast<int32_t>(position)) {
        recompute_ref_[out] = 0;
        release(out);
      }
    }
  }
  for (TensorId tensor : release_at_end) {
    if (!recompute_ref_[tensor]) continue;
    recompute_ref_[tensor] = 0;
    if (checkpoints_.unit_reentrant[unit] && graph_.tensors[tensor].role == TensorRole::Activation) {
      // CheckpointFunction.backward holds the recomputed block outputs (its `outputs`) until
      // its torch.autograd.backward over them returns: the end of the block's backward.
      unit_held_outputs_[unit].push_back(tensor);
      continue;
    }
    release(tensor);
  }
  // Selective checkpointing: SAC's cache entries are consumed by the recompute.
  for (TensorId tensor : unit_internal_kept_[unit]) release(tensor);
  writer_->free(fork_state);
}

uint32_t GraphRunner::grad_name(TensorId tensor) {
  uint32_t& cached = grad_name_cache_[tensor];
  if (cached == 0) cached = writer_->intern("grad:" + graph_.names[graph_.tensors[tensor].name]);
  return cached;
}

int32_t GraphRunner::new_grad(TensorId tensor, TensorCategory category) {
  uint32_t slot = writer_->alloc(grad_name(tensor), graph_.tensors[tensor].bytes(), category);
  grads_.push_back(GradBuffer{slot, 1});
  return static_cast<int32_t>(grads_.size() - 1);
}

void GraphRunner::release_grad(int32_t grad) {
  GradBuffer& buffer = grads_[static_cast<size_t>(grad)];
  if (buffer.refs == 0) throw std::logic_error("planner released a dead gradient");
  if (--buffer.refs == 0 && buffer.slot != kNoSlot) {
    if (buffer.sent) {
      sent_grad_slots_.push_back(buffer.slot);
    } else {
      writer_->free(buffer.slot);
    }
  }
}

void GraphRunner::release_saved(uint32_t op_index) {
  const OpNode& op = graph_.ops[op_index];
  std::vector<uint8_t>& acquired = saved_acquired_[op_index];
  for (size_t i = 0; i < op.saved.size(); ++i) {
    if (!acquired[i]) continue;
    acquired[i] = 0;
    release(op.saved[i]);
  }
}

void GraphRunner::finalize_parameter(int32_t parameter) {
  auto index = static_cast<size_t>(parameter);
  int32_t buffer = parameter_buffer_[index];
  if (buffer < 0) return;
  parameter_buffer_[index] = -1;
  if (model_->grad_slot[index] >= 0) {
    release_grad(buffer);  // .grad += new_grad, in place
  } else {
    model_->grad_slot[index] = grads_[static_cast<size_t>(buffer)].slot;  // AccumulateGrad steals it
    grads_[static_cast<size_t>(buffer)].refs = 0;
  }
  if (model_->hooks) model_->hooks->parameter_grad_ready(parameter);
}

void GraphRunner::deliver_parameter_grad(int32_t parameter, int32_t grad) {
  auto index = static_cast<size_t>(parameter);
  // Several uses of one parameter (tied embeddings) sum in AccumulateGrad's input buffer,
  // which runs once every use has delivered.
  if (parameter_buffer_[index] < 0) {
    parameter_buffer_[index] = grad;
  } else {
    release_grad(grad);
  }
  if (--parameter_pending_[index] <= 0) finalize_parameter(parameter);
}

void GraphRunner::run_backward_node(uint32_t op_index) {
  const OpNode& op = graph_.ops[op_index];
  bool reached = false;
  for (TensorId out : op.outputs) reached = reached || grad_of_[out] >= 0;
  if (!reached) return;  // no gradient flows here; saved tensors go with the graph at the end
  writer_->set_op(name(op.name));
  if (!op.backward_program.empty()) {
    run_backward_program(op_index);
    return;
  }
  if (op.uses_cublas) maybe_workspace(true);
  // The node's apply() unpacks its saved tensors first: an offloaded one comes back as a new
  // device tensor (.to(device)), a local of apply() that dies as it returns.
  std::vector<uint32_t>& unpacked = unpacked_slots_;
  unpacked.clear();
  for (size_t i = 0; i < op.saved.size(); ++i) {
    if (!offloaded(op_index, i)) continue;
    const TensorDesc& desc = graph_.tensors[op.saved[i]];
    unpacked.push_back(writer_->alloc(name(desc.name), desc.bytes(), TensorCategory::Activation));
  }
  std::vector<uint32_t>& transients = transient_slots_;
  transients.clear();
  run_transients(op.backward_transients, false, &transients);
  free_early_transients(op.backward_transients, &transients);
  std::vector<std::pair<TensorId, int32_t>>& produced = produced_;
  produced.clear();
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    TensorId in = op.inputs[i];
    const TensorDesc& desc = graph_.tensors[in];
    GradRule rule = op.input_grads[i];
    if (!desc.requires_grad || rule == GradRule::None) continue;
    if (desc.parameter >= 0) rule = GradRule::New;
    if (rule == GradRule::New) {
      TensorCategory category = TensorCategory::Temporary;
      if (desc.parameter >= 0) {
        auto p = static_cast<size_t>(desc.parameter);
        if (model_->grad_slot[p] < 0 && parameter_buffer_[p] < 0) category = TensorCategory::Gradient;
      }
      produced.emplace_back(in, new_grad(in, category));
    } else {
      int32_t incoming = grad_of_[op.outputs[0]];
      if (incoming < 0) continue;
      ++grads_[static_cast<size_t>(incoming)].refs;
      produced.emplace_back(in, incoming);
    }
  }
  run_transients(op.backward_transients, true, &transients);
  for (uint32_t slot : transients) writer_->free(slot);
  for (uint32_t slot : unpacked) writer_->free(slot);
  // The node returns: its incoming gradients drop, then release_variables() frees what it saved.
  for (TensorId out : op.outputs) {
    if (grad_of_[out] >= 0) {
      release_grad(grad_of_[out]);
      grad_of_[out] = -1;
    }
  }
  release_saved(op_index);
  deliver_input_grads(produced);
}

void GraphRunner::deliver_input_grads(const std::vector<std::pair<TensorId, int32_t>>& produced) {
  for (const auto& [in, grad] : produced) {
    const TensorDesc& desc = graph_.tensors[in];
    if (desc.parameter >= 0) {
      deliver_parameter_grad(desc.parameter, grad);
    } else if (grad_of_[in] >= 0) {
      release_grad(grad);  // InputBuffer adds the second contribution in place
    } else {
      grad_of_[in] = grad;
    }
  }
}

void GraphRunner::backward() {
  if (graph_.loss == kNoTensor) throw std::logic_error("graph has no loss");
  grads_.clear();
  for (size_t p = 0; p < parameter_pending_.size(); ++p) parameter_pending_[p] = parameter_uses_[p];
  writer_->set_op(writer_->intern("loss.backward"));
  if (output_grad_received_) {
    grads_.push_back(GradBuffer{kNoSlot, 1});  // the stage's receive buffer, not this step's to free
    grad_of_[graph_.loss] = static_cast<int32_t>(grads_.size() - 1);
  } else {
    grad_of_[graph_.loss] = new_grad(graph_.loss, TensorCategory::Temporary);  // ones_like(loss)
  }
  for (int32_t position = static_cast<int32_t>(order_.order.size()) - 1; position >= 0; --position) {
    uint32_t op_index = order_.order[static_cast<size_t>(position)];
    const OpNode& op = graph_.ops[op_index];
    bool checkpointed = op.unit >= 0 && checkpoints_.unit_checkpointed[static_cast<size_t>(op.unit)];
    bool recomputes = checkpointed && !unit_recomputed_[static_cast<size_t>(op.unit)];
    if (model_->hooks) model_->hooks->before_backward_op(op_index, recomputes);
    if (recomputes) recompute_unit(static_cast<size_t>(op.unit));
    if (op.records_grad_node) run_backward_node(op_index);
    if (model_->hooks) model_->hooks->after_backward_op(op_index);
    if (checkpointed && position == checkpoints_.unit_first_position[static_cast<size_t>(op.unit)]) {
      end_unit_backward(static_cast<size_t>(op.unit));
      for (TensorId tensor : unit_external_kept_[static_cast<size_t>(op.unit)]) release(tensor);
    }
  }
  // The graph is gone after backward: nodes that were never reached free their saved tensors.
  for (uint32_t op_index = 0; op_index < graph_.ops.size(); ++op_index) release_saved(op_index);
  if (input_grad_sent_) {
    // The received inputs' gradients go to the send, which outlives backward.
    for (TensorId input : graph_.inputs) {
      if (grad_of_[input] >= 0) grads_[static_cast<size_t>(grad_of_[input])].sent = true;
    }
  }
  for (TensorId tensor = 0; tensor < grad_of_.size(); ++tensor) {
    if (grad_of_[tensor] >= 0 && graph_leaf_[tensor]) {
      // AccumulateGrad of a leaf activation: the gradient becomes its .grad.
      GradBuffer& buffer = grads_[static_cast<size_t>(grad_of_[tensor])];
      if (buffer.refs == 1 && buffer.slot != kNoSlot) {
        buffer.refs = 0;
        leaf_grad_slots_.push_back(buffer.slot);
      } else {
        release_grad(grad_of_[tensor]);
      }
      grad_of_[tensor] = -1;
    } else if (grad_of_[tensor] >= 0) {
      release_grad(grad_of_[tensor]);
      grad_of_[tensor] = -1;
    }
  }
  for (size_t p = 0; p < parameter_buffer_.size(); ++p) finalize_parameter(static_cast<int32_t>(p));
  std::fill(unit_recomputed_.begin(), unit_recomputed_.end(), 0);
}

std::vector<std::pair<std::string, uint32_t>> GraphRunner::finish_step() {
  std::vector<std::pair<std::string, uint32_t>> kept;
  for (const auto& [output_name, tensor] : graph_.named_outputs) {
    TensorId storage = graph_.tensors[tensor].storage;
    if (!is_tracked(storage) || slot_[storage] == kNoSlot) continue;
    if (tensor < dropped_.size() && dropped_[tensor]) continue;
    if (caller_keeps_[tensor] && refs_[storage] == 1) {
      kept.emplace_back(output_name, slot_[storage]);
      slot_[storage] = kNoSlot;
      refs_[storage] = 0;
    } else {
      release(tensor);
    }
  }
  if (graph_.loss != kNoTensor && graph_.named_outputs.count("loss") == 0) release(graph_.loss);
  // A non-reentrant frame whose backward did not run dies with the graph, as the reentrant ctx.
  for (int64_t& slot : unit_rng_state_slot_) {
    if (slot >= 0) rng_state_slots_.push_back(static_cast<uint32_t>(slot));
    slot = -1;
  }
  // The reentrant checkpoints' RNG states live with the graph: as long as the caller keeps the loss.
  bool loss_kept = std::any_of(kept.begin(), kept.end(), [](const auto& entry) { return entry.first == "loss"; });
  for (uint32_t slot : rng_state_slots_) {
    if (loss_kept) {
      kept.emplace_back("loss", slot);
    } else {
      writer_->free(slot);
    }
  }
  rng_state_slots_.clear();
  // Leaves held by the graph's AccumulateGrad nodes, and their .grad, go with the loss too.
  for (TensorId leaf : leaves_held_) {
    TensorId storage = graph_.tensors[leaf].storage;
    if (loss_kept && refs_[storage] == 1) {
      kept.emplace_back("loss", slot_[storage]);
      slot_[storage] = kNoSlot;
      refs_[storage] = 0;
    } else {
      release(leaf);
    }
  }
  leaves_held_.clear();
  for (uint32_t slot : leaf_grad_slots_) {
    if (loss_kept) {
      kept.emplace_back("loss", slot);
    } else {
      writer_->free(slot);
    }
  }
  leaf_grad_slots_.clear();
  for (uint32_t slot : sent_grad_slots_) kept.emplace_back("input_grad", slot);
  sent_grad_slots_.clear();
  return kept;
}

std::vector<uint32_t> GraphRunner::take_all_live() {
  std::vector<uint32_t> live;
  for (TensorId tensor = 0; tensor < slot_.size(); ++tensor) {
    if (slot_[tensor] != kNoSlot && !kept_by_caller_[tensor]) live.push_back(slot_[tensor]);
    kept_by_caller_[tensor] = 0;
    slot_[tensor] = kNoSlot;
    refs_[tensor] = 0;
  }
  for (auto& acquired : saved_acquired_) std::fill(acquired.begin(), acquired.end(), 0);
  leaves_held_.clear();
  for (uint32_t slot : leaf_grad_slots_) live.push_back(slot);
  leaf_grad_slots_.clear();
  return live;
}

std::vector<uint32_t> GraphRunner::take_step_outputs() {
  std::vector<uint32_t> outputs;
  for (const auto& [name, slot] : finish_step()) outputs.push_back(slot);
  for (uint32_t slot : take_all_live()) outputs.push_back(slot);
  return outputs;
}

}  // namespace oomcast::planner
