// GraphBuilder: the state a model family writes its forward pass into: module path names,
// parameters and buffers, tensors and ops, Python call-frame lifetimes (scopes), checkpoint
// units and the autocast weight cache. The op catalogue (ops/*.h) adds ops through it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/precision.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// What the forward being built looks like: train or eval, grad mode, sizes from the scenario.
struct BuildContext {
  PrecisionRules precision;
  scenario::AttentionImpl attention = scenario::AttentionImpl::SdpaMath;
  double dropout = 0.0;
  bool training = true;       // model.train(): dropout active, batch norm updates stats
  bool grad_enabled = true;   // false under torch.no_grad()
  int64_t batch = 1;
  int64_t seq_len = 1;        // image size for vision models
  // The cpu device: PyTorch's CPU kernels, which allocate differently from CUDA's in a few
  // ops (dropout's mask; validate/README.md lists the evidence).
  bool cpu_kernels = false;
  // The PyTorch release whose Python-level module code runs (allocator.torch_version, 100 *
  // major + minor): torch 1.13's nn.MultiheadAttention and autograd formulas differ from 2.x's.
  int torch_version = 206;
  // Mixture-of-experts routing is data dependent: plan the worst case of moe.imbalance (the
  // busiest expert gets k times its share) or the balanced one.
  bool moe_worst_case = true;
  // The job's trainable subset, LoRA adapters and weight formats (planner/trainable_policy.h);
  // nullptr: every parameter trains, weights as the precision says.
  const scenario::JobConfig* job = nullptr;
  // PEFT's enable_input_require_grads(): the output of an embedding of the batch's token ids
  // is made to require grad (a leaf the graph keeps), so later blocks build graphs.
  bool input_require_grads = false;
  // Reentrant torch.utils.checkpoint per block (unit): a block none of whose inputs requires
  // grad runs without a graph (its parameters get no gradient).
  // The non-reentrant checkpoint (checkpointing.reentrant false) records the graph as usual.
  scenario::CheckpointMode checkpoint_mode = scenario::CheckpointMode::None;
  int64_t checkpoint_every_n = 1;
  bool checkpoint_reentrant = true;
  // loss.chunks: torchtune's chunked output projection and cross-entropy (1 = one loss).
  int64_t loss_chunks = 1;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(BuildContext context);

  const BuildContext& context() const { return context_; }
  const PrecisionRules& precision() const { return context_.precision; }
  double active_dropout() const { return context_.training ? context_.dropout : 0.0; }
  const TensorDesc& tensor(TensorId id) const { return graph_.tensors[id]; }
  TensorDesc& mutable_tensor(TensorId id) { return graph_.tensors[id]; }
  uint32_t intern(std::string_view text);

  // Module path: push_module("h.3") then "attn" makes names like "h.3.attn.c_attn.weight".
  void push_module(std::string_view name);
  void pop_module();
  std::string qualified(std::string_view leaf) const;

  // Registers a trainable parameter (dtype from the precision regime) in parameters() order.
  TensorId parameter(std::string_view leaf, std::vector<int64_t> shape);
  // A LoRA adapter's weight: always trainable, in `dtype`, registered when the forward reaches it.
  TensorId adapter_parameter(std::string_view leaf, std::vector<int64_t> shape, DType dtype);
  // A tensor of the constructor that is not a parameter of the finished model (a template
  // module that gets deep-copied, a weight that tying replaces), allocated at this point of the
  // parameter order; `dtype` nullopt: the dtype the parameters are built in.
  void construction_temporary(std::string_view leaf, std::vector<int64_t> shape,
                              std::optional<DType> dtype = std::nullopt);
  // Registers a persistent buffer.
  TensorId buffer(std::string_view leaf, uint64_t numel, DType dtype);
  // A batch tensor loaded by the training loop (token ids, targets, images).
  TensorId input(std::string_view name, uint64_t numel, DType dtype);
  // A fresh activation with its own storage; requires_grad is set when an op outputs it.
  TensorId activation(std::string_view leaf, uint64_t numel, DType dtype);
  // A view sharing `base`'s storage (reshape, transpose, split piece, in-place result).
  TensorId view(TensorId base, std::string_view leaf, uint64_t numel);
  // An in-place write with autograd history into a view (out[..., 0] = a): autograd rebases
  // the view's base (CopySlices), so the base and every view of its storage require grad from
  // then on, however they were made (torch.zeros_like, a detached buffer).
  void storage_requires_grad(TensorId storage);

  // Appends an op. Outputs get requires_grad when grad mode is on and an input requires it;
  // saved tensors are dropped when no grad node is recorded.
  OpNode& add_op(scenario::OpKind kind, std::string_view leaf, std::vector<TensorId> inputs,
                 std::vector<TensorId> outputs, std::vector<GradRule> input_grads);
  // Finishes the op most recently added (applies the grad-mode rule to its saved list).
  void finish_op(OpNode& op);

  // A Python call frame: tensors held in it (module arguments, locals) live until end_scope.
  void begin_scope();
  void hold(TensorId tensor);
  void end_scope();

  // Checkpoint units: every op added between begin_unit and end_unit belongs to one block;
  // `model_checkpoint` says the model's own forward checkpoints it (always on).
  void begin_unit(LayerGraph::ModelCheckpoint model_checkpoint = LayerGraph::ModelCheckpoint::None);
  void end_unit();
  // The current block's attention keys and values as a generation's KV cache would keep them
  // (before repeat_kv): a view held there keeps its whole base alive (GPT-2's fused c_attn).
  void cache_key_value(TensorId key, TensorId value);

  // The autocast cast of a parameter to the low dtype, made once per forward and kept by
  // the cache until the forward's autocast context exits (../shared/docs/training-memory-model.md §3.1).
  TensorId autocast_weight(TensorId parameter);
  // Casts a tensor to `dtype` (a new tensor and a ToCopyBackward node); returns it unchanged
  // when it already has that dtype.
  TensorId cast(TensorId tensor, DType dtype, std::string_view leaf);

  void set_named_output(const std::string& name, TensorId tensor);
  void set_loss(TensorId loss);

  // Ends the forward (closes the autocast cache scope) and returns the graph.
  LayerGraph finish();

 private:
  TensorId new_tensor(std::string_view leaf, uint64_t numel, DType dtype, TensorRole role);

  BuildContext context_;
  LayerGraph graph_;
  std::unordered_map<std::string, uint32_t> name_index_;
  std::vector<std::string> module_path_;
  std::string module_prefix_;
  std::vector<std::vector<TensorId>> scopes_;
  std::unordered_map<TensorId, TensorId> autocast_cache_;
  std::vector<TensorId> cache_entries_;
  int32_t current_unit_ = -1;
  bool unit_decided_ = false;      // the current unit's first op has been seen
  bool unit_grad_blocked_ = false; // reentrant checkpoint with no input requiring grad
};

uint64_t shape_numel(const std::vector<int64_t>& shape);

}  // namespace oomcast::planner
