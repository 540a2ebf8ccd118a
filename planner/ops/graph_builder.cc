// GraphBuilder: names, tensors, ops, scopes, checkpoint units and the autocast cache.
#include "planner/ops/graph_builder.h"

#include <algorithm>

#include <stdexcept>

#include "planner/torch_release_facts.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::CheckpointMode;
using scenario::OpKind;

uint64_t shape_numel(const std::vector<int64_t>& shape) {
  uint64_t numel = 1;
  for (int64_t dim : shape) numel *= static_cast<uint64_t>(dim);
  return numel;
}

GraphBuilder::GraphBuilder(BuildContext context) : context_(context) {
  graph_.names.emplace_back();
  name_index_.emplace("", 0);
}

uint32_t GraphBuilder::intern(std::string_view text) {
  std::string key(text);
  auto [it, inserted] = name_index_.emplace(key, static_cast<uint32_t>(graph_.names.size()));
  if (inserted) graph_.names.push_back(std::move(key));
  return it->second;
}

void GraphBuilder::push_module(std::string_view name) {
  module_path_.emplace_back(name);
  module_prefix_.clear();
  for (const auto& part : module_path_) {
    module_prefix_ += part;
    module_prefix_ += '.';
  }
}

void GraphBuilder::pop_module() {
  module_path_.pop_back();
  module_prefix_.clear();
  for (const auto& part : module_path_) {
    module_prefix_ += part;
    module_prefix_ += '.';
  }
}

std::string GraphBuilder::qualified(std::string_view leaf) const {
  std::string name = module_prefix_;
  name += leaf;
  return name;
}

TensorId GraphBuilder::new_tensor(std::string_view leaf, uint64_t numel, DType dtype, TensorRole role) {
  auto id = static_cast<TensorId>(graph_.tensors.size());
  TensorDesc desc;
  desc.name = intern(qualified(leaf));
  desc.numel = numel;
  desc.dtype = dtype;
  desc.role = role;
  desc.storage = id;
  graph_.tensors.push_back(desc);
  return id;
}

TensorId GraphBuilder::parameter(std::string_view leaf, std::vector<int64_t> shape) {
  TensorId id = new_tensor(leaf, shape_numel(shape), context_.precision.parameter_dtype, TensorRole::Parameter);
  graph_.tensors[id].requires_grad =
      context_.job == nullptr || parameter_trainable(context_.job->training, graph_.names[graph_.tensors[id].name]);
  graph_.tensors[id].parameter = static_cast<int32_t>(graph_.parameters.size());
  graph_.parameters.push_back(id);
  graph_.parameter_shapes.push_back(std::move(shape));
  return id;
}

TensorId GraphBuilder::adapter_parameter(std::string_view leaf, std::vector<int64_t> shape, DType dtype) {
  graph_.first_adapter_parameter = std::min(graph_.first_adapter_parameter, graph_.parameters.size());
  TensorId id = new_tensor(leaf, shape_numel(shape), dtype, TensorRole::Parameter);
  graph_.tensors[id].requires_grad = true;
  graph_.tensors[id].parameter = static_cast<int32_t>(graph_.parameters.size());
  graph_.parameters.push_back(id);
  graph_.parameter_shapes.push_back(std::move(shape));
  return id;
}

void GraphBuilder::construction_temporary(std::string_view leaf, std::vector<int64_t> shape,
                                          std::optional<DType> dtype) {
  ConstructionTemporary temporary;
  temporary.name = intern(qualified(leaf));
  temporary.numel = shape_numel(shape);
  temporary.dtype = dtype;
  temporary.after_parameters = graph_.parameters.size();
  graph_.construction_temporaries.push_back(temporary);
}

TensorId GraphBuilder::buffer(std::string_view leaf, uint64_t numel, DType dtype) {
  TensorId id = new_tensor(leaf, numel, dtype, TensorRole::Buffer);
  graph_.buffers.push_back(id);
  return id;
}

TensorId GraphBuilder::input(std::string_view name, uint64_t numel, DType dtype) {
  TensorId id = new_tensor(name, numel, dtype, TensorRole::Input);
  graph_.inputs.push_back(id);
  return id;
}

