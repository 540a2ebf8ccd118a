// A graph file's generic op: one dispatcher op with its outputs (new or views), what autograd
// saves, gradient rules and temporaries written out. Its `aten` name decides the autocast class
// (the device's autocast lists, planner/autocast_lists.h, applied the way the catalogue's ops
// apply them), whether it is a cuBLAS GEMM, and its default op kind for checkpointing.recompute_ops.
#include <algorithm>
#include <string_view>

#include "planner/families/graph_file_builder.h"
#include "planner/ops/cpu_gemm_buffer.h"
#include "planner/ops/generic_backward_temporaries.h"
#include "planner/torch_release_facts.h"

namespace oomcast::planner::families {

using scenario::OpKind;
using scenario::parse_op_kind;

namespace {

// "aten::add.Tensor" / "aten.add.Tensor" / "add_" -> "add" (in-place spelling kept apart by
// the caller through view_of, not through the name).
std::string base_name(std::string name) {
  for (std::string_view prefix : {"aten::", "aten."}) {
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  }
  if (size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  if (name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_') name.pop_back();
  return name;
}

// "copy_", "aten::index_put_.default": an in-place op (not a dunder such as __and__).
bool in_place_spelling(std::string name) {
  for (std::string_view prefix : {"aten::", "aten."}) {
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  }
  if (size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_';
}

bool listed(const std::string& name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool uses_cublas(const std::string& name) {
  return listed(name, {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "addmv", "mv", "addr"});
}

OpKind default_kind(const std::string& name) {
  struct Entry {
    std::initializer_list<std::string_view> names;
    OpKind kind;
  };
  static const Entry table[] = {
      {{"addmm", "linear"}, OpKind::Linear},
      {{"mm", "bmm", "baddbmm", "addbmm", "matmul", "mv", "addmv"}, OpKind::Matmul},
      {{"scaled_dot_product_attention", "_scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_flash_attention_forward", "_efficient_attention_forward"},
       OpKind::Attention},
      {{"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "mkldnn_convolution", "cudnn_convolution"},
       OpKind::Conv},
      {{"embedding"}, OpKind::Embedding},
      {{"layer_norm", "native_layer_norm", "group_norm", "native_group_norm"}, OpKind::LayerNorm},
      {{"batch_norm", "native_batch_norm", "_native_batch_norm_legit", "cudnn_batch_norm"}, OpKind::BatchNorm},
      {{"softmax", "_softmax"}, OpKind::Softmax},
      {{"log_softmax", "_log_softmax"}, OpKind::LogSoftmax},
      {{"nll_loss", "nll_loss_forward", "nll_loss2d"}, OpKind::NllLoss},
      {{"dropout", "native_dropout", "bernoulli", "feature_dropout"}, OpKind::Dropout},
      {{"gelu"}, OpKind::Gelu},
      {{"silu"}, OpKind::Silu},
      {{"relu", "threshold"}, OpKind::Relu},
      {{"tanh"}, OpKind::Tanh},
      {{"add", "sub", "rsub"}, OpKind::Add},
      {{"mul", "div"}, OpKind::Mul},
      {{"pow"}, OpKind::Pow},
      {{"mean"}, OpKind::Mean},
      {{"rsqrt"}, OpKind::Rsqrt},
      {{"neg"}, OpKind::Neg},
      {{"cat", "concat", "stack"}, OpKind::Cat},
      {{"masked_fill"}, OpKind::MaskedFill},
      {{"_to_copy", "to", "type_as"}, OpKind::Cast},
      {{"clone", "contiguous", "copy"}, OpKind::Copy},
      {{"view", "reshape", "_unsafe_view", "transpose", "t", "permute", "expand", "slice", "select", "unsqueeze",
        "squeeze", "as_strided", "flatten", "unflatten", "alias", "detach", "narrow", "unbind"},
       OpKind::View},
      {{"split", "split_with_sizes", "chunk"}, OpKind::Split},
      {{"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d"},
       OpKind::Pool},
      {{"eq", "ne", "lt", "le", "gt", "ge"}, OpKind::Compare},
      {{"zeros", "ones", "empty", "full", "arange", "tril", "triu", "zeros_like", "ones_like", "empty_like",
        "full_like", "scalar_tensor", "lift_fresh"},
       OpKind::Constant},
  };
  for (const Entry& entry : table) {
    if (std::find(entry.names.begin(), entry.names.end(), name) != entry.names.end()) return entry.kind;
  }
  return OpKind::Other;
}

}  // namespace

// A generic op's `backward_program:` resolved: buffers numbered in order of first allocation,
// `release` names matched to the op's saves (or `grad_output`), `grad` names to its inputs.
std::vector<BackwardStep> GraphFileBuilder::backward_program(const scenario::graph::Statement& statement,
                                                             const scenario::graph::OpStatement& op, const std::string& leaf,
                                                             const std::vector<TensorId>& inputs,
                                                             const std::vector<TensorId>& originals,
                                                             const std::vector<TensorId>& saved) {
  std::vector<BackwardStep> program;
  std::vector<std::string> buffers;
  std::vector<uint8_t> live;
  std::vector<uint8_t> granted(inputs.size(), 0);
  for (const scenario::graph::BackwardStep& written : op.backward_program) {
    const std::string name = written.name.name.render(env_);
    BackwardStep step;
    switch (written.kind) {
      case scenario::graph::BackwardStep::Kind::Alloc: {
        auto known = std::find(buffers.begin(), buffers.end(), name);
        if (known != buffers.end() && live[static_cast<size_t>(known - buffers.begin())])
          fail_op(op, written.name.where, "backward buffer '" + name + "' is allocated twice without a free");
        step.kind = BackwardStep::Kind::Alloc;
        step.index = static_cast<uint32_t>(known - buffers.begin());
        if (known == buffers.end()) {
          buffers.push_back(name);
          live.push_back(0);
        }
        live[step.index] = 1;
        step.name = g_.intern(g_.qualified(leaf + ".backward." + name));
        if (written.shape.present) {
          Shape shape = eval_shape(written.shape, written.name.where);
          step.bytes = checked_numel(shape, written.name.where) * dtype_bytes(dtype_of(written.dtype, DType::Float32));
        } else {
          int64_t value = eval(written.bytes);
          if (value < 0 || value > (int64_t{1} << 50)) fail_op(op, written.name.where, "buffer bytes outside 0 .. 2^50");
          step.bytes = static_cast<uint64_t>(value);
        }
        break;
      }
      case scenario::graph::BackwardStep::Kind::Free: {
        auto known = std::find(buffers.begin(), buffers.end(), name);
        if (known == buffers.end() || !live[static_cast<size_t>(known - buffers.begin())])
          fail_op(op, written.name.where, "backward buffer '" + name + "' is freed but not allocated");
        step.kind = BackwardStep::Kind::Free;
        step.index = static_cast<uint32_t>(known - buffers.begin());
        live[step.index] = 0;
        break;
      }
      case scenario::graph::BackwardStep::Kind::Release: {
        if (name == "grad_output") {
          step.kind = BackwardStep::Kind::ReleaseGradOutput;
          break;
        }
        step.kind = BackwardStep::Kind::ReleaseSaved;
        step.index = UINT32_MAX;
        for (size_t i = 0; i < op.saves.size(); ++i) {
          if (op.saves[i].name.render(env_) == name) step.index = static_cast<uint32_t>(i);
        }
        if (step.index == UINT32_MAX || step.index >= saved.size())
          fail_op(op, written.name.where, "release '" + name + "' names no tensor in 'saves' (or grad_output)");
        break;
      }
      case scenario::graph::BackwardStep::Kind::Grad: {
        step.kind = BackwardStep::Kind::Grad;
        step.index = UINT32_MAX;
        const TensorId tensor = lookup(written.name, &op).tensor;
        for (size_t i = 0; i < originals.size(); ++i) {
          if (originals[i] == tensor) step.index = static_cast<uint32_t>(i);
        }
        if (step.index == UINT32_MAX) fail_op(op, written.name.where, "grad '" + name + "' is not one of the op's inputs");
        if (granted[step.index]) fail_op(op, written.name.where, "grad '" + name + "' is given twice");
        granted[step.index] = 1;
        break;
      }
    }
    program.push_back(step);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (live[i]) fail_op(op, statement.where, "backward buffer '" + buffers[i] + "' is never freed");
  }
  return program;
}

// A 2-D GEMM written as a generic op (mm, addmm, linear, matmul of a matrix by a weight) gets the
// catalogue linear's CPU bf16 result buffers (planner/ops/cpu_gemm_buffer.h): m x n from its
// output, k from the 2-D input that shares the output's last dimension.
void GraphFileBuilder::add_cpu_gemm_buffers(OpNode& node, const scenario::graph::OpStatement& op,
                                            const std::string& aten, const std::string& leaf,
                                            const std::vector<Shape>& output_shapes) {
  if (!listed(aten, {"mm", "addmm", "linear", "matmul"}) || output_shapes.empty() || node.outputs.empty()) return;
  const Shape& out = output_shapes[0];
  if (out.size() < 2) return;
  const auto n = static_cast<uint64_t>(out.back());
  uint64_t m = 1;
  for (size_t i = 0; i + 1 < out.size(); ++i) m *= static_cast<uint64_t>(out[i]);
  uint64_t k = 0;
  bool a_requires_grad = false;
  bool b_requires_grad = false;
  for (size_t i = 0; i < op.inputs.size() && i < node.inputs.size(); ++i) {
    const Shape& shape = lookup(op.inputs[i], &op).shape;
    const bool wants_grad = i < node.input_grads.size() && node.input_grads[i] != GradRule::None &&
                            g_.tensor(node.inputs[i]).requires_grad;
    const uint64_t rows = shape.size() == 2 ? static_cast<uint64_t>(shape[0]) : 0;
    const uint64_t columns = shape.size() == 2 ? static_cast<uint64_t>(shape[1]) : 0;
    if (k == 0 && (rows == n || columns == n)) {
      k = rows == n ? columns : rows;
      b_requires_grad = wants_grad;
    } else if (shape.size() >= 2) {
      a_requires_grad = a_requires_grad || wants_grad;
    }
  }
  if (k == 0) return;
  ops::add_cpu_bf16_gemm_buffers(g_, node, leaf, g_.tensor(node.outputs[0]).dtype, m, n, k, a_requires_grad,
                                 b_requires_grad);
}

// The saves were recorded under the capturing torch (the file's torch_version); where the
// planned release saves otherwise (planner/torch_release_facts.yaml), they follow the planned one:
// MeanBackward1 keeps `self` in 1.x only (mean_saves_input); softmax's and log_softmax's backward
// named their input too before 1.11 (softmax_saves_input, added for every build in
// GraphBuilder::finish_op, dropped here for a file captured then and planned later).
void GraphFileBuilder::adjust_saves_to_release(const std::string& aten, const std::vector<TensorId>& inputs,
                                               std::vector<TensorId>& saved) const {
  const int captured_release = file_.torch_version;
  const int planned_release = g_.context().torch_version;
  if (captured_release == 0 || captured_release == planned_release || inputs.empty()) return;
  const TorchReleaseFacts& captured = torch_release_facts(captured_release);
  const TorchReleaseFacts& planned = torch_release_facts(planned_release);
  bool captured_saves = false;
  bool planned_saves = false;
  if (aten == "mean") {
    captured_saves = captured.mean_saves_input;
    planned_saves = planned.mean_saves_input;
  } else if (listed(aten, {"_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax"})) {
    captured_saves = captured.softmax_saves_input;
    planned_saves = planned.softmax_saves_input;
  }
  const TensorId input = inputs.front();
  auto found = std::find(saved.begin(), saved.end(), input);
  if (planned_saves && !captured_saves && found == saved.end()) saved.push_back(input);
  if (captured_saves && !planned_saves && found != saved.end()) saved.erase(found);
}

void GraphFileBuilder::run_generic_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op,
                                      const std::string& leaf) {
  const PrecisionRules& rules = g_.precision();
  const std::string aten = base_name(op.aten.empty() ? op.op : op.aten);
  const AutocastClass autocast =
      rules.autocast ? autocast_class(aten, rules.autocast_device, rules.torch_version) : AutocastClass::None;

  // Inputs as the kernel sees them: autocast casts parameters through its weight cache and
  // other tensors per call.
  std::vector<TensorId> inputs;
  std::vector<TensorId> originals;
  inputs.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Binding& binding = lookup(op.inputs[i], &op);
    if (binding.tensor == kNoTensor) {
      fail_op(op, op.inputs[i].where, "input '" + op.inputs[i].name.render(env_) + "' is a buffer not registered with this attention");
    }
    TensorId input = binding.tensor;
    originals.push_back(input);
    const DType dtype = g_.tensor(input).dtype;
    std::string cast_leaf = leaf + (i == 0 ? std::string(".input_cast") : ".input" + std::to_string(i) + "_cast");
    if (autocast == AutocastClass::Lower && is_floating(dtype) && rules.matmul_dtype(dtype) != dtype) {
      input = g_.tensor(input).role == TensorRole::Parameter ? g_.autocast_weight(input)
                                                             : g_.cast(input, rules.matmul_dtype(dtype), cast_leaf);
    } else if (autocast == AutocastClass::Fp32 && rules.upcasts_to_fp32(aten, dtype)) {
      input = g_.cast(input, DType::Float32, cast_leaf);
    }
    inputs.push_back(input);
  }

  DType computed = DType::Float32;
  bool any_floating = false;
  for (TensorId input : inputs) {
    DType dtype = g_.tensor(input).dtype;
    if (!is_floating(dtype)) continue;
    computed = any_floating ? promote_types(computed, dtype) : dtype;
    any_floating = true;
  }

  std::vector<TensorId> outputs;
  TensorId hidden_storage = kNoTensor;  // an output's storage larger than the output (mse_loss)
  std::vector<Shape> shapes;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const scenario::graph::Output& output = op.outputs[i];
    Shape shape = eval_shape(output.shape, output.where);
    uint64_t numel = checked_numel(shape, output.where);
    std::string name = leaf + (i == 0 ? std::string(".out") : ".out" + std::to_string(i));
    if (output.view_of.present()) {
      const Binding& base = lookup(output.view_of, &op);
      outputs.push_back(g_.view(base.tensor, name, numel));
    } else if (i == 0 && aten == "mse_loss" && g_.context().cpu_kernels && !inputs.empty()) {
      // The CPU's mse_loss reduces a loss-sized (input-sized) tensor in place and returns its
      // 0-dim result on that storage (torch 2.13: untyped_storage().nbytes() == input.nbytes(),
      // reduction mean or sum, with or without grad): the storage lives as long as the loss.
      hidden_storage = g_.activation(name + ".storage", g_.tensor(inputs[0]).numel, dtype_of(output.dtype, computed));
      outputs.push_back(g_.view(hidden_storage, name, numel));
    } else {
      outputs.push_back(g_.activation(name, numel, dtype_of(output.dtype, computed)));
    }
    shapes.push_back(std::move(shape));
  }

  // Saved tensors: an input's name means the tensor the kernel received (its autocast copy).
  std::vector<TensorId> saved;
  for (const scenario::graph::Ref& ref : op.saves) {
    std::string name = ref.name.render(env_);
    TensorId tensor = kNoTensor;
    for (size_t i = 0; i < op.outputs.size() && tensor == kNoTensor; ++i) {
      if (op.outputs[i].name.render(env_) == name) tensor = outputs[i];
    }
    if (tensor == kNoTensor) {
      const Binding& binding = lookup(ref, &op);
      tensor = binding.tensor;
      for (size_t i = 0; i < originals.size(); ++i) {
        if (originals[i] == tensor) tensor = inputs[i];
      }
    }
    if (tensor != kNoTensor) saved.push_back(tensor);
  }
  adjust_saves_to_release(aten, inputs, saved);

  auto temporaries = [&](const std::vector<scenario::graph::Temporary>& list) {
    std::vector<Transient> out;
    DType fallback = outputs.empty() ? computed : g_.tensor(outputs[0]).dtype;
    for (const scenario::graph::Temporary& temporary : list) {
      uint64_t bytes = 0;
      if (temporary.shape.present) {
        Shape shape = eval_shape(temporary.shape, statement.where);
        bytes = checked_numel(shape, statement.where) * dtype_bytes(dtype_of(temporary.dtype, fallback));
      } else {
        int64_t value = eval(temporary.bytes);
        if (value < 0 || value > (int64_t{1} << 50)) fail_op(op, statement.where, "temporary bytes outside 0 .. 2^50");
        bytes = static_cast<uint64_t>(value);
      }
      out.push_back(Transient{g_.intern(g_.qualified(leaf + "." + temporary.name.render(env_))), bytes,
                              temporary.after_outputs});
    }
    return out;
  };
  std::vector<Transient> forward_transients = temporaries(op.forward_temporaries);
  std::vector<Transient> backward_transients = temporaries(op.backward_temporaries);

  std::vector<GradRule> grads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    scenario::graph::GradSpec spec = i < op.grads.size() ? op.grads[i] : scenario::graph::GradSpec::Default;
    switch (spec) {
      case scenario::graph::GradSpec::New: grads.push_back(GradRule::New); break;
      case scenario::graph::GradSpec::Pass: grads.push_back(GradRule::PassThrough); break;
      case scenario::graph::GradSpec::None: grads.push_back(GradRule::None); break;
      case scenario::graph::GradSpec::Default:
        grads.push_back(is_floating(g_.tensor(inputs[i]).dtype) ? GradRule::New : GradRule::None);
        break;
    }
  }

  std::vector<BackwardStep> program = backward_program(statement, op, leaf, inputs, originals, saved);
  if (program.empty() && op.backward_temporaries.empty()) {
    backward_transients = ops::generic_backward_temporaries(g_, leaf, aten, inputs, outputs, grads);
  }
  if (!program.empty()) {
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = GradRule::None;
    for (const BackwardStep& step : program) {
      if (step.kind == BackwardStep::Kind::Grad) grads[step.index] = GradRule::New;
    }
  }

  OpKind kind = default_kind(aten);
  if (!op.kind.empty()) parse_op_kind(op.kind, &kind);
  std::vector<TensorId> node_outputs = outputs;
  if (hidden_storage != kNoTensor) node_outputs.insert(node_outputs.begin(), hidden_storage);
  OpNode& node = g_.add_op(kind, leaf, std::move(inputs), node_outputs, std::move(grads));
  node.uses_cublas = op.cublas >= 0 ? op.cublas == 1 : uses_cublas(aten);
  node.saved = std::move(saved);
  node.forward_transients = std::move(forward_transients);
  node.backward_transients = std::move(backward_transients);
  node.backward_program = std::move(program);
  add_cpu_gemm_buffers(node, op, aten, leaf, shapes);
  g_.finish_op(node);
  // An in-place op (aten name ending in one '_') writing a tensor with history into a view.
  if (in_place_spelling(op.aten.empty() ? op.op : op.aten) && node.records_grad_node) {
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      if (op.outputs[i].view_of.present()) g_.storage_requires_grad(g_.tensor(outputs[i]).storage);
    }
  }
  bind_outputs(op, outputs, shapes);
}

}  // namespace oomcast::planner::families