TensorId GraphBuilder::activation(std::string_view leaf, uint64_t numel, DType dtype) {
  return new_tensor(leaf, numel, dtype, TensorRole::Activation);
}

TensorId GraphBuilder::view(TensorId base, std::string_view leaf, uint64_t numel) {
  TensorId id = new_tensor(leaf, numel, graph_.tensors[base].dtype, TensorRole::Activation);
  graph_.tensors[id].storage = graph_.tensors[base].storage;
  return id;
}

void GraphBuilder::storage_requires_grad(TensorId storage) {
  std::vector<uint8_t> rebased(graph_.tensors.size(), 0);
  for (size_t id = 0; id < graph_.tensors.size(); ++id) {
    TensorDesc& desc = graph_.tensors[id];
    if (desc.storage != storage || desc.requires_grad) continue;
    desc.requires_grad = true;
    rebased[id] = 1;
  }
  // Their producers (torch.zeros_like, a detach) now have a grad node in autograd's eyes (the
  // base's CopySlices), not leaves whose .grad backward would fill and keep.
  for (OpNode& op : graph_.ops) {
    if (op.records_grad_node) continue;
    for (TensorId out : op.outputs) {
      if (rebased[out]) op.records_grad_node = true;
    }
  }
}

OpNode& GraphBuilder::add_op(OpKind kind, std::string_view leaf, std::vector<TensorId> inputs,
                             std::vector<TensorId> outputs, std::vector<GradRule> input_grads) {
  if (input_grads.size() != inputs.size()) throw std::logic_error("add_op: one grad rule per input");
  OpNode op;
  op.kind = kind;
  op.name = intern(qualified(leaf));
  op.unit = current_unit_;
  bool any_input_requires_grad = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (graph_.tensors[inputs[i]].requires_grad && input_grads[i] != GradRule::None) any_input_requires_grad = true;
  }
  if (current_unit_ >= 0 && !unit_decided_ && kind != OpKind::ScopeEnd) {
    // CheckpointFunction.apply(block, x): under the reentrant checkpoint the block runs in
    // no_grad, and its output requires grad only if an argument (not a parameter) does.
    unit_decided_ = true;
    const CheckpointMode mode = context_.checkpoint_mode;
    const auto unit = static_cast<int64_t>(current_unit_);
    const LayerGraph::ModelCheckpoint model_checkpoint = graph_.unit_model_checkpoint[static_cast<size_t>(unit)];
    bool reentrant = model_checkpoint != LayerGraph::ModelCheckpoint::None
                         ? model_checkpoint == LayerGraph::ModelCheckpoint::Reentrant
                         : context_.checkpoint_reentrant &&
                               (mode == CheckpointMode::Full ||
                                (mode == CheckpointMode::EveryN &&
                                 (context_.checkpoint_every_n <= 1 || unit % context_.checkpoint_every_n == 0)));
    bool argument_requires_grad = false;
    for (TensorId in : inputs) {
      const TensorDesc& desc = graph_.tensors[graph_.tensors[in].storage];
      if (desc.role != TensorRole::Parameter && graph_.tensors[in].requires_grad) argument_requires_grad = true;
    }
    unit_grad_blocked_ = reentrant && context_.job != nullptr && context_.job->training.any_frozen() && !argument_requires_grad;
  }
  op.records_grad_node = context_.grad_enabled && any_input_requires_grad && kind != OpKind::ScopeEnd &&
                         !(current_unit_ >= 0 && unit_grad_blocked_);
  for (TensorId out : outputs) graph_.tensors[out].requires_grad = op.records_grad_node;
  if (kind == OpKind::Embedding && context_.input_require_grads && context_.grad_enabled && !inputs.empty() &&
      graph_.tensors[inputs[0]].role == TensorRole::Input) {
    for (TensorId out : outputs) graph_.tensors[out].requires_grad = true;  // output.requires_grad_(True)
  }
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.input_grads = std::move(input_grads);
  graph_.ops.push_back(std::move(op));
  return graph_.ops.back();
}

void GraphBuilder::finish_op(OpNode& op) {
  if (!op.records_grad_node) {
    op.saved.clear();
    op.backward_transients.clear();
    return;
  }
  // Before PyTorch 1.11 the backward formulas of softmax and log_softmax named their input as
  // well as their result, so autograd kept both (pytorch#64000, fixed by pytorch#65242): one
  // more score-sized tensor per eager attention, and the logits alive until backward.
  const bool softmax_like = op.kind == OpKind::Softmax || op.kind == OpKind::LogSoftmax;
  if (softmax_like && torch_release_facts(context_.torch_version).softmax_saves_input && !op.inputs.empty() &&
      std::find(op.saved.begin(), op.saved.end(), op.inputs.front()) == op.saved.end()) {
    op.saved.push_back(op.inputs.front());
  }
}

void GraphBuilder::begin_scope() { scopes_.emplace_back(); }

void GraphBuilder::hold(TensorId tensor) {
  if (!scopes_.empty()) scopes_.back().push_back(tensor);
}

void GraphBuilder::end_scope() {
  std::vector<TensorId> held = std::move(scopes_.back());
  scopes_.pop_back();
  if (held.empty()) return;
  std::vector<GradRule> rules(held.size(), GradRule::None);
  add_op(OpKind::ScopeEnd, "return", std::move(held), {}, std::move(rules));
}

void GraphBuilder::begin_unit(LayerGraph::ModelCheckpoint model_checkpoint) {
  current_unit_ = graph_.num_units++;
  graph_.unit_model_checkpoint.push_back(model_checkpoint);
  unit_decided_ = false;
  unit_grad_blocked_ = false;
}
void GraphBuilder::end_unit() { current_unit_ = -1; }

void GraphBuilder::cache_key_value(TensorId key, TensorId value) {
  if (current_unit_ < 0) return;
  graph_.kv_cache_entries.push_back(LayerGraph::CachedKeyValue{current_unit_, key, value});
}

TensorId GraphBuilder::autocast_weight(TensorId parameter) {
  const PrecisionRules& rules = context_.precision;
  const TensorDesc param = graph_.tensors[parameter];  // a copy: new_tensor() may reallocate
  if (!rules.autocast || param.dtype == rules.low_dtype) return parameter;
  auto found = autocast_cache_.find(parameter);
  if (found != autocast_cache_.end()) return found->second;
  std::string leaf = graph_.names[param.name] + ".autocast";
  // Names are absolute here: the cast belongs to the parameter, not the current module.
  std::string saved_prefix = module_prefix_;
  module_prefix_.clear();
  TensorId cast_tensor = new_tensor(leaf, param.numel, rules.low_dtype, TensorRole::AutocastWeight);
  OpNode& op = add_op(OpKind::Cast, leaf, {parameter}, {cast_tensor}, {GradRule::New});
  finish_op(op);
  module_prefix_ = saved_prefix;
  autocast_cache_.emplace(parameter, cast_tensor);
  cache_entries_.push_back(cast_tensor);
  return cast_tensor;
}

TensorId GraphBuilder::cast(TensorId tensor, DType dtype, std::string_view leaf) {
  if (graph_.tensors[tensor].dtype == dtype) return tensor;
  uint64_t numel = graph_.tensors[tensor].numel;
  TensorId out = activation(leaf, numel, dtype);
  OpNode& op = add_op(OpKind::Cast, leaf, {tensor}, {out}, {GradRule::New});
  finish_op(op);  // _to_copy saves nothing
  return out;
}

void GraphBuilder::set_named_output(const std::string& name, TensorId tensor) {
  graph_.named_outputs[name] = tensor;
}

void GraphBuilder::set_loss(TensorId loss) {
  graph_.loss = loss;
  graph_.named_outputs["loss"] = loss;
}

LayerGraph GraphBuilder::finish() {
  if (!cache_entries_.empty()) {
    // The autocast context exits after the loss: the cache drops its references then.
    std::vector<GradRule> rules(cache_entries_.size(), GradRule::None);
    std::string saved_prefix = module_prefix_;
    module_prefix_.clear();
    add_op(OpKind::ScopeEnd, "autocast_exit", cache_entries_, {}, std::move(rules));
    module_prefix_ = saved_prefix;
  }
  return std::move(graph_);
}

}  // namespace oomcast::planner
